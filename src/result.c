/*-------------------------------------------------------------------------
 *
 * result.c
 *		The body's result: the rows of its last statement that returns rows,
 *		as a jsonb array of objects, for occ.retry's INOUT result.
 *
 * A DestReceiver collects them while the body runs.  Which statement
 * returns rows is known only when it runs (a body's statements are
 * prepared one by one, and a later one may depend on what an earlier one
 * created), so each statement that returns rows (a SELECT, a VALUES, DML
 * with RETURNING, a CALL with output arguments) starts the result afresh:
 * what is left at the end is the last one's.  No such statement, no result
 * (SQL NULL); one that returned no rows, an empty array.
 *
 * Each row becomes an object as row_to_json() makes it: column names as
 * keys (a duplicate name keeps its last value), numbers as JSON numbers
 * (jsonb keeps them as numeric, exactly), NaN and infinities as strings,
 * timestamps in ISO 8601, other types as their text output.  The rows are
 * appended as JSON text and converted to jsonb once, at the end of the
 * body, before the attempt commits: a result that cannot be made (too
 * large) fails the attempt, which is rolled back, rather than commit work
 * whose result is lost.
 *
 * Everything lives in a memory context that is a child of the attempt's
 * and is deleted with it: a failed attempt's rows are never kept, and a
 * call's memory does not grow with its attempts.  occ.max_result_size
 * bounds the JSON text, and jsonb bounds the number of rows (an array of
 * more elements than OCC_RESULT_MAX_ROWS cannot be built in memory).  A
 * statement whose rows exceed either stops being collected; only if it is
 * the last one that returns rows is that an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "pg_occ.h"

/*
 * Most rows in a result: jsonb builds an array in an array of JsonbValue,
 * which must fit in one allocation (MaxAllocSize)
 */
#define OCC_RESULT_MAX_ROWS ((int64) (MaxAllocSize / sizeof(JsonbValue)) - 1)

/* The receiver: the result of the latest statement that returned rows */
typedef struct OccResultReceiver
{
	DestReceiver pub;			/* must be first */
	MemoryContext cxt;			/* this struct, and the rows */
	MemoryContext rowcxt;		/* scratch for one row, reset per row */
	TupleDesc	tupdesc;		/* row type of the latest statement that
								 * returns rows (blessed for row_to_json);
								 * NULL until one does */
	StringInfoData json;		/* "[{...},{...}" so far */
	int64		nrows;
	int64		nkept;			/* rows in json: all, unless overflowed */
	bool		overflowed;		/* rows beyond the limits: json dropped */
	Size		limit;			/* bytes of JSON text, occ.max_result_size */
} OccResultReceiver;

/*
 * occ_result_startup: a statement that returns rows begins: drop the rows
 * of any earlier one.
 */
static void
occ_result_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	OccResultReceiver *r = (OccResultReceiver *) self;
	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	if (r->tupdesc != NULL)
	{
		if (!r->overflowed)
			pfree(r->json.data);
		FreeTupleDesc(r->tupdesc);
	}
	r->overflowed = false;
	r->nrows = r->nkept = 0;
	r->tupdesc = BlessTupleDesc(CreateTupleDescCopy(typeinfo));
	initStringInfo(&r->json);
	appendStringInfoChar(&r->json, '[');
	MemoryContextSwitchTo(old);
}

/*
 * occ_result_receive: append one row, as a JSON object, within
 * occ.max_result_size and OCC_RESULT_MAX_ROWS; beyond, drop the rows
 * collected and only count them
 */
static bool
occ_result_receive(TupleTableSlot *slot, DestReceiver *self)
{
	OccResultReceiver *r = (OccResultReceiver *) self;
	MemoryContext old;
	HeapTuple	tuple;
	text	   *object;

	r->nrows++;
	if (r->overflowed)
		return true;

	old = MemoryContextSwitchTo(r->rowcxt);
	slot_getallattrs(slot);
	tuple = heap_form_tuple(r->tupdesc, slot->tts_values, slot->tts_isnull);
	object = DatumGetTextPP(DirectFunctionCall1(row_to_json,
												HeapTupleGetDatum(tuple)));
	if (r->json.len + VARSIZE_ANY_EXHDR(object) + 2 > r->limit ||
		r->nrows > OCC_RESULT_MAX_ROWS)
	{
		r->overflowed = true;
		pfree(r->json.data);
	}
	else
	{
		MemoryContextSwitchTo(r->cxt);
		if (r->nkept > 0)
			appendStringInfoChar(&r->json, ',');
		appendBinaryStringInfo(&r->json, VARDATA_ANY(object), VARSIZE_ANY_EXHDR(object));
		r->nkept++;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->rowcxt);
	return true;
}

/* occ_result_shutdown: a statement ends; its rows stay until the next one */
static void
occ_result_shutdown(DestReceiver *self)
{
}

/* occ_result_destroy: the receiver goes with its memory context */
static void
occ_result_destroy(DestReceiver *self)
{
}

/*
 * occ_result_receiver: a receiver for the rows of one attempt's
 * statements, in a new child context of cxt (the attempt's).
 */
DestReceiver *
occ_result_receiver(MemoryContext cxt)
{
	MemoryContext rcxt = AllocSetContextCreate(cxt, "occ.retry result",
											   ALLOCSET_DEFAULT_SIZES);
	OccResultReceiver *r = MemoryContextAllocZero(rcxt, sizeof(OccResultReceiver));

	r->pub.receiveSlot = occ_result_receive;
	r->pub.rStartup = occ_result_startup;
	r->pub.rShutdown = occ_result_shutdown;
	r->pub.rDestroy = occ_result_destroy;
	r->pub.mydest = DestNone;
	r->cxt = rcxt;
	r->rowcxt = AllocSetContextCreate(rcxt, "occ.retry result row",
									  ALLOCSET_SMALL_SIZES);
	r->limit = (Size) occ_max_result_size * 1024;
	return &r->pub;
}

/*
 * occ_result_jsonb: set *jsonb to the result, made in the current memory
 * context; false when no statement returned rows (the result is NULL).
 * Call once, when the body has run; a result beyond the limits is an error.
 */
bool
occ_result_jsonb(DestReceiver *self, Datum *jsonb)
{
	OccResultReceiver *r = (OccResultReceiver *) self;

	if (r->tupdesc == NULL)
		return false;
	if (r->overflowed && r->nrows > OCC_RESULT_MAX_ROWS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the result of the occ.retry body has more than " INT64_FORMAT " rows",
						OCC_RESULT_MAX_ROWS),
				 errdetail("Its last statement that returns rows returned " INT64_FORMAT " rows, more than a jsonb array can hold.",
						   r->nrows),
				 errhint("Return fewer rows (LIMIT, an aggregate), or call the form of occ.retry without result.")));
	if (r->overflowed)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the result of the occ.retry body exceeds occ.max_result_size (%zu kB)",
						r->limit / 1024),
				 errdetail("Its last statement that returns rows returned " INT64_FORMAT " rows; the first " INT64_FORMAT " fit.",
						   r->nrows, r->nkept),
				 errhint("Return fewer or smaller rows (LIMIT, an aggregate), raise occ.max_result_size, "
						 "or call the form of occ.retry without result.")));
	appendStringInfoChar(&r->json, ']');
	*jsonb = DirectFunctionCall1(jsonb_in, CStringGetDatum(r->json.data));
	return true;
}

/* occ_result_free: free the receiver and its rows */
void
occ_result_free(DestReceiver *self)
{
	MemoryContextDelete(((OccResultReceiver *) self)->cxt);
}
