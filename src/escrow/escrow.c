/*-------------------------------------------------------------------------
 *
 * escrow.c
 *		The rows' entries in shared memory, by which reservations of a
 *		reservable column are taken within its bounds without a row lock,
 *		and the current transaction's reservations, settled at its end.
 *
 * A reservation (reserve.c) inserts (rel, col, key, delta) into the ledger
 * in the caller's transaction; the row's value is its column plus its
 * committed ledger rows, which the fold moves into the column.  The bounds
 * are checked here.  Each row that has had a reservation since the server
 * started has an entry: its committed value (column plus committed ledger
 * rows), and the sums of the decrements and of the increments in flight
 * (reserved by transactions not yet ended).  A reservation is taken at once
 * when the bounds hold in the worst case: committed + in-flight decrements
 * + delta >= lower for a decrement, committed + in-flight increments +
 * delta <= upper for an increment; it is refused at once (23514, or 22003
 * past the column type's range) otherwise.  At
 * commit, the transaction's deltas move from in flight to committed (after
 * the commit is visible: meanwhile they count in the worst case both
 * ways); at abort, or the rollback of their savepoint, they are dropped.
 *
 * Nothing in shared memory outlives a crash: an entry is loaded from the
 * tables (escrow_load.c: the latest committed state, never half a fold)
 * the first time a row is reserved again.  No reservation of the row is in
 * flight while it loads: reservations enter through the entry, and an entry
 * leaves the table only when none is in flight.
 *
 * Every database and role shares the entries: a transaction's rows in
 * flight count against its database's and role's shares (escrow_share.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pg_occ.h"
#include "escrow/escrow.h"

/* a reservation of this transaction's */
typedef struct OccReservation
{
	OccEscrowRow *row;
	int64		delta;
	SubTransactionId subid;
} OccReservation;

/* a row this transaction has reserved: its own change of it */
typedef struct OccReservedRow
{
	OccEscrowRow *row;			/* the hash key */
	int64		own;
	int32		count;
} OccReservedRow;

static LWLock *occ_escrow_lock = NULL;
static HTAB *occ_escrow_rows = NULL;

/* this transaction's reservations in the order taken, and its rows */
static List *occ_reservations_made = NIL;
static HTAB *occ_reserved_rows = NULL;

/* the entry this backend is loading, which it removes if it exits meanwhile */
static OccEscrowRow *occ_escrow_loading = NULL;

/* occ_escrow_shmem_size: the shared memory of the rows' entries and shares */
Size
occ_escrow_shmem_size(void)
{
	return add_size(hash_estimate_size(occ_reservable_rows, sizeof(OccEscrowRow)),
					occ_escrow_shares_size());
}

/* occ_escrow_shmem_request: our LWLocks: the entries', the shares' */
void
occ_escrow_shmem_request(void)
{
	RequestNamedLWLockTranche("pg_occ escrow", 2);
}

/* occ_escrow_shmem_init: create or attach to the rows' entries and shares */
void
occ_escrow_shmem_init(void)
{
	HASHCTL		info;

	info.keysize = sizeof(OccEscrowTag);
	info.entrysize = sizeof(OccEscrowRow);
	occ_escrow_rows = occ_shmem_init_hash("pg_occ escrow rows", occ_reservable_rows, &info,
										  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	occ_escrow_lock = &(GetNamedLWLockTranche("pg_occ escrow"))[0].lock;
	occ_escrow_shares_init(&(GetNamedLWLockTranche("pg_occ escrow"))[1].lock);
}

/* occ_escrow_ready: is the entries' shared memory there (pg_occ preloaded)? */
bool
occ_escrow_ready(void)
{
	return occ_escrow_rows != NULL;
}

/* occ_escrow_require_preload: reservations keep their entries in shared memory */
void
occ_escrow_require_preload(void)
{
	if (occ_escrow_rows == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("reservations need pg_occ in shared_preload_libraries"),
				 errhint("Add pg_occ to shared_preload_libraries and restart the server.")));
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
 * occ_escrow_forget: take out the entries of a column whose value may have
 * changed without them (its declaration made, dropped, or its table
 * altered).  Its table is locked against reservations, so that one still
 * in flight is the current transaction's: an error, since its entry would
 * outlive the change.
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
				 errhint("Change its table or its declaration in a transaction that has not reserved it.")));
}

/* occ_escrow_load: fill row's committed value from the tables */
static void
occ_escrow_load(OccEscrowRow *row, Relation rel, const OccReservable *decl, Datum key)
{
	int			waits = 0;
	int64		value = occ_escrow_read_stable(rel, decl, key, row->tag.key, &waits);

	SpinLockAcquire(&row->mutex);
	row->committed = value;
	row->waits += waits;
	row->loaded = true;
	row->loader = 0;
	SpinLockRelease(&row->mutex);
}

/* occ_escrow_enter: enter tag's entry and load it; false when the table is full */
static bool
occ_escrow_enter(const OccEscrowTag *tag, Relation rel, const OccReservable *decl, Datum key)
{
	static bool exit_hooked = false;
	OccEscrowRow *row;
	bool		found;

	LWLockAcquire(occ_escrow_lock, LW_EXCLUSIVE);
	row = hash_search(occ_escrow_rows, tag, HASH_ENTER_NULL, &found);
	if (row == NULL && occ_escrow_evict())
		row = hash_search(occ_escrow_rows, tag, HASH_ENTER_NULL, &found);
	if (row == NULL || found)
	{
		LWLockRelease(occ_escrow_lock);
		return row != NULL;
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
	return true;
}

/*
 * occ_escrow_row: the loaded entry of tag, entered and loaded if need be,
 * returned with the escrow lock held (shared: occ_escrow_take or
 * occ_escrow_release releases it); NULL when the table is full of rows in
 * flight.  *waits counts the waits for another backend's load.
 */
OccEscrowRow *
occ_escrow_row(const OccEscrowTag *tag, Relation rel, const OccReservable *decl, Datum key,
			   int *waits)
{
	OccEscrowRow *row;

	for (;;)
	{
		LWLockAcquire(occ_escrow_lock, LW_SHARED);
		row = hash_search(occ_escrow_rows, tag, HASH_FIND, NULL);
		if (row != NULL && row->loaded)
			return row;
		LWLockRelease(occ_escrow_lock);
		if (row != NULL)
		{
			(*waits)++;
			occ_escrow_pause();
		}
		else if (!occ_escrow_enter(tag, rel, decl, key))
			return NULL;
	}
}

/*
 * occ_escrow_loaded: has tag's row a loaded entry?  Then the row exists: a
 * declared column's rows are not deleted, and an entry leaves when its
 * column's declaration changes.
 */
bool
occ_escrow_loaded(const OccEscrowTag *tag)
{
	OccEscrowRow *row;
	bool		loaded;

	LWLockAcquire(occ_escrow_lock, LW_SHARED);
	row = hash_search(occ_escrow_rows, tag, HASH_FIND, NULL);
	loaded = row != NULL && row->loaded;
	LWLockRelease(occ_escrow_lock);
	return loaded;
}

/* occ_escrow_release: release the lock that occ_escrow_row returned with */
void
occ_escrow_release(void)
{
	LWLockRelease(occ_escrow_lock);
}

/* occ_escrow_committed: row's committed value */
int64
occ_escrow_committed(OccEscrowRow *row)
{
	int64		value;

	SpinLockAcquire(&row->mutex);
	value = row->committed;
	SpinLockRelease(&row->mutex);
	return value;
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

	if (occ_reserved_rows == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (occ_reservations_made != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that has made reservations"),
						 errhint("Commit it, or make the reservations in a transaction that is not prepared.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			foreach(lc, occ_reservations_made)
				occ_escrow_settle(lfirst(lc), event == XACT_EVENT_COMMIT);
			occ_escrow_unshare(hash_get_num_entries(occ_reserved_rows));
			if (event == XACT_EVENT_COMMIT && occ_reservations_made != NIL)
				occ_fold_committed();
			/* both in TopTransactionContext, which goes now */
			occ_reservations_made = NIL;
			occ_reserved_rows = NULL;
			break;
		default:
			break;
	}
}

/* occ_escrow_drop_last: drop the transaction's last reservation, not taken or rolled back */
static void
occ_escrow_drop_last(void)
{
	OccReservation *r = llast(occ_reservations_made);
	OccReservedRow *rr = hash_search(occ_reserved_rows, &r->row, HASH_FIND, NULL);

	occ_reservations_made = list_delete_last(occ_reservations_made);
	rr->own -= r->delta;
	if (--rr->count == 0)
	{
		hash_search(occ_reserved_rows, &r->row, HASH_REMOVE, NULL);
		occ_escrow_unshare(1);
	}
}

/*
 * occ_escrow_subxact: a savepoint's rollback drops its reservations: those
 * taken since it began (and in the subtransactions it holds, whose IDs are
 * greater), the last ones of the list
 */
static void
occ_escrow_subxact(SubXactEvent event, SubTransactionId mySubid,
				   SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (occ_reservations_made != NIL &&
		   ((OccReservation *) llast(occ_reservations_made))->subid >= mySubid)
	{
		occ_escrow_settle(llast(occ_reservations_made), false);
		occ_escrow_drop_last();
	}
}

/*
 * occ_escrow_join: r joins the transaction's reservations, its row counted
 * against the shares if new to the transaction; errors when it is over
 */
static void
occ_escrow_join(OccReservation *r)
{
	static bool hooked = false;
	OccReservedRow *rr;
	bool		found;
	MemoryContext old;

	if (!hooked)
	{
		RegisterXactCallback(occ_escrow_xact, NULL);
		RegisterSubXactCallback(occ_escrow_subxact, NULL);
		hooked = true;
	}
	if (occ_reserved_rows == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(OccEscrowRow *);
		ctl.entrysize = sizeof(OccReservedRow);
		ctl.hcxt = TopTransactionContext;
		occ_reserved_rows = hash_create("pg_occ reserved rows", 16, &ctl,
										HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	rr = hash_search(occ_reserved_rows, &r->row, HASH_FIND, NULL);
	if (rr == NULL && !occ_escrow_share())
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many rows with reservations in flight for this database or role"),
				 errdetail("The last quarter of occ.reservable_rows (%d) is kept for the roles that hold reservations on less than a quarter of it, its last eighth for such databases.",
						   occ_reservable_rows),
				 errhint("End the transactions that hold reservations, or raise occ.reservable_rows (needs a restart).")));
	if (rr == NULL)
	{
		rr = hash_search(occ_reserved_rows, &r->row, HASH_ENTER, &found);
		rr->own = 0;
		rr->count = 0;
	}
	rr->own += r->delta;
	rr->count++;
	old = MemoryContextSwitchTo(TopTransactionContext);
	occ_reservations_made = lappend(occ_reservations_made, r);
	MemoryContextSwitchTo(old);
}

/* occ_escrow_own: this transaction's pending change of row */
int64
occ_escrow_own(OccEscrowRow *row)
{
	OccReservedRow *rr = occ_reserved_rows == NULL ? NULL :
		hash_search(occ_reserved_rows, &row, HASH_FIND, NULL);

	return rr == NULL ? 0 : rr->own;
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

/* occ_escrow_out_of_range: the error for a reservation that could leave the column's type */
pg_noreturn static void
occ_escrow_out_of_range(Relation rel, const OccReservable *decl, int64 delta)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("reservation of %lld on \"%s\" of \"%s\" could take it out of range for type %s",
					(long long) delta, get_attname(decl->relid, decl->attnum, false),
					RelationGetRelationName(rel), format_type_be(decl->atttype)),
			 errhint("Add a CHECK constraint that bounds the column, or make it bigint.")));
}

/*
 * occ_escrow_worst: would row's value stay in the column's type and bounds
 * with delta and every reservation in flight that moves the same way
 * committed? (row's mutex held)  *bound: which would break (-1 the lower
 * bound, 1 the upper, 2 the type's range)
 */
static bool
occ_escrow_worst(const OccEscrowRow *row, const OccReservable *decl, int64 delta, int *bound)
{
	int64		worst;
	int64		tmin = decl->atttype == INT2OID ? PG_INT16_MIN :
		decl->atttype == INT4OID ? PG_INT32_MIN : PG_INT64_MIN;
	int64		tmax = decl->atttype == INT2OID ? PG_INT16_MAX :
		decl->atttype == INT4OID ? PG_INT32_MAX : PG_INT64_MAX;

	*bound = 2;
	if (pg_add_s64_overflow(row->committed, delta < 0 ? row->down : row->up, &worst) ||
		pg_add_s64_overflow(worst, delta, &worst) || worst < tmin || worst > tmax)
		return false;
	*bound = delta < 0 ? -1 : 1;
	return delta < 0 ? !decl->has_lower || worst >= decl->lower :
		!decl->has_upper || worst <= decl->upper;
}

/*
 * occ_escrow_take: reserve delta of row (entered by occ_escrow_row, whose
 * lock this releases) if the bounds hold in the worst case, or whatever
 * they say if forced (a subscription's apply); otherwise an error, or false
 * for OCC_TAKE_TRY.  The reservation joins the transaction's first, so that
 * nothing can fail between counting it in flight and settling it.
 */
bool
occ_escrow_take(OccEscrowRow *row, Relation rel, const OccReservable *decl, const char *keytext,
				int64 delta, OccTake how, int waits)
{
	OccReservation *r;
	int64		committed;
	int64		in_flight;
	int			bound;
	bool		taken;

	PG_TRY();
	{
		r = MemoryContextAlloc(TopTransactionContext, sizeof(OccReservation));
		r->row = row;
		r->delta = delta;
		r->subid = GetCurrentSubTransactionId();
		occ_escrow_join(r);
	}
	PG_CATCH();
	{
		LWLockRelease(occ_escrow_lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	SpinLockAcquire(&row->mutex);
	committed = row->committed;
	in_flight = delta < 0 ? row->down : row->up;
	taken = how == OCC_TAKE_FORCED || occ_escrow_worst(row, decl, delta, &bound);
	row->waits += waits;
	if (!taken)
		row->refusals++;
	else
	{
		if (delta < 0)
			row->down += delta;
		else
			row->up += delta;
		row->in_flight++;
		row->reservations++;
	}
	SpinLockRelease(&row->mutex);
	LWLockRelease(occ_escrow_lock);
	if (taken)
		return true;
	occ_escrow_drop_last();
	if (bound == 2)
		occ_escrow_out_of_range(rel, decl, delta);
	if (how == OCC_TAKE_TRY)
		return false;
	occ_escrow_refuse(rel, decl, keytext, delta, committed, in_flight, bound < 0);
}

/* occ_escrow_report_fold: the fold's last error on the row of key, or NULL when folded */
void
occ_escrow_report_fold(Oid relid, AttrNumber attnum, const char *key, const char *error)
{
	OccEscrowTag tag;
	OccEscrowRow *row;

	if (occ_escrow_rows == NULL || strlen(key) >= OCC_ESCROW_KEYLEN)
		return;
	memset(&tag, 0, sizeof(tag));
	tag.dbid = MyDatabaseId;
	tag.relid = relid;
	tag.attnum = attnum;
	strlcpy(tag.key, key, OCC_ESCROW_KEYLEN);
	LWLockAcquire(occ_escrow_lock, LW_SHARED);
	row = hash_search(occ_escrow_rows, &tag, HASH_FIND, NULL);
	if (row != NULL)
	{
		SpinLockAcquire(&row->mutex);
		row->fold_failures += error != NULL ? 1 : 0;
		strlcpy(row->fold_error, error != NULL ? error : "", sizeof(row->fold_error));
		SpinLockRelease(&row->mutex);
	}
	LWLockRelease(occ_escrow_lock);
}

/*
 * occ_escrow_copy: copies of this database's loaded entries, at most max;
 * returns how many
 */
int
occ_escrow_copy(OccEscrowRow *copies, int max)
{
	HASH_SEQ_STATUS status;
	OccEscrowRow *row;
	int			n = 0;

	if (occ_escrow_rows == NULL)
		return 0;
	LWLockAcquire(occ_escrow_lock, LW_SHARED);
	hash_seq_init(&status, occ_escrow_rows);
	while ((row = hash_seq_search(&status)) != NULL)
	{
		if (row->tag.dbid != MyDatabaseId || n >= max)
			continue;
		SpinLockAcquire(&row->mutex);
		if (row->loaded)
			copies[n++] = *row;
		SpinLockRelease(&row->mutex);
	}
	LWLockRelease(occ_escrow_lock);
	return n;
}
