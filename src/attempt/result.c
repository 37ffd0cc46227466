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
 * kept as JSON text and converted to jsonb at the end of the body, before
 * the attempt commits: a result that cannot be made (too large, or JSON
 * that jsonb refuses) fails the attempt, which is rolled back, rather than
 * commit work whose result is lost.  An earlier statement's rows are never
 * converted.
 *
 * The conversion goes row by row: each row's object is made into jsonb on
 * its own and appended to the array in jsonb's binary format, as
 * convertJsonbArray() (jsonb_util.c) lays it out.  jsonb_in on the whole
 * text would first build a tree of JsonbValue, some 600 bytes per row (an
 * object's first four pairs are allocated at once): 3.8 MB of empty
 * objects took 630 MB.  Row by row, the memory is the text and the jsonb
 * (a few times the text at most, for tiny rows), and interrupts are checked
 * between rows, so that a cancel or statement_timeout ends a long
 * conversion at once (one huge row is converted at once, as PostgreSQL
 * itself would).
 *
 * Everything lives in a memory context that is a child of the attempt's
 * and is deleted with it: a failed attempt's rows are never kept, and a
 * call's memory does not grow with its attempts.  occ.max_result_size
 * bounds the JSON text; a statement whose rows exceed it stops being
 * collected, which is an error only if it is the last one that returns
 * rows.  jsonb bounds the size of the result (JENTRY_OFFLENMASK bytes), and
 * the result's text, which the caller gets, must fit in 1 GB: a JSON
 * number prints in full (1e1000: 1001 digits), so the numbers are counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "pg_occ.h"
#include "attempt/attempt.h"

/* The receiver: the result of the latest statement that returned rows */
typedef struct OccResultReceiver
{
	DestReceiver pub;			/* must be first */
	MemoryContext cxt;			/* this struct, and the rows */
	MemoryContext rowcxt;		/* scratch for one row, reset per row */
	TupleDesc	tupdesc;		/* row type of the latest statement that
								 * returns rows (blessed for row_to_json);
								 * NULL until one does */
	StringInfoData json;		/* the rows' objects so far, each ended by a
								 * NUL: as long as "[{...},{...}" */
	int64		nrows;
	int64		nkept;			/* rows in json: all, unless overflowed */
	bool		overflowed;		/* rows beyond the limit: json dropped */
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
	MemoryContextSwitchTo(old);
}

/*
 * occ_result_receive: append one row, as a JSON object, within
 * occ.max_result_size (of the JSON text of the whole array); beyond, drop
 * the rows collected and only count them
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
	/* the array's text: '[', the objects and their separators, ']' */
	if (1 + r->json.len + VARSIZE_ANY_EXHDR(object) + 1 > r->limit)
	{
		r->overflowed = true;
		pfree(r->json.data);
	}
	else
	{
		MemoryContextSwitchTo(r->cxt);
		appendBinaryStringInfo(&r->json, VARDATA_ANY(object), VARSIZE_ANY_EXHDR(object));
		appendStringInfoChar(&r->json, '\0');
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

/* occ_result_too_big: the jsonb of the rows would exceed jsonb's limit */
pg_noreturn static void
occ_result_too_big(OccResultReceiver *r, int64 fit)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the result of the occ.retry body exceeds the size of a jsonb value (%u bytes)",
					JENTRY_OFFLENMASK),
			 errdetail("Its last statement that returns rows returned " INT64_FORMAT " rows; the first " INT64_FORMAT " fit.",
					   r->nrows, fit),
			 errhint("Return fewer or smaller rows (LIMIT, an aggregate), or call the form of occ.retry without result.")));
}

/*
 * occ_result_digits: how many characters the numbers of object print with,
 * counted up to more than budget.  jsonb keeps a JSON number as numeric and
 * prints it in full: 1e1000, six bytes of text, prints as 1001 digits.
 */
static Size
occ_result_digits(Jsonb *object, Size budget)
{
	JsonbIterator *it = JsonbIteratorInit(&object->root);
	JsonbValue	v;
	JsonbIteratorToken token;
	Size		digits = 0;

	while (digits <= budget && (token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
		if ((token == WJB_VALUE || token == WJB_ELEM) && v.type == jbvNumeric)
		{
			char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out,
																   NumericGetDatum(v.val.numeric)));

			digits += strlen(text);
			pfree(text);
		}
	return digits;
}

/*
 * occ_result_array: the rows kept, as a jsonb array of their objects, in
 * the current memory context.  Each row's JSON text is made into jsonb on
 * its own (in rowcxt) and its object appended: padded to a multiple of 4
 * bytes, every JB_OFFSET_STRIDE'th element's JEntry holding the end offset
 * of its data, the others its length.  Interrupts are checked per row.
 */
static Jsonb *
occ_result_array(OccResultReceiver *r)
{
	StringInfoData out;
	/* at least 3 bytes of text a row: fewer rows than JB_CMASK counts */
	uint32		header = (uint32) r->nkept | JB_FARRAY;
	int			jentries;		/* offset of the first element's JEntry */
	uint32		datalen = 0;	/* the elements' data so far */
	const char *row = r->json.data;
	/* jsonb's text of the result: at most twice the JSON text, and numbers */
	Size		printed = 2 * (Size) r->json.len + 2;

	/* the JSON text's size is a good guess at the data's */
	initStringInfo(&out);
	enlargeStringInfo(&out, VARHDRSZ + sizeof(uint32) + sizeof(JEntry) * r->nkept + r->json.len);
	out.len = VARHDRSZ;
	appendBinaryStringInfo(&out, (const char *) &header, sizeof(uint32));
	jentries = out.len;
	out.len += sizeof(JEntry) * r->nkept;

	for (int64 i = 0; i < r->nkept; i++)
	{
		MemoryContext old;
		Jsonb	   *object;
		uint32		len;
		JEntry		jentry;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(r->rowcxt);
		object = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(row)));
		/* a number prints longer than its text only with an exponent */
		if (strpbrk(row, "eE") != NULL)
			printed += occ_result_digits(object, MaxAllocSize - printed);
		MemoryContextSwitchTo(old);
		if (printed >= MaxAllocSize)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the result of the occ.retry body would print larger than 1 GB"),
					 errdetail("Its numbers print in full: a JSON number of the rows, such as 1e1000, takes a digit per power of ten."),
					 errhint("Return such numbers as text, or call the form of occ.retry without result.")));

		len = (INTALIGN(out.len) - out.len) + (VARSIZE(object) - VARHDRSZ);
		if (len > JENTRY_OFFLENMASK - datalen)
			occ_result_too_big(r, i);
		datalen += len;
		while (out.len % sizeof(uint32) != 0)
			appendStringInfoChar(&out, '\0');
		appendBinaryStringInfo(&out, VARDATA(object), VARSIZE(object) - VARHDRSZ);
		jentry = JENTRY_ISCONTAINER |
			(i % JB_OFFSET_STRIDE == 0 ? JENTRY_HAS_OFF | datalen : len);
		memcpy(out.data + jentries + sizeof(JEntry) * i, &jentry, sizeof(JEntry));

		row += strlen(row) + 1;
		MemoryContextReset(r->rowcxt);
	}
	/* the whole array, its header and JEntries included, has the same bound */
	if (out.len - VARHDRSZ > JENTRY_OFFLENMASK)
		occ_result_too_big(r, r->nkept - 1);
	SET_VARSIZE(out.data, out.len);
	return (Jsonb *) out.data;
}

/*
 * occ_result_jsonb: the result, made in the current memory context; NULL
 * when no statement returned rows (the result is SQL NULL).  Call once,
 * when the body has run; a result beyond the limits is an error.
 */
Jsonb *
occ_result_jsonb(DestReceiver *self)
{
	OccResultReceiver *r = (OccResultReceiver *) self;

	if (r->tupdesc == NULL)
		return NULL;
	if (r->overflowed)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the result of the occ.retry body exceeds occ.max_result_size (%zu kB)",
						r->limit / 1024),
				 errdetail("Its last statement that returns rows returned " INT64_FORMAT " rows; the first " INT64_FORMAT " fit.",
						   r->nrows, r->nkept),
				 errhint("Return fewer or smaller rows (LIMIT, an aggregate), raise occ.max_result_size, "
						 "or call the form of occ.retry without result.")));
	return occ_result_array(r);
}

/* occ_result_free: free the receiver and its rows */
void
occ_result_free(DestReceiver *self)
{
	MemoryContextDelete(((OccResultReceiver *) self)->cxt);
}
