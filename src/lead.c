/*-------------------------------------------------------------------------
 *
 * lead.c
 *		The leader of a batch: in its attempt, after its own body and before
 *		its commit, it runs the bodies of the calls waiting behind it.
 *
 * When the leader's attempt begins, before its snapshot, occ_lead_begin
 * takes the calls that wait in its key's batch queue with the same body
 * and signature (batch.c).  The attempt (attempt.c) runs the leader's own
 * body in a subtransaction and releases it; then, before the commit,
 * occ_lead_run runs each taken call's body, with its own parameters and
 * attempt number (occ.attempt()), in a subtransaction of its own, in queue
 * order:
 * each body sees the ones before it, as if they had run one after another.
 * Then the attempt commits once, and occ_lead_end tells every call its
 * outcome.
 *
 *	- A body's error that its call would not retry rolls back its
 *	  subtransaction only; its call gets the error, the others go on.  A
 *	  body's deferred triggers (constraints DEFERRABLE) fire at its end, as
 *	  they would at its own commit, so that they fail that body alone.
 *	- A retryable error (or a cancel of the leader) fails the batch: the
 *	  attempt rolls back; the call whose body failed gets the failure, the
 *	  others get nothing and join again.  A retryable failure at COMMIT is
 *	  every call's; another (the leader cancelled) the leader's alone.
 *	  Each call then decides by its own policy: no body runs twice after a
 *	  commit, since outcomes are told only after it.
 *	- A body that leaves something in the session (session.c) or changes
 *	  synchronous_commit for its transaction is rolled back and its call
 *	  runs alone; a result too large to hand over, too.
 *	- A leader whose own body left something in its session, or wrote to a
 *	  foreign table, takes no one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "pg_occ.h"

/* The time a batch's bodies should take, at most, once their time is known */
#define OCC_LEAD_BATCH_USEC 10000.0

/*
 * occ_lead_room: how many calls the leader takes: up to occ.batch_max_calls
 * (its own included), and no more than the key's bodies run in
 * OCC_LEAD_BATCH_USEC, by the last batch's mean.  Every call of a batch
 * waits for its last body: where bodies are long, large batches would add
 * a batch's time to the wait of the calls that just missed one, and gain
 * nothing, the commit being a small part of the time.
 */
static int
occ_lead_room(void)
{
	double		usec = occ_batch_body_usec();
	int			room = occ_batch_max_calls - 1;

	if (usec > 0 && usec * room > OCC_LEAD_BATCH_USEC)
		room = Max(1, (int) (OCC_LEAD_BATCH_USEC / usec));
	return room;
}

/*
 * occ_lead_begin: the leader's attempt begins (its isolation level set, no
 * snapshot yet): note what its session is like, to see what its own body
 * changes, and take the calls waiting behind it, now: each call began
 * before the batch's snapshot, which therefore sees whatever committed
 * before any of them began, as their own transactions would.
 */
void
occ_lead_begin(OccLead *lead, const OccRetrySpec *spec, OccBody **body, uint64 key)
{
	memset(lead, 0, sizeof(*lead));
	lead->spec = spec;
	lead->body = body;
	lead->key = key;
	lead->fingerprint = occ_session_fingerprint();
	lead->signature = occ_batch_signature(spec, lead->fingerprint);
	lead->failed = -1;
	lead->synchronous_commit = synchronous_commit;
	lead->settings = occ_session_settings_open();
	if (occ_batch_max_calls <= 1)
		return;
	lead->members = palloc(sizeof(OccBatchMember) * (occ_batch_max_calls - 1));
	lead->n = occ_batch_claim(key, lead->signature, occ_lead_room(), lead->members);
}

/* occ_lead_give_back: the calls taken go back to the queue, not run */
static void
occ_lead_give_back(OccLead *lead)
{
	occ_batch_publish(lead->members, lead->n, false, 1, NULL, false, -1);
	lead->n = 0;
}

/*
 * occ_commit_changed: has a body changed synchronous_commit for its
 * transaction?  It asked its commit to wait for more (remote_apply) or
 * less: its body cannot share a commit with others.
 */
static bool
occ_commit_changed(const OccLead *lead)
{
	return synchronous_commit != lead->synchronous_commit;
}

/*
 * occ_lead_shares: can the leader's transaction take others' calls?  Not
 * after its own body left something in its session, or changed how its
 * transaction commits.
 */
static bool
occ_lead_shares(OccLead *lead)
{
	return *lead->body != NULL && occ_body_shares(*lead->body) &&
		!occ_foreign_written_yet() && !occ_session_has_temp() && !occ_commit_changed(lead);
}

/*
 * occ_lead_retryable: is this failure one that every call of the batch
 * shares?  A failure the calls retry (every member's retry_on is the
 * leader's), or any other of class 40 (transaction rollback).
 */
static bool
occ_lead_retryable(const OccLead *lead, const ErrorData *edata)
{
	return occ_sqlstates_match(lead->spec->retry_on, edata->sqlerrcode) ||
		ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK;
}

/*
 * occ_lead_fails_batch: does this error of a member's body fail the whole
 * batch?  A retryable one, and a cancel or statement_timeout of the leader.
 */
static bool
occ_lead_fails_batch(const OccLead *lead, const ErrorData *edata)
{
	return occ_lead_retryable(lead, edata) || edata->sqlerrcode == ERRCODE_QUERY_CANCELED;
}

/*
 * occ_lead_member_body: run member m's body, in the subtransaction begun by
 * the caller; returns its result (NULL when it wants none or has none)
 */
static Jsonb *
occ_lead_member_body(OccLead *lead, OccBatchMember *m, MemoryContext cxt)
{
	DestReceiver *rows = m->want_result ? occ_result_receiver(cxt) : NULL;
	Jsonb	   *result = NULL;

	occ_attempt_body(*lead->body, m->params, m->attempt,
					 rows != NULL ? rows : None_Receiver);
	if (rows != NULL)
	{
		MemoryContextSwitchTo(cxt);
		result = occ_result_jsonb(rows);
		occ_result_free(rows);
	}
	return result;
}

/*
 * occ_lead_member: run member m's body in a subtransaction of its own and
 * note its outcome (see the file header)
 */
static void
occ_lead_member(OccLead *lead, int i, const OccSessionLocks *locks)
{
	OccBatchMember *m = &lead->members[i];
	const OccRetrySpec *spec = lead->spec;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool in_subxact = false;
	bool		alone = false;

	if (strcmp(m->sql, spec->sql) != 0 || m->nargs != spec->nargs ||
		memcmp(m->argtypes, spec->argtypes, sizeof(Oid) * spec->nargs) != 0)
	{
		occ_batch_send_alone(m);	/* a hash collision */
		return;
	}
	BeginInternalSubTransaction(NULL);
	in_subxact = true;
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int			level = occ_session_settings_open();
		Jsonb	   *result = occ_lead_member_body(lead, m, cxt);

		/* (the level, left open when the commit changed, goes with the subtransaction) */
		alone = occ_commit_changed(lead) ||
			!occ_session_settings_close(level, lead->fingerprint, true) ||
			occ_session_has_temp() || occ_session_locks_changed(locks) ||
			occ_foreign_written_yet() ||
			!occ_batch_note(m, OCC_BATCH_COMMITTED, result, NULL);
		in_subxact = false;
		if (alone)
			RollbackAndReleaseCurrentSubTransaction();
		else
			ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (in_subxact)
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		occ_session_locks_restore(locks);
		if (occ_lead_fails_batch(lead, edata))
		{
			/* a cancel is the leader's, not the member's failure */
			if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
				lead->failed = i;
			ReThrowError(edata);
		}
		(void) occ_batch_note(m, OCC_BATCH_ERROR, NULL, edata);
		FreeErrorData(edata);
		return;
	}
	PG_END_TRY();
	if (alone)
	{
		occ_session_locks_restore(locks);
		occ_batch_send_alone(m);
	}
	else
		lead->ran++;
}

/*
 * occ_lead_run: the before-commit step of the leader's attempt: run the
 * bodies of the calls it took (errors that fail the batch throw)
 */
void
occ_lead_run(void *arg)
{
	OccLead    *lead = (OccLead *) arg;
	OccSessionLocks *locks;
	instr_time	start;

	/*
	 * The leader's own settings: as before its body, or changed for its
	 * transaction only (undone if it runs calls: they would see them), or
	 * for its session (then it runs none)
	 */
	if (lead->n == 0 || !occ_lead_shares(lead) ||
		!occ_session_settings_local(lead->settings, lead->fingerprint))
	{
		(void) occ_session_settings_close(lead->settings, lead->fingerprint, false);
		if (lead->n > 0)
			occ_lead_give_back(lead);
		return;
	}
	if (!occ_session_settings_close(lead->settings, lead->fingerprint, true))
	{
		occ_lead_give_back(lead);
		return;
	}
	/* the leader's deferred triggers fire before the next body, as its commit's */
	AfterTriggerFireDeferred();
	locks = occ_session_locks();
	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < lead->n; i++)
		occ_lead_member(lead, i, locks);
	occ_batch_seal(lead->members, lead->n,
				   lead->ran > 0 ? occ_elapsed_usec(start) / lead->ran : 0);
}

/*
 * occ_lead_end: the leader's attempt committed (committed) or failed with
 * failure: tell every call it took.  A retryable failure at COMMIT is
 * every call's; any other (a cancel of the leader) is the leader's alone:
 * the others' bodies were rolled back with it, and they run again.
 * Returns the size of the batch that committed (1 when the leader ran
 * alone).
 */
int
occ_lead_end(OccLead *lead, bool committed, const OccAttemptFailure *failure)
{
	int			size = 1;

	if (lead->n == 0)
		return size;
	if (committed)
		size += lead->ran;
	occ_batch_publish(lead->members, lead->n, committed, size,
					  committed ? NULL : failure->edata,
					  !committed && failure->at_commit &&
					  occ_lead_retryable(lead, failure->edata),
					  lead->failed);
	lead->n = 0;
	return size;
}
