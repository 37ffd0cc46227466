/*-------------------------------------------------------------------------
 *
 * retry.c
 *		CALL occ.retry(sql, ...): run a transaction, and run it again whole
 *		after a serialization failure or a deadlock.
 *
 * The procedure needs a non-atomic context, because it ends transactions:
 *
 *	1. commit the CALL's own transaction (it holds the snapshot taken to
 *	   evaluate the arguments, and the isolation level must be set before any
 *	   snapshot);
 *	2. for each attempt, set the isolation level, run the body inside an
 *	   internal subtransaction (so that after a statement error the portal
 *	   snapshots can be released and the transaction rolled back cleanly),
 *	   release the subtransaction and commit;
 *	3. on a retryable error, raised by a statement or by COMMIT (SSI raises
 *	   some failures only at commit), roll back and, holding no snapshot and
 *	   no transaction id, either sleep a jittered backoff (contention =>
 *	   'backoff') or wait in FIFO order for the gate of the call's key
 *	   (contention => 'queue', see gate.c), which the call then keeps until
 *	   it ends; and go again.
 *
 * In queue mode a call whose key is hot takes the gate before its first
 * attempt; the gate is released once the call commits, gives up or fails.
 * Each retry also draws on the server-wide retry budget (budget.c): one it
 * refuses waits for the gate, in backoff mode too.
 *
 * The forms with INOUT result collect the rows of the last statement that
 * returns rows (result.c) in each attempt, and return the committed one's.
 *
 * Since PostgreSQL 15 (and 13.8, 14.5), a failing SPI_commit() has already
 * aborted and started a new transaction when it rethrows, so catching its
 * error is safe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "portability/instr_time.h"
#include "tcop/dest.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_retry);
PG_FUNCTION_INFO_V1(occ_attempt);

/* The attempt that is running, for occ.attempt(); 0 outside a body */
static int	occ_current_attempt = 0;

/*
 * Argument positions of occ.retry, as declared in the SQL script, in the
 * form without outputs.  The other forms have their INOUT arguments (result;
 * attempts and slept; or all three) right after sql, shifting the options by
 * their number.
 */
enum
{
	ARG_SQL,
	ARG_PARAMS,
	ARG_MAX_ATTEMPTS,
	ARG_BASE,
	ARG_CAP,
	ARG_JITTER,
	ARG_FACTOR,
	ARG_MAX_DURATION,
	ARG_ISOLATION,
	ARG_RETRY_ON,
	ARG_CONTENTION,
	ARG_KEY,
	OCC_RETRY_NARGS
};

/*
 * The outputs of the form called: its INOUT arguments, which are the columns
 * of the row that the CALL returns (-1: the form has no such column)
 */
typedef struct OccOutputs
{
	TupleDesc	tupdesc;		/* NULL for the form without outputs */
	int			result;
	int			attempts;
	int			slept;
} OccOutputs;

/* Everything one call needs, checked before the first transaction ends */
typedef struct OccRetrySpec
{
	char	   *sql;
	uint64		sql_hash;		/* occ_hash_text(sql), once per call */
	int			nargs;
	Oid		   *argtypes;
	Datum	   *values;
	char	   *nulls;
	ParamListInfo params;		/* the same values, for SPI; NULL if none */
	int			max_attempts;
	OccBackoff	backoff;
	double		max_duration;	/* microseconds, 0 = no limit */
	const char *isolation;		/* transaction_isolation spelling */
	OccSqlstates *retry_on;
	OccContention contention;
	const char *key;			/* contention key given, or NULL */
} OccRetrySpec;

/* One call: what it was asked, what has happened so far */
typedef struct OccCall
{
	OccRetrySpec spec;
	OccCallResult result;
	instr_time	start;
	bool		accounted;		/* recorded (statistics, last_retry) */
} OccCall;

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

/* occ_level_of_setting: the spelling of occ.isolation's value */
static const char *
occ_level_of_setting(void)
{
	const struct config_enum_entry *e = occ_isolation_options;

	while (e->name != NULL && e->val != occ_isolation)
		e++;
	Assert(e->name != NULL);
	return e->name;
}

/* occ_parse_isolation: the transaction_isolation spelling of a level */
static const char *
occ_parse_isolation(const char *name)
{
	for (const struct config_enum_entry *e = occ_isolation_options; e->name != NULL; e++)
		if (pg_strcasecmp(name, e->name) == 0)
			return e->name;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown isolation level \"%s\"", name),
			 errhint("Valid levels are: %s.", occ_enum_names(occ_isolation_options))));
	pg_unreachable();
}

/*
 * occ_parse_retry_on: the retryable SQLSTATEs and classes, from the retry_on
 * array or, when it is NULL, a copy of occ.retry_sqlstates, parsed when it
 * was set (a copy, because the body could change the setting).
 */
static void
occ_parse_retry_on(FunctionCallInfo fcinfo, int argno, OccRetrySpec *spec)
{
	List	   *items = NIL;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char *bad;

	if (PG_ARGISNULL(argno))
	{
		spec->retry_on = palloc(OCC_SQLSTATES_SIZE(occ_retry_sqlstates_parsed->n));
		memcpy(spec->retry_on, occ_retry_sqlstates_parsed,
			   OCC_SQLSTATES_SIZE(occ_retry_sqlstates_parsed->n));
		return;
	}

	deconstruct_array(PG_GETARG_ARRAYTYPE_P(argno), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		items = lappend(items, nulls[i] ? NULL : TextDatumGetCString(elems[i]));
	spec->retry_on = palloc(OCC_SQLSTATES_SIZE(n));
	switch (occ_parse_sqlstates(items, spec->retry_on, &bad))
	{
		case OCC_SQLSTATES_OK:
			break;
		case OCC_SQLSTATES_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid SQLSTATE \"%s\" in retry_on", bad ? bad : "NULL"),
					 errhint("Give 5-character codes such as 40001 or 2-character classes such as 40.")));
			break;
		case OCC_SQLSTATES_CANCEL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("query_canceled (57014) cannot be retried"),
					 errhint("A cancel or statement_timeout always ends occ.retry; remove 57014 from retry_on.")));
			break;
	}
}

/*
 * occ_parse_contention: the contention mode (the argument, or
 * occ.contention) and the key.  Backoff mode uses the key too: a retry that
 * the server's retry budget refuses waits on its gate.
 */
static void
occ_parse_contention(FunctionCallInfo fcinfo, int contention_arg, int key_arg,
					 OccRetrySpec *spec)
{
	/* 0.1.0's declarations have no contention and key: take them as NULL */
	bool		no_contention = contention_arg >= PG_NARGS() || PG_ARGISNULL(contention_arg);
	bool		no_key = key_arg >= PG_NARGS() || PG_ARGISNULL(key_arg);

	spec->contention = occ_contention;
	if (!no_contention)
	{
		char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(contention_arg));
		const struct config_enum_entry *e = occ_contention_options;

		while (e->name != NULL && pg_strcasecmp(name, e->name) != 0)
			e++;
		if (e->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown contention mode \"%s\"", name),
					 errhint("Valid modes are: %s.", occ_enum_names(occ_contention_options))));
		spec->contention = e->val;
	}

	spec->key = NULL;
	if (no_key)
		return;
	spec->key = text_to_cstring(PG_GETARG_TEXT_PP(key_arg));
	(void) occ_gate_key_hash(spec->key, "key");
}

/*
 * occ_param_types: bind the fields of the params record as $1, $2, ...
 * Fields of type unknown (untyped literals) are bound as text, the type
 * PostgreSQL gives an unknown literal that nothing else types; the body
 * can cast them ($1::int).
 */
static void
occ_param_types(HeapTupleHeader rec, OccRetrySpec *spec)
{
	TupleDesc	tupdesc;
	HeapTupleData tuple;
	int			n = 0;

	tupdesc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(rec),
									 HeapTupleHeaderGetTypMod(rec));
	tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = rec;

	spec->argtypes = palloc(sizeof(Oid) * Max(tupdesc->natts, 1));
	spec->values = palloc(sizeof(Datum) * Max(tupdesc->natts, 1));
	spec->nulls = palloc(sizeof(char) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		bool		isnull;
		Datum		value;

		if (att->attisdropped)
			continue;
		if (n >= FUNC_MAX_ARGS)
			ereport(ERROR,
					(errcode(ERRCODE_TOO_MANY_ARGUMENTS),
					 errmsg("params has more than %d fields", FUNC_MAX_ARGS),
					 errhint("Pass fewer parameters, for example an array in one field.")));
		value = heap_getattr(&tuple, i + 1, tupdesc, &isnull);
		spec->nulls[n] = isnull ? 'n' : ' ';
		if (att->atttypid == UNKNOWNOID)
		{
			/* an untyped literal (row('x'), row(NULL)): text, its C string */
			spec->argtypes[n] = TEXTOID;
			spec->values[n] = isnull ? (Datum) 0 : CStringGetTextDatum(DatumGetCString(value));
		}
		else
		{
			spec->argtypes[n] = att->atttypid;
			spec->values[n] = isnull ? (Datum) 0 : datumCopy(value, att->attbyval, att->attlen);
		}
		n++;
	}
	spec->nargs = n;
	ReleaseTupleDesc(tupdesc);

	spec->params = makeParamList(n);
	for (int i = 0; i < n; i++)
	{
		ParamExternData *prm = &spec->params->params[i];

		prm->value = spec->values[i];
		prm->isnull = (spec->nulls[i] == 'n');
		prm->pflags = PARAM_FLAG_CONST;
		prm->ptype = spec->argtypes[i];
	}
}

/*
 * occ_read_spec: read and check every argument but sql, which the caller has
 * read already (NULL when it is NULL); shift is the number of INOUT
 * arguments before the options.  Options that are NULL (their
 * default) take the value of their occ.* setting: reading the settings here
 * is much cheaper than default expressions, which every CALL would have to
 * decode and evaluate.
 */
static void
occ_read_spec(FunctionCallInfo fcinfo, int shift, OccRetrySpec *spec)
{
	if (PG_ARGISNULL(ARG_SQL))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sql must not be NULL"),
				 errhint("Pass the statements to run as one transaction.")));
	spec->nargs = 0;
	spec->argtypes = NULL;
	spec->values = NULL;
	spec->nulls = NULL;
	spec->params = NULL;
	if (!PG_ARGISNULL(ARG_PARAMS + shift))
		occ_param_types(PG_GETARG_HEAPTUPLEHEADER(ARG_PARAMS + shift), spec);

	spec->max_attempts = PG_ARGISNULL(ARG_MAX_ATTEMPTS + shift) ? occ_max_attempts :
		PG_GETARG_INT32(ARG_MAX_ATTEMPTS + shift);
	if (spec->max_attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1"),
				 errhint("max_attempts counts every execution of the body, the first included.")));

	occ_backoff_args(fcinfo, ARG_BASE + shift, &spec->backoff);

	spec->max_duration = PG_ARGISNULL(ARG_MAX_DURATION + shift) ? occ_max_duration * 1000.0 :
		occ_interval_to_usec(PG_GETARG_INTERVAL_P(ARG_MAX_DURATION + shift), "max_duration");
	spec->isolation = PG_ARGISNULL(ARG_ISOLATION + shift) ? occ_level_of_setting() :
		occ_parse_isolation(text_to_cstring(PG_GETARG_TEXT_PP(ARG_ISOLATION + shift)));
	occ_parse_retry_on(fcinfo, ARG_RETRY_ON + shift, spec);
	occ_parse_contention(fcinfo, ARG_CONTENTION + shift, ARG_KEY + shift, spec);
}

/* occ_plural: "s" unless n is 1, for messages that count attempts */
static const char *
occ_plural(int n)
{
	return n == 1 ? "" : "s";
}

/* occ_is_retryable: does this SQLSTATE call for another attempt? */
static bool
occ_is_retryable(const OccRetrySpec *spec, int sqlerrcode)
{
	if (sqlerrcode == ERRCODE_QUERY_CANCELED)
		return false;
	for (int i = 0; i < spec->retry_on->n; i++)
	{
		const OccSqlstate *item = &spec->retry_on->items[i];

		if (item->is_class ?
			ERRCODE_TO_CATEGORY(sqlerrcode) == item->code :
			sqlerrcode == item->code)
			return true;
	}
	return false;
}

/* occ_elapsed_usec: microseconds since start */
static double
occ_elapsed_usec(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_DOUBLE(now) * 1000000.0;
}

/*
 * occ_run_attempt: run the body once as a whole transaction and commit it,
 * statement by statement (*body, the kept plans, is opened on the first
 * attempt: a syntax error counts as a failed attempt).  Returns NULL on
 * success; otherwise the error, copied into attemptcxt, with
 * the failed transaction already rolled back and a new one started, and
 * *at_commit telling whether COMMIT failed (rather than a statement).
 * Non-retryable errors are returned too: the caller decides.
 *
 * When result is not NULL, the rows of the last statement that returns
 * rows are collected and, before the commit, made into jsonb in attemptcxt:
 * *result, left NULL when no statement returned rows.
 */
static ErrorData *
occ_run_attempt(const OccRetrySpec *spec, OccBody **body, MemoryContext attemptcxt,
				bool *at_commit, Jsonb **result)
{
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool in_subxact = false;
	volatile bool body_failed = false;
	ErrorData  *edata = NULL;
	DestReceiver *volatile rows = NULL;

	/* A new transaction without a snapshot yet: the level can still change */
	(void) set_config_option("transaction_isolation", spec->isolation,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SET,
							 true, 0, false);

	BeginInternalSubTransaction(NULL);
	in_subxact = true;
	MemoryContextSwitchTo(attemptcxt);
	if (result != NULL)
	{
		*result = NULL;
		rows = occ_result_receiver(attemptcxt);
	}

	PG_TRY();
	{
		SPIExecuteOptions options;

		/* rows that the statements return are collected, or discarded */
		memset(&options, 0, sizeof(options));
		options.params = spec->params;
		options.dest = rows != NULL ? rows : None_Receiver;

		if (*body == NULL)
			*body = occ_body_open(spec->sql, spec->sql_hash, spec->nargs, spec->argtypes);
		for (int i = 0; i < occ_body_nstmts(*body); i++)
		{
			int			rc = SPI_execute_plan_extended(occ_body_plan(*body, i), &options);

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
			if (rc < 0)			/* a bad plan or parameters: a bug */
				elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
		}

		/* the result is made before the commit: if it cannot be, roll back */
		if (rows != NULL)
		{
			Datum		jsonb;

			MemoryContextSwitchTo(attemptcxt);
			if (occ_result_jsonb(rows, &jsonb))
				*result = DatumGetJsonbP(jsonb);
			occ_result_free(rows);
			rows = NULL;
			/* making a large one takes a while: a cancel must roll it back */
			CHECK_FOR_INTERRUPTS();
		}

		ReleaseCurrentSubTransaction();
		in_subxact = false;
		MemoryContextSwitchTo(attemptcxt);
		CurrentResourceOwner = oldowner;

		/* SSI may fail here; SPI_commit then starts a new transaction */
		SPI_commit();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(attemptcxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (in_subxact)
		{
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(attemptcxt);
			CurrentResourceOwner = oldowner;
			body_failed = true;
		}
	}
	PG_END_TRY();

	/* A failed attempt's rows are not kept, not even until the next attempt */
	if (edata != NULL && result != NULL)
	{
		if (rows != NULL)
			occ_result_free(rows);
		if (*result != NULL)
			pfree(*result);
		*result = NULL;
	}

	/* A failed COMMIT has already rolled back; a failed statement has not */
	if (body_failed)
		SPI_rollback();
	*at_commit = (edata != NULL && !body_failed);
	return edata;
}

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
 * occ.log_retries is on).
 */
static void
pg_noreturn
occ_give_up(ErrorData *edata, const char *why)
{
	if (occ_log_retries)
		ereport(LOG,
				(errmsg("occ.retry %s, last SQLSTATE %s",
						why, unpack_sql_state(edata->sqlerrcode))));
	edata->detail = edata->detail ?
		psprintf("%s\nocc.retry %s.", edata->detail, why) :
		psprintf("occ.retry %s.", why);
	ReThrowError(edata);
}

/*
 * occ_classify: count a failed attempt by its SQLSTATE
 */
static void
occ_classify(OccCallResult *result, int sqlerrcode)
{
	result->last_sqlerrcode = sqlerrcode;
	if (sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE)
		result->serialization_failures++;
	else if (sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		result->deadlocks++;
	else
		result->other_failures++;
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

	InvalidateCatalogSnapshot();
	INSTR_TIME_SET_CURRENT(from);
	occ_sleep_usec(delay);
	delay = occ_elapsed_usec(from) / 1000.0;
	call->result.sleep_ms += delay;
	call->result.max_sleep_ms = Max(call->result.max_sleep_ms, delay);
}

/*
 * occ_wait_gate: wait for the call's gate, like a sleep between
 * transactions, within what is left of max_duration.  An interrupt throws
 * (and ends the call, accounted by occ_retry, the wait included).
 */
static OccGateWait
occ_wait_gate(OccCall *call, OccGate *gate)
{
	instr_time	from;
	OccGateWait outcome;
	double		waited;
	double		timeout = 0;

	if (call->spec.max_duration > 0)
	{
		timeout = call->spec.max_duration - occ_elapsed_usec(call->start);
		if (timeout <= 0)
			return OCC_GATE_TIMED_OUT;
	}

	InvalidateCatalogSnapshot();
	INSTR_TIME_SET_CURRENT(from);
	PG_TRY();
	{
		outcome = occ_gate_wait(gate, timeout);
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
 * occ_call_gate: the gate of the call's key (given, or derived from the body
 * and its parameters), in cxt: queue mode's from the start, backoff mode's
 * once the retry budget refuses a retry
 */
static OccGate *
occ_call_gate(const OccRetrySpec *spec, MemoryContext cxt)
{
	OccGate    *gate = MemoryContextAlloc(cxt, sizeof(OccGate));

	occ_gate_prepare(gate, spec->key, spec->sql_hash, spec->nargs, spec->argtypes,
					 spec->values, spec->nulls);
	return gate;
}

/*
 * occ_outputs: which form was called, from the row type it returns: the
 * names of its INOUT arguments.  0.1.0's and 0.2.0's declarations have only
 * the form without outputs and the one with attempts and slept.
 */
static void
occ_outputs(FunctionCallInfo fcinfo, OccOutputs *out)
{
	TupleDesc	tupdesc;

	out->tupdesc = NULL;
	out->result = out->attempts = out->slept = -1;
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		return;
	out->tupdesc = BlessTupleDesc(tupdesc);
	for (int i = 0; i < tupdesc->natts; i++)
	{
		const char *name = NameStr(TupleDescAttr(tupdesc, i)->attname);

		if (strcmp(name, "result") == 0)
			out->result = i;
		else if (strcmp(name, "attempts") == 0)
			out->attempts = i;
		else if (strcmp(name, "slept") == 0)
			out->slept = i;
		else
			elog(ERROR, "unexpected output argument \"%s\" of occ.retry", name);
	}
}

/*
 * occ_run_call: everything occ.retry does, from checking where and how it
 * was called to the commit; errors throw.  Returns the procedure's result,
 * made in the caller's memory context.
 */
static Datum
occ_run_call(FunctionCallInfo fcinfo, OccCall *call)
{
	OccRetrySpec *spec = &call->spec;
	OccCallResult *result = &call->result;
	OccGate    *volatile gate = NULL;	/* set within PG_TRY when refused */
	OccBody   **body;			/* in callcxt: set within PG_TRY, read in PG_CATCH */
	MemoryContext outercxt = CurrentMemoryContext;
	MemoryContext callcxt;
	MemoryContext attemptcxt;
	double		prev;
	int			gated_failures = 0;
	OccOutputs	outputs;
	Jsonb	   *rows = NULL;	/* the committed attempt's result */
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	/* the text first: a call refused below is recorded under it */
	if (!PG_ARGISNULL(ARG_SQL))
	{
		spec->sql = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SQL));
		spec->sql_hash = occ_hash_text(spec->sql);
	}
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
	occ_outputs(fcinfo, &outputs);
	occ_read_spec(fcinfo, outputs.tupdesc ? outputs.tupdesc->natts : 0, spec);
	if (RecoveryInProgress() && strcmp(spec->isolation, "serializable") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("occ.retry cannot run serializable transactions on a hot standby"),
				 errdetail("PostgreSQL does not support the serializable isolation level during recovery."),
				 errhint("Pass isolation => 'repeatable read', or set occ.isolation = 'repeatable read' on the standby.")));

	prev = spec->backoff.base;

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
	body = palloc0(sizeof(OccBody *));
	if (spec->contention == OCC_CONTENTION_QUEUE)
		gate = occ_call_gate(spec, callcxt);
	SPI_commit();

	/* queue mode: a call on a hot key queues before its first attempt */
	if (gate != NULL && occ_gate_admit(gate))
		(void) occ_wait_gate(call, gate);

	PG_TRY();
	{
		for (;;)
		{
			ErrorData  *edata;
			double		delay;
			char	   *why = NULL;
			bool		at_commit;
			bool		refused;
			Oid			foreign;

			MemoryContextReset(attemptcxt);
			MemoryContextSwitchTo(attemptcxt);
			result->attempts++;
			occ_current_attempt = result->attempts;
			edata = occ_run_attempt(spec, body, attemptcxt, &at_commit,
									outputs.result >= 0 ? &rows : NULL);
			occ_current_attempt = 0;
			if (gate != NULL)
				occ_gate_observe(gate, edata != NULL);
			if (edata == NULL)
			{
				result->committed = true;
				break;
			}

			occ_classify(result, edata->sqlerrcode);
			if (!occ_is_retryable(spec, edata->sqlerrcode))
			{
				occ_account(call);
				ReThrowError(edata);
			}

			/*
			 * postgres_fdw commits the remote side at pre-commit, before the
			 * local serializable check: after a failure at COMMIT, a body
			 * that wrote to a foreign table may have committed there.
			 * Running it again would repeat that work: raise the failure.
			 */
			foreign = (at_commit && *body != NULL) ?
				occ_body_foreign_target(*body) : InvalidOid;
			if (OidIsValid(foreign))
			{
				char	   *relname = get_rel_name(foreign);

				occ_account(call);
				occ_give_up(edata,
							psprintf("did not run the body again after this failure at COMMIT: "
									 "it wrote to the foreign table \"%s\", whose remote transaction may have committed already",
									 relname ? relname : "?"));
			}

			if (result->attempts >= spec->max_attempts)
				why = psprintf("gave up after %d attempt%s", result->attempts,
							   occ_plural(result->attempts));

			/*
			 * The server-wide retry budget (budget.c): a retry takes a
			 * token.  One that the budget refuses does not run beside the
			 * others: it waits on the gate of its key below, in backoff
			 * mode too, so that a storm becomes a queue.  A call that holds
			 * its gate already has nothing left to wait for: it gives up.
			 */
			refused = (why == NULL && !occ_budget_withdraw());
			if (refused)
			{
				if (gate == NULL)
					gate = occ_call_gate(spec, callcxt);
				if (gate->bypassed || occ_gate_still_held(gate))
					why = psprintf("gave up after %d attempt%s: the server's retry budget is exhausted",
								   result->attempts, occ_plural(result->attempts));
			}

			/*
			 * Queue mode (or a refused retry): instead of sleeping, wait for
			 * the gate of the key (or, when a gated attempt lost to a caller
			 * of another derived key, for the gate of the body alone).  The
			 * gate is kept across the call's further attempts (and taken
			 * again if the body released it with pg_advisory_unlock_all()).
			 * If the wait cannot be had (deadlock, lock table full,
			 * lock_timeout), back off instead, or give up if refused.  A
			 * deadlock is a cycle with another transaction, not a queue of
			 * callers: it backs off too (after taking the gate, if refused),
			 * so that the winner can take the locks this attempt released
			 * before it runs again.
			 */
			if (why == NULL && gate != NULL && !gate->bypassed &&
				(refused || edata->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED) &&
				(!occ_gate_still_held(gate) || occ_gate_escalate(gate)))
			{
				if (occ_log_retries)
					ereport(LOG,
							(errmsg("occ.retry attempt %d failed with SQLSTATE %s, waiting for the gate%s",
									result->attempts, unpack_sql_state(edata->sqlerrcode),
									refused ? " (the retry budget is exhausted)" : "")));
				switch (occ_wait_gate(call, gate))
				{
					case OCC_GATE_TAKEN:
						if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
							break;
						FreeErrorData(edata);
						continue;
					case OCC_GATE_TIMED_OUT:
						why = psprintf("gave up after %d attempt%s: max_duration ran out while waiting for the gate",
									   result->attempts, occ_plural(result->attempts));
						break;
					case OCC_GATE_UNAVAILABLE:
						if (refused)
							why = psprintf("gave up after %d attempt%s: the server's retry budget is exhausted and the gate of the key cannot be taken",
										   result->attempts, occ_plural(result->attempts));
						break;
				}
			}

			/*
			 * Backoff mode, and a gated attempt that failed: sleep a
			 * jittered delay.  A gated attempt lost to someone outside the
			 * queue; after a serialization failure the winner has committed,
			 * so the first time it runs again at once.  Otherwise, it backs
			 * off holding the gate, counting only its gated failures, so
			 * that the delay stays short.
			 */
			if (gate != NULL && gate->held)
			{
				delay = (gated_failures == 0 &&
						 edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE) ? 0 :
					occ_backoff_delay(&spec->backoff, gated_failures, spec->backoff.base,
									  occ_random_draw());
				gated_failures++;
			}
			else
			{
				delay = occ_backoff_delay(&spec->backoff, result->attempts - 1, prev,
										  occ_random_draw());
				prev = Max(delay, spec->backoff.base);
			}
			if (why == NULL && spec->max_duration > 0 &&
				occ_elapsed_usec(call->start) + delay > spec->max_duration)
				why = psprintf("gave up after %d attempt%s: the next delay of %.3f ms would exceed max_duration",
							   result->attempts, occ_plural(result->attempts), delay / 1000.0);
			if (why != NULL)
			{
				result->gave_up = true;
				occ_account(call);
				occ_give_up(edata, why);
			}

			if (occ_log_retries)
				ereport(LOG,
						(errmsg("occ.retry attempt %d failed with SQLSTATE %s, retrying in %.3f ms",
								result->attempts, unpack_sql_state(edata->sqlerrcode), delay / 1000.0)));
			FreeErrorData(edata);
			occ_sleep_between(call, delay);
		}
	}
	PG_CATCH();
	{
		occ_current_attempt = 0;
		if (gate != NULL)
			occ_gate_release(gate);
		if (*body != NULL)
			occ_body_close(*body);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* the attempt has committed: pass the gate on, pay into the budget */
	occ_budget_deposit();
	if (gate != NULL)
		occ_gate_release(gate);
	if (*body != NULL)
		occ_body_close(*body);
	occ_account(call);

	/* the row the CALL returns, in the caller's memory (SPI's goes away) */
	if (outputs.tupdesc != NULL)
	{
		MemoryContextSwitchTo(outercxt);
		if (outputs.result >= 0)
		{
			nulls[outputs.result] = (rows == NULL);
			if (rows != NULL)
				values[outputs.result] = PointerGetDatum(pg_detoast_datum_copy((struct varlena *) rows));
		}
		if (outputs.attempts >= 0)
			values[outputs.attempts] = Int32GetDatum(result->attempts);
		if (outputs.slept >= 0)
			values[outputs.slept] =
				PointerGetDatum(occ_usec_to_interval(rint(result->sleep_ms * 1000.0)));
	}
	SPI_finish();

	if (outputs.tupdesc == NULL)
		return (Datum) 0;
	return HeapTupleGetDatum(heap_form_tuple(outputs.tupdesc, values, nulls));
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
	if (occ_current_attempt == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(occ_current_attempt);
}
