/*-------------------------------------------------------------------------
 *
 * escrow.c
 *		Reservations (escrow) of a reservable column: c = c + delta taken
 *		without a row lock, within the column's bounds in the worst case,
 *		applied exactly once when the transaction commits.
 *
 * occ.reserve(rel, col, key, delta) changes the row whose primary key is key
 * by delta, in the caller's transaction, without locking the row: it
 * inserts (rel, col, key, delta) into the ledger, occ.reservation_ledger, a
 * logged table that commits or aborts with the transaction (so WAL, crash
 * recovery and standbys apply a reservation exactly as they apply the
 * transaction).  The row's value is its column plus its ledger rows;
 * fold.c's worker moves committed ledger rows into the column.
 *
 * The bounds are checked in shared memory.  Each row that has had a
 * reservation since the server started has an entry: its committed value
 * (column plus committed ledger rows), and the sums of the decrements and of
 * the increments in flight (reserved by transactions not yet ended).  A
 * reservation is taken, at once, when the bounds hold in the worst case:
 * committed + in-flight decrements + delta >= lower for a decrement,
 * committed + in-flight increments + delta <= upper for an increment; it is
 * refused at once (23514, naming the constraint) otherwise.  At commit, the
 * transaction's deltas move from in flight to committed (after the commit
 * is visible: meanwhile they count in the worst case both ways); at abort,
 * or the rollback of their savepoint, they are dropped.  A transaction that
 * reserved cannot be prepared (its deltas would have no backend to end
 * them).
 *
 * Nothing in shared memory outlives a crash: it is reset with the server,
 * and an entry is loaded from the tables the first time a row is reserved
 * again.  The load reads the row and its ledger rows with SnapshotSelf (the
 * latest committed state, with no predicate lock: a SERIALIZABLE caller
 * gets no serialization failure from it), between two reads of the fold's
 * generation (fold.c), so that it never sees half a fold.  No reservation
 * of the row is in flight while it loads: reservations enter through the
 * entry, and an entry leaves the table only when none is in flight.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_reserve);
PG_FUNCTION_INFO_V1(occ_reserved_value);
PG_FUNCTION_INFO_V1(occ_reservations);

/* a primary key's text, at most: the entry's key holds it whole */
#define OCC_ESCROW_KEYLEN 256

int			occ_reservable_rows = 10000;

typedef struct OccEscrowTag
{
	Oid			dbid;
	Oid			relid;
	AttrNumber	attnum;
	char		key[OCC_ESCROW_KEYLEN]; /* the key's text, zero-padded */
} OccEscrowTag;

typedef struct OccEscrowRow
{
	OccEscrowTag tag;
	slock_t		mutex;			/* the fields below */
	bool		loaded;			/* committed is known */
	pid_t		loader;			/* the backend loading it, until loaded */
	int64		committed;		/* column + committed ledger rows */
	int64		down;			/* in-flight decrements, <= 0 */
	int64		up;				/* in-flight increments, >= 0 */
	int32		in_flight;		/* reservations in flight */
	int64		reservations;	/* taken, since it entered */
	int64		refusals;
	int64		waits;			/* for another's load or a fold */
} OccEscrowRow;

/* a reservation of this transaction's */
typedef struct OccReservation
{
	OccEscrowRow *row;
	int64		delta;
	SubTransactionId subid;
} OccReservation;

static LWLock *occ_escrow_lock = NULL;
static HTAB *occ_escrow_rows = NULL;

/* this transaction's reservations, in TopTransactionContext */
static List *occ_reservations_made = NIL;

/* the entry this backend is loading, which it removes if it exits meanwhile */
static OccEscrowRow *occ_escrow_loading = NULL;

/* occ_escrow_shmem_size: the shared memory of the rows' entries */
Size
occ_escrow_shmem_size(void)
{
	return hash_estimate_size(occ_reservable_rows, sizeof(OccEscrowRow));
}

/* occ_escrow_shmem_request: our LWLock */
void
occ_escrow_shmem_request(void)
{
	RequestNamedLWLockTranche("pg_occ escrow", 1);
}

/* occ_escrow_shmem_init: create or attach to the rows' entries */
void
occ_escrow_shmem_init(void)
{
	HASHCTL		info;

	info.keysize = sizeof(OccEscrowTag);
	info.entrysize = sizeof(OccEscrowRow);
	occ_escrow_rows = occ_shmem_init_hash("pg_occ escrow rows", occ_reservable_rows, &info,
										  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	occ_escrow_lock = &(GetNamedLWLockTranche("pg_occ escrow"))->lock;
}

/* occ_escrow_remove: take entry row out of the table */
static void
occ_escrow_remove(OccEscrowRow *row)
{
	OccEscrowTag tag = row->tag;

	LWLockAcquire(occ_escrow_lock, LW_EXCLUSIVE);
	hash_search(occ_escrow_rows, &tag, HASH_REMOVE, NULL);
	LWLockRelease(occ_escrow_lock);
}

/* occ_escrow_exit: a backend that exits while loading drops its entry */
static void
occ_escrow_exit(int code, Datum arg)
{
	if (occ_escrow_loading != NULL)
		occ_escrow_remove(occ_escrow_loading);
	occ_escrow_loading = NULL;
}

/*
 * occ_escrow_evict: make room for an entry, taking out one with nothing in
 * flight (under the exclusive lock); false when every entry has
 */
static bool
occ_escrow_evict(void)
{
	HASH_SEQ_STATUS status;
	OccEscrowRow *row;

	hash_seq_init(&status, occ_escrow_rows);
	while ((row = hash_seq_search(&status)) != NULL)
	{
		if (row->loaded && row->in_flight == 0)
		{
			hash_search(occ_escrow_rows, &row->tag, HASH_REMOVE, NULL);
			hash_seq_term(&status);
			return true;
		}
	}
	return false;
}

/*
 * occ_escrow_forget: take out the entries of a column no longer reservable.
 * Its table is locked against reservations, so that a reservation still in
 * flight is the current transaction's: an error, since its entry would
 * outlive the declaration and miss the changes made without it.
 */
void
occ_escrow_forget(Oid relid, AttrNumber attnum)
{
	HASH_SEQ_STATUS status;
	OccEscrowRow *row;
	bool		in_flight = false;

	if (occ_escrow_rows == NULL)
		return;
	LWLockAcquire(occ_escrow_lock, LW_EXCLUSIVE);
	/* first whether one is in flight, then (if none) out with them all */
	for (int pass = 0; pass < 2 && !in_flight; pass++)
	{
		hash_seq_init(&status, occ_escrow_rows);
		while ((row = hash_seq_search(&status)) != NULL)
		{
			if (row->tag.dbid != MyDatabaseId || row->tag.relid != relid ||
				row->tag.attnum != attnum || !row->loaded)
				continue;
			if (pass == 1)
				hash_search(occ_escrow_rows, &row->tag, HASH_REMOVE, NULL);
			else
			{
				SpinLockAcquire(&row->mutex);
				in_flight |= row->in_flight > 0;
				SpinLockRelease(&row->mutex);
			}
		}
	}
	LWLockRelease(occ_escrow_lock);
	if (in_flight)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of \"%s\" has reservations in flight in this transaction",
						get_attname(relid, attnum, false), get_rel_name(relid)),
				 errhint("Declare it reservable or not in a transaction that has not reserved it.")));
}

/* occ_escrow_ledger_oid: the ledger's OID; InvalidOid where pg_occ is not installed */
Oid
occ_escrow_ledger_oid(void)
{
	Oid			nsp = get_namespace_oid("occ", true);

	return OidIsValid(nsp) ? get_relname_relid("reservation_ledger", nsp) : InvalidOid;
}

/* occ_escrow_ledger: the ledger, opened in mode */
static Relation
occ_escrow_ledger(LOCKMODE mode)
{
	Oid			relid = occ_escrow_ledger_oid();
	/* try_: dropped between the lookup and the lock, it is missing too */
	Relation	ledger = OidIsValid(relid) ? try_table_open(relid, mode) : NULL;

	if (ledger == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("pg_occ's ledger, occ.reservation_ledger, does not exist"),
				 errhint("ALTER EXTENSION pg_occ UPDATE.")));
	return ledger;
}

/* occ_escrow_value: a column's Datum as int64 */
static int64
occ_escrow_value(Datum d, Oid type)
{
	return type == INT2OID ? DatumGetInt16(d) :
		type == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);
}

/*
 * occ_escrow_read: the row's value, column plus ledger rows, as snapshot
 * sees them; *ledger_rows counts the latter
 */
static int64
occ_escrow_read(Relation rel, const OccReservable *decl, Datum key, const char *keytext,
				Snapshot snapshot, int *ledger_rows)
{
	ScanKeyData skey[3];
	SysScanDesc scan;
	HeapTuple	tuple;
	Relation	ledger;
	int64		value;
	NameData	col;
	bool		isnull;

	ScanKeyInit(&skey[0], decl->pkattnum, BTEqualStrategyNumber, decl->pkeqproc, key);
	skey[0].sk_collation = decl->pkcollation;
	scan = systable_beginscan(rel, decl->pkindex, true, snapshot, 1, skey);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("no row of \"%s\" has the key %s", RelationGetRelationName(rel), keytext),
				 errhint("A reservation changes an existing row; insert it first.")));
	value = occ_escrow_value(heap_getattr(tuple, decl->attnum, RelationGetDescr(rel), &isnull),
							 decl->atttype);
	systable_endscan(scan);

	namestrcpy(&col, get_attname(decl->relid, decl->attnum, false));
	ledger = occ_escrow_ledger(AccessShareLock);
	ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(decl->relid));
	ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_NAMEEQ, NameGetDatum(&col));
	ScanKeyInit(&skey[2], 3, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(keytext));
	skey[2].sk_collation = C_COLLATION_OID;
	scan = systable_beginscan(ledger, InvalidOid, false, snapshot, 3, skey);
	*ledger_rows = 0;
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		int64		delta = DatumGetInt64(heap_getattr(tuple, 4, RelationGetDescr(ledger), &isnull));

		if (pg_add_s64_overflow(value, delta, &value))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("the reserved value of \"%s\" overflows bigint", RelationGetRelationName(rel))));
		(*ledger_rows)++;
	}
	systable_endscan(scan);
	table_close(ledger, AccessShareLock);
	return value;
}

/* occ_escrow_pause: wait a millisecond for another's load or a fold */
static void
occ_escrow_pause(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * occ_escrow_load: fill row's committed value from the tables, never from
 * half a fold (fold.c's generation unchanged around the read)
 */
static void
occ_escrow_load(OccEscrowRow *row, Relation rel, const OccReservable *decl, Datum key)
{
	int64		value;
	int			ledger_rows;
	int			waits = 0;
	uint64		generation;

	for (;;)
	{
		if (!occ_fold_stable_begin(decl->relid, &generation))
		{
			waits++;
			occ_escrow_pause();
			continue;
		}
		value = occ_escrow_read(rel, decl, key, row->tag.key, SnapshotSelf, &ledger_rows);
		if (occ_fold_stable_end(decl->relid, generation))
			break;
		waits++;
	}
	SpinLockAcquire(&row->mutex);
	row->committed = value;
	row->waits += waits;
	row->loaded = true;
	row->loader = 0;
	SpinLockRelease(&row->mutex);
	if (ledger_rows > 0)
		occ_fold_committed();
}

/*
 * occ_escrow_row: the loaded entry of tag, entered and loaded if need be;
 * *waits counts the waits for another backend's load
 */
static OccEscrowRow *
occ_escrow_row(const OccEscrowTag *tag, Relation rel, const OccReservable *decl, Datum key,
			   int *waits)
{
	static bool exit_hooked = false;
	OccEscrowRow *row;
	bool		found;

	for (;;)
	{
		LWLockAcquire(occ_escrow_lock, LW_SHARED);
		row = hash_search(occ_escrow_rows, tag, HASH_FIND, NULL);
		if (row != NULL && row->loaded)
		{
			/* the caller registers with the row before releasing the lock */
			return row;
		}
		LWLockRelease(occ_escrow_lock);
		if (row != NULL)
		{
			(*waits)++;
			occ_escrow_pause();
			continue;
		}
		LWLockAcquire(occ_escrow_lock, LW_EXCLUSIVE);
		row = hash_search(occ_escrow_rows, tag, HASH_ENTER_NULL, &found);
		if (row == NULL && occ_escrow_evict())
			row = hash_search(occ_escrow_rows, tag, HASH_ENTER_NULL, &found);
		if (row == NULL)
		{
			LWLockRelease(occ_escrow_lock);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many rows with reservations in flight"),
					 errdetail("pg_occ tracks at most %d rows (occ.reservable_rows).", occ_reservable_rows),
					 errhint("Raise occ.reservable_rows (needs a restart), or end the transactions that hold reservations.")));
		}
		if (found)
		{
			LWLockRelease(occ_escrow_lock);
			continue;
		}
		memset(((char *) row) + sizeof(OccEscrowTag), 0, sizeof(OccEscrowRow) - sizeof(OccEscrowTag));
		SpinLockInit(&row->mutex);
		row->loader = MyProcPid;
		LWLockRelease(occ_escrow_lock);
		if (!exit_hooked)
			before_shmem_exit(occ_escrow_exit, (Datum) 0);
		exit_hooked = true;
		occ_escrow_loading = row;
		PG_TRY();
		{
			occ_escrow_load(row, rel, decl, key);
		}
		PG_CATCH();
		{
			occ_escrow_loading = NULL;
			occ_escrow_remove(row);
			PG_RE_THROW();
		}
		PG_END_TRY();
		occ_escrow_loading = NULL;
	}
}

/* occ_escrow_settle: end reservation r, committed or not */
static void
occ_escrow_settle(OccReservation *r, bool committed)
{
	OccEscrowRow *row = r->row;

	SpinLockAcquire(&row->mutex);
	if (r->delta < 0)
		row->down -= r->delta;
	else
		row->up -= r->delta;
	if (committed)
		row->committed += r->delta;
	row->in_flight--;
	SpinLockRelease(&row->mutex);
}

/* occ_escrow_xact: settle the transaction's reservations at its end */
static void
occ_escrow_xact(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (occ_reservations_made == NIL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that has made reservations"),
					 errhint("Commit it, or make the reservations in a transaction that is not prepared.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			foreach(lc, occ_reservations_made)
				occ_escrow_settle(lfirst(lc), event == XACT_EVENT_COMMIT);
			occ_reservations_made = NIL;
			if (event == XACT_EVENT_COMMIT)
				occ_fold_committed();
			break;
		default:
			break;
	}
}

/*
 * occ_escrow_subxact: a savepoint's rollback drops its reservations; its
 * release hands them to its parent
 */
static void
occ_escrow_subxact(SubXactEvent event, SubTransactionId mySubid,
				   SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	foreach(lc, occ_reservations_made)
	{
		OccReservation *r = lfirst(lc);

		if (r->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			r->subid = parentSubid;
		else
		{
			occ_escrow_settle(r, false);
			occ_reservations_made = foreach_delete_current(occ_reservations_made, lc);
		}
	}
}

/* occ_escrow_refuse: the error for a reservation that could break a bound */
pg_noreturn static void
occ_escrow_refuse(Relation rel, const OccReservable *decl, const char *keytext, int64 delta,
				  int64 committed, int64 in_flight, bool lower)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("reservation of %lld on \"%s\" of \"%s\" violates check constraint \"%s\"",
					(long long) delta, get_attname(decl->relid, decl->attnum, false),
					RelationGetRelationName(rel), lower ? decl->lower_name : decl->upper_name),
			 errdetail("Key %s: committed value %lld, %s in flight %lld, bound %lld.",
					   keytext, (long long) committed, lower ? "decrements" : "increments",
					   (long long) in_flight, (long long) (lower ? decl->lower : decl->upper)),
			 errhint("A reservation is taken only if the bound holds when every reservation in flight that moves toward it commits."),
			 errtableconstraint(rel, lower ? decl->lower_name : decl->upper_name)));
}

/*
 * occ_escrow_take: reserve delta of row if the bounds hold in the worst
 * case (under the escrow lock, shared, which this releases); errors
 * otherwise.  r joins the transaction's reservations first, so that nothing
 * can fail between counting it in flight and its being settled at the end.
 */
static void
occ_escrow_take(OccEscrowRow *row, Relation rel, const OccReservable *decl, const char *keytext,
				int64 delta, OccReservation *r, int waits)
{
	int64		committed;
	int64		in_flight;
	int64		worst;
	bool		lower = delta < 0;
	bool		overflow;
	bool		broken;

	r->row = row;
	occ_reservations_made = lappend(occ_reservations_made, r);
	SpinLockAcquire(&row->mutex);
	committed = row->committed;
	in_flight = lower ? row->down : row->up;
	overflow = pg_add_s64_overflow(committed, in_flight, &worst) ||
		pg_add_s64_overflow(worst, delta, &worst) ||
		(decl->atttype == INT2OID && (worst < PG_INT16_MIN || worst > PG_INT16_MAX)) ||
		(decl->atttype == INT4OID && (worst < PG_INT32_MIN || worst > PG_INT32_MAX));
	broken = !overflow && ((lower && decl->has_lower && worst < decl->lower) ||
						   (!lower && decl->has_upper && worst > decl->upper));
	row->waits += waits;
	if (overflow || broken)
		row->refusals++;
	else
	{
		if (lower)
			row->down += delta;
		else
			row->up += delta;
		row->in_flight++;
		row->reservations++;
	}
	SpinLockRelease(&row->mutex);
	LWLockRelease(occ_escrow_lock);
	if (!overflow && !broken)
		return;
	occ_reservations_made = list_delete_last(occ_reservations_made);
	if (broken)
		occ_escrow_refuse(rel, decl, keytext, delta, committed, in_flight, lower);
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("reservation of %lld on \"%s\" of \"%s\" could take it out of range for type %s",
					(long long) delta, get_attname(decl->relid, decl->attnum, false),
					RelationGetRelationName(rel), format_type_be(decl->atttype)),
			 errhint("Add a CHECK constraint that bounds the column, or make it bigint.")));
}

/* occ_escrow_append: insert the ledger row of a reservation */
static void
occ_escrow_append(const OccReservable *decl, const char *keytext, int64 delta)
{
	Relation	ledger = occ_escrow_ledger(RowExclusiveLock);
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	NameData	col;
	HeapTuple	tuple;

	if (RelationGetDescr(ledger)->natts != 4)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("occ.reservation_ledger has been altered"),
				 errhint("Reinstall pg_occ.")));
	namestrcpy(&col, get_attname(decl->relid, decl->attnum, false));
	values[0] = ObjectIdGetDatum(decl->relid);
	values[1] = NameGetDatum(&col);
	values[2] = CStringGetTextDatum(keytext);
	values[3] = Int64GetDatum(delta);
	tuple = heap_form_tuple(RelationGetDescr(ledger), values, nulls);
	simple_heap_insert(ledger, tuple);
	table_close(ledger, NoLock);
}

/*
 * occ_escrow_key: the primary key's value, from the argument argno of any
 * type, as the key's type and as its text (the entry's key)
 */
static Datum
occ_escrow_key(FunctionCallInfo fcinfo, int argno, const OccReservable *decl, OccEscrowTag *tag)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Datum		key = PG_GETARG_DATUM(argno);
	char	   *text;

	if (argtype != decl->pktype)
	{
		Oid			output;
		bool		varlena;

		getTypeOutputInfo(argtype, &output, &varlena);
		key = OidInputFunctionCall(decl->pkinput, OidOutputFunctionCall(output, key),
								   decl->pkioparam, -1);
	}
	text = OidOutputFunctionCall(decl->pkoutput, key);
	if (strlen(text) >= OCC_ESCROW_KEYLEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a reservable row's key has at most %d bytes as text", OCC_ESCROW_KEYLEN - 1),
				 errhint("Use a shorter primary key.")));
	memset(tag, 0, sizeof(*tag));
	tag->dbid = MyDatabaseId;
	tag->relid = decl->relid;
	tag->attnum = decl->attnum;
	strlcpy(tag->key, text, OCC_ESCROW_KEYLEN);
	return key;
}

/* occ_escrow_require_preload: reservations keep their entries in shared memory */
static void
occ_escrow_require_preload(void)
{
	if (occ_escrow_rows == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("reservations need pg_occ in shared_preload_libraries"),
				 errhint("Add pg_occ to shared_preload_libraries and restart the server.")));
}

/*
 * occ.reserve(rel regclass, col name, key anycompatible, delta bigint): change
 * the row of rel whose primary key is key by delta, at commit, without
 * waiting for the other transactions that change it
 */
Datum
occ_reserve(PG_FUNCTION_ARGS)
{
	static bool hooked = false;
	Relation	rel;
	const OccReservable *decl;
	OccEscrowTag tag;
	OccEscrowRow *row;
	OccReservation *r;
	Datum		key;
	int64		delta;
	int			waits = 0;

	occ_reservable_require_args(fcinfo, 4, "occ.reserve()");
	occ_escrow_require_preload();
	PreventCommandIfReadOnly("occ.reserve()");
	PreventCommandIfParallelMode("occ.reserve()");
	PreventCommandDuringRecovery("occ.reserve()");
	rel = table_open(PG_GETARG_OID(0), RowExclusiveLock);
	occ_reservable_check_any(rel, true);
	decl = occ_reservable_get(rel, NameStr(*PG_GETARG_NAME(1)));
	occ_reservable_check_access(rel, decl, true);
	delta = PG_GETARG_INT64(3);
	key = occ_escrow_key(fcinfo, 2, decl, &tag);
	if (!hooked)
	{
		RegisterXactCallback(occ_escrow_xact, NULL);
		RegisterSubXactCallback(occ_escrow_subxact, NULL);
		hooked = true;
	}
	r = MemoryContextAlloc(TopTransactionContext, sizeof(OccReservation));
	r->delta = delta;
	r->subid = GetCurrentSubTransactionId();
	(void) GetCurrentTransactionId();
	row = occ_escrow_row(&tag, rel, decl, key, &waits);
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		occ_escrow_take(row, rel, decl, tag.key, delta, r, waits);
		MemoryContextSwitchTo(old);
	}
	occ_escrow_append(decl, tag.key, delta);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/* occ_escrow_own: this transaction's pending change of row */
static int64
occ_escrow_own(const OccEscrowRow *row)
{
	ListCell   *lc;
	int64		own = 0;

	foreach(lc, occ_reservations_made)
	{
		OccReservation *r = lfirst(lc);

		if (r->row == row)
			own += r->delta;
	}
	return own;
}

/*
 * occ.reserved_value(rel regclass, col name, key anycompatible): the row's
 * committed value plus this transaction's own reservations; on a standby,
 * the value as the transaction's snapshot sees the tables
 */
Datum
occ_reserved_value(PG_FUNCTION_ARGS)
{
	Relation	rel;
	const OccReservable *decl;
	OccEscrowTag tag;
	OccEscrowRow *row;
	Datum		key;
	int64		value;
	int			waits = 0;

	occ_reservable_require_args(fcinfo, 3, "occ.reserved_value()");
	rel = table_open(PG_GETARG_OID(0), AccessShareLock);
	occ_reservable_check_any(rel, false);
	decl = occ_reservable_get(rel, NameStr(*PG_GETARG_NAME(1)));
	occ_reservable_check_access(rel, decl, false);
	key = occ_escrow_key(fcinfo, 2, decl, &tag);
	if (RecoveryInProgress())
	{
		int			ledger_rows;

		value = occ_escrow_read(rel, decl, key, tag.key, GetActiveSnapshot(), &ledger_rows);
		table_close(rel, AccessShareLock);
		PG_RETURN_INT64(value);
	}
	occ_escrow_require_preload();
	row = occ_escrow_row(&tag, rel, decl, key, &waits);
	SpinLockAcquire(&row->mutex);
	value = row->committed;
	SpinLockRelease(&row->mutex);
	LWLockRelease(occ_escrow_lock);
	value += occ_escrow_own(row);
	table_close(rel, AccessShareLock);
	PG_RETURN_INT64(value);
}

/*
 * occ_escrow_may_read: may the current role read column attnum of relid and
 * the primary key that names its rows (the key that occ.reservations shows)?
 * A table whose primary key has gone needs SELECT on the whole table.
 */
static bool
occ_escrow_may_read(Oid relid, AttrNumber attnum)
{
	Oid			constraint;
	Bitmapset  *pk = get_primary_key_attnos(relid, true, &constraint);

	if (bms_num_members(pk) != 1)
		return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	return occ_reservable_may_read(relid, attnum,
								   bms_singleton_member(pk) + FirstLowInvalidHeapAttributeNumber);
}

/*
 * occ.reservations(): each row's entry in this database, for the columns
 * the caller may read: committed value, what is in flight, the counts
 */
Datum
occ_reservations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	OccEscrowRow *row;
	OccEscrowRow *copies;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (occ_escrow_rows == NULL)
		return (Datum) 0;
	copies = palloc(sizeof(OccEscrowRow) * occ_reservable_rows);
	LWLockAcquire(occ_escrow_lock, LW_SHARED);
	hash_seq_init(&status, occ_escrow_rows);
	while ((row = hash_seq_search(&status)) != NULL)
	{
		if (row->tag.dbid != MyDatabaseId || n >= occ_reservable_rows)
			continue;
		SpinLockAcquire(&row->mutex);
		copies[n++] = *row;
		SpinLockRelease(&row->mutex);
	}
	LWLockRelease(occ_escrow_lock);
	for (int i = 0; i < n; i++)
	{
		Datum		values[10];
		bool		nulls[10] = {0};
		char	   *attname = get_attname(copies[i].tag.relid, copies[i].tag.attnum, true);

		if (!copies[i].loaded || attname == NULL ||
			!occ_escrow_may_read(copies[i].tag.relid, copies[i].tag.attnum))
			continue;
		values[0] = ObjectIdGetDatum(copies[i].tag.relid);
		values[1] = CStringGetDatum(attname);
		values[1] = DirectFunctionCall1(namein, values[1]);
		values[2] = CStringGetTextDatum(copies[i].tag.key);
		values[3] = Int64GetDatum(copies[i].committed);
		values[4] = Int64GetDatum(copies[i].down);
		values[5] = Int64GetDatum(copies[i].up);
		values[6] = Int32GetDatum(copies[i].in_flight);
		values[7] = Int64GetDatum(copies[i].reservations);
		values[8] = Int64GetDatum(copies[i].refusals);
		values[9] = Int64GetDatum(copies[i].waits);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
