/*-------------------------------------------------------------------------
 *
 * args.c
 *		The arguments of occ.retry and occ.backoff: read from the call,
 *		checked, and defaulted from the occ.* settings.
 *
 * occ.retry has four forms, one per set of INOUT outputs (none; result;
 * attempts and slept; all three), declared in the SQL script with the
 * outputs right after sql.  The options follow; one that is NULL (its
 * default) takes the value of its occ.* setting.  Everything is checked
 * here, before the call's first transaction ends: bad input is an error
 * with an SQLSTATE and a hint, never a clamped value.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "pg_occ.h"
#include "queue/queue.h"
#include "retry/retry.h"
#include "util/util.h"

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
 * occ_enum_lookup: the entry of options spelled name (case-insensitively),
 * or an error naming what it is ("isolation level") and listing the valid
 * spellings ("levels").
 */
static const struct config_enum_entry *
occ_enum_lookup(const struct config_enum_entry *options, const char *name,
				const char *what, const char *plural)
{
	for (const struct config_enum_entry *e = options; e->name != NULL; e++)
		if (pg_strcasecmp(name, e->name) == 0)
			return e;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown %s \"%s\"", what, name),
			 errhint("Valid %s are: %s.", plural, occ_enum_names(options))));
	pg_unreachable();
}

/*
 * occ_check_backoff: refuse parameters for which the formulas make no sense,
 * rather than clamping them silently; base_set, cap_set: they are the
 * occ.* settings', not arguments (a role's settings can disagree)
 */
static void
occ_check_backoff(const OccBackoff *b, bool base_set, bool cap_set)
{
	if (b->base <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("base delay must be positive"),
				 errhint("Pass an interval of at least one microsecond, such as '1 ms'.")));
	if (b->cap < b->base)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cap must not be less than the base delay"),
				 errdetail("The cap is %g ms (%s), the base delay %g ms (%s).",
						   b->cap / 1000.0, cap_set ? "occ.max_delay" : "the argument cap",
						   b->base / 1000.0, base_set ? "occ.base_delay" : "the argument base"),
				 cap_set ? errhint("Set occ.max_delay to at least the base delay, or pass a cap of at least it.") :
				 errhint("Pass a cap of at least the base delay.")));
	if (isnan(b->factor) || b->factor < 1 || isinf(b->factor))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("factor must be a finite number of at least 1"),
				 errhint("Use 2 to double the delay after each attempt, or 1 for a constant delay.")));
}

/*
 * occ_args_backoff: the backoff of a call whose base, cap, jitter and factor
 * arguments start at position first; an argument that is NULL (or omitted,
 * its default being NULL) takes the value of its occ.* setting.  Checked.
 */
void
occ_args_backoff(FunctionCallInfo fcinfo, int first, OccBackoff *b)
{
	b->base = PG_ARGISNULL(first) ? rint(occ_base_delay * 1000.0) :
		occ_interval_to_usec(PG_GETARG_INTERVAL_P(first), "base");
	b->cap = PG_ARGISNULL(first + 1) ? rint(occ_max_delay * 1000.0) :
		occ_interval_to_usec(PG_GETARG_INTERVAL_P(first + 1), "cap");
	b->jitter = PG_ARGISNULL(first + 2) ? (OccJitter) occ_jitter :
		(OccJitter) occ_enum_lookup(occ_jitter_options,
									text_to_cstring(PG_GETARG_TEXT_PP(first + 2)),
									"backoff strategy", "strategies")->val;
	b->factor = PG_ARGISNULL(first + 3) ? occ_factor : PG_GETARG_FLOAT8(first + 3);
	occ_check_backoff(b, PG_ARGISNULL(first), PG_ARGISNULL(first + 1));
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

/* occ_key_text: one key, the text of a value of type (unknown: a C string) */
static char *
occ_key_text(Oid type, Datum value)
{
	Oid			typoutput;
	bool		isvarlena;
	char	   *key;

	if (type == UNKNOWNOID)
		key = pstrdup(DatumGetCString(value));
	else
	{
		getTypeOutputInfo(type, &typoutput, &isvarlena);
		key = OidOutputFunctionCall(typoutput, value);
	}
	(void) occ_key_hash(key, "key", InvalidOid);	/* checks it */
	return key;
}

/*
 * occ_parse_keys: the key argument: one key (text, or any value as its
 * text) or several (an array); type is its type as the call passed it
 */
static void
occ_parse_keys(Datum arg, Oid type, OccRetrySpec *spec)
{
	Oid			element = OidIsValid(type) ? get_element_type(type) : InvalidOid;
	Datum	   *elems;
	bool	   *nulls;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (!OidIsValid(element))
	{
		spec->nkeys = 1;
		spec->keys = palloc(sizeof(char *));
		spec->keys[0] = occ_key_text(OidIsValid(type) ? type : TEXTOID, arg);
		return;
	}
	get_typlenbyvalalign(element, &typlen, &typbyval, &typalign);
	deconstruct_array(DatumGetArrayTypeP(arg), element, typlen, typbyval, typalign,
					  &elems, &nulls, &spec->nkeys);
	occ_key_check_count(spec->nkeys, "key");
	if (spec->nkeys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key must not be an empty array"),
				 errhint("Pass one key, an array of keys, or NULL to let queue mode find the keys.")));
	spec->keys = palloc(sizeof(char *) * spec->nkeys);
	for (int i = 0; i < spec->nkeys; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key must not contain NULL"),
					 errhint("Name what the transaction contends on, for example ARRAY['account:' || 1, 'account:' || 2].")));
		spec->keys[i] = occ_key_text(element, elems[i]);
	}
}

/*
 * occ_parse_contention: the contention mode (the argument, or
 * occ.contention) and the keys.  Backoff mode uses the keys too: a retry
 * that the server's retry budget refuses waits on their gates.
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
		spec->contention = occ_enum_lookup(occ_contention_options,
										   text_to_cstring(PG_GETARG_TEXT_PP(contention_arg)),
										   "contention mode", "modes")->val;
	}

	spec->keys = NULL;
	spec->nkeys = 0;
	spec->key_owner = InvalidOid;
	if (!no_key)
	{
		occ_parse_keys(PG_GETARG_DATUM(key_arg),
					   get_fn_expr_argtype(fcinfo->flinfo, key_arg), spec);
		spec->key_owner = occ_key_owner();
	}
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
 * occ_args_sql: the body's text and its hash, read first: a call refused
 * later is recorded under it.  Left NULL when sql is NULL (occ_args_spec
 * refuses it).
 */
void
occ_args_sql(FunctionCallInfo fcinfo, OccRetrySpec *spec)
{
	if (PG_ARGISNULL(ARG_SQL))
		return;
	spec->sql = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SQL));
	spec->sql_hash = occ_hash_text(spec->sql);
}

/*
 * occ_args_spec: read and check every argument but sql, which the caller has
 * read already (NULL when it is NULL); shift is the number of INOUT
 * arguments before the options.  Options that are NULL (their
 * default) take the value of their occ.* setting: reading the settings here
 * is much cheaper than default expressions, which every CALL would have to
 * decode and evaluate.
 */
void
occ_args_spec(FunctionCallInfo fcinfo, int shift, OccRetrySpec *spec)
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

	occ_args_backoff(fcinfo, ARG_BASE + shift, &spec->backoff);

	spec->max_duration = PG_ARGISNULL(ARG_MAX_DURATION + shift) ? occ_max_duration * 1000.0 :
		occ_interval_to_usec(PG_GETARG_INTERVAL_P(ARG_MAX_DURATION + shift), "max_duration");
	spec->isolation = PG_ARGISNULL(ARG_ISOLATION + shift) ? occ_level_of_setting() :
		occ_enum_lookup(occ_isolation_options,
						text_to_cstring(PG_GETARG_TEXT_PP(ARG_ISOLATION + shift)),
						"isolation level", "levels")->name;
	occ_parse_retry_on(fcinfo, ARG_RETRY_ON + shift, spec);
	occ_parse_contention(fcinfo, ARG_CONTENTION + shift, ARG_KEY + shift, spec);
}

/*
 * occ_args_outputs: which form was called, from the row type it returns: the
 * names of its INOUT arguments.  0.1.0's and 0.2.0's declarations have only
 * the form without outputs and the one with attempts and slept.
 */
void
occ_args_outputs(FunctionCallInfo fcinfo, OccOutputs *out)
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
