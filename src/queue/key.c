/*-------------------------------------------------------------------------
 *
 * key.c
 *		The contention keys of a call: the keys it gives, or the values
 *		that its parameters carry, from which the learner (learner.c) picks
 *		the hot ones.
 *
 * A key is known by its 64-bit hash, which names its gate (gate.c) and its
 * temperature slot (temperature.c).  Keys live in two namespaces that never
 * meet (the top bit of the hash tells them apart): a key given as text
 * (occ.retry's key, SET LOCAL occ.key, occ.gate's) hashes its text; a key
 * learned from a call hashes the body's text and the role that calls, alone
 * or with one value that the call carries, so that occ.gate('<the body>') is
 * never a learned key's gate, and another role that runs the same text
 * (which may resolve to tables of its own, through its search_path) gets
 * other gates.
 *
 * Who shares a key given as text: the roles that may take its gate with
 * occ.gate (EXECUTE on occ.gate(text), which the owner grants to the roles
 * that write what the keys name) share one queue per key and database, as
 * the writers of the same rows must.  Any other role's keys are its own:
 * their hash includes the role, so that a stranger that names your key (in a
 * call whose body always fails, or in a transaction it keeps open) holds a
 * gate of its own, not yours, and heats its own key, not yours.
 *
 * A value is hashed in a canonical form, so that one row gets one gate
 * whatever the session's settings: with its type's extended hash function
 * (the one hash joins use: a timestamptz hashes its instant, not its text in
 * the session's TimeZone; 1::int and 1::bigint hash alike), else its binary
 * output, else its text output.  The elements of an array are values of
 * their own (a body may update the rows WHERE id = ANY($1)).  NULLs and
 * large values (more than OCC_KEY_VALUE_MAX bytes: never a row's identity)
 * are not values.  Values are hashed only for calls that need them: when
 * their body has failed recently, or when an attempt has just failed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "pg_occ.h"
#include "queue/queue.h"

/* Larger values are not keys */
#define OCC_KEY_VALUE_MAX 256

/* The elements of a longer array are not keys (the array is one value) */
#define OCC_KEY_ARRAY_MAX 64

/* set in the hash of every given key, clear in that of every learned key */
#define OCC_KEY_GIVEN UINT64CONST(0x8000000000000000)

/*
 * occ_key_owner: whose are the keys that the current role gives as text:
 * InvalidOid, everyone's (the database's), when it may take their gates
 * with occ.gate (a superuser, or a role granted EXECUTE on occ.gate(text)
 * in this database); else the role's own.  Looked up without a check of
 * the schema's privileges, and InvalidOid only where occ.gate exists.
 */
Oid
occ_key_owner(void)
{
	Oid			role = GetUserId();
	Oid			nsp = get_namespace_oid("occ", true);
	Oid			text_type = TEXTOID;
	Oid			gate;

	if (superuser_arg(role))
		return InvalidOid;
	if (!OidIsValid(nsp))
		return role;
	gate = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("gate"),
						   PointerGetDatum(buildoidvector(&text_type, 1)),
						   ObjectIdGetDatum(nsp));
	if (OidIsValid(gate) && occ_proc_aclcheck(gate, role, ACL_EXECUTE) == ACLCHECK_OK)
		return InvalidOid;
	return role;
}

/*
 * occ_key_hash: the hash of a key given as text (occ.retry's key, SET LOCAL
 * occ.key, occ.gate's) of owner (occ_key_owner(); InvalidOid for occ.gate,
 * whose callers share keys), after checking it; what names the argument in
 * the error.
 */
uint64
occ_key_hash(const char *key, const char *what, Oid owner)
{
	uint64		hash;

	if (key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint("Name what the transaction contends on, for example 'account:' || id.")));
	hash = occ_hash_text(key);
	if (OidIsValid(owner))
		hash = hash_combine64(hash, (uint64) owner);
	return hash | OCC_KEY_GIVEN;
}

/*
 * occ_key_of_body: the learned key of a body alone, for the role that calls
 * (a body can only SET ROLE to roles that its caller may act as)
 */
uint64
occ_key_of_body(uint64 body_hash)
{
	return hash_combine64(body_hash, (uint64) GetUserId()) & ~OCC_KEY_GIVEN;
}

/* occ_key_of_value: the learned key of a body and one value it carries */
uint64
occ_key_of_value(uint64 body_hash, uint64 value_hash)
{
	return hash_combine64(occ_key_of_body(body_hash), value_hash) & ~OCC_KEY_GIVEN;
}

/*
 * occ_key_hash_datum: the canonical hash of a value of a type (see the file
 * header)
 */
static uint64
occ_key_hash_datum(Oid type, Datum value)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_HASH_EXTENDED_PROC_FINFO);
	Oid			send;
	bool		isvarlena;

	if (OidIsValid(tc->hash_extended_proc))
		return DatumGetUInt64(FunctionCall2Coll(&tc->hash_extended_proc_finfo,
												tc->typcollation, value,
												UInt64GetDatum(0)));
	getTypeBinaryOutputInfo(type, &send, &isvarlena);
	if (OidIsValid(send))
	{
		bytea	   *bytes = OidSendFunctionCall(send, value);

		return hash_bytes_extended((const unsigned char *) VARDATA(bytes),
								   VARSIZE(bytes) - VARHDRSZ, type);
	}
	else
	{
		Oid			typoutput;
		char	   *text;

		getTypeOutputInfo(type, &typoutput, &isvarlena);
		text = OidOutputFunctionCall(typoutput, value);
		return hash_bytes_extended((const unsigned char *) text, strlen(text), type);
	}
}

/* occ_key_value_text: a short text of a value, for occ.stats */
static void
occ_key_value_text(Oid type, Datum value, char *out)
{
	Oid			typoutput;
	bool		isvarlena;
	char	   *text;

	getTypeOutputInfo(type, &typoutput, &isvarlena);
	text = OidOutputFunctionCall(typoutput, value);
	if (strlen(text) < OCC_KEY_TEXT_MAX)
		strcpy(out, text);
	else
	{
		/* cut at a character's end, not within one */
		int			len = pg_mbcliplen(text, strlen(text), OCC_KEY_TEXT_MAX - 4);

		memcpy(out, text, len);
		strcpy(out + len, "...");
	}
	pfree(text);
}

/* occ_key_add: add a value of a parameter to the values of a call */
static void
occ_key_add(OccKeyValues *kv, int position, Oid type, Datum value, bool with_text)
{
	OccKeyValue *v;

	if (get_typlen(type) == -1 && VARSIZE_ANY(DatumGetPointer(value)) > OCC_KEY_VALUE_MAX)
		return;
	if (kv->n == kv->size)
	{
		kv->size *= 2;
		kv->values = repalloc(kv->values, sizeof(OccKeyValue) * kv->size);
	}
	v = &kv->values[kv->n++];
	v->hash = occ_key_hash_datum(type, value);
	v->position = position;
	v->text[0] = '\0';
	if (with_text)
		occ_key_value_text(type, value, v->text);
}

/*
 * occ_key_values: the values that a call's parameters carry (see the file
 * header), with their text when with_text (for a failed attempt, which the
 * learner may start to track), in the current memory context
 */
OccKeyValues *
occ_key_values(const OccRetrySpec *spec, bool with_text)
{
	OccKeyValues *kv = palloc(sizeof(OccKeyValues));

	kv->n = 0;
	kv->size = Max(spec->nargs, 4);
	kv->values = palloc(sizeof(OccKeyValue) * kv->size);
	for (int i = 0; i < spec->nargs; i++)
	{
		Oid			element = get_element_type(spec->argtypes[i]);

		if (spec->nulls[i] == 'n')
			continue;
		if (OidIsValid(element))
		{
			ArrayType  *array = DatumGetArrayTypeP(spec->values[i]);
			Datum	   *elems;
			bool	   *nulls;
			int			n;
			int16		typlen;
			bool		typbyval;
			char		typalign;

			if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) <= OCC_KEY_ARRAY_MAX)
			{
				get_typlenbyvalalign(element, &typlen, &typbyval, &typalign);
				deconstruct_array(array, element, typlen, typbyval, typalign,
								  &elems, &nulls, &n);
				for (int e = 0; e < n; e++)
					if (!nulls[e])
						occ_key_add(kv, i + 1, element, elems[e], with_text);
				continue;
			}
		}
		occ_key_add(kv, i + 1, spec->argtypes[i], spec->values[i], with_text);
	}
	return kv;
}

/*
 * occ_key_check_count: a call or transaction gives nkeys keys (through
 * what): no more than OCC_KEYS_MAX, a gate each, all held at once
 */
void
occ_key_check_count(int nkeys, const char *what)
{
	if (nkeys > OCC_KEYS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s gives %d contention keys, more than the %d allowed", what, nkeys, OCC_KEYS_MAX),
				 errdetail("A transaction takes the gate of each of its keys and holds them all until it ends."),
				 errhint("Give the keys of the rows that the transaction contends on, not of every row it touches.")));
}

/*
 * occ_key_given: the hashes of the keys the call gives (spec->keys), into
 * keys, which has room for spec->nkeys; returns their number
 */
int
occ_key_given(const OccRetrySpec *spec, uint64 *keys)
{
	for (int i = 0; i < spec->nkeys; i++)
		keys[i] = occ_key_hash(spec->keys[i], "key", spec->key_owner);
	return spec->nkeys;
}
