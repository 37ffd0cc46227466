/*-------------------------------------------------------------------------
 *
 * gate.c
 *		The FIFO gate of a contention key: a lock, waited for between
 *		transactions; and occ.gate(key).
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
 * Callers that do not retry through occ.retry (occ.gate(), and a transaction
 * that sets occ.key, client.c) take the same lock at transaction level
 * instead: the end of their transaction (commit, abort, the backend's exit)
 * releases it, as any transaction-level lock.
 *
 * This file is the mechanism only: which key a call waits for is key.c's,
 * whether and when it waits is policy.c's (client.c's for transactions).
 * OccGate is opaque: a key's lock tag, and whether we hold it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_gate);

/* field4 of a gate's lock tag; pg_advisory_lock uses only 1 and 2 */
#define OCC_GATE_TAG 0x4F43

/* the gates' lock mode: one holder at a time */
#define OCC_GATE_LOCKMODE ExclusiveLock

/* A gate: the lock of one key */
struct OccGate
{
	LOCKTAG		tag;			/* the gate's lock */
	uint64		key_hash;		/* of the key the gate belongs to */
	bool		held;			/* we hold the gate (as far as we know) */
};

/* occ_gate_set_tag: the lock tag of the gate of a key hash */
static void
occ_gate_set_tag(LOCKTAG *tag, uint64 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32),
						 (uint32) hash, OCC_GATE_TAG);
}

/* occ_gate_create: the gate of a key, in the current memory context; not taken */
OccGate *
occ_gate_create(uint64 key_hash)
{
	OccGate    *gate = palloc0(sizeof(OccGate));

	gate->key_hash = key_hash;
	occ_gate_set_tag(&gate->tag, key_hash);
	return gate;
}

/* occ_gate_key: the hash of the gate's key */
uint64
occ_gate_key(const OccGate *gate)
{
	return gate->key_hash;
}

/* occ_gate_move: make this the gate of another key, releasing the old one */
void
occ_gate_move(OccGate *gate, uint64 key_hash)
{
	occ_gate_release(gate);
	gate->key_hash = key_hash;
	occ_gate_set_tag(&gate->tag, key_hash);
}

/*
 * occ_gate_release: release the gate if we hold it.  A body may have called
 * pg_advisory_unlock_all(), which releases it behind our back: then there is
 * nothing to release.
 */
void
occ_gate_release(OccGate *gate)
{
	if (occ_gate_held(gate))
		LockRelease(&gate->tag, OCC_GATE_LOCKMODE, true);
	gate->held = false;
}

/*
 * occ_gate_held: do we still hold the gate?  A body may have released
 * it with pg_advisory_unlock_all(); then the caller queues again.
 */
bool
occ_gate_held(OccGate *gate)
{
	gate->held = gate->held && occ_lock_held_by_me(&gate->tag, OCC_GATE_LOCKMODE);
	return gate->held;
}

/*
 * occ_gate_wait: wait for the gate, at most timeout_usec microseconds when
 * that is positive (through lock_timeout, which also applies if shorter).
 * Called between transactions: no transaction id, no snapshot.
 *
 * Returns OCC_GATE_TAKEN, or OCC_GATE_TIMED_OUT when the timeout ran out,
 * or OCC_GATE_UNAVAILABLE when the wait ended in a deadlock, a full lock
 * table or the session's lock_timeout.
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
	return gate->held ? OCC_GATE_TAKEN : outcome;
}

/*
 * occ_gate_take_for_transaction: wait for the gate of a key and hold it
 * until the end of the transaction.  The wait is an ordinary lock wait:
 * cancels, statement_timeout, lock_timeout and deadlocks end it with an
 * error, and the transaction's abort releases a grant that raced them.
 */
void
occ_gate_take_for_transaction(uint64 key_hash)
{
	LOCKTAG		tag;

	occ_gate_set_tag(&tag, key_hash);
	(void) LockAcquire(&tag, OCC_GATE_LOCKMODE, false, false);
}

/*
 * occ.gate(key text): wait for the gate of key and hold it until the end of
 * the transaction.  For writers that do not go through occ.retry: they then
 * queue with occ.retry calls of the same key instead of overtaking them.
 */
Datum
occ_gate(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be NULL"),
				 errhint("Pass the same key as occ.retry's key argument, for example 'account:' || id.")));
	occ_gate_take_for_transaction(occ_key_hash(text_to_cstring(PG_GETARG_TEXT_PP(0)), "key"));
	PG_RETURN_VOID();
}
