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
 *	- A body's error rolls back its subtransaction only; the others go on.
 *	  One of class 40 (transaction rollback) or that its call retries is
 *	  told to its call at once, which decides by its own policy; another
 *	  is its outcome if the batch commits (it may come from a body before
 *	  it).  A body's deferred triggers (constraints DEFERRABLE) fire at its
 *	  end, as they would at its own commit, so that they fail that body
 *	  alone; the leader's fire at the end of its own body (attempt.c).
 *	- Each body runs under its own caller's statement_timeout (which ends
 *	  that body only); the leader's own is suspended meanwhile: the time
 *	  others' bodies take is not its own.  Only a cancel of the leader
 *	  (from ProcessInterrupts, not a body's RAISE of 57014) fails the
 *	  batch: the attempt rolls back, the others get nothing and join again.
 *	  A retryable failure at COMMIT is every call's; another (the leader
 *	  cancelled) the leader's alone.  No body runs twice after a commit,
 *	  since outcomes are told only after it.
 *	- Before the commit, the leader looks whether every caller is still
 *	  there: the bodies of one that has gone (terminated, client lost)
 *	  must not commit, so the bodies of the others, which each ran in a
 *	  subtransaction within one of them all, are rolled back and run
 *	  again, without it.
 *	- A body that leaves something in the session (session.c: settings,
 *	  temporary tables, user locks, a cursor open) or changes
 *	  synchronous_commit for its transaction is rolled back and its call
 *	  runs alone; a result too large to hand over, too.  The leader's
 *	  gate, if a body released it (pg_advisory_unlock_all()), is taken back.
 *	- A leader whose own body left something in its session, or wrote to a
 *	  foreign table, or that no longer holds its key's gate, takes no one.
 *	- A batch runs bodies for about occ.batch_max_time (10 ms): the calls
 *	  taken that it has no time for join again, before the next leader's.
 *	- A member's body waits at most OCC_LEAD_LOCK_WAIT_MS for a lock held
 *	  outside the batch, then runs alone: a batch holds the rows of many
 *	  calls, and a transaction beside it (a call that runs ungated, another
 *	  key's batch, the application's) that takes one of them while it waits
 *	  for one of those rows would make a deadlock that only
 *	  deadlock_timeout ends.  Waiting only outside the batch, the call can
 *	  wait as long as it takes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/timeout.h"

#include "pg_occ.h"
#include "attempt/attempt.h"
#include "batch/batch.h"
#include "util/util.h"

/*
 * The longest a member's body waits for a lock that a transaction outside
 * the batch holds (lock_timeout, unless the callers' own is shorter)
 */
#define OCC_LEAD_LOCK_WAIT_MS 10

/* occ_lead_batch_usec: the time a batch's bodies should take, at most */
static double
occ_lead_batch_usec(void)
{
	return occ_batch_max_time * 1000.0;
}

/*
 * occ_lead_room: how many calls the leader takes: up to occ.batch_max_calls
 * (its own included), and no more than the key's bodies run in
 * occ.batch_max_time, by the last batch's mean.  Every call of a batch
 * waits for its last body: where bodies are long, large batches would add
 * a batch's time to the wait of the calls that just missed one, and gain
 * nothing, the commit being a small part of the time.
 */
static int
occ_lead_room(void)
{
	double		usec = occ_batch_body_usec();
	int			room = occ_batch_max_calls - 1;

	if (usec > 0 && usec * room > occ_lead_batch_usec())
		room = Max(1, (int) (occ_lead_batch_usec() / usec));
	return room;
}

/*
 * occ_lead_begin: the leader's attempt begins (its isolation level set, no
 * snapshot yet): note what its session is like, to see what its own body
 * changes, and take the calls waiting behind it (it holds its key's gate),
 * now: each call began before the batch's snapshot, which
 * therefore sees whatever committed before any of them began, as their own
 * transactions would.  The transaction starts again after the taking, so
 * that now() is for each call a time within it.
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
	lead->synchronous_commit = synchronous_commit;
	lead->lock_timeout = LockTimeout;
	if (occ_batch_max_calls > 1)
	{
		lead->members = palloc(sizeof(OccBatchMember) * (occ_batch_max_calls - 1));
		lead->n = occ_batch_claim(key, lead->signature, occ_lead_room(), lead->members);
		if (lead->n > 0)
		{
			SPI_commit();
			occ_attempt_set_isolation(spec);	/* below the level of its settings */
		}
	}
	lead->locks = occ_session_locks();
	lead->settings = occ_session_settings_open();
	occ_session_utility_reset(true);
}

/* occ_lead_give_back: the calls taken go back to the queue, not run */
static void
occ_lead_give_back(OccLead *lead)
{
	occ_batch_publish(lead->members, lead->n, false, 1, NULL, false);
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

/* occ_lead_no_cursor_step: is no cursor open?  (Its subtransaction is rolled back.) */
static bool
occ_lead_no_cursor_step(void *arg)
{
	*(bool *) arg = ThereAreNoReadyPortals();
	return false;
}

/*
 * occ_lead_no_cursor: has the body just run left no cursor open (no portal
 * ready to run)?  ThereAreNoReadyPortals() returns from within its scan of
 * the portals when it finds one, without ending the scan, and the
 * (sub)transaction that then commits warns "leaked hash_seq_search scan".
 * A member's body (own false) is asked in its own subtransaction, which is
 * rolled back when the body left a cursor; the leader's own body, whose
 * transaction then commits, in a subtransaction begun for the question and
 * rolled back at once: an abort forgets the scans begun within it.
 */
static bool
occ_lead_no_cursor(bool own)
{
	bool		none = true;
	ErrorData  *edata;

	if (!own)
		return ThereAreNoReadyPortals();
	edata = occ_subxact_run(occ_lead_no_cursor_step, &none);
	if (edata != NULL)
		ReThrowError(edata);
	return none;
}

/*
 * occ_lead_left_nothing: has the body just run (the leader's own, if own)
 * left nothing in the session that would have stayed in its own (a
 * temporary table, user locks taken or released, a cursor open, a LISTEN,
 * a prepared statement and the like, a foreign table written to), sent no
 * NOTIFY that another body sent already, nor changed how the transaction
 * commits?
 */
static bool
occ_lead_left_nothing(const OccLead *lead, bool own)
{
	return !occ_session_has_temp() && !occ_session_locks_changed(lead->locks) &&
		occ_lead_no_cursor(own) && !occ_session_utility_kept() &&
		!occ_foreign_written_yet() && !occ_commit_changed(lead);
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
		occ_lead_left_nothing(lead, true);
}

/*
 * occ_lead_clean: a member's body was rolled back: what it left that its
 * subtransaction's rollback does not undo goes too (session-level user
 * locks taken, the leader's gate released), and its foreign writes no
 * longer count
 */
static void
occ_lead_clean(OccLead *lead)
{
	occ_session_locks_restore(lead->locks);
	occ_foreign_watch();
}

/*
 * occ_lead_retryable: is this failure one that its call, as every call of
 * the batch, retries (every member's retry_on is the leader's), or any
 * other of class 40 (transaction rollback)?
 */
static bool
occ_lead_retryable(const OccLead *lead, const ErrorData *edata)
{
	return occ_sqlstates_match(lead->spec->retry_on, edata->sqlerrcode) ||
		ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK;
}

/*
 * occ_lead_timed_out: has member m's statement_timeout run out?  Its own
 * backend raises it; its body, if it ran, was ended by it.
 */
static bool
occ_lead_timed_out(const OccBatchMember *m)
{
	return m->deadline != 0 && GetCurrentTimestamp() >= m->deadline;
}

/*
 * occ_lead_cancelled: is edata the leader's cancel (pg_cancel_backend, or
 * a member's statement_timeout, which arms the leader's timer)?  Raised by
 * ProcessInterrupts, not by a body that raises 57014 itself.
 */
static bool
occ_lead_cancelled(const ErrorData *edata)
{
	return edata->sqlerrcode == ERRCODE_QUERY_CANCELED && edata->funcname != NULL &&
		strcmp(edata->funcname, "ProcessInterrupts") == 0;
}

/*
 * occ_lead_bounds_locks: do the members' lock waits end sooner than the
 * callers' own lock_timeout (the same for all: it is among their settings)?
 */
static bool
occ_lead_bounds_locks(const OccLead *lead)
{
	return lead->lock_timeout == 0 || lead->lock_timeout > OCC_LEAD_LOCK_WAIT_MS;
}

/*
 * occ_lead_lock_waited: did a member's body wait too long for a lock held
 * outside the batch (see the file header)?
 */
static bool
occ_lead_lock_waited(const OccLead *lead, const ErrorData *edata)
{
	return edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE && occ_lead_bounds_locks(lead) &&
		edata->funcname != NULL && strcmp(edata->funcname, "ProcessInterrupts") == 0;
}

/*
 * occ_lead_member_body: run member m's body, in the subtransaction begun by
 * the caller, under m's statement_timeout; returns its result (NULL when it
 * wants none or has none)
 */
static Jsonb *
occ_lead_member_body(OccLead *lead, OccBatchMember *m, MemoryContext cxt)
{
	DestReceiver *rows = m->want_result ? occ_result_receiver(cxt) : NULL;
	Jsonb	   *result = NULL;

	if (m->deadline != 0)
		enable_timeout_at(STATEMENT_TIMEOUT, m->deadline);
	if (occ_lead_bounds_locks(lead))
		LockTimeout = OCC_LEAD_LOCK_WAIT_MS;
	occ_attempt_body(*lead->body, m->params, m->attempt,
					 rows != NULL ? rows : None_Receiver);
	LockTimeout = lead->lock_timeout;
	if (m->deadline != 0)
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		/* it ran out as the body ended: the body stands, no one is cancelled */
		if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
			QueryCancelPending = false;
	}
	if (rows != NULL)
	{
		MemoryContextSwitchTo(cxt);
		result = occ_result_jsonb(rows);
		occ_result_free(rows);
	}
	return result;
}

/*
 * occ_lead_member_failed: member m's body failed with edata (rolled back):
 * a failure its call retries or of class 40, or its statement_timeout, is
 * told at once; a wait for a lock outside the batch sends it to run alone;
 * another error is its outcome if the batch commits.  The leader's cancel
 * fails the batch: it is rethrown.
 */
static void
occ_lead_member_failed(OccLead *lead, OccBatchMember *m, ErrorData *edata)
{
	bool		timed_out = occ_lead_timed_out(m);

	LockTimeout = lead->lock_timeout;
	if (m->deadline != 0)
		disable_timeout(STATEMENT_TIMEOUT, false);
	if (occ_lead_cancelled(edata) && !timed_out)
		ReThrowError(edata);
	if (occ_lead_lock_waited(lead, edata))
		occ_batch_send(m, OCC_BATCH_ALONE, NULL);
	else if (timed_out || occ_lead_retryable(lead, edata))
		occ_batch_send(m, OCC_BATCH_FAILED, edata);
	else
		(void) occ_batch_note(m, OCC_BATCH_ERROR, NULL, edata);
}

/* What occ_lead_member_step works on, and what it found */
typedef struct OccLeadMemberStep
{
	OccLead    *lead;
	OccBatchMember *m;
	MemoryContext cxt;			/* for its result */
	bool		alone;			/* the call must run alone */
} OccLeadMemberStep;

/*
 * occ_lead_member_step: member m's body, in its subtransaction, kept
 * unless the call must run alone: the body left something in the session
 * or changed the commit, or its result does not fit its slot
 */
static bool
occ_lead_member_step(void *arg)
{
	OccLeadMemberStep *step = (OccLeadMemberStep *) arg;
	OccLead    *lead = step->lead;
	int			level;
	Jsonb	   *result;

	occ_session_utility_reset(false);
	level = occ_session_settings_open();
	result = occ_lead_member_body(lead, step->m, step->cxt);
	/* (the level, left open when the commit changed, goes with the subtransaction) */
	step->alone = occ_commit_changed(lead) ||
		!occ_session_settings_close(level, lead->fingerprint, true) ||
		!occ_lead_left_nothing(lead, false) ||
		!occ_batch_note(step->m, OCC_BATCH_COMMITTED, result, NULL);
	return !step->alone;
}

/*
 * occ_lead_member: run member m's body in a subtransaction of its own and
 * note its outcome (see the file header)
 */
static void
occ_lead_member(OccLead *lead, OccBatchMember *m)
{
	const OccRetrySpec *spec = lead->spec;
	OccLeadMemberStep step = {lead, m, CurrentMemoryContext, false};
	ErrorData  *edata;

	if (strcmp(m->sql, spec->sql) != 0 || m->nargs != spec->nargs ||
		memcmp(m->argtypes, spec->argtypes, sizeof(Oid) * spec->nargs) != 0)
	{
		occ_batch_send(m, OCC_BATCH_ALONE, NULL);	/* a hash collision */
		return;
	}
	if (occ_lead_timed_out(m))
	{
		occ_batch_send(m, OCC_BATCH_UNRUN, NULL);	/* its caller raises it */
		return;
	}
	edata = occ_subxact_run(occ_lead_member_step, &step);
	if (edata != NULL)
	{
		occ_lead_clean(lead);
		occ_lead_member_failed(lead, m, edata);
		FreeErrorData(edata);
	}
	else if (step.alone)
	{
		occ_lead_clean(lead);
		occ_batch_send(m, OCC_BATCH_ALONE, NULL);
	}
	else
		lead->ran++;
}

/*
 * occ_lead_bodies: run the bodies of the members not told yet, for about
 * occ.batch_max_time (the others join again), the leader's own
 * statement_timeout suspended meanwhile
 */
static void
occ_lead_bodies(OccLead *lead)
{
	TimestampTz own = get_timeout_active(STATEMENT_TIMEOUT) ?
		get_timeout_finish_time(STATEMENT_TIMEOUT) : 0;
	TimestampTz from = GetCurrentTimestamp();
	instr_time	start;

	if (own != 0)
		disable_timeout(STATEMENT_TIMEOUT, false);
	INSTR_TIME_SET_CURRENT(start);
	PG_TRY();
	{
		for (int i = 0; i < lead->n; i++)
		{
			OccBatchMember *m = &lead->members[i];

			if (m->finished)
				continue;
			if (lead->ran > 0 && occ_elapsed_usec(start) > occ_lead_batch_usec())
				occ_batch_send(m, OCC_BATCH_UNRUN, NULL);
			else
				occ_lead_member(lead, m);
		}
	}
	PG_FINALLY();
	{
		if (own != 0)
			enable_timeout_at(STATEMENT_TIMEOUT, own + (GetCurrentTimestamp() - from));
	}
	PG_END_TRY();
}

/* What occ_lead_members_step works on, and what it found */
typedef struct OccLeadMembersStep
{
	OccLead    *lead;
	bool		gone;			/* a caller whose body ran has gone */
} OccLeadMembersStep;

/*
 * occ_lead_members_step: the members' bodies, in a subtransaction of them
 * all, kept if every caller whose body ran is still there
 */
static bool
occ_lead_members_step(void *arg)
{
	OccLeadMembersStep *step = (OccLeadMembersStep *) arg;

	occ_lead_bodies(step->lead);
	step->gone = occ_batch_gone(step->lead->members, step->lead->n) > 0;
	return !step->gone;
}

/*
 * occ_lead_members: run the members' bodies within a subtransaction of
 * them all, and again without the callers that have gone meanwhile, until
 * every caller whose body ran is still there (errors that fail the batch
 * throw)
 */
static void
occ_lead_members(OccLead *lead)
{
	OccLeadMembersStep step = {lead, false};

	for (;;)
	{
		ErrorData  *edata = occ_subxact_run(occ_lead_members_step, &step);

		if (edata != NULL)
			ReThrowError(edata);
		if (!step.gone)
			return;
		occ_lead_clean(lead);
		lead->ran = 0;
		for (int i = 0; i < lead->n; i++)
			if (!lead->members[i].finished)
				occ_batch_slot_kind(&lead->members[i], OCC_BATCH_UNRUN);
	}
}

/*
 * occ_lead_run: the before-commit step of the leader's attempt: run the
 * bodies of the calls it took (errors that fail the batch throw)
 */
void
occ_lead_run(void *arg)
{
	OccLead    *lead = (OccLead *) arg;
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
	INSTR_TIME_SET_CURRENT(start);
	occ_lead_members(lead);
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
					  occ_lead_retryable(lead, failure->edata));
	lead->n = 0;
	return size;
}
