/*-------------------------------------------------------------------------
 *
 * gate.c
 *		Queue mode: a FIFO gate per contention key, and the temperature of
 *		keys that decides which calls queue.
 *
 * A gate is a lock in PostgreSQL's heavyweight lock manager, in the user
 * (advisory) lock method, whose tag pg_occ reserves: field4 is
 * OCC_GATE_TAG, which pg_advisory_lock() never uses (it uses 1 for bigint
 * keys and 2 for pairs of integers), so a gate cannot collide with the
 * users' advisory locks.  Field1 is the database, fields 2 and 3 a 64-bit
 * hash of the key.  In pg_locks a gate is an "advisory" lock with
 * objsubid = 20291.  This is the right primitive because (PostgreSQL 15
 * source):
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
 * Temperature: with pg_occ preloaded, each key hashes to one of
 * OCC_HEAT_SLOTS slots in shared memory, each a pair of exponentially
 * decaying counts (time constant OCC_HEAT_TAU_USEC): attempts that ran
 * without the gate, and attempts that failed.  A key is hot while its
 * recent failures are at least OCC_HOT_MIN_FAILURES and at least
 * OCC_HOT_FAILURE_RATIO of its ungated attempts.  Calls on a hot key take
 * the gate before their first attempt, except one admission in
 * OCC_PROBE_ONE_IN, which runs optimistically to re-measure.  Without
 * preloading no key is hot: calls queue after their first failure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_gate);

/* field4 of a gate's lock tag; pg_advisory_lock uses only 1 and 2 */
#define OCC_GATE_TAG 0x4F43

/* the gates' lock mode: one holder at a time */
#define OCC_GATE_LOCKMODE ExclusiveLock

/* temperature slots in shared memory, and how they decide */
#define OCC_HEAT_SLOTS 4096
#define OCC_HEAT_TAU_USEC 1000000.0
#define OCC_HOT_MIN_FAILURES 1.0
#define OCC_HOT_FAILURE_RATIO 0.25
#define OCC_PROBE_ONE_IN 64

typedef struct OccHeatSlot
{
	slock_t		mutex;
	TimestampTz updated;		/* when the counts below were last decayed */
	double		ungated;		/* decaying count of attempts run ungated */
	double		failures;		/* decaying count of failed attempts */
} OccHeatSlot;

static OccHeatSlot *occ_heat = NULL;

static shmem_request_hook_type occ_prev_shmem_request_hook = NULL;
static shmem_startup_hook_type occ_prev_shmem_startup_hook = NULL;

/* occ_gate_shmem_request: reserve the temperature slots */
static void
occ_gate_shmem_request(void)
{
	if (occ_prev_shmem_request_hook)
		occ_prev_shmem_request_hook();
	RequestAddinShmemSpace(mul_size(OCC_HEAT_SLOTS, sizeof(OccHeatSlot)));
}

/* occ_gate_shmem_startup: create or attach to the temperature slots */
static void
occ_gate_shmem_startup(void)
{
	bool		found;

	if (occ_prev_shmem_startup_hook)
		occ_prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	occ_heat = ShmemInitStruct("pg_occ gate temperature",
							   mul_size(OCC_HEAT_SLOTS, sizeof(OccHeatSlot)), &found);
	if (!found)
	{
		memset(occ_heat, 0, mul_size(OCC_HEAT_SLOTS, sizeof(OccHeatSlot)));
		for (int i = 0; i < OCC_HEAT_SLOTS; i++)
			SpinLockInit(&occ_heat[i].mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* occ_gate_init: called from _PG_init while shared_preload_libraries loads */
void
occ_gate_init(void)
{
	occ_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = occ_gate_shmem_request;
	occ_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = occ_gate_shmem_startup;
}

/*
 * occ_gate_key_hash: the hash of a key given as text (occ.retry's key, or
 * occ.gate's), after checking it.
 */
uint64
occ_gate_key_hash(const char *key, const char *what)
{
	if (key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint("Name what the transaction contends on, for example 'account:' || id.")));
	return occ_hash_text(key);
}

/*
 * occ_gate_derive_hash: the key of a call that gives none: the body's text
 * and the text of each parameter value, so that a body with WHERE id = $1
 * gets one gate per row; body_hash is the hash of the body's text.
 */
static uint64
occ_gate_derive_hash(uint64 body_hash, int nargs, const Oid *argtypes,
					 const Datum *values, const char *nulls)
{
	uint64		hash = body_hash;

	for (int i = 0; i < nargs; i++)
	{
		Oid			typoutput;
		bool		isvarlena;
		char	   *text;

		if (nulls[i] == 'n')
		{
			hash = hash_combine64(hash, 0);
			continue;
		}
		getTypeOutputInfo(argtypes[i], &typoutput, &isvarlena);
		text = OidOutputFunctionCall(typoutput, values[i]);
		hash = hash_combine64(hash, hash_bytes_extended((const unsigned char *) text,
														strlen(text), argtypes[i]));
		pfree(text);
	}
	return hash;
}

/* occ_gate_set_tag: the lock tag of the gate of a key hash */
static void
occ_gate_set_tag(LOCKTAG *tag, uint64 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32),
						 (uint32) hash, OCC_GATE_TAG);
}

/*
 * occ_gate_prepare: the gate of one call, from the key given or the body
 * and its parameters.  Nothing is locked yet.
 */
void
occ_gate_prepare(OccGate *gate, const char *key, uint64 sql_hash, int nargs,
				 const Oid *argtypes, const Datum *values, const char *nulls)
{
	memset(gate, 0, sizeof(*gate));
	gate->derived = (key == NULL);
	if (key != NULL)
		gate->hash = occ_gate_key_hash(key, "key");
	else
	{
		gate->body_hash = sql_hash;
		gate->hash = occ_gate_derive_hash(sql_hash, nargs, argtypes, values, nulls);
	}
	occ_gate_set_tag(&gate->tag, gate->hash);
}

/* occ_heat_slot: the temperature slot of the gate's key, or NULL */
static OccHeatSlot *
occ_heat_slot(const OccGate *gate)
{
	if (occ_heat == NULL)
		return NULL;
	return &occ_heat[gate->hash % OCC_HEAT_SLOTS];
}

/* occ_heat_decay: bring a slot's counts to now; caller holds its mutex */
static void
occ_heat_decay(OccHeatSlot *slot, TimestampTz now)
{
	double		factor;

	if (now <= slot->updated)
		return;
	factor = exp(-(double) (now - slot->updated) / OCC_HEAT_TAU_USEC);
	slot->ungated *= factor;
	slot->failures *= factor;
	slot->updated = now;
}

/* occ_gate_is_hot: have recent attempts on this key failed often? */
static bool
occ_gate_is_hot(const OccGate *gate)
{
	OccHeatSlot *slot = occ_heat_slot(gate);
	bool		hot;

	if (slot == NULL)
		return false;
	SpinLockAcquire(&slot->mutex);
	occ_heat_decay(slot, GetCurrentTimestamp());
	hot = slot->failures >= OCC_HOT_MIN_FAILURES &&
		slot->failures >= OCC_HOT_FAILURE_RATIO * slot->ungated;
	SpinLockRelease(&slot->mutex);
	return hot;
}

/*
 * occ_gate_admit: should this call take its gate before its first attempt?
 * Yes when its key is hot, except for one call in OCC_PROBE_ONE_IN, which
 * runs optimistically so that the temperature follows the workload.
 */
bool
occ_gate_admit(const OccGate *gate)
{
	return occ_gate_is_hot(gate) && occ_random_draw() * OCC_PROBE_ONE_IN >= 1.0;
}

/*
 * occ_gate_observe: account an attempt's outcome in the key's temperature.
 * Gated attempts count only when they fail (they lost to someone outside
 * the gate); ungated ones measure the failure rate.
 */
void
occ_gate_observe(const OccGate *gate, bool failed)
{
	OccHeatSlot *slot = occ_heat_slot(gate);

	if (slot == NULL || (gate->held && !failed))
		return;
	SpinLockAcquire(&slot->mutex);
	occ_heat_decay(slot, GetCurrentTimestamp());
	if (!gate->held)
		slot->ungated += 1.0;
	if (failed)
		slot->failures += 1.0;
	SpinLockRelease(&slot->mutex);
}

/*
 * occ_gate_release: release the gate if we hold it.  A body may have called
 * pg_advisory_unlock_all(), which releases it behind our back: then there is
 * nothing to release.
 */
void
occ_gate_release(OccGate *gate)
{
	if (occ_gate_still_held(gate))
		LockRelease(&gate->tag, OCC_GATE_LOCKMODE, true);
	gate->held = false;
}

/*
 * occ_gate_still_held: do we still hold the gate?  A body may have released
 * it with pg_advisory_unlock_all(); then the caller queues again.
 */
bool
occ_gate_still_held(OccGate *gate)
{
	gate->held = gate->held && occ_lock_held_by_me(&gate->tag, OCC_GATE_LOCKMODE);
	return gate->held;
}

/*
 * occ_gate_escalate: a gated attempt failed.  If the key was derived from
 * the body and its parameters and is not hot, whoever won holds another
 * key (a parameter that varies per call, such as an amount, splits one
 * row's callers over many gates): move to the gate of the body alone, for
 * the rest of this call.  Returns whether it did; the caller then waits.
 */
bool
occ_gate_escalate(OccGate *gate)
{
	if (!gate->derived || gate->escalated || occ_gate_is_hot(gate))
		return false;
	occ_gate_release(gate);
	gate->escalated = true;
	gate->hash = gate->body_hash;
	occ_gate_set_tag(&gate->tag, gate->hash);
	return true;
}

/*
 * occ_gate_wait: wait for the gate, at most timeout_usec microseconds when
 * that is positive (through lock_timeout, which also applies if shorter).
 * Called between transactions: no transaction id, no snapshot.
 *
 * Returns OCC_GATE_TAKEN, or OCC_GATE_TIMED_OUT when the timeout ran out,
 * or OCC_GATE_UNAVAILABLE when the wait ended in a deadlock, a full lock
 * table or the session's lock_timeout: the gate is then bypassed, and the
 * call runs ungated, backing off, until it ends.
 * Cancels, statement_timeout and errors are rethrown, with no gate held.
 */
OccGateWait
occ_gate_wait(OccGate *gate, double timeout_usec)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	int			saved_lock_timeout = LockTimeout;
	bool		bounded = false;	/* did we shorten lock_timeout? */
	volatile OccGateWait outcome = OCC_GATE_TAKEN;

	Assert(!gate->held);

	/* a free gate is taken at once, without the cost of a subtransaction */
	if (occ_lock_acquire_extended(&gate->tag, OCC_GATE_LOCKMODE, true, true,
							false, NULL) != LOCKACQUIRE_NOT_AVAIL)
	{
		gate->held = true;
		return OCC_GATE_TAKEN;
	}

	if (timeout_usec > 0)
	{
		double		ms = Max(ceil(timeout_usec / 1000.0), 1.0);

		if (LockTimeout == 0 || ms <= LockTimeout)
		{
			LockTimeout = (int) Min(ms, (double) INT_MAX);
			bounded = true;
		}
	}

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (occ_lock_acquire_extended(&gate->tag, OCC_GATE_LOCKMODE, true, false,
								false, NULL) == LOCKACQUIRE_NOT_AVAIL)
			outcome = OCC_GATE_UNAVAILABLE; /* out of lock table memory */
		LockTimeout = saved_lock_timeout;
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		LockTimeout = saved_lock_timeout;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		/* runs LockErrorCleanup(), which keeps a lock granted meanwhile */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;

		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			outcome = bounded ? OCC_GATE_TIMED_OUT : OCC_GATE_UNAVAILABLE;
		else if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
				 edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
			outcome = OCC_GATE_UNAVAILABLE;
		else
		{
			gate->held = true;	/* a grant may have raced the cancel */
			occ_gate_release(gate);
			ReThrowError(edata);
		}
		FreeErrorData(edata);
	}
	PG_END_TRY();

	/* a grant may also have raced a timeout or a deadlock report */
	gate->held = (outcome == OCC_GATE_TAKEN ||
				  occ_lock_held_by_me(&gate->tag, OCC_GATE_LOCKMODE));
	if (gate->held)
		return OCC_GATE_TAKEN;
	gate->bypassed = (outcome == OCC_GATE_UNAVAILABLE);
	return outcome;
}

/*
 * occ.gate(key text): wait for the gate of key and hold it until the end of
 * the transaction.  For writers that do not go through occ.retry: they then
 * queue with occ.retry calls of the same key instead of overtaking them.
 */
Datum
occ_gate(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be NULL"),
				 errhint("Pass the same key as occ.retry's key argument, for example 'account:' || id.")));
	occ_gate_set_tag(&tag, occ_gate_key_hash(text_to_cstring(PG_GETARG_TEXT_PP(0)), "key"));
	(void) LockAcquire(&tag, OCC_GATE_LOCKMODE, false, false);
	PG_RETURN_VOID();
}
