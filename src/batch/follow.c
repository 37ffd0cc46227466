/*-------------------------------------------------------------------------
 *
 * follow.c
 *		A follower in batch mode: it posts its call in its slot, sleeps
 *		until a leader has run it, and takes its outcome.
 *
 * A call that joins its key's batch queue (batch.c) while another leads
 * the key posts its body and parameters (handover.c) in its slot and
 * sleeps on the slot's condition variable.  It wakes when its leader has
 * told the outcome (outcome.c: DONE), has gone (ORPHANED), or handed it the
 * lead (LEAD).  An orphaned call waits for the batch's transaction to end
 * (XactLockTableWait) and takes its outcome only if it committed;
 * otherwise nothing of it was done, and it runs again.  (A leader killed
 * with SIGKILL takes the whole server down with it, followers included:
 * crash recovery keeps the batch's commit or not, as for any transaction.)
 *
 * A follower that is cancelled while POSTED leaves with nothing done.
 * Once CLAIMED it waits for the outcome, holding cancels off (not
 * terminations): if its call committed, it says so in a WARNING and
 * returns the outcome, as a cancelled wait for synchronous replication
 * does, the cancels that came meanwhile answered; a body's own error, in
 * a batch that committed, is raised; otherwise the cancel is raised.  A
 * follower that is terminated, or whose client has gone (it looks every
 * OCC_BATCH_CLIENT_CHECK_MS while it waits), leaves its slot ABANDONED
 * (batch.c): its leader, which looks before its commit, rolls back the
 * bodies it ran and runs the others again, so that no work commits for a
 * caller that has gone (only the moment of COMMIT itself is in doubt, as
 * for any transaction).
 *
 * Batches are taken only where they are equivalent to their calls run one
 * after another: at SERIALIZABLE (the batch is serializable, and its calls
 * are in a row within it) and READ COMMITTED (each statement sees what
 * committed before it).  At REPEATABLE READ a call that sees the one
 * before it in the batch would not see what committed since the batch's
 * snapshot, which no snapshot of its own could give: such calls, calls on
 * a hot standby (a batch there commits nothing) and calls whose parameters
 * are anonymous records (their type is known only to their backend) run
 * alone, as in queue mode.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/wait_event.h"

#include "attempt/attempt.h"
#include "batch/batch.h"
#include "util/util.h"
#include "batch_slots.h"

/* How often a follower looks whether its client is still there, waiting */
#define OCC_BATCH_CLIENT_CHECK_MS 100

/*
 * occ_batch_sleep: sleep until the slot is no longer POSTED or CLAIMED (or
 * the timeout, microseconds if positive, ran out: returns false), looking
 * every OCC_BATCH_CLIENT_CHECK_MS whether the client is still there (if
 * not, the session ends, and its leader leaves its call out)
 */
static bool
occ_batch_sleep(OccBatchSlot *slot, double timeout_usec)
{
	instr_time	start;
	bool		ended = true;

	INSTR_TIME_SET_CURRENT(start);
	ConditionVariablePrepareToSleep(&slot->cv);
	for (;;)
	{
		OccSlotState state = occ_slot_state(slot);
		double		left = OCC_BATCH_CLIENT_CHECK_MS * 1000.0;

		if (state != OCC_SLOT_POSTED && state != OCC_SLOT_CLAIMED)
			break;
		if (timeout_usec > 0)
		{
			left = Min(left, timeout_usec - occ_elapsed_usec(start));
			if (left <= 0)
			{
				ended = false;
				break;
			}
		}
		if (ConditionVariableTimedSleep(&slot->cv, (long) Max(left / 1000.0, 1.0),
										PG_WAIT_EXTENSION))
			occ_check_client();
	}
	ConditionVariableCancelSleep();
	return ended;
}

/*
 * occ_batch_take_outcome: under no lock, the slot DONE (or resolved
 * ORPHANED): read the outcome into out, in the current memory context, and
 * make the slot IDLE.  Returns what became of the call.
 */
static OccBatchJoin
occ_batch_take_outcome(OccBatchSlot *slot, OccBatchOutcome *out)
{
	OccBatchKind kind = slot->kind;

	memset(out, 0, sizeof(*out));
	out->batch_size = slot->batch_size;
	out->leader_pid = slot->leader_pid;
	out->at_commit = slot->at_commit;
	out->committed = (kind == OCC_BATCH_COMMITTED || kind == OCC_BATCH_ERROR);
	if (kind == OCC_BATCH_COMMITTED && slot->outcome_len > 0)
	{
		out->result = palloc(slot->outcome_len);
		memcpy(out->result, slot->outcome, slot->outcome_len);
	}
	if (kind == OCC_BATCH_ERROR || kind == OCC_BATCH_FAILED)
		out->edata = occ_handover_error_read(slot->outcome, slot->sqlerrcode);
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	slot->state = OCC_SLOT_IDLE;
	LWLockRelease(occ_batch->lock);
	switch (kind)
	{
		case OCC_BATCH_COMMITTED:
		case OCC_BATCH_ERROR:
		case OCC_BATCH_FAILED:
			return OCC_BATCH_RAN;
		case OCC_BATCH_ALONE:
			return OCC_BATCH_JOIN_ALONE;
		case OCC_BATCH_UNRUN:
			break;
	}
	return OCC_BATCH_NOT_RUN;
}

/*
 * occ_batch_resolve: the slot is ORPHANED: its leader went away.  Wait for
 * the batch's transaction to end; the outcome stands if it committed,
 * otherwise the call was not run.
 */
static void
occ_batch_resolve(OccBatchSlot *slot)
{
	TransactionId xid = slot->xid;
	bool		committed = false;

	if (TransactionIdIsValid(xid))
	{
		XactLockTableWait(xid, NULL, NULL, XLTW_None);
		committed = TransactionIdDidCommit(xid);
	}
	if (!committed)
		slot->kind = OCC_BATCH_UNRUN;
}

/*
 * occ_batch_conclude: the slot left POSTED and CLAIMED: become the leader
 * (LEAD), or take the outcome
 */
static OccBatchJoin
occ_batch_conclude(OccBatchSlot *slot, OccBatchOutcome *out)
{
	OccSlotState state;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	state = slot->state;
	if (state == OCC_SLOT_LEAD)
		slot->state = OCC_SLOT_LEADING;
	LWLockRelease(occ_batch->lock);
	if (state == OCC_SLOT_LEAD)
		return OCC_BATCH_LEAD;
	if (state == OCC_SLOT_ORPHANED)
		occ_batch_resolve(slot);
	return occ_batch_take_outcome(slot, out);
}

/*
 * occ_batch_cancelled: the follower's wait was interrupted (edata): leave
 * the queue if no leader took the call; otherwise wait for the outcome,
 * holding cancels off (a termination, or the client gone, still ends the
 * session, and the leader leaves the call out), and report it: a committed
 * call is returned with a WARNING that the cancel came too late (the
 * cancels that came meanwhile answered by it: processed after, they would
 * report a failure of committed work); a body's own error, final in a batch
 * that committed, is returned, for the call to raise; any other outcome
 * raises the interrupt, nothing of the call having been done.
 */
static OccBatchJoin
occ_batch_cancelled(OccBatchSlot *slot, ErrorData *edata, OccBatchOutcome *out)
{
	OccBatchJoin join;
	bool		ran;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (slot->state == OCC_SLOT_POSTED)
		slot->state = OCC_SLOT_IDLE;
	else if (slot->state == OCC_SLOT_LEAD)
		occ_hand_on(slot);
	if (slot->state == OCC_SLOT_IDLE)
	{
		LWLockRelease(occ_batch->lock);
		ReThrowError(edata);
	}
	LWLockRelease(occ_batch->lock);

	HOLD_CANCEL_INTERRUPTS();
	ereport(WARNING,
			(errmsg("%s: the call waits for the outcome of the batch that runs it", edata->message),
			 errdetail("Process %d took the call into its batch transaction; the call reports whether it committed.",
					   slot->leader_pid)));
	(void) occ_batch_sleep(slot, 0);
	join = occ_batch_conclude(slot, out);
	ran = (join == OCC_BATCH_RAN && out->committed);
	if (ran && out->edata == NULL)
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("%s came too late: the call had already run in a batch, which committed", edata->message),
				 errdetail("Process %d ran the call's body in its batch transaction.", out->leader_pid),
				 errhint("The call's outcome is returned as if it had not been interrupted.")));
	QueryCancelPending = false;
	RESUME_CANCEL_INTERRUPTS();
	if (!ran)
		ReThrowError(edata);
	return join;
}

/*
 * occ_batch_join: the call (spec, attempt number attempt) would wait for
 * the gate of key: join its batch queue, at most timeout_usec if positive.
 * *seq keeps the call's place between joins (0 for a new one).  Returns
 *	OCC_BATCH_LEAD			the call leads: take the gate, run the attempt,
 *	OCC_BATCH_RAN			a leader ran it: *out says how it ended,
 *	OCC_BATCH_NOT_RUN		the leader's batch ended without running it,
 *	OCC_BATCH_JOIN_ALONE	it cannot share a transaction: run it alone,
 *	OCC_BATCH_TIMED_OUT		the timeout ran out before a leader took it.
 * Interrupts throw, with the call out of the queue and nothing done (or see
 * occ_batch_cancelled).  out's parts are made in the current context.
 */
OccBatchJoin
occ_batch_join(const OccRetrySpec *spec, uint64 key, uint64 signature, int attempt,
			   bool want_result, uint64 *seq, double timeout_usec,
			   OccBatchOutcome *out)
{
	OccBatchSlot *slot = occ_my_slot();
	MemoryContext cxt = CurrentMemoryContext;
	volatile OccBatchJoin join = OCC_BATCH_LEAD;
	int			len;

	/*
	 * A session with temporary tables, or advisory locks of its own (a
	 * body that takes them again would wait in the leader for this
	 * follower, which waits for the leader, unseen by the deadlock
	 * detector), runs alone; so do calls at REPEATABLE READ and on a hot
	 * standby (see the file header)
	 */
	if (slot == NULL || occ_session_has_temp() || occ_user_locks_held(NULL, NULL, 0) > 0 ||
		strcmp(spec->isolation, "repeatable read") == 0 || RecoveryInProgress())
		return OCC_BATCH_JOIN_ALONE;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (slot->state == OCC_SLOT_LEADING && slot->key == key && slot->dbid == MyDatabaseId)
	{
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_LEAD;
	}
	if (slot->state == OCC_SLOT_LEADING)
		occ_hand_on(slot);		/* the call's key has changed */
	if (slot->state != OCC_SLOT_IDLE)
	{
		/* ABANDONED by the backend before us: its leader has not let go */
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_JOIN_ALONE;
	}
	slot->key = key;
	slot->dbid = MyDatabaseId;
	slot->pid = MyProcPid;
	if (occ_find_leader(key) == NULL)
	{
		slot->state = OCC_SLOT_LEADING;
		slot->body_usec = 0;
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_LEAD;
	}
	LWLockRelease(occ_batch->lock);

	/* the slot is IDLE: ours to fill until it is POSTED */
	len = occ_handover_request_write(spec, slot->request, OCC_BATCH_REQUEST_BYTES);
	if (len < 0)
		return OCC_BATCH_JOIN_ALONE;
	slot->request_len = len;
	slot->userid = GetUserId();
	slot->signature = signature;
	slot->attempt = attempt;
	slot->want_result = want_result;
	slot->deadline = get_timeout_active(STATEMENT_TIMEOUT) ?
		get_timeout_finish_time(STATEMENT_TIMEOUT) : 0;
	slot->xid = InvalidTransactionId;
	slot->kind = OCC_BATCH_UNRUN;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (*seq == 0)
		*seq = occ_batch->next_seq++;
	slot->seq = *seq;
	if (occ_find_leader(key) == NULL)
	{
		slot->state = OCC_SLOT_LEADING; /* the leader left meanwhile */
		slot->body_usec = 0;
	}
	else
		slot->state = OCC_SLOT_POSTED;
	LWLockRelease(occ_batch->lock);
	if (slot->state == OCC_SLOT_LEADING)
		return OCC_BATCH_LEAD;

	PG_TRY();
	{
		if (occ_batch_sleep(slot, timeout_usec))
			join = occ_batch_conclude(slot, out);
		else
		{
			LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
			if (slot->state == OCC_SLOT_POSTED)
			{
				slot->state = OCC_SLOT_IDLE;
				join = OCC_BATCH_TIMED_OUT;
			}
			LWLockRelease(occ_batch->lock);
			if (join != OCC_BATCH_TIMED_OUT)
			{
				/* taken just now: its outcome is what counts */
				(void) occ_batch_sleep(slot, 0);
				join = occ_batch_conclude(slot, out);
			}
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		ConditionVariableCancelSleep();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		join = occ_batch_cancelled(slot, edata, out);
	}
	PG_END_TRY();
	return join;
}
