/*-------------------------------------------------------------------------
 *
 * policy.c
 *		What occ.retry does after a failed attempt: run again now, sleep,
 *		wait for a gate, or give up, and why.
 *
 * The retry loop (retry.c) runs an attempt, asks the policy, and does what
 * it says.  The policy runs no SQL: it decides from the failure, the call's
 * options and what it has decided before, drawing on the retry budget
 * (budget.c), the temperature of keys (temperature.c), the key (key.c),
 * the gate's state (gate.c) and the delays (backoff.c).  The rules, in the
 * order they apply:
 *
 *	1. A SQLSTATE not in retry_on is raised as it is.
 *	2. A failure at COMMIT after the body wrote to a foreign table gives up:
 *	   postgres_fdw commits the remote side at pre-commit, before the local
 *	   serializable check, so running the body again would repeat that work.
 *	3. max_attempts: the call gives up after that many attempts.
 *	4. The server-wide retry budget: a retry takes a token.  One that the
 *	   budget refuses does not run beside the others: it waits on the gate
 *	   of its key, in backoff mode too, so that a storm becomes a queue.  A
 *	   call that holds its gate already has nothing left to wait for: it
 *	   gives up.
 *	5. Queue mode (or a refused retry): instead of sleeping, wait for the
 *	   gate of the key, then keep it across the call's further attempts
 *	   (and take it again if the body released it).  When a gated attempt
 *	   still loses, a derived key that is not hot escalates to the gate of
 *	   the body alone: a parameter that varies per call, such as an amount,
 *	   split one row's callers over many gates.  A deadlock is a cycle with
 *	   another transaction, not a queue of callers, and that transaction
 *	   may be a writer that holds a row of the body and waits for our gate
 *	   (occ.gate()): the call releases its gate and backs off ungated, so
 *	   that the winner can go on and take the locks this attempt released
 *	   (a refused retry waits for the gate instead).  If the wait cannot be
 *	   had (deadlock, lock table full, lock_timeout), the call runs ungated
 *	   with backoff for the rest of the call, or gives up if refused.
 *	6. Backoff: sleep a jittered delay.  A gated attempt lost to someone
 *	   outside the queue; after a serialization failure the winner has
 *	   committed, so the first time it runs again at once; after that it
 *	   backs off holding the gate, counting only its gated failures, so
 *	   that the delay stays short.
 *	7. max_duration: a call gives up when the next delay, or the wait for
 *	   the gate, would exceed it.
 *
 * Before the first attempt, a call in queue mode whose key is hot takes its
 * gate, except one call in OCC_PROBE_ONE_IN, which runs optimistically so
 * that the temperature follows the workload.  Transactions that set occ.key
 * (client.c) take the same decision before their first statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"

#include "pg_occ.h"

/* One admission to a hot key in this many runs optimistically (a probe) */
#define OCC_PROBE_ONE_IN 64

/* occ_decide: a decision */
static OccDecision
occ_decide(OccStep step, double usec, const char *why, bool gave_up)
{
	OccDecision d;

	d.step = step;
	d.usec = usec;
	d.why = why;
	d.gave_up = gave_up;
	return d;
}

/* occ_policy_gate: the call's gate, made when first needed */
static OccGate *
occ_policy_gate(OccPolicy *p)
{
	if (p->gate == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(p->cxt);

		p->gate = occ_gate_create(occ_key_of_call(p->spec));
		MemoryContextSwitchTo(old);
	}
	return p->gate;
}

/*
 * occ_policy_begin: a call begins.  Queue mode makes its gate now (deriving
 * a key reads the parameters, which the first commit may free).
 */
void
occ_policy_begin(OccPolicy *p, const OccRetrySpec *spec, instr_time start,
				 MemoryContext cxt)
{
	memset(p, 0, sizeof(*p));
	p->spec = spec;
	p->start = start;
	p->cxt = cxt;
	p->derived = (spec->key == NULL);
	p->prev = spec->backoff.base;
	if (spec->contention == OCC_CONTENTION_QUEUE)
		(void) occ_policy_gate(p);
}

/*
 * occ_policy_wait_timeout: how long a wait for the gate may take within
 * max_duration: 0 for no limit, negative when there is no time left
 */
static double
occ_policy_wait_timeout(const OccPolicy *p)
{
	double		left;

	if (p->spec->max_duration <= 0)
		return 0;
	left = p->spec->max_duration - occ_elapsed_usec(p->start);
	return left > 0 ? left : -1;
}

/*
 * occ_policy_gate_first: should an attempt on this key take the gate before
 * it runs?  Yes when the key is hot, but for one in OCC_PROBE_ONE_IN, which
 * runs optimistically so that the temperature follows the workload.  For
 * occ.retry's first attempt, and for transactions that set occ.key
 * (client.c).
 */
bool
occ_policy_gate_first(uint64 key_hash)
{
	return occ_temperature_is_hot(key_hash) &&
		occ_random_draw() * OCC_PROBE_ONE_IN >= 1.0;
}

/*
 * occ_policy_before_first: WAIT when the call should take its gate before
 * its first attempt (queue mode, a hot key, not a probe), else RETRY
 */
OccDecision
occ_policy_before_first(OccPolicy *p)
{
	double		timeout = occ_policy_wait_timeout(p);

	if (p->gate == NULL || timeout < 0 || !occ_policy_gate_first(occ_gate_key(p->gate)))
		return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
	return occ_decide(OCC_STEP_WAIT, timeout, NULL, false);
}

/* occ_policy_observe: an attempt ended; its outcome heats or cools its key */
void
occ_policy_observe(OccPolicy *p, bool failed)
{
	if (p->gate != NULL)
		occ_temperature_observe(occ_gate_key(p->gate), occ_gate_held(p->gate), failed);
}

/*
 * occ_policy_escalate: a gated attempt failed.  If the key was derived and
 * is not hot, whoever won holds another key: move to the gate of the body
 * alone, for the rest of this call.  Returns whether it did.
 */
static bool
occ_policy_escalate(OccPolicy *p)
{
	if (!p->derived || p->escalated || occ_temperature_is_hot(occ_gate_key(p->gate)))
		return false;
	p->escalated = true;
	occ_gate_move(p->gate, p->spec->sql_hash);
	return true;
}

/* occ_policy_should_wait: rule 5, should the call wait for its gate now? */
static bool
occ_policy_should_wait(OccPolicy *p, int sqlerrcode)
{
	if (p->gate == NULL || p->bypassed)
		return false;
	if (!p->refused && sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		return false;
	return !occ_gate_held(p->gate) || occ_policy_escalate(p);
}

/* occ_policy_gave_up: a give-up after the attempts so far, and why */
static OccDecision
occ_policy_gave_up(const OccFailure *f, const char *reason)
{
	return occ_decide(OCC_STEP_GIVE_UP, 0,
					  psprintf("gave up after %d attempt%s%s", f->attempts,
							   occ_plural(f->attempts), reason),
					  true);
}

/*
 * occ_policy_backoff: rules 6 and 7, sleep a jittered delay, or give up
 * (with why, when a rule before already decided to)
 */
static OccDecision
occ_policy_backoff(OccPolicy *p, const OccFailure *f, OccDecision give_up)
{
	const OccBackoff *b = &p->spec->backoff;
	double		delay;

	if (p->gate != NULL && occ_gate_held(p->gate))
	{
		delay = (p->gated_failures == 0 &&
				 f->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE) ? 0 :
			occ_backoff_delay(b, p->gated_failures, b->base, occ_random_draw());
		p->gated_failures++;
	}
	else
	{
		delay = occ_backoff_delay(b, f->attempts - 1, p->prev, occ_random_draw());
		p->prev = Max(delay, b->base);
	}
	if (give_up.step == OCC_STEP_GIVE_UP)
		return give_up;
	if (p->spec->max_duration > 0 &&
		occ_elapsed_usec(p->start) + delay > p->spec->max_duration)
		return occ_policy_gave_up(f, psprintf(": the next delay of %.3f ms would exceed max_duration",
											  delay / 1000.0));
	return occ_decide(OCC_STEP_SLEEP, delay, NULL, false);
}

/* occ_policy_after_failure: what to do after the failed attempt f */
OccDecision
occ_policy_after_failure(OccPolicy *p, const OccFailure *f)
{
	OccDecision give_up = occ_decide(OCC_STEP_RETRY, 0, NULL, false);

	/* 1 */
	if (!occ_sqlstates_match(p->spec->retry_on, f->sqlerrcode))
		return occ_decide(OCC_STEP_RAISE, 0, NULL, false);
	/* 2 */
	if (f->at_commit && f->foreign_table != NULL)
		return occ_decide(OCC_STEP_GIVE_UP, 0,
						  psprintf("did not run the body again after this failure at COMMIT: "
								   "it wrote to the foreign table \"%s\", whose remote transaction may have committed already",
								   f->foreign_table),
						  false);
	/* 3 */
	if (f->attempts >= p->spec->max_attempts)
		give_up = occ_policy_gave_up(f, "");

	/* 5, first: after a deadlock the call does not keep its gate */
	if (f->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED && p->gate != NULL)
		occ_gate_release(p->gate);

	/* 4 */
	p->refused = (give_up.step != OCC_STEP_GIVE_UP && !occ_budget_withdraw());
	if (p->refused && (p->bypassed || occ_gate_held(occ_policy_gate(p))))
		give_up = occ_policy_gave_up(f, ": the server's retry budget is exhausted");

	/* 5 */
	if (give_up.step != OCC_STEP_GIVE_UP && occ_policy_should_wait(p, f->sqlerrcode))
	{
		double		timeout = occ_policy_wait_timeout(p);

		if (timeout < 0)
			return occ_policy_after_wait(p, f, OCC_GATE_TIMED_OUT);
		return occ_decide(OCC_STEP_WAIT, timeout, NULL, false);
	}
	return occ_policy_backoff(p, f, give_up);
}

/*
 * occ_policy_after_wait: the wait for the gate that the policy asked for
 * ended with outcome; what now?  f is NULL for the wait before the first
 * attempt, which runs whatever the outcome.
 */
OccDecision
occ_policy_after_wait(OccPolicy *p, const OccFailure *f, OccGateWait outcome)
{
	OccDecision give_up = occ_decide(OCC_STEP_RETRY, 0, NULL, false);

	if (outcome == OCC_GATE_UNAVAILABLE)
		p->bypassed = true;
	if (f == NULL)
		return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
	switch (outcome)
	{
		case OCC_GATE_TAKEN:
			return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
		case OCC_GATE_TIMED_OUT:
			give_up = occ_policy_gave_up(f, ": max_duration ran out while waiting for the gate");
			break;
		case OCC_GATE_UNAVAILABLE:
			if (p->refused)
				give_up = occ_policy_gave_up(f, ": the server's retry budget is exhausted and the gate of the key cannot be taken");
			break;
	}
	return occ_policy_backoff(p, f, give_up);
}

/* occ_policy_end: the call is over: pass the gate on */
void
occ_policy_end(OccPolicy *p)
{
	if (p->gate != NULL)
		occ_gate_release(p->gate);
}
