/*-------------------------------------------------------------------------
 *
 * key.c
 *		The contention key of a call: the key it gives, or one derived from
 *		its body and parameters.
 *
 * A key is known by its 64-bit hash, which names its gate (gate.c) and its
 * temperature slot (temperature.c).  A key given as text (occ.retry's key,
 * occ.gate's) hashes its text.  A call that gives none gets the body's text
 * and the text of each parameter value, so that a body with WHERE id = $1
 * gets one gate per row; the policy may move such a call to the key of its
 * body alone (policy.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/lsyscache.h"

#include "pg_occ.h"

/*
 * occ_key_hash: the hash of a key given as text (occ.retry's key, or
 * occ.gate's), after checking it; what names the argument in the error.
 */
uint64
occ_key_hash(const char *key, const char *what)
{
	if (key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what),
				 errhint("Name what the transaction contends on, for example 'account:' || id.")));
	return occ_hash_text(key);
}

/*
 * occ_key_derive: the key of a call that gives none: the body's text and
 * the text of each parameter value.
 */
static uint64
occ_key_derive(uint64 body_hash, int nargs, const Oid *argtypes,
			   const Datum *values, const char *nulls)
{
	uint64		hash = body_hash;

	for (int i = 0; i < nargs; i++)
	{
		Oid			typoutput;
		bool		isvarlena;
		char	   *text;

		if (nulls[i] == 'n')
		{
			hash = hash_combine64(hash, 0);
			continue;
		}
		getTypeOutputInfo(argtypes[i], &typoutput, &isvarlena);
		text = OidOutputFunctionCall(typoutput, values[i]);
		hash = hash_combine64(hash, hash_bytes_extended((const unsigned char *) text,
														strlen(text), argtypes[i]));
		pfree(text);
	}
	return hash;
}

/* occ_key_of_call: the hash of the call's key, given or derived */
uint64
occ_key_of_call(const OccRetrySpec *spec)
{
	if (spec->key != NULL)
		return occ_key_hash(spec->key, "key");
	return occ_key_derive(spec->sql_hash, spec->nargs, spec->argtypes,
						  spec->values, spec->nulls);
}
