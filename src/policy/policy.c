/*-------------------------------------------------------------------------
 *
 * policy.c
 *		What occ.retry does after a failed attempt: run again now, sleep,
 *		wait for a gate, or give up, and why.
 *
 * The retry loop (retry.c) runs an attempt, asks the policy, and does what
 * it says.  The policy runs no SQL: it decides from the failure, the call's
 * options and what it has decided before, drawing on the retry budget
 * (budget.c), the keys (key.c, learner.c) and their temperature
 * (temperature.c), the gates' state (gate.c) and the delays (backoff.c).  The rules, in the
 * order they apply:
 *
 *	1. A SQLSTATE not in retry_on is raised as it is.
 *	2. A failure at COMMIT after part of the attempt may have committed
 *	   elsewhere gives up: postgres_fdw commits the remote side of a
 *	   foreign table written to at pre-commit, before the local
 *	   serializable check, and so does Citus with work on other nodes that
 *	   it commits in one phase (attempt.c), so running the body again would
 *	   repeat that work.  Its outcome is unknown: not the failure, which
 *	   clients retry, but statement_completion_unknown (40003) is raised.
 *	3. max_attempts: the call gives up after that many attempts.
 *	4. The server-wide retry budget: a retry takes a token.  One that the
 *	   budget refuses does not run beside the others: it waits on the gate
 *	   of its key, in backoff mode too, so that a storm becomes a queue.  A
 *	   call that holds its gate already has nothing left to wait for: it
 *	   gives up.
 *	5. Queue mode, and batch mode (or a refused retry): instead of sleeping, wait for the
 *	   gates of the call's keys, in one global order (gate.c), then keep
 *	   them across the call's further attempts (and take them again if the
 *	   body released them).  The keys are those the call gives; without
 *	   them, those the learner (learner.c) finds hot among the values the
 *	   call carries, looked up again after each failure: a call that
 *	   carries no hot value backs off without a gate.  A refused retry
 *	   without keys waits on the gate of its body.  A deadlock is a cycle
 *	   with another transaction, not a queue of callers, and that
 *	   transaction may be a writer that holds a row of the body and waits
 *	   for our gate (occ.gate()): the call releases its gates and backs off
 *	   ungated, so that the winner can go on and take the locks this attempt
 *	   released (a refused retry waits for the gates instead).  If the wait
 *	   cannot be had (deadlock, lock table full, lock_timeout), the call
 *	   runs ungated with backoff for the rest of the call, or gives up if
 *	   refused.  (In batch mode lock_timeout does not end a wait in the
 *	   key's line, the next leader's for the gate included: retry.c.)
 *	6. Backoff: sleep a jittered delay.  A gated attempt lost to someone
 *	   outside the queue; after a serialization failure the winner has
 *	   committed, so the first time it runs again at once; after that it
 *	   backs off holding the gate, counting only its gated failures, so
 *	   that the delay stays short.
 *	7. max_duration: a call gives up when the next delay, or the wait for
 *	   the gate, would exceed it.
 *
 * Before the first attempt, a call in queue mode that gives a hot key
 * (temperature.c), or carries a value its body's failures concentrate on,
 * takes its gates, except one call in OCC_PROBE_ONE_IN, which runs
 * optimistically so that the measures follow the workload (in batch mode
 * with keys given, the batches keep the measures instead).  Only failures
 * the call would retry heat its keys.  A transaction that sets occ.key
 * (client.c) is admitted by the same rule, before its first statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"

#include "pg_occ.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "util/util.h"

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
	d.outcome_unknown = false;
	return d;
}

/*
 * occ_policy_values: the values the call carries, hashed once (with their
 * text once it fails, for the learner's display)
 */
static OccKeyValues *
occ_policy_values(OccPolicy *p, bool with_text)
{
	if (p->values == NULL || (with_text && !p->values_text))
	{
		MemoryContext old = MemoryContextSwitchTo(p->cxt);

		p->values = occ_key_values(p->spec, with_text);
		p->values_text = with_text;
		MemoryContextSwitchTo(old);
	}
	return p->values;
}

/*
 * occ_policy_keys: the call's keys now: those it gives, or those the
 * learner finds in the values it carries (none while nothing is hot), in
 * the policy's room for them, made once per call (one array per failed
 * attempt was 24 bytes more per attempt until the call ended)
 */
static int
occ_policy_keys(OccPolicy *p, uint64 **keys)
{
	const OccRetrySpec *spec = p->spec;
	OccKeyValues *values = spec->nkeys > 0 ? NULL : occ_policy_values(p, false);
	int			room = values != NULL ? values->n + 1 : spec->nkeys;

	if (p->keys_room < room)
	{
		if (p->keys != NULL)
			pfree(p->keys);
		p->keys = MemoryContextAlloc(p->cxt, sizeof(uint64) * room);
		p->keys_room = room;
	}
	*keys = p->keys;
	if (values == NULL)
		return occ_key_given(spec, *keys);
	return occ_learner_keys(spec->sql_hash, values, *keys);
}

/*
 * occ_policy_set_gates: make the call's gates those of keys (releasing the
 * old ones if they differ); none when nkeys is 0
 */
static void
occ_policy_set_gates(OccPolicy *p, uint64 *keys, int nkeys)
{
	MemoryContext old;

	if (p->gates != NULL && nkeys > 0 && occ_gates_same(p->gates, keys, nkeys))
		return;
	if (p->gates != NULL)
	{
		occ_gates_release(p->gates);
		pfree(p->gates);
		p->gates = NULL;
	}
	if (nkeys == 0)
		return;
	old = MemoryContextSwitchTo(p->cxt);
	p->gates = occ_gates_create(keys, nkeys);
	MemoryContextSwitchTo(old);
}

/* occ_policy_held: does the call hold all its gates (and have some)? */
static bool
occ_policy_held(OccPolicy *p)
{
	return p->gates != NULL && occ_gates_held(p->gates);
}

/* occ_policy_begin: a call begins */
void
occ_policy_begin(OccPolicy *p, const OccRetrySpec *spec, instr_time start,
				 MemoryContext cxt)
{
	memset(p, 0, sizeof(*p));
	p->spec = spec;
	p->start = start;
	p->cxt = cxt;
	p->prev = spec->backoff.base;
}

/*
 * occ_policy_wait_timeout: how long a wait for the gates may take within
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
 * occ_policy_hot: is one of these given keys hot?  (Learned keys are hot by
 * construction.)
 */
static bool
occ_policy_hot(const uint64 *keys, int nkeys)
{
	for (int i = 0; i < nkeys; i++)
		if (occ_temperature_is_hot(keys[i]))
			return true;
	return false;
}

/* occ_policy_probe: is this admission to hot keys one of the probes? */
static bool
occ_policy_probe(void)
{
	return occ_random_draw() * OCC_PROBE_ONE_IN < 1.0;
}

/*
 * occ_policy_probes: does this call probe?  Not a batch mode call that gives
 * its keys: an ungated call beside a batch, which holds the rows of many
 * calls until its commit, takes one row and waits for another that the
 * batch holds, which may then need the first: a deadlock, found only after
 * deadlock_timeout.  Its batches keep the key hot instead
 * (occ_policy_observe_batch).
 */
static bool
occ_policy_probes(const OccPolicy *p)
{
	if (p->spec->contention == OCC_CONTENTION_BATCH && p->spec->nkeys > 0)
		return false;
	return occ_policy_probe();
}

/*
 * occ_policy_gate_first: should a transaction that gives these keys take
 * their gates before it runs?  The rule of occ.retry's first attempt: when
 * one of them is hot, except for a probe.  For the transactions that set
 * occ.key (client.c).
 */
bool
occ_policy_gate_first(const uint64 *keys, int nkeys)
{
	return occ_policy_hot(keys, nkeys) && !occ_policy_probe();
}

/*
 * occ_policy_before_first: in queue mode, WAIT when the call should take its
 * gates before its first attempt (it gives a hot key, or its body has hot
 * values that it carries), except for a probe; else RETRY
 */
OccDecision
occ_policy_before_first(OccPolicy *p)
{
	double		timeout = occ_policy_wait_timeout(p);
	uint64	   *keys;
	int			nkeys = 0;

	if (p->spec->contention == OCC_CONTENTION_BACKOFF)
		return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
	if (p->spec->nkeys > 0 || occ_learner_knows(p->spec->sql_hash))
		nkeys = occ_policy_keys(p, &keys);
	if (nkeys == 0)
		return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
	occ_policy_set_gates(p, keys, nkeys);
	if (timeout < 0 || (p->spec->nkeys > 0 && !occ_policy_hot(keys, nkeys)) ||
		occ_policy_probes(p))
		return occ_decide(OCC_STEP_RETRY, 0, NULL, false);
	return occ_decide(OCC_STEP_WAIT, timeout, NULL, false);
}

/*
 * occ_policy_observe: an attempt ended, with sqlerrcode (0 if it committed);
 * its outcome heats or cools its keys.  An attempt that a batch's leader
 * ran (batched) ran under the leader's gate.  Only a failure that the call
 * retries is contention: any other (42501, 23505, ...) counts as an attempt
 * that did not fail, else a caller without privileges could make a key hot,
 * and make every caller of it queue.
 */
void
occ_policy_observe(OccPolicy *p, int sqlerrcode, bool batched)
{
	bool		failed = (sqlerrcode != 0 &&
						  occ_sqlstates_match(p->spec->retry_on, sqlerrcode));
	bool		gated = batched || occ_policy_held(p);

	if (p->spec->nkeys > 0)
	{
		for (int i = 0; p->gates != NULL && i < occ_gates_count(p->gates); i++)
			occ_temperature_observe(occ_gates_key(p->gates, i), gated, failed);
		return;
	}
	occ_learner_observe(p->spec->sql_hash,
						(failed || p->values != NULL) ? occ_policy_values(p, failed) : NULL,
						gated, failed);
}

/*
 * occ_policy_observe_batch: the call led a batch that committed with
 * others calls: they came while it ran, which is contention on its keys,
 * and keeps them hot as failures would (for the keys it gives; learned
 * keys follow their probes)
 */
void
occ_policy_observe_batch(OccPolicy *p, int others)
{
	if (others <= 0 || p->spec->nkeys == 0 || p->gates == NULL)
		return;
	for (int i = 0; i < occ_gates_count(p->gates); i++)
		occ_temperature_observe(occ_gates_key(p->gates, i), false, true);
}

/*
 * occ_policy_refused_gates: a retry the budget refused waits on the gates
 * of its keys; a call without keys (nothing hot) on the gate of its body
 */
static void
occ_policy_refused_gates(OccPolicy *p)
{
	uint64	   *keys;
	int			nkeys = occ_policy_keys(p, &keys);

	if (nkeys == 0)
		keys[nkeys++] = occ_key_of_body(p->spec->sql_hash);
	occ_policy_set_gates(p, keys, nkeys);
}

/*
 * occ_policy_should_wait: rule 5, should the call wait for its gates now?
 * In queue mode the gates are those of the keys the call has now (a learned
 * key may have become hot, or cooled); none, and it backs off.
 */
static bool
occ_policy_should_wait(OccPolicy *p, int sqlerrcode)
{
	if (p->bypassed)
		return false;
	if (!p->refused)
	{
		uint64	   *keys;
		int			nkeys;

		if (p->spec->contention == OCC_CONTENTION_BACKOFF ||
			sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
			return false;
		nkeys = occ_policy_keys(p, &keys);
		occ_policy_set_gates(p, keys, nkeys);
	}
	return p->gates != NULL && !occ_gates_held(p->gates);
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

	if (occ_policy_held(p))
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
	if (f->at_commit && f->committed_first != NULL)
	{
		give_up = occ_decide(OCC_STEP_GIVE_UP, 0,
							 psprintf("did not run the body again after this failure at COMMIT: %s",
									  f->committed_first),
							 true);
		give_up.outcome_unknown = true;
		return give_up;
	}
	/* 3 */
	if (f->attempts >= p->spec->max_attempts)
		give_up = occ_policy_gave_up(f, "");

	/* 5, first: after a deadlock the call does not keep its gates */
	if (f->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED && p->gates != NULL)
		occ_gates_release(p->gates);

	/* 4 */
	p->refused = (give_up.step != OCC_STEP_GIVE_UP && !occ_budget_withdraw());
	if (p->refused && !p->bypassed)
		occ_policy_refused_gates(p);
	if (p->refused && (p->bypassed || occ_policy_held(p)))
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

/* occ_policy_end: the call is over: pass the gates on */
void
occ_policy_end(OccPolicy *p)
{
	if (p->gates != NULL)
		occ_gates_release(p->gates);
}
