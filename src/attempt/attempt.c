/*-------------------------------------------------------------------------
 *
 * attempt.c
 *		One attempt of occ.retry: the body run once as a whole transaction
 *		and committed; and the checks of where occ.retry was called.
 *
 * occ.retry needs a non-atomic context, because it ends transactions: the
 * checks below say why it cannot run where it was called, and how to call
 * it instead.
 *
 * An attempt sets the isolation level on a transaction that has no
 * snapshot yet, runs the body inside an internal subtransaction (so that
 * after a statement error the portal snapshots can be released and the
 * transaction rolled back cleanly), releases the subtransaction and
 * commits.  Errors are caught and returned, copied, with the transaction
 * rolled back and a new one started, and, for a failed COMMIT, why part of
 * the attempt may have committed elsewhere before it (a foreign table it
 * wrote to, which foreign.c watches it run for; work that Citus commits on
 * other nodes in one phase, citus.c): whether to retry is not decided here.
 *
 * Since PostgreSQL 15 (and 13.8, 14.5), a failing SPI_commit() has already
 * aborted and started a new transaction when it rethrows, so catching its
 * error is safe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "pg_occ.h"
#include "attempt/attempt.h"
#include "util/util.h"

/* The attempt that is running, for occ.attempt(); 0 outside a body */
static int	occ_current_attempt = 0;

/* occ_attempt_running: the number of the attempt running now, or 0 */
int
occ_attempt_running(void)
{
	return occ_current_attempt;
}

/* What occ_attempt_warm's step works on */
typedef struct OccWarm
{
	const OccRetrySpec *spec;
	OccBody   **body;
} OccWarm;

/*
 * occ_attempt_warm_step: open the body, and rehearse its statements under a
 * snapshot, as PostgreSQL analyses and plans a query; the subtransaction is
 * rolled back
 */
static bool
occ_attempt_warm_step(void *arg)
{
	OccWarm    *w = (OccWarm *) arg;

	if (*w->body == NULL)
		*w->body = occ_body_open(w->spec->sql, w->spec->sql_hash, w->spec->nargs,
								 w->spec->argtypes);
	PushActiveSnapshot(GetTransactionSnapshot());
	occ_body_rehearse(*w->body);
	PopActiveSnapshot();
	return false;
}

/*
 * occ_attempt_warm: before a call waits for its gate, open its body and,
 * unless the session did already (occ_body_warm), rehearse the statements
 * that it has not prepared yet (parse, analyse and plan them, and forget
 * the plans), in a transaction of their own, rolled back at once (no lock
 * and no snapshot outlives it: the attempt, after the wait, sees what
 * committed during it), so that the first call of a body in a session reads
 * the catalogs while it waits, not while it holds the gate that the calls
 * behind it wait for.  Analysis alone left the planner's reads (the
 * tables' indexes and statistics, the functions' and operators' details)
 * under the gate (test/bench/README.md, issue 37).  An error is left for
 * the attempt to meet again; a cancel or a termination is rethrown.
 * Called between transactions, like the wait.
 */
void
occ_attempt_warm(const OccRetrySpec *spec, OccBody **body)
{
	OccWarm		w = {spec, body};
	ErrorData  *edata;

	if (*body == NULL)
		*body = occ_body_find(spec->sql, spec->sql_hash, spec->nargs, spec->argtypes);
	if (*body != NULL && occ_body_warm(*body))
		return;
	edata = occ_subxact_run(occ_attempt_warm_step, &w);
	SPI_rollback();
	if (edata == NULL)
		return;
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION)
		ReThrowError(edata);
	FreeErrorData(edata);
}

/*
 * occ_in_implicit_block: is the transaction block the implicit one that
 * PostgreSQL wraps around a query string of several statements
 * ("SELECT 1; CALL occ.retry(...)")?  xact.c does not say, but such a block
 * began with the current query string (a transaction's start time is the
 * first statement's, and a query string's statements share one start time)
 * and that string has no BEGIN or START TRANSACTION.  False when unsure.
 */
static bool
occ_in_implicit_block(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool implicit = false;

	if (debug_query_string == NULL ||
		GetCurrentTransactionStartTimestamp() != GetCurrentStatementStartTimestamp())
		return false;

	/* the string parsed once already; if it does not now, we are unsure */
	PG_TRY();
	{
		List	   *raw = raw_parser(debug_query_string, RAW_PARSE_DEFAULT);
		ListCell   *lc;

		implicit = list_length(raw) > 1;
		foreach(lc, raw)
		{
			Node	   *stmt = lfirst_node(RawStmt, lc)->stmt;

			if (IsA(stmt, TransactionStmt) &&
				(((TransactionStmt *) stmt)->kind == TRANS_STMT_BEGIN ||
				 ((TransactionStmt *) stmt)->kind == TRANS_STMT_START))
				implicit = false;
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		implicit = false;
	}
	PG_END_TRY();
	return implicit;
}

/*
 * occ_require_nonatomic: occ.retry commits, so it must be CALLed where
 * transaction control is allowed.  Say why it cannot here, and how to call
 * it instead.
 */
static void
occ_require_nonatomic(FunctionCallInfo fcinfo)
{
	CallContext *ctx = (CallContext *) fcinfo->context;

	if (ctx != NULL && IsA(ctx, CallContext) && !ctx->atomic)
		return;
	if (IsTransactionBlock() && !IsSubTransaction())
	{
		if (occ_in_implicit_block())
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("occ.retry cannot run inside a transaction block"),
					 errdetail("The query string has several statements, which PostgreSQL runs in one implicit transaction block."),
					 errhint("Send CALL occ.retry(...) as a query of its own, or move the other statements into its body.")));
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("occ.retry cannot run inside a transaction block"),
				 errhint("CALL occ.retry(...) in autocommit mode, outside BEGIN ... COMMIT: the body is the transaction.")));
	}
	if (IsSubTransaction())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("occ.retry cannot run in an atomic context"),
				 errdetail("A block with an EXCEPTION clause runs in a subtransaction, which occ.retry cannot commit."),
				 errhint("CALL occ.retry(...) outside any block with an EXCEPTION clause.")));
	if (ActivePortal != NULL &&
		(ActivePortal->commandTag == CMDTAG_CALL || ActivePortal->commandTag == CMDTAG_DO))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("occ.retry cannot run in an atomic context"),
				 errdetail("A SQL-language procedure (LANGUAGE sql, or BEGIN ATOMIC) runs its statements atomically even when it was itself CALLed, "
						   "and so does a procedure with a SET clause or SECURITY DEFINER, or a function, called in between."),
				 errhint("CALL occ.retry(...) from a DO block or a PL/pgSQL procedure (without SET clause or SECURITY DEFINER), "
						 "with only such procedures in between.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
			 errmsg("occ.retry cannot run in an atomic context"),
			 errhint("CALL occ.retry(...) at top level outside BEGIN ... COMMIT, from a PL/pgSQL procedure that was itself CALLed that way, "
					 "or from a DO block; not from a function or a trigger.")));
}

/*
 * occ_attempt_check_context: can occ.retry run here?  Not in the body of
 * another occ.retry, not where it cannot commit, not in a transaction that
 * has written already.
 */
void
occ_attempt_check_context(FunctionCallInfo fcinfo)
{
	if (occ_current_attempt > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("occ.retry cannot run inside the body of occ.retry"),
				 errdetail("The body is one transaction, which the outer occ.retry commits and retries."),
				 errhint("Put the statements into the outer body.")));
	occ_require_nonatomic(fcinfo);
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("occ.retry cannot run in a transaction that has already written"),
				 errhint("COMMIT before CALL occ.retry(...), or move those statements into its body.")));
}

/* occ_attempt_check_isolation: can the call's isolation level run here? */
void
occ_attempt_check_isolation(const OccRetrySpec *spec)
{
	if (RecoveryInProgress() && strcmp(spec->isolation, "serializable") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("occ.retry cannot run serializable transactions on a hot standby"),
				 errdetail("PostgreSQL does not support the serializable isolation level during recovery."),
				 errhint("Pass isolation => 'repeatable read', or set occ.isolation = 'repeatable read' on the standby.")));
}

/*
 * occ_attempt_statements: run the body's statements with params, their rows
 * going to dest
 */
static void
occ_attempt_statements(OccBody *body, ParamListInfo params, DestReceiver *dest)
{
	SPIExecuteOptions options;

	memset(&options, 0, sizeof(options));
	options.params = params;
	options.dest = dest;

	for (int i = 0; i < occ_body_nstmts(body); i++)
	{
		int			rc = SPI_execute_plan_extended(occ_body_plan(body, i), &options);

		if (rc == SPI_ERROR_TRANSACTION)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
					 errmsg("transaction control statements are not allowed in an occ.retry body"),
					 errhint("The body runs as one transaction that occ.retry commits; remove COMMIT, ROLLBACK and the like from it.")));
		if (rc == SPI_ERROR_COPY)	/* refused earlier; in case */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("COPY FROM STDIN and COPY TO STDOUT are not supported in an occ.retry body"),
					 errhint("COPY the data into a table first, in a transaction of its own, and use it from the body.")));
		if (rc < 0)				/* a bad plan or parameters: a bug */
			elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	}
}

/*
 * occ_attempt_body: run a body (opened already) with params as attempt
 * number (what occ.attempt() says meanwhile), its rows going to dest, and
 * then the deferred triggers it queued (its constraints DEFERRABLE), which
 * its own transaction would fire at its commit: for the calls a batch's
 * leader runs in its transaction (lead.c), so that a body's deferred
 * constraint fails that body, and its triggers see what the body saw, not
 * the bodies after it
 */
void
occ_attempt_body(OccBody *body, ParamListInfo params, int number, DestReceiver *dest)
{
	int			outer = occ_current_attempt;

	occ_current_attempt = number;
	PG_TRY();
	{
		occ_attempt_statements(body, params, dest);
		AfterTriggerFireDeferred();
	}
	PG_FINALLY();
	{
		occ_current_attempt = outer;
	}
	PG_END_TRY();
}

/*
 * occ_attempt_set_isolation: set the session's transaction_isolation to the
 * call's, on a transaction that has no snapshot yet (as each attempt does)
 */
void
occ_attempt_set_isolation(const OccRetrySpec *spec)
{
	(void) set_config_option("transaction_isolation", spec->isolation,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SET,
							 true, 0, false);
}

/*
 * occ_attempt_committed_first: why part of an attempt whose COMMIT failed
 * may have committed before (foreign: a foreign table it wrote to;
 * citus_first: why Citus may have committed some of it, or NULL), in cxt;
 * NULL if nothing could
 */
static const char *
occ_attempt_committed_first(const char *foreign, const char *citus_first, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	const char *why = NULL;

	if (foreign != NULL)
		why = psprintf("it wrote to the foreign table \"%s\", whose remote transaction may have committed already",
					   foreign);
	else
		why = citus_first;		/* a constant string, or NULL */
	MemoryContextSwitchTo(old);
	return why;
}

/*
 * occ_attempt_run: run the body once, as attempt number, as a whole
 * transaction and commit it.  Returns true if it committed; otherwise fills
 * *failure with the error, copied into attemptcxt, the failed transaction
 * already rolled back and a new one started.  Non-retryable errors are
 * returned too: the caller decides.
 *
 * When result is not NULL, the rows of the last statement that returns
 * rows are collected: *result is the committed attempt's, as jsonb in
 * attemptcxt, or NULL when no statement returned rows.  A failed attempt's
 * rows are not kept, not even until the next attempt.
 *
 * before_commit, if not NULL, is called with arg after the body, before
 * the commit (a batch's leader runs the other calls' bodies there); its
 * errors fail the attempt.  The body's deferred triggers then fire at its
 * end, in its subtransaction, under its settings, as its commit's would
 * (an error there is the body's, with its SQLSTATE), and not after the
 * other bodies, whose effects they would see.
 */
bool
occ_attempt_run(const OccRetrySpec *spec, int number, OccBody **body,
				MemoryContext attemptcxt, Jsonb **result, OccAttemptFailure *failure,
				void (*before_commit) (void *), void *arg)
{
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool in_subxact = false;
	volatile bool committing = false;
	ErrorData  *edata = NULL;
	DestReceiver *volatile rows = NULL;
	const char *volatile citus_first = NULL;
	const char *foreign;

	/* A new transaction without a snapshot yet: the level can still change */
	occ_attempt_set_isolation(spec);

	BeginInternalSubTransaction(NULL);
	in_subxact = true;
	MemoryContextSwitchTo(attemptcxt);
	if (result != NULL)
	{
		*result = NULL;
		rows = occ_result_receiver(attemptcxt);
	}

	occ_current_attempt = number;
	occ_foreign_watch();
	PG_TRY();
	{
		/* a syntax error when opening counts as a failed attempt */
		if (*body == NULL)
			*body = occ_body_open(spec->sql, spec->sql_hash, spec->nargs, spec->argtypes);
		occ_attempt_statements(*body, spec->params, rows != NULL ? rows : None_Receiver);
		/* a batch's leader: its deferred triggers fire before the others' bodies */
		if (before_commit != NULL)
			AfterTriggerFireDeferred();
		if (rows != NULL)
		{
			/* before the commit: if it cannot be made, the attempt rolls back */
			MemoryContextSwitchTo(attemptcxt);
			*result = occ_result_jsonb(rows);
			occ_result_free(rows);
			rows = NULL;
		}

		ReleaseCurrentSubTransaction();
		in_subxact = false;
		MemoryContextSwitchTo(attemptcxt);
		CurrentResourceOwner = oldowner;
		if (before_commit != NULL)
			before_commit(arg);

		/* SSI may fail here; SPI_commit then starts a new transaction */
		citus_first = occ_citus_prepare_commit();
		committing = true;
		SPI_commit();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(attemptcxt);
		edata = CopyErrorData();
		FlushErrorState();
		occ_citus_deadlock_cancel(edata);
		if (in_subxact)
		{
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(attemptcxt);
			CurrentResourceOwner = oldowner;
		}
	}
	PG_END_TRY();
	occ_current_attempt = 0;
	foreign = occ_foreign_unwatch();

	if (edata == NULL)
		return true;

	if (result != NULL)
	{
		if (rows != NULL)
			occ_result_free(rows);
		if (*result != NULL)
			pfree(*result);
		*result = NULL;
	}

	/* A failed COMMIT has already rolled back; a failed statement has not */
	if (!committing)
		SPI_rollback();
	failure->edata = edata;
	failure->at_commit = committing;
	failure->committed_first = committing ?
		occ_attempt_committed_first(foreign, citus_first, attemptcxt) : NULL;
	return false;
}
