/*-------------------------------------------------------------------------
 *
 * escrow_load.c
 *		A reservable row's committed value, read from the tables: its column
 *		plus its ledger rows, for the row's entry in shared memory (escrow.c)
 *		and for occ.reserved_value() where there is no entry.
 *
 * The read takes the latest committed state with SnapshotSelf, which takes
 * no predicate lock (a SERIALIZABLE caller gets no serialization failure
 * from it) and sees no uncommitted change but the reading transaction's
 * own; where it meets one of those (the row inserted or updated by this
 * transaction, a ledger row it inserted), it reads again with an MVCC
 * snapshot of the latest commits that sees nothing of this transaction's:
 * a row this transaction inserted has no committed value (P0002), and a
 * value it could change and roll back is never taken for a committed one.
 * A read never sees half a fold: fold.c's generation must be the same
 * before and after it, and no fold of the table under way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "common/int.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

/* occ_escrow_value: a column's Datum as int64 */
static int64
occ_escrow_value(Datum d, Oid type)
{
	return type == INT2OID ? DatumGetInt16(d) :
		type == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);
}

/*
 * occ_escrow_read_row: the column's value in the row of key, as snapshot
 * sees it; *ours when it is a version this transaction made
 */
static int64
occ_escrow_read_row(Relation rel, const OccReservable *decl, Datum key, const char *keytext,
					Snapshot snapshot, bool *ours)
{
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	int64		value;
	bool		isnull;

	ScanKeyInit(&skey, decl->pkattnum, BTEqualStrategyNumber, decl->pkeqproc, key);
	skey.sk_collation = decl->pkcollation;
	scan = systable_beginscan(rel, decl->pkindex, true, snapshot, 1, &skey);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("no committed row of \"%s\" has the key %s", RelationGetRelationName(rel), keytext),
				 errhint("A reservation changes a row that exists and has committed; insert it first, in a transaction of its own.")));
	*ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
	value = occ_escrow_value(heap_getattr(tuple, decl->attnum, RelationGetDescr(rel), &isnull),
							 decl->atttype);
	systable_endscan(scan);
	return value;
}

/*
 * occ_escrow_read_ledger: add the row's ledger rows, as snapshot sees them,
 * to *value; *ours when one is this transaction's
 */
static int
occ_escrow_read_ledger(Relation rel, const OccReservable *decl, const char *keytext,
					   Snapshot snapshot, int64 *value, bool *ours)
{
	Relation	ledger = occ_ledger_open(AccessShareLock);
	TableScanDesc scan;
	HeapTuple	tuple;
	int			n = 0;

	scan = occ_ledger_scan(ledger, snapshot, decl->relid,
						   get_attname(decl->relid, decl->attnum, false), keytext);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		OccLedgerRow lr;

		occ_ledger_row(ledger, tuple, &lr);
		*ours |= lr.ours;
		if (pg_add_s64_overflow(*value, lr.delta, value))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("the reserved value of \"%s\" overflows bigint", RelationGetRelationName(rel))));
		n++;
	}
	table_endscan(scan);
	table_close(ledger, AccessShareLock);
	return n;
}

/*
 * occ_escrow_read_snapshot: the row's value, column plus ledger rows, as
 * snapshot sees them; *ledger_rows counts the latter, *ours tells whether
 * it saw a version or a ledger row of this transaction's
 */
int64
occ_escrow_read_snapshot(Relation rel, const OccReservable *decl, Datum key, const char *keytext,
						 Snapshot snapshot, int *ledger_rows, bool *ours)
{
	int64		value;

	*ours = false;
	value = occ_escrow_read_row(rel, decl, key, keytext, snapshot, ours);
	*ledger_rows = occ_escrow_read_ledger(rel, decl, keytext, snapshot, &value, ours);
	return value;
}

/*
 * occ_escrow_read_committed: the row's committed value, column plus ledger rows, with
 * nothing of this transaction's; *ledger_rows counts the latter
 */
static int64
occ_escrow_read_committed(Relation rel, const OccReservable *decl, Datum key, const char *keytext,
				int *ledger_rows)
{
	bool		ours;
	int64		value;
	Snapshot	snapshot;

	value = occ_escrow_read_snapshot(rel, decl, key, keytext, SnapshotSelf, ledger_rows, &ours);
	if (!ours)
		return value;
	/* the latest commits, and none of this transaction's commands */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	snapshot->curcid = FirstCommandId;
	value = occ_escrow_read_snapshot(rel, decl, key, keytext, snapshot, ledger_rows, &ours);
	UnregisterSnapshot(snapshot);
	return value;
}

/* occ_escrow_pause: wait a millisecond for another's load or a fold */
void
occ_escrow_pause(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * occ_escrow_read_stable: occ_escrow_read_committed, never from half a fold (fold.c's
 * generation unchanged around the read); *waits counts the retries
 */
int64
occ_escrow_read_stable(Relation rel, const OccReservable *decl, Datum key, const char *keytext,
					   int *waits)
{
	int64		value;
	int			ledger_rows;
	uint64		generation;

	for (;;)
	{
		if (!occ_fold_stable_begin(decl->relid, &generation))
		{
			(*waits)++;
			occ_escrow_pause();
			continue;
		}
		value = occ_escrow_read_committed(rel, decl, key, keytext, &ledger_rows);
		if (occ_fold_stable_end(decl->relid, generation))
			break;
		(*waits)++;
	}
	if (ledger_rows > 0)
		occ_fold_committed();
	return value;
}

