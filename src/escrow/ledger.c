/*-------------------------------------------------------------------------
 *
 * ledger.c
 *		occ.reservation_ledger, below SQL: found as a member of the
 *		extension, its rows inserted, summed, scanned and deleted by heap
 *		access, with no SQL, operator or function of anyone's.
 *
 * The ledger holds one row (rel, col, key, delta) per reservation; it
 * commits or aborts with the transaction that reserved (escrow.c), and the
 * fold (fold.c, fold_apply.c) moves committed rows into their tables.  The
 * fold worker runs as the bootstrap superuser, in every database: it must
 * not take a table of someone else's for the ledger (a database without
 * pg_occ may have a schema occ of its owner's), nor evaluate anything the
 * database's owner may define (a domain named oid, an operator, a cast,
 * settings).  So the ledger is the table occ.reservation_ledger only when
 * the extension pg_occ of this database owns it, and its rows are read and
 * written here, through the heap, by attribute number.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

/* the ledger's columns */
#define OCC_LEDGER_REL		1
#define OCC_LEDGER_COL		2
#define OCC_LEDGER_KEY		3
#define OCC_LEDGER_DELTA	4
#define OCC_LEDGER_NATTS	4

/* this backend's ledger, InvalidOid until looked up (and after a change) */
static Oid	occ_ledger_cached = InvalidOid;

/* occ_ledger_invalidate: a relcache callback; the ledger may have gone */
static void
occ_ledger_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == occ_ledger_cached)
		occ_ledger_cached = InvalidOid;
}

/*
 * occ_ledger_oid: the ledger of this database's pg_occ; InvalidOid where
 * pg_occ is not installed, or the table of that name is not its member
 */
Oid
occ_ledger_oid(void)
{
	static bool registered = false;
	Oid			ext;
	Oid			nsp;
	Oid			relid;

	if (OidIsValid(occ_ledger_cached))
		return occ_ledger_cached;
	ext = get_extension_oid("pg_occ", true);
	nsp = OidIsValid(ext) ? get_namespace_oid("occ", true) : InvalidOid;
	relid = OidIsValid(nsp) ? get_relname_relid("reservation_ledger", nsp) : InvalidOid;
	if (!OidIsValid(relid) || getExtensionOfObject(RelationRelationId, relid) != ext)
		return InvalidOid;
	if (!registered)
		CacheRegisterRelcacheCallback(occ_ledger_invalidate, (Datum) 0);
	registered = true;
	occ_ledger_cached = relid;
	return relid;
}

/*
 * occ_ledger_open: the ledger, opened in mode; errors where it is missing
 * or not as pg_occ made it
 */
Relation
occ_ledger_open(LOCKMODE mode)
{
	Oid			relid = occ_ledger_oid();
	/* try_: dropped between the lookup and the lock, it is missing too */
	Relation	ledger = OidIsValid(relid) ? try_table_open(relid, mode) : NULL;

	if (ledger == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("pg_occ's ledger, occ.reservation_ledger, does not exist"),
				 errhint("ALTER EXTENSION pg_occ UPDATE.")));
	if (RelationGetDescr(ledger)->natts != OCC_LEDGER_NATTS ||
		ledger->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("occ.reservation_ledger has been altered"),
				 errhint("Reinstall pg_occ.")));
	return ledger;
}

/* occ_ledger_append: insert the ledger row of a reservation */
void
occ_ledger_append(Oid relid, const char *col, const char *key, int64 delta)
{
	Relation	ledger = occ_ledger_open(RowExclusiveLock);
	Datum		values[OCC_LEDGER_NATTS];
	bool		nulls[OCC_LEDGER_NATTS] = {false, false, false, false};
	NameData	colname;
	HeapTuple	tuple;

	namestrcpy(&colname, col);
	values[OCC_LEDGER_REL - 1] = ObjectIdGetDatum(relid);
	values[OCC_LEDGER_COL - 1] = NameGetDatum(&colname);
	values[OCC_LEDGER_KEY - 1] = CStringGetTextDatum(key);
	values[OCC_LEDGER_DELTA - 1] = Int64GetDatum(delta);
	tuple = heap_form_tuple(RelationGetDescr(ledger), values, nulls);
	simple_heap_insert(ledger, tuple);
	heap_freetuple(tuple);
	table_close(ledger, NoLock);
}

/*
 * occ_ledger_scan: a scan of ledger's rows of relid (of its column col
 * unless NULL; of its row key unless NULL) as snapshot sees them
 */
TableScanDesc
occ_ledger_scan(Relation ledger, Snapshot snapshot, Oid relid, const char *col, const char *key)
{
	ScanKeyData *skey = palloc(sizeof(ScanKeyData) * 3);
	int			nkeys = 0;

	ScanKeyInit(&skey[nkeys++], OCC_LEDGER_REL, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	if (col != NULL)
	{
		Name		colname = palloc0(sizeof(NameData));

		namestrcpy(colname, col);
		ScanKeyInit(&skey[nkeys++], OCC_LEDGER_COL, BTEqualStrategyNumber, F_NAMEEQ,
					NameGetDatum(colname));
	}
	if (key != NULL)
	{
		ScanKeyInit(&skey[nkeys], OCC_LEDGER_KEY, BTEqualStrategyNumber, F_TEXTEQ,
					CStringGetTextDatum(key));
		skey[nkeys++].sk_collation = C_COLLATION_OID;
	}
	return occ_table_beginscan(ledger, snapshot, nkeys, skey);
}

/* occ_ledger_row: the fields of ledger row tuple */
void
occ_ledger_row(Relation ledger, HeapTuple tuple, OccLedgerRow *row)
{
	TupleDesc	desc = RelationGetDescr(ledger);
	bool		isnull;

	row->relid = DatumGetObjectId(heap_getattr(tuple, OCC_LEDGER_REL, desc, &isnull));
	row->col = NameStr(*DatumGetName(heap_getattr(tuple, OCC_LEDGER_COL, desc, &isnull)));
	row->key = TextDatumGetCString(heap_getattr(tuple, OCC_LEDGER_KEY, desc, &isnull));
	row->delta = DatumGetInt64(heap_getattr(tuple, OCC_LEDGER_DELTA, desc, &isnull));
	row->tid = tuple->t_self;
	row->ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
}

/*
 * occ_ledger_holds: has the ledger rows of column col of relid, committed
 * or this transaction's?
 */
bool
occ_ledger_holds(Oid relid, const char *col)
{
	Relation	ledger = occ_ledger_open(AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = occ_ledger_scan(ledger, snapshot, relid, col, NULL);
	bool		any = heap_getnext(scan, ForwardScanDirection) != NULL;

	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(ledger, AccessShareLock);
	return any;
}

/*
 * occ_ledger_delete_rows: delete ledger's rows of relid (of its column col
 * unless NULL), the latest committed ones: those of a table or column gone,
 * which nothing will fold (the caller holds what keeps others from
 * deleting them meanwhile: the table's lock, or its absence)
 */
void
occ_ledger_delete_rows(Relation ledger, Oid relid, const char *col)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = occ_ledger_scan(ledger, snapshot, relid, col, NULL);
	HeapTuple	tuple;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
		simple_heap_delete(ledger, &tuple->t_self);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
}
