/*-------------------------------------------------------------------------
 *
 * gate.c
 *		The FIFO gates of contention keys: locks, waited for between
 *		transactions, several in one global order; and occ.gate(key).
 *
 * A gate is a lock in PostgreSQL's heavyweight lock manager, in the user
 * (advisory) lock method, whose tag pg_occ reserves: field4 is
 * OCC_LOCK_CLASS_GATE (compat.h), which pg_advisory_lock() never uses (it uses 1 for bigint
 * keys and 2 for pairs of integers), so a gate cannot collide with the
 * users' advisory locks; nor with Citus's, whose classes of advisory locks
 * (shards, colocation groups, operations, background tasks) are field4 4
 * to 16 (Citus 13.2, AdvisoryLocktagClass in resource_lock.h).  Field1 is
 * the database, fields 2 and 3 a 64-bit hash of the key.  In pg_locks a
 * gate is an "advisory" lock with objsubid = 20291 (and Citus's
 * distributed deadlock detector takes a wait for a gate for any other lock
 * wait).  This is the right primitive because (PostgreSQL 15 source):
 *
 *	- a session-level lock of the user method survives the rollback of a
 *	  failed attempt and every commit: ProcReleaseLocks() releases only
 *	  transaction-level user locks, LockReleaseAll(USER_LOCKMETHOD, false);
 *	  session locks go at backend exit (ShutdownPostgres);
 *	- the wait queue is FIFO: ProcSleep() appends a waiter that holds no
 *	  conflicting lock on the object at the end, and ProcLockWakeup() grants
 *	  in queue order, calling GrantLock() before waking the process, so a
 *	  released gate passes to the next waiter without a race;
 *	- the wait is interruptible (ProcSleep's latch loop runs
 *	  CHECK_FOR_INTERRUPTS), honours lock_timeout, and is checked for
 *	  deadlocks after deadlock_timeout like any lock wait;
 *	- waiters show in pg_locks (granted = false), in pg_stat_activity
 *	  (wait event Lock/advisory) and in pg_blocking_pids().
 *
 * A cancel can race the grant: LockErrorCleanup() then records the lock as
 * held (GrantAwaitedLock).  We wait inside an internal subtransaction, whose
 * rollback runs that cleanup, and afterwards release whatever we hold before
 * rethrowing, so an interrupted wait never leaves a gate behind.
 *
 * A call may have several keys (the rows of a transfer): it takes their
 * gates one after the other in the order of their hashes, one order for
 * every caller, so that two callers of keys {a, b} and {b, a} cannot
 * deadlock on them; a wait that fails releases every gate of the set.
 *
 * Callers that do not retry through occ.retry (occ.gate(), and the
 * transactions that set occ.key, client.c) take the same locks at
 * transaction level instead, in the same order: the end of their
 * transaction (commit, abort, the backend's exit) releases them, as any
 * transaction-level lock.
 *
 * This file is the mechanism only: which keys a call waits for is key.c's
 * and learner.c's, whether and when it waits is policy.c's (client.c's for
 * transactions).  OccGates is opaque: the lock tags of a call's keys, and
 * whether we hold each.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "pg_occ.h"
#include "queue/queue.h"
#include "util/util.h"

PG_FUNCTION_INFO_V1(occ_gate);
PG_FUNCTION_INFO_V1(occ_gate_keys);

/* the gates' lock mode: one holder at a time */
#define OCC_GATE_LOCKMODE ExclusiveLock

/* A gate: the lock of one key */
typedef struct OccGate
{
	LOCKTAG		tag;			/* the gate's lock */
	uint64		key_hash;		/* of the key the gate belongs to */
	bool		held;			/* we hold the gate (as far as we know) */
} OccGate;

/* The gates of a call's keys, in the order of their hashes, each key once */
struct OccGates
{
	int			n;
	OccGate		gates[FLEXIBLE_ARRAY_MEMBER];
};

/* occ_gate_set_tag: the lock tag of the gate of a key hash */
static void
occ_gate_set_tag(LOCKTAG *tag, uint64 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32),
						 (uint32) hash, OCC_LOCK_CLASS_GATE);
}

/* occ_gate_cmp: qsort's order of key hashes, the one order of every caller */
static int
occ_gate_cmp(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * occ_gate_sort: sort keys into the one order and drop repeats; returns
 * how many are left
 */
static int
occ_gate_sort(uint64 *keys, int nkeys)
{
	int			n = 0;

	qsort(keys, nkeys, sizeof(uint64), occ_gate_cmp);
	for (int i = 0; i < nkeys; i++)
		if (n == 0 || keys[i] != keys[n - 1])
			keys[n++] = keys[i];
	return n;
}

/*
 * occ_gates_create: the gates of keys (nkeys >= 1), in the current memory
 * context; none taken yet
 */
OccGates *
occ_gates_create(const uint64 *keys, int nkeys)
{
	uint64	   *sorted = palloc(sizeof(uint64) * nkeys);
	OccGates   *gates;

	Assert(nkeys > 0);
	memcpy(sorted, keys, sizeof(uint64) * nkeys);
	nkeys = occ_gate_sort(sorted, nkeys);
	gates = palloc0(offsetof(OccGates, gates) + sizeof(OccGate) * nkeys);
	gates->n = nkeys;
	for (int i = 0; i < nkeys; i++)
	{
		gates->gates[i].key_hash = sorted[i];
		occ_gate_set_tag(&gates->gates[i].tag, sorted[i]);
	}
	pfree(sorted);
	return gates;
}

/* occ_gates_count: how many gates (distinct keys) */
int
occ_gates_count(const OccGates *gates)
{
	return gates->n;
}

/* occ_gates_key: the hash of the key of the i-th gate */
uint64
occ_gates_key(const OccGates *gates, int i)
{
	return gates->gates[i].key_hash;
}

/* occ_gates_same: are these the gates of exactly these keys? */
bool
occ_gates_same(const OccGates *gates, const uint64 *keys, int nkeys)
{
	uint64	   *sorted = palloc(sizeof(uint64) * Max(nkeys, 1));
	bool		same;

	memcpy(sorted, keys, sizeof(uint64) * nkeys);
	nkeys = occ_gate_sort(sorted, nkeys);
	same = (nkeys == gates->n);
	for (int i = 0; same && i < nkeys; i++)
		same = (sorted[i] == gates->gates[i].key_hash);
	pfree(sorted);
	return same;
}

/*
 * occ_gate_held: do we still hold the gate?  A body may have released
 * it with pg_advisory_unlock_all(); then the caller queues again.
 */
static bool
occ_gate_held(OccGate *gate)
{
	gate->held = gate->held && occ_lock_held_by_me(&gate->tag, OCC_GATE_LOCKMODE);
	return gate->held;
}

/* occ_gate_release: release the gate if we (still) hold it */
static void
occ_gate_release(OccGate *gate)
{
	if (occ_gate_held(gate))
		LockRelease(&gate->tag, OCC_GATE_LOCKMODE, true);
	gate->held = false;
}

/* occ_gates_held: do we still hold every gate? */
bool
occ_gates_held(OccGates *gates)
{
	bool		all = true;

	for (int i = 0; i < gates->n; i++)
		all &= occ_gate_held(&gates->gates[i]);
	return all;
}

/*
 * occ_gates_release: release every gate we hold.  A body may have called
 * pg_advisory_unlock_all(), which releases them behind our back: then
 * there is nothing to release.
 */
void
occ_gates_release(OccGates *gates)
{
	for (int i = 0; i < gates->n; i++)
		occ_gate_release(&gates->gates[i]);
}

/* What occ_gate_wait's step works on, and its outcome */
typedef struct OccGateWaitStep
{
	OccGate    *gate;
	OccGateWait outcome;
} OccGateWaitStep;

/*
 * occ_gate_wait_step: wait for the gate (OCC_GATE_UNAVAILABLE: no room);
 * the subtransaction is kept, and the gate, a session lock, with it
 */
static bool
occ_gate_wait_step(void *arg)
{
	OccGateWaitStep *step = (OccGateWaitStep *) arg;

	if (occ_lock_acquire_extended(&step->gate->tag, OCC_GATE_LOCKMODE, true, false,
								  false, NULL) == LOCKACQUIRE_NOT_AVAIL)
		step->outcome = OCC_GATE_UNAVAILABLE;	/* out of lock table memory */
	return true;
}

/*
 * occ_gate_wait: wait for the gate, at most timeout_usec microseconds when
 * that is positive (through lock_timeout, which also applies if shorter,
 * unless lock_timeout is false: then the session's does not end the wait).
 * Called between transactions: no transaction id, no snapshot.
 *
 * Returns OCC_GATE_TAKEN, or OCC_GATE_TIMED_OUT when the timeout ran out,
 * or OCC_GATE_UNAVAILABLE when the wait ended in a deadlock, a full lock
 * table or the session's lock_timeout.
 * Cancels, statement_timeout and errors are rethrown, with no gate held.
 */
static OccGateWait
occ_gate_wait(OccGate *gate, double timeout_usec, bool lock_timeout)
{
	int			saved_lock_timeout = LockTimeout;
	bool		bounded = false;	/* did we shorten lock_timeout? */
	OccGateWaitStep step = {gate, OCC_GATE_TAKEN};
	ErrorData  *edata;

	Assert(!gate->held);

	/* a free gate is taken at once, without the cost of a subtransaction */
	if (occ_lock_acquire_extended(&gate->tag, OCC_GATE_LOCKMODE, true, true,
							false, NULL) != LOCKACQUIRE_NOT_AVAIL)
	{
		gate->held = true;
		return OCC_GATE_TAKEN;
	}

	if (!lock_timeout)
		LockTimeout = 0;
	if (timeout_usec > 0)
	{
		double		ms = Max(ceil(timeout_usec / 1000.0), 1.0);

		if (LockTimeout == 0 || ms <= LockTimeout)
		{
			LockTimeout = (int) Min(ms, (double) INT_MAX);
			bounded = true;
		}
	}

	edata = occ_subxact_run(occ_gate_wait_step, &step);
	LockTimeout = saved_lock_timeout;
	if (edata != NULL)
	{
		/* the rollback ran LockErrorCleanup(), which keeps a lock granted meanwhile */
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			step.outcome = bounded ? OCC_GATE_TIMED_OUT : OCC_GATE_UNAVAILABLE;
		else if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
				 edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
			step.outcome = OCC_GATE_UNAVAILABLE;
		else
		{
			gate->held = true;	/* a grant may have raced the cancel */
			occ_gate_release(gate);
			ReThrowError(edata);
		}
		FreeErrorData(edata);
	}

	/* a grant may also have raced a timeout or a deadlock report */
	gate->held = (step.outcome == OCC_GATE_TAKEN ||
				  occ_lock_held_by_me(&gate->tag, OCC_GATE_LOCKMODE));
	return gate->held ? OCC_GATE_TAKEN : step.outcome;
}

/*
 * occ_gates_wait: take every gate not held yet, in order, all within
 * timeout_usec microseconds when that is positive, and within the
 * session's lock_timeout if lock_timeout.  Returns OCC_GATE_TAKEN when all
 * are held; otherwise what ended the wait, with none held.
 * Cancels, statement_timeout and errors are rethrown, with none held.
 */
OccGateWait
occ_gates_wait(OccGates *gates, double timeout_usec, bool lock_timeout)
{
	instr_time	start;
	volatile OccGateWait outcome = OCC_GATE_TAKEN;

	INSTR_TIME_SET_CURRENT(start);
	PG_TRY();
	{
		for (int i = 0; i < gates->n && outcome == OCC_GATE_TAKEN; i++)
		{
			double		left = 0;

			if (occ_gate_held(&gates->gates[i]))
				continue;
			if (timeout_usec > 0)
				left = timeout_usec - occ_elapsed_usec(start);
			outcome = (timeout_usec > 0 && left <= 0) ? OCC_GATE_TIMED_OUT :
				occ_gate_wait(&gates->gates[i], left, lock_timeout);
		}
	}
	PG_CATCH();
	{
		occ_gates_release(gates);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (outcome != OCC_GATE_TAKEN)
		occ_gates_release(gates);
	return outcome;
}

/*
 * occ_gate_lock_keys: wait for the gates of keys (sorted here, in place),
 * in order, and hold them until the end of the transaction: for occ.gate()
 * and for the transactions that set occ.key (client.c).  Each wait is an
 * ordinary lock wait: a cancel, statement_timeout, lock_timeout or a
 * deadlock ends it with an error, and the transaction's abort releases
 * every gate taken, a grant that raced the error included.
 */
void
occ_gate_lock_keys(uint64 *keys, int nkeys)
{
	nkeys = occ_gate_sort(keys, nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		LOCKTAG		tag;

		occ_gate_set_tag(&tag, keys[i]);
		(void) LockAcquire(&tag, OCC_GATE_LOCKMODE, false, false);
	}
}

/*
 * occ.gate(key text): wait for the gate of key and hold it until the end of
 * the transaction.  For writers that do not go through occ.retry: they then
 * queue with occ.retry calls of the same key instead of overtaking them.
 */
Datum
occ_gate(PG_FUNCTION_ARGS)
{
	uint64		key;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be NULL"),
				 errhint("Pass the same key as occ.retry's key argument, for example 'account:' || id.")));
	key = occ_key_hash(text_to_cstring(PG_GETARG_TEXT_PP(0)), "key", InvalidOid);
	occ_gate_lock_keys(&key, 1);
	PG_RETURN_VOID();
}

/*
 * occ.gate(keys text[]): the same for several keys, whose gates are taken in
 * the one order that occ.retry takes them in
 */
Datum
occ_gate_keys(PG_FUNCTION_ARGS)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	uint64	   *keys;

	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keys must not be empty"),
				 errhint("Pass at least one key, for example ARRAY['account:' || 1, 'account:' || 2].")));
	keys = palloc(sizeof(uint64) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not contain NULL"),
					 errhint("Pass the same keys as occ.retry's key argument.")));
		keys[i] = occ_key_hash(TextDatumGetCString(elems[i]), "key", InvalidOid);
	}
	occ_gate_lock_keys(keys, n);
	PG_RETURN_VOID();
}
