/*-------------------------------------------------------------------------
 *
 * outcome.c
 *		The outcomes a batch's leader writes into the slots of the calls
 *		it took, and tells them.
 *
 * As the leader (lead.c) runs each call's body, it notes the tentative
 * outcome in the call's slot (a result, an error); an outcome that does
 * not depend on the batch (run alone, not run, a failure the call
 * retries) is told at once.  Before the commit it seals the batch: the
 * batch's transaction id goes into every slot still waiting, so that a
 * follower whose leader goes away learns its outcome from that
 * transaction's fate (follow.c).  After the commit or the rollback it
 * publishes: every outcome becomes final (DONE) under the queue's lock, and
 * the followers are woken after the lock is let go.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/condition_variable.h"

#include "batch/batch.h"
#include "batch_slots.h"

/*
 * occ_batch_note: the leader ran member m's body: record its tentative
 * outcome (final once the batch commits).  An error is kept with its
 * SQLSTATE, message, detail and hint, each cut to fit.  Returns false when
 * the outcome does not fit (a result too large): the call must run alone.
 */
bool
occ_batch_note(OccBatchMember *m, OccBatchKind kind, const Jsonb *result,
			   const ErrorData *edata)
{
	OccBatchSlot *slot = &occ_batch->slots[m->slot];

	slot->outcome_len = 0;
	if (result != NULL)
	{
		if (VARSIZE(result) > OCC_BATCH_OUTCOME_BYTES)
			return false;
		memcpy(slot->outcome, result, VARSIZE(result));
		slot->outcome_len = VARSIZE(result);
	}
	if (edata != NULL)
	{
		slot->sqlerrcode = edata->sqlerrcode;
		slot->outcome_len = occ_handover_error_write(edata, slot->outcome);
	}
	slot->kind = kind;
	m->kind = kind;
	return true;
}

/*
 * occ_batch_finish: under the lock, member m's outcome is final.  Returns
 * whether its call waits for it: the caller wakes it (occ_batch_wake) once
 * it has let go of the lock, which every follower's wake-up takes.
 */
static bool
occ_batch_finish(OccBatchMember *m)
{
	OccBatchSlot *slot = &occ_batch->slots[m->slot];
	bool		waits = false;

	if (slot->state == OCC_SLOT_ABANDONED)
		slot->state = OCC_SLOT_IDLE;
	else if (slot->state == OCC_SLOT_CLAIMED && slot->pid == m->pid)
	{
		slot->state = OCC_SLOT_DONE;
		waits = true;
	}
	m->finished = true;
	return waits;
}

/*
 * occ_batch_wake: wake the call of member m, finished (a late wake-up of
 * the slot's next call only makes it look at its state again)
 */
static void
occ_batch_wake(const OccBatchMember *m)
{
	ConditionVariableSignal(&occ_batch->slots[m->slot].cv);
}

/*
 * occ_batch_send: member m's outcome does not depend on the batch's: tell
 * it now.  Its body was rolled back, or not run: it runs alone (ALONE),
 * joins again (UNRUN), or decides by its own policy on its failure edata
 * (FAILED).
 */
void
occ_batch_send(OccBatchMember *m, OccBatchKind kind, const ErrorData *edata)
{
	bool		waits;

	if (edata != NULL)
		(void) occ_batch_note(m, kind, NULL, edata);
	else
		occ_batch_slot_kind(m, kind);
	occ_batch->slots[m->slot].at_commit = false;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	waits = occ_batch_finish(m);
	LWLockRelease(occ_batch->lock);
	if (waits)
		occ_batch_wake(m);
}

/*
 * occ_batch_gone: before the commit, the members whose backend has gone
 * (terminated, or its client lost) since they were taken: each is freed
 * and finished (its body must not commit).  Returns how many.
 */
int
occ_batch_gone(OccBatchMember *members, int n)
{
	int			gone = 0;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[members[i].slot];

		if (members[i].finished ||
			(s->state == OCC_SLOT_CLAIMED && s->pid == members[i].pid))
			continue;
		(void) occ_batch_finish(&members[i]);	/* gone: no one waits */
		gone++;
	}
	LWLockRelease(occ_batch->lock);
	return gone;
}

/*
 * occ_batch_slot_kind: set member m's outcome kind, without its data
 */
void
occ_batch_slot_kind(OccBatchMember *m, OccBatchKind kind)
{
	occ_batch->slots[m->slot].kind = kind;
	occ_batch->slots[m->slot].outcome_len = 0;
	m->kind = kind;
}

/*
 * occ_batch_seal: every member has run: record the batch's transaction
 * id, before its commit, for followers whose leader goes away, and the
 * mean time its bodies took (body_usec, 0 if none ran), for the key's next
 * leaders.  The id is assigned now if the bodies have none yet: a NOTIFY
 * assigns one only at COMMIT, and a batch sealed without one would pass
 * for not committed.
 */
void
occ_batch_seal(OccBatchMember *members, int n, double body_usec)
{
	OccBatchSlot *slot = occ_my_slot();
	bool		any = false;
	TransactionId xid;

	for (int i = 0; i < n; i++)
		any |= !members[i].finished;
	xid = any ? GetTopTransactionId() : InvalidTransactionId;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (body_usec > 0)
		slot->body_usec = body_usec;
	for (int i = 0; i < n; i++)
		if (!members[i].finished)
			occ_batch->slots[members[i].slot].xid = xid;
	LWLockRelease(occ_batch->lock);
}

/*
 * occ_batch_publish: the batch committed (committed) or was rolled back:
 * make every member's outcome final and wake it.  batch_size counts the
 * calls that committed together.  When rolled back after a failure at
 * COMMIT that they share (at_commit), every member that ran gets the
 * failure (edata); otherwise they were not run.
 */
void
occ_batch_publish(OccBatchMember *members, int n, bool committed, int batch_size,
				  const ErrorData *edata, bool at_commit)
{
	for (int i = 0; i < n; i++)
	{
		OccBatchMember *m = &members[i];

		if (m->finished)
			continue;
		if (!committed)
		{
			if (at_commit && m->kind != OCC_BATCH_UNRUN)
				(void) occ_batch_note(m, OCC_BATCH_FAILED, NULL, edata);
			else
				occ_batch_slot_kind(m, OCC_BATCH_UNRUN);
			occ_batch->slots[m->slot].at_commit = at_commit;
		}
		occ_batch->slots[m->slot].batch_size = batch_size;
	}
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
		members[i].wake = !members[i].finished && occ_batch_finish(&members[i]);
	LWLockRelease(occ_batch->lock);
	occ_batch_told();
	for (int i = 0; i < n; i++)
		if (members[i].wake)
			occ_batch_wake(&members[i]);
}
