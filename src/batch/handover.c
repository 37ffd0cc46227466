/*-------------------------------------------------------------------------
 *
 * handover.c
 *		What a follower of batch mode hands its leader, and what the leader
 *		hands back: the call's request and its body's error, as the bytes
 *		of the follower's slot (batch.c).
 *
 * A request is the parameter types, the body and the parameters, the
 * values serialized as a parallel query's are (datumSerialize).  Values of
 * anonymous record types cannot be handed over: their typmod is known only
 * to the backend that made them, and another would read them as some other
 * record type of its own (wrong values, or a crash): such a call runs
 * alone.  An error is its message, detail, hint and context and the names
 * of the objects it is about, each cut to a room of its own; the follower
 * raises it again, with its own error context added.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "pg_occ.h"
#include "batch/batch.h"

/*
 * The parts of an error that an outcome keeps, and the bytes each may take
 * (cut at a character's end), 7,808 in all: its message, detail, hint and
 * context, and the names of the objects it is about (as clients read them:
 * a unique violation's constraint_name, for one)
 */
typedef enum OccErrorPart
{
	OCC_ERROR_MESSAGE,
	OCC_ERROR_DETAIL,
	OCC_ERROR_HINT,
	OCC_ERROR_CONTEXT,
	OCC_ERROR_SCHEMA,
	OCC_ERROR_TABLE,
	OCC_ERROR_COLUMN,
	OCC_ERROR_DATATYPE,
	OCC_ERROR_CONSTRAINT,
	OCC_ERROR_PARTS
} OccErrorPart;

static const int occ_error_room[OCC_ERROR_PARTS] = {4096, 1536, 512, 1024, 128, 128, 128, 128, 128};

StaticAssertDecl(4096 + 1536 + 512 + 1024 + 5 * 128 == OCC_HANDOVER_ERROR_BYTES,
				 "OCC_HANDOVER_ERROR_BYTES is the sum of the rooms");

/*
 * occ_type_is_local: are the values of type (through domains and arrays)
 * anonymous records, which carry a typmod that only their own backend's
 * registry of record types knows?  Another backend would read them as
 * some other record type of its own.
 */
static bool
occ_type_is_local(Oid type)
{
	Oid			base = getBaseType(type);
	Oid			element = get_element_type(base);

	if (OidIsValid(element))
		base = getBaseType(element);
	return base == RECORDOID || get_typtype(base) == TYPTYPE_PSEUDO;
}

/*
 * occ_handover_request_write: write the call's request (parameter types,
 * body, parameters) to buf, of room bytes; returns its length, or -1 if it
 * does not fit or cannot be read in another backend
 */
int
occ_handover_request_write(const OccRetrySpec *spec, char *buf, int room)
{
	Size		need = sizeof(int) + sizeof(Oid) * spec->nargs + strlen(spec->sql) + 1;
	char	   *p = buf;

	for (int i = 0; i < spec->nargs; i++)
	{
		int16		typlen;
		bool		typbyval;

		if (occ_type_is_local(spec->argtypes[i]))
			return -1;
		get_typlenbyval(spec->argtypes[i], &typlen, &typbyval);
		need += datumEstimateSpace(spec->values[i], spec->nulls[i] == 'n',
								   typbyval, typlen);
	}
	if (need > room)
		return -1;
	memcpy(p, &spec->nargs, sizeof(int));
	p += sizeof(int);
	memcpy(p, spec->argtypes, sizeof(Oid) * spec->nargs);
	p += sizeof(Oid) * spec->nargs;
	strcpy(p, spec->sql);
	p += strlen(spec->sql) + 1;
	for (int i = 0; i < spec->nargs; i++)
	{
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(spec->argtypes[i], &typlen, &typbyval);
		datumSerialize(spec->values[i], spec->nulls[i] == 'n', typbyval, typlen, &p);
	}
	return (int) (p - buf);
}

/*
 * occ_handover_request_read: a taken call's request (len bytes at buf),
 * into m, copied into the current memory context
 */
void
occ_handover_request_read(const char *buf, int len, OccBatchMember *m)
{
	char	   *copy = palloc(len);
	char	   *p = copy;

	memcpy(copy, buf, len);
	memcpy(&m->nargs, p, sizeof(int));
	p += sizeof(int);
	m->argtypes = (Oid *) palloc(sizeof(Oid) * Max(m->nargs, 1));
	memcpy(m->argtypes, p, sizeof(Oid) * m->nargs);
	p += sizeof(Oid) * m->nargs;
	m->sql = p;
	p += strlen(p) + 1;
	m->params = m->nargs > 0 ? makeParamList(m->nargs) : NULL;
	for (int i = 0; i < m->nargs; i++)
	{
		ParamExternData *prm = &m->params->params[i];

		prm->value = datumRestore(&p, &prm->isnull);
		prm->pflags = PARAM_FLAG_CONST;
		prm->ptype = m->argtypes[i];
	}
}

/*
 * occ_handover_error_write: write edata's parts to buf (of at least
 * OCC_HANDOVER_ERROR_BYTES), each cut at a character's end to its room;
 * returns the length written
 */
int
occ_handover_error_write(const ErrorData *edata, char *buf)
{
	const char *part[OCC_ERROR_PARTS] = {
		edata->message, edata->detail, edata->hint, edata->context,
		edata->schema_name, edata->table_name, edata->column_name,
		edata->datatype_name, edata->constraint_name
	};
	char	   *p = buf;

	for (int i = 0; i < OCC_ERROR_PARTS; i++)
	{
		const char *text = part[i] ? part[i] : "";
		int			len = strlen(text);

		if (len >= occ_error_room[i])
			len = pg_mbcliplen(text, len, occ_error_room[i] - 1);
		memcpy(p, text, len);
		p[len] = '\0';
		p += len + 1;
	}
	return p - buf;
}

/*
 * occ_handover_error_read: the error that occ_handover_error_write wrote
 * at buf, with its SQLSTATE sqlerrcode, as ErrorData in the current memory
 * context.  Made by raising it, so that it is complete (the
 * follower's error context added), and caught: errfinish resets the
 * interrupt holdoff counts, which a cancelled follower holds while it
 * takes its outcome, so they are restored.
 */
ErrorData *
occ_handover_error_read(const char *buf, int sqlerrcode)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	const char *part[OCC_ERROR_PARTS];
	const char *p = buf;
	ErrorData  *edata = NULL;

	for (int i = 0; i < OCC_ERROR_PARTS; i++)
	{
		part[i] = p;
		p += strlen(p) + 1;
	}
	PG_TRY();
	{
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg_internal("%s", part[OCC_ERROR_MESSAGE]),
				 *part[OCC_ERROR_DETAIL] ? errdetail_internal("%s", part[OCC_ERROR_DETAIL]) : 0,
				 *part[OCC_ERROR_HINT] ? errhint("%s", part[OCC_ERROR_HINT]) : 0,
				 *part[OCC_ERROR_CONTEXT] ? errcontext_msg("%s", part[OCC_ERROR_CONTEXT]) : 0,
				 *part[OCC_ERROR_SCHEMA] ? err_generic_string(PG_DIAG_SCHEMA_NAME, part[OCC_ERROR_SCHEMA]) : 0,
				 *part[OCC_ERROR_TABLE] ? err_generic_string(PG_DIAG_TABLE_NAME, part[OCC_ERROR_TABLE]) : 0,
				 *part[OCC_ERROR_COLUMN] ? err_generic_string(PG_DIAG_COLUMN_NAME, part[OCC_ERROR_COLUMN]) : 0,
				 *part[OCC_ERROR_DATATYPE] ? err_generic_string(PG_DIAG_DATATYPE_NAME, part[OCC_ERROR_DATATYPE]) : 0,
				 *part[OCC_ERROR_CONSTRAINT] ? err_generic_string(PG_DIAG_CONSTRAINT_NAME, part[OCC_ERROR_CONSTRAINT]) : 0));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
	}
	PG_END_TRY();
	return edata;
}
