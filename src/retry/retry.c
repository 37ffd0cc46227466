/*-------------------------------------------------------------------------
 *
 * retry.c
 *		CALL occ.retry(sql, ...): run a transaction, and run it again whole
 *		after a serialization failure or a deadlock; and occ.attempt().
 *
 * A call is a sequence of transactions:
 *
 *	1. read the arguments (args.c) and commit the CALL's own transaction (it
 *	   holds the snapshot taken to evaluate the arguments, and the isolation
 *	   level must be set before any snapshot);
 *	2. run an attempt, the body as one transaction (attempt.c);
 *	3. if it failed, ask the policy (policy.c) and do what it says, holding
 *	   no snapshot and no transaction id: run again at once, sleep a
 *	   jittered backoff, wait in FIFO order for the gate of the call's key
 *	   (and ask again), or give up, re-raising the failure with why in its
 *	   detail; and go again;
 *	4. once an attempt commits, pass the gate on, pay into the retry budget,
 *	   and account the call (stats.c).
 *
 * The forms with INOUT result return the committed attempt's rows as jsonb
 * (result.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "pg_occ.h"
#include "attempt/attempt.h"
#include "batch/batch.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "retry/retry.h"
#include "stats/stats.h"
#include "util/util.h"

PG_FUNCTION_INFO_V1(occ_retry);
PG_FUNCTION_INFO_V1(occ_attempt);

/* One call: what it was asked, what has happened so far */
typedef struct OccCall
{
	OccRetrySpec spec;
	OccOutputs	outputs;
	OccCallResult result;
	OccPolicy	policy;
	instr_time	start;
	OccBody    *body;			/* the kept plans, opened by the first attempt */
	Jsonb	   *rows;			/* the committed attempt's result, or NULL */
	bool		accounted;		/* recorded (statistics, last_retry) */

	/* batch mode */
	bool		alone;			/* it runs alone, as in queue mode */
	bool		leading;		/* it leads the batches of lead_key */
	uint64		lead_key;
	OccLead		lead;			/* the batch of its attempt */
	uint64		batch_seq;		/* its place in the key's batch queue */
	bool		handed;			/* a leader ran its next attempt: */
	OccBatchOutcome outcome;	/* what became of it, in outcomecxt */
	MemoryContext outcomecxt;
} OccCall;

/*
 * occ_account: the call is over; time it and record it, once, under the
 * role that called.
 */
static void
occ_account(OccCall *call)
{
	if (call->accounted)
		return;
	call->accounted = true;
	call->result.total_ms = occ_elapsed_usec(call->start) / 1000.0;
	occ_stats_record(call->spec.sql, call->spec.sql_hash, &call->result);
}

/*
 * occ_give_up: re-raise the last failure with its own SQLSTATE, message and
 * hint, adding to its detail why occ.retry stopped (and logging it when
 * occ.log_retries is on).  When the body may have committed in part, raise
 * statement_completion_unknown instead, with the failure in the detail:
 * clients and tools retry the failure's SQLSTATE (40001 "might succeed if
 * retried"), which would repeat what committed.
 */
pg_noreturn static void
occ_give_up(ErrorData *edata, const OccDecision *d)
{
	if (occ_log_retries)
		ereport(LOG,
				(errmsg("occ.retry %s, last SQLSTATE %s",
						d->why, unpack_sql_state(edata->sqlerrcode))));
	if (d->outcome_unknown)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_STATEMENT_COMPLETION_UNKNOWN),
				 errmsg("the occ.retry body may have committed in part"),
				 errdetail("It failed with SQLSTATE %s: %s\n%s%socc.retry %s.",
						   unpack_sql_state(edata->sqlerrcode), edata->message,
						   edata->detail ? edata->detail : "", edata->detail ? "\n" : "",
						   d->why),
				 errhint("Find out what committed before running the body again: running it again could repeat it.")));
	edata->detail = edata->detail ?
		psprintf("%s\nocc.retry %s.", edata->detail, d->why) :
		psprintf("occ.retry %s.", d->why);
	ReThrowError(edata);
}

/*
 * occ_sleep_between: sleep delay microseconds between attempts, holding no
 * snapshot and no transaction id, only the virtual transaction id.  An
 * interrupt throws (and ends the call, accounted by occ_retry).
 */
static void
occ_sleep_between(OccCall *call, double delay)
{
	instr_time	from;

	occ_check_client();
	InvalidateCatalogSnapshot();
	INSTR_TIME_SET_CURRENT(from);
	occ_sleep_usec(delay);
	delay = occ_elapsed_usec(from) / 1000.0;
	call->result.sleep_ms += delay;
	call->result.max_sleep_ms = Max(call->result.max_sleep_ms, delay);
}

/*
 * occ_join_batch: in batch mode, instead of waiting for the gate of a
 * single key, join the key's batch queue (follow.c) until a leader has run
 * the call (call->handed, *outcome OCC_GATE_TAKEN) or the timeout ran out
 * (OCC_GATE_TIMED_OUT): returns true.  Returns false when the call is to
 * wait for the gate itself: it leads the key, or must run alone.
 */
static bool
occ_join_batch(OccCall *call, double timeout, OccGateWait *outcome)
{
	OccGates   *gates = call->policy.gates;
	uint64		key;
	uint64		signature;
	instr_time	from;

	if (call->spec.contention != OCC_CONTENTION_BATCH || call->alone ||
		gates == NULL || occ_gates_count(gates) != 1 || !occ_batch_available())
		return false;
	key = occ_gates_key(gates, 0);
	if (call->leading && call->lead_key == key)
		return false;
	signature = occ_batch_signature(&call->spec, occ_session_fingerprint());
	INSTR_TIME_SET_CURRENT(from);
	for (;;)
	{
		double		left = timeout > 0 ? Max(timeout - occ_elapsed_usec(from), 1.0) : 0;

		MemoryContextReset(call->outcomecxt);
		MemoryContextSwitchTo(call->outcomecxt);
		switch (occ_batch_join(&call->spec, key, signature, call->result.attempts + 1,
							   call->outputs.result >= 0, &call->batch_seq, left,
							   &call->outcome))
		{
			case OCC_BATCH_LEAD:
				call->leading = true;
				call->lead_key = key;
				return false;
			case OCC_BATCH_JOIN_ALONE:
				call->alone = true;
				return false;
			case OCC_BATCH_TIMED_OUT:
				*outcome = OCC_GATE_TIMED_OUT;
				return true;
			case OCC_BATCH_RAN:
				call->handed = true;
				*outcome = OCC_GATE_TAKEN;
				return true;
			case OCC_BATCH_NOT_RUN:
				occ_check_client();
				break;
		}
	}
}

/*
 * occ_lead_keyed: does the call lead its key's batches, and is that key
 * its only one?
 */
static bool
occ_lead_keyed(OccCall *call)
{
	OccGates   *gates = call->policy.gates;

	return call->leading && gates != NULL && occ_gates_count(gates) == 1 &&
		occ_gates_key(gates, 0) == call->lead_key;
}

/*
 * occ_wait_gate: wait for the call's gate (or, in batch mode, for a leader
 * to run it), like a sleep between transactions, at most timeout
 * microseconds if positive.  An interrupt throws (and ends the call,
 * accounted by occ_retry, the wait included).
 *
 * The session's lock_timeout does not end the wait of a call that leads
 * its key's batches: that wait is its turn in the key's line, as a
 * follower's wait on its slot is, and which call leads is only its place
 * in line.  Ended, the call would run ungated for the rest of the call
 * (policy.c), behind a gate held longer than lock_timeout by a call that
 * runs alone: one that its batch sent to run alone because its body waited
 * for a lock held outside the batch waits for that lock holding the gate.
 * The leader could then spend all its attempts without ever holding the
 * gate, while the calls in line before and after it held it.
 */
static OccGateWait
occ_wait_gate(OccCall *call, double timeout)
{
	instr_time	from;
	OccGateWait outcome;
	double		waited;

	occ_check_client();
	InvalidateCatalogSnapshot();
	INSTR_TIME_SET_CURRENT(from);
	PG_TRY();
	{
		MemoryContext cxt = CurrentMemoryContext;

		if (occ_join_batch(call, timeout, &outcome))
			MemoryContextSwitchTo(cxt);
		else
		{
			MemoryContextSwitchTo(cxt);
			outcome = occ_gates_wait(call->policy.gates, timeout, !occ_lead_keyed(call));
		}
	}
	PG_CATCH();
	{
		call->result.wait_ms += occ_elapsed_usec(from) / 1000.0;
		PG_RE_THROW();
	}
	PG_END_TRY();
	waited = occ_elapsed_usec(from) / 1000.0;
	call->result.wait_ms += waited;
	call->result.max_wait_ms = Max(call->result.max_wait_ms, waited);
	call->result.queued |= (outcome == OCC_GATE_TAKEN);
	return outcome;
}

/*
 * occ_error_copy: a copy of edata in the current memory context (what
 * CopyErrorData copies)
 */
static ErrorData *
occ_error_copy(const ErrorData *edata)
{
	ErrorData  *copy = palloc(sizeof(ErrorData));
	char	  **strings[] = {&copy->message, &copy->detail, &copy->detail_log, &copy->hint,
		&copy->context, &copy->backtrace, &copy->schema_name,
		&copy->table_name, &copy->column_name, &copy->datatype_name,
	&copy->constraint_name, &copy->internalquery};

	memcpy(copy, edata, sizeof(ErrorData));
	for (int i = 0; i < lengthof(strings); i++)
		if (*strings[i] != NULL)
			*strings[i] = pstrdup(*strings[i]);
	copy->assoc_context = CurrentMemoryContext;
	return copy;
}

/*
 * occ_handed_outcome: the attempt that a batch's leader ran for the call:
 * true if it committed (its result in call->rows's place), else the
 * failure, as occ_attempt_run reports one
 */
static bool
occ_handed_outcome(OccCall *call, Jsonb **rows, OccAttemptFailure *failure)
{
	OccBatchOutcome *o = &call->outcome;

	call->handed = false;
	if (o->committed && o->edata == NULL)
	{
		if (rows != NULL)
			*rows = o->result;
		call->result.batch_size = o->batch_size;
		return true;
	}
	/* in the attempt's memory: the outcome's is reset when the call joins again */
	failure->edata = occ_error_copy(o->edata);
	failure->at_commit = o->at_commit;
	failure->committed_first = NULL;
	return false;
}

/*
 * occ_lead_gated: does the call that leads its key's batches still hold
 * that key's gate, and that one only?
 */
static bool
occ_lead_gated(OccCall *call)
{
	return occ_lead_keyed(call) && occ_gates_held(call->policy.gates);
}

/*
 * occ_next_attempt: run the call's next attempt: as a batch's leader runs it
 * (handed over), as the leader of its key's batch, or alone
 */
static bool
occ_next_attempt(OccCall *call, MemoryContext attemptcxt, Jsonb **rows,
			OccAttemptFailure *failure)
{
	bool		committed;

	if (call->handed)
		return occ_handed_outcome(call, rows, failure);
	if (call->leading && !occ_lead_gated(call))
	{
		/* its key cooled, or its gate is gone: the next call in line leads */
		occ_batch_leave();
		call->leading = false;
	}
	if (!call->leading)
		return occ_attempt_run(&call->spec, call->result.attempts, &call->body,
							   attemptcxt, rows, failure, NULL, NULL);
	occ_attempt_set_isolation(&call->spec);
	PG_TRY();
	{
		occ_lead_begin(&call->lead, &call->spec, &call->body, call->lead_key);
		committed = occ_attempt_run(&call->spec, call->result.attempts, &call->body,
									attemptcxt, rows, failure, occ_lead_run, &call->lead);
		call->result.batch_size = occ_lead_end(&call->lead, committed, failure);
	}
	PG_CATCH();
	{
		/* the calls taken learn from the batch transaction's fate */
		occ_batch_orphan();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (committed)
		occ_policy_observe_batch(&call->policy, call->result.batch_size - 1);
	return committed;
}

/*
 * occ_after_failure: ask the policy what to do after the failed attempt,
 * waiting for the gate as often as it says; returns its final decision
 */
static OccDecision
occ_after_failure(OccCall *call, const OccAttemptFailure *af)
{
	OccFailure	f;
	OccDecision d;

	f.sqlerrcode = af->edata->sqlerrcode;
	f.attempts = call->result.attempts;
	f.at_commit = af->at_commit;
	f.committed_first = af->committed_first;
	d = occ_policy_after_failure(&call->policy, &f);
	while (d.step == OCC_STEP_WAIT)
	{
		if (occ_log_retries)
			ereport(LOG,
					(errmsg("occ.retry attempt %d failed with SQLSTATE %s, waiting for the gate%s",
							f.attempts, unpack_sql_state(f.sqlerrcode),
							call->policy.refused ? " (the retry budget is exhausted)" : "")));
		d = occ_policy_after_wait(&call->policy, &f, occ_wait_gate(call, d.usec));
	}
	return d;
}

/*
 * occ_attempts: run attempts until one commits (returns) or the policy
 * stops the call (throws, after accounting it)
 */
static void
occ_attempts(OccCall *call, MemoryContext attemptcxt)
{
	Jsonb	  **rows = call->outputs.result >= 0 ? &call->rows : NULL;

	for (;;)
	{
		OccAttemptFailure failure;
		OccDecision d;
		bool		batched = call->handed;

		occ_check_client();
		MemoryContextReset(attemptcxt);
		MemoryContextSwitchTo(attemptcxt);
		call->result.attempts++;
		if (occ_next_attempt(call, attemptcxt, rows, &failure))
		{
			occ_policy_observe(&call->policy, 0, batched);
			call->result.committed = true;
			return;
		}
		occ_policy_observe(&call->policy, failure.edata->sqlerrcode, batched);
		occ_stats_failure(&call->result, failure.edata->sqlerrcode);

		d = occ_after_failure(call, &failure);
		switch (d.step)
		{
			case OCC_STEP_RAISE:
				occ_account(call);
				ReThrowError(failure.edata);
				break;
			case OCC_STEP_GIVE_UP:
				call->result.gave_up = d.gave_up;
				occ_account(call);
				occ_give_up(failure.edata, &d);
				break;
			case OCC_STEP_SLEEP:
				if (occ_log_retries)
					ereport(LOG,
							(errmsg("occ.retry attempt %d failed with SQLSTATE %s, retrying in %.3f ms",
									call->result.attempts,
									unpack_sql_state(failure.edata->sqlerrcode),
									d.usec / 1000.0)));
				occ_sleep_between(call, d.usec);
				break;
			case OCC_STEP_RETRY:
			case OCC_STEP_WAIT:
				break;
		}
	}
}

/*
 * occ_output_row: the row the CALL returns, made in the caller's memory
 * context (SPI's goes away), or 0 for the form without outputs
 */
static Datum
occ_output_row(OccCall *call)
{
	const OccOutputs *out = &call->outputs;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (out->tupdesc == NULL)
		return (Datum) 0;
	/* heap_form_tuple copies the result: one copy of it, not two */
	if (out->result >= 0)
	{
		nulls[out->result] = (call->rows == NULL);
		values[out->result] = PointerGetDatum(call->rows);
	}
	if (out->attempts >= 0)
		values[out->attempts] = Int32GetDatum(call->result.attempts);
	if (out->slept >= 0)
		values[out->slept] =
			PointerGetDatum(occ_usec_to_interval(rint(call->result.sleep_ms * 1000.0)));
	return HeapTupleGetDatum(heap_form_tuple(out->tupdesc, values, nulls));
}

/*
 * occ_run_call: everything occ.retry does, from checking where and how it
 * was called to the commit; errors throw.  Returns the procedure's result,
 * made in the caller's memory context.
 */
static Datum
occ_run_call(FunctionCallInfo fcinfo, OccCall *call)
{
	MemoryContext outercxt = CurrentMemoryContext;
	MemoryContext callcxt;
	MemoryContext attemptcxt;
	Datum		retval;

	occ_args_sql(fcinfo, &call->spec);
	occ_attempt_check_context(fcinfo);
	occ_args_outputs(fcinfo, &call->outputs);
	occ_args_spec(fcinfo, call->outputs.tupdesc ? call->outputs.tupdesc->natts : 0,
				  &call->spec);
	occ_attempt_check_isolation(&call->spec);

	SPI_connect_ext(SPI_OPT_NONATOMIC);
	callcxt = CurrentMemoryContext;

	/*
	 * What an attempt leaves behind (its error, its messages) goes in
	 * attemptcxt, reset before the next attempt: a call's memory does not
	 * grow with its attempts.  The last failure, rethrown at give-up, lives
	 * there until then.
	 */
	attemptcxt = AllocSetContextCreate(callcxt, "occ.retry attempt",
									   ALLOCSET_DEFAULT_SIZES);
	call->outcomecxt = AllocSetContextCreate(callcxt, "occ.retry batch outcome",
											 ALLOCSET_DEFAULT_SIZES);
	occ_policy_begin(&call->policy, &call->spec, call->start, callcxt);
	SPI_commit();

	PG_TRY();
	{
		OccDecision d = occ_policy_before_first(&call->policy);

		if (d.step == OCC_STEP_WAIT)
		{
			occ_attempt_warm(&call->spec, &call->body);
			(void) occ_policy_after_wait(&call->policy, NULL, occ_wait_gate(call, d.usec));
		}
		occ_attempts(call, attemptcxt);
	}
	PG_CATCH();
	{
		if (call->leading)
			occ_batch_leave();
		occ_policy_end(&call->policy);
		if (call->body != NULL)
			occ_body_close(call->body);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* the attempt has committed: pass the gate on, pay into the budget */
	occ_budget_deposit();
	if (call->leading)
		occ_batch_leave();
	occ_policy_end(&call->policy);
	if (call->body != NULL)
		occ_body_close(call->body);
	occ_account(call);

	MemoryContextSwitchTo(outercxt);
	retval = occ_output_row(call);
	SPI_finish();
	return retval;
}

/*
 * occ_retry: the procedure.  See the file header for the sequence of
 * transactions.  The two contention modes differ only in what happens
 * between attempts: backoff sleeps, queue waits for the gate of the key.
 *
 * Every call is recorded (occ.last_retry(), and occ.stats when its text is
 * known), also one refused before its first attempt (bad arguments, called
 * where it cannot commit): then with 0 attempts and the error's SQLSTATE.
 * Its statistics go to the role that called, whatever roles the body sets.
 */
Datum
occ_retry(PG_FUNCTION_ARGS)
{
	MemoryContext entrycxt = CurrentMemoryContext;
	OccCall    *call = palloc0(sizeof(OccCall));
	Datum		retval = (Datum) 0;

	call->result.userid = GetUserId();
	INSTR_TIME_SET_CURRENT(call->start);
	PG_TRY();
	{
		retval = occ_run_call(fcinfo, call);
	}
	PG_CATCH();
	{
		if (!call->accounted)
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(entrycxt);
			edata = CopyErrorData();
			call->result.last_sqlerrcode = edata->sqlerrcode;
			FreeErrorData(edata);
			occ_account(call);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();

	PG_RETURN_DATUM(retval);
}

/*
 * occ_attempt: occ.attempt(), the number of the attempt running now (1 for
 * the first) in the body of occ.retry and what it calls; NULL outside.
 */
Datum
occ_attempt(PG_FUNCTION_ARGS)
{
	int			attempt = occ_attempt_running();

	if (attempt == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(attempt);
}
