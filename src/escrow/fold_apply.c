/*-------------------------------------------------------------------------
 *
 * fold_apply.c
 *		Applying a reservable column's committed ledger rows to its table:
 *		each row's sum added by one UPDATE, run as the table's owner, and
 *		the row's ledger rows deleted.
 *
 * The fold worker (fold.c) applies a column row by row, each row in a
 * subtransaction of its own: a row locked past lock_timeout, or one that
 * cannot take its sum (gone, out of range, a constraint of the owner's),
 * keeps its ledger rows and is reported, and the others are folded.  The
 * DDL that needs the committed values in the rows (declare.c: ALTER TABLE,
 * occ.drop_reservable) applies a column in its own transaction, where an
 * error is the statement's.
 *
 * Nothing here evaluates code of anyone's but the table owner's, and that
 * as the owner: the ledger is read and written through the heap (ledger.c),
 * the UPDATE runs as the owner in a restricted security context, with
 * pg_catalog first in search_path and ONLY the table named, and the guard
 * (reservable.c) lets that one UPDATE of that one row through, and nothing
 * that the UPDATE runs in its turn.
 *
 * Sums are taken in 128 bits: deltas that each passed the bounds may add up
 * past bigint (a column at -9e18 reserved +9e18 twice), which the column
 * takes as two halves, c + s/2 + (s - s/2), each between c and c + s.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"
#include "util/util.h"

/* a row's committed ledger rows: their sum and where they are */
typedef struct OccFoldRow
{
	char		key[OCC_ESCROW_KEYLEN]; /* the hash key: the row's key text */
	int128		sum;
	List	   *tids;			/* ItemPointer of each ledger row */
} OccFoldRow;

/* a column's fold */
typedef struct OccFoldApply
{
	Relation	rel;
	Relation	ledger;
	OccReservable decl;
	const char *col;
	SPIPlanPtr	plan;
	Snapshot	snapshot;
	OccFoldRow *row;			/* the row being applied */
} OccFoldApply;

/* occ_fold_rows_of: the committed ledger rows of fa's column, by row */
static HTAB *
occ_fold_rows_of(OccFoldApply *fa)
{
	HASHCTL		ctl;
	HTAB	   *rows;
	TableScanDesc scan;
	HeapTuple	tuple;

	ctl.keysize = OCC_ESCROW_KEYLEN;
	ctl.entrysize = sizeof(OccFoldRow);
	ctl.hcxt = CurrentMemoryContext;
	rows = hash_create("pg_occ fold rows", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	scan = occ_ledger_scan(fa->ledger, fa->snapshot, RelationGetRelid(fa->rel), fa->col, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		OccLedgerRow lr;
		OccFoldRow *row;
		bool		found;
		ItemPointer tid = palloc(sizeof(ItemPointerData));

		occ_ledger_row(fa->ledger, tuple, &lr);
		if (strlen(lr.key) >= OCC_ESCROW_KEYLEN)
			continue;			/* the ledger's guard lets none in */
		row = hash_search(rows, lr.key, HASH_ENTER, &found);
		if (!found)
		{
			row->sum = 0;
			row->tids = NIL;
		}
		row->sum += lr.delta;
		*tid = lr.tid;
		row->tids = lappend(row->tids, tid);
	}
	table_endscan(scan);
	return rows;
}

/* occ_fold_row_cmp: rows in the order of their keys (row locks taken in one order) */
static int
occ_fold_row_cmp(const void *a, const void *b)
{
	return strcmp((*(OccFoldRow *const *) a)->key, (*(OccFoldRow *const *) b)->key);
}

/* occ_fold_prepare: the UPDATE of fa's column, as the owner (who runs it) plans it */
static void
occ_fold_prepare(OccFoldApply *fa)
{
	Relation	rel = fa->rel;
	const OccReservable *decl = &fa->decl;
	Oid			types[3] = {decl->pktype, INT8OID, INT8OID};
	char	   *sql;

	sql = psprintf("UPDATE ONLY %s SET %s = %s + $2 + $3 WHERE %s = $1",
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel)),
				   quote_identifier(fa->col), quote_identifier(fa->col),
				   quote_identifier(get_attname(decl->relid, decl->pkattnum, false)));
	fa->plan = SPI_prepare(sql, 3, types);
	if (fa->plan == NULL)
		elog(ERROR, "pg_occ fold: could not prepare %s: %s", sql, SPI_result_code_string(SPI_result));
}

/*
 * occ_fold_row: add fa->row's sum to its row, which the guard lets through
 * once, and delete its ledger rows
 */
static bool
occ_fold_row(void *arg)
{
	OccFoldApply *fa = arg;
	OccFoldRow *row = fa->row;
	int128		half = row->sum / 2;
	Datum		values[3];
	ListCell   *lc;
	int			rc;

	if (half < PG_INT64_MIN || half > PG_INT64_MAX ||
		row->sum - half < PG_INT64_MIN || row->sum - half > PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("the committed reservations of key %s of \"%s\" add up past the range of its column",
						row->key, RelationGetRelationName(fa->rel))));
	values[0] = OidInputFunctionCall(fa->decl.pkinput, row->key, fa->decl.pkioparam, -1);
	values[1] = Int64GetDatum((int64) half);
	values[2] = Int64GetDatum((int64) (row->sum - half));
	occ_guard_allow_fold(&fa->decl, row->key, row->sum);
	PG_TRY();
	{
		rc = SPI_execute_snapshot(fa->plan, values, NULL, fa->snapshot, InvalidSnapshot,
								  false, true, 0);
	}
	PG_FINALLY();
	{
		occ_guard_allow_fold(NULL, NULL, 0);
	}
	PG_END_TRY();
	if (rc != SPI_OK_UPDATE || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("no row of \"%s\" has the key %s", RelationGetRelationName(fa->rel), row->key),
				 errhint("Reservations of a row that has gone stay in occ.reservation_ledger.")));
	foreach(lc, row->tids)
		simple_heap_delete(fa->ledger, lfirst(lc));
	return true;
}

/*
 * occ_fold_apply: fold the committed ledger rows of column col of rel
 * (locked) in the current transaction.  each_row: each row in a
 * subtransaction, its outcome told to report (its error, or NULL); else
 * an error is the caller's.  Returns the rows folded.
 */
int
occ_fold_apply(Relation rel, const char *col, bool each_row, OccFoldReport report)
{
	OccFoldApply fa;
	HTAB	   *rows;
	HASH_SEQ_STATUS status;
	OccFoldRow **sorted;
	OccFoldRow *row;
	int			n = 0;
	int			folded = 0;
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;

	memset(&fa, 0, sizeof(fa));
	fa.rel = rel;
	fa.col = col;
	occ_reservable_get(rel, col, &fa.decl);
	fa.ledger = occ_ledger_open(RowExclusiveLock);
	fa.snapshot = RegisterSnapshot(GetLatestSnapshot());
	rows = occ_fold_rows_of(&fa);
	sorted = palloc(sizeof(OccFoldRow *) * (hash_get_num_entries(rows) + 1));
	hash_seq_init(&status, rows);
	while ((row = hash_seq_search(&status)) != NULL)
		sorted[n++] = row;
	qsort(sorted, n, sizeof(OccFoldRow *), occ_fold_row_cmp);

	GetUserIdAndSecContext(&save_user, &save_sec);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	SPI_connect();
	occ_fold_prepare(&fa);
	for (int i = 0; i < n; i++)
	{
		ErrorData  *edata = NULL;
		bool		canceled;

		fa.row = sorted[i];
		if (!each_row)
			(void) occ_fold_row(&fa);
		else
			edata = occ_subxact_run(occ_fold_row, &fa);
		folded += edata == NULL ? 1 : 0;
		canceled = edata != NULL && edata->sqlerrcode == ERRCODE_QUERY_CANCELED;
		if (each_row)
			report(RelationGetRelid(rel), fa.decl.attnum, sorted[i]->key, edata);
		/* the worker's turn at the table is over (fold.c): the rest wait */
		if (canceled)
			break;
	}
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	/* what the table's code set ends here, as after ANALYZE runs its code */
	AtEOXact_GUC(false, save_nestlevel);
	UnregisterSnapshot(fa.snapshot);
	table_close(fa.ledger, NoLock);
	hash_destroy(rows);
	return folded;
}
