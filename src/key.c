/*-------------------------------------------------------------------------
 *
 * key.c
 *		The contention key of a call: the key it gives, or one derived from
 *		its body and parameters.
 *
 * A key is known by its 64-bit hash, which names its gate (gate.c) and its
 * temperature slot (temperature.c).  A key given as text (occ.retry's key,
 * occ.gate's) hashes its text.  A call that gives none gets the body's text,
 * the role that calls and the text of each parameter value, so that a body
 * with WHERE id = $1 gets one gate per row; the policy may move such a call
 * to the key of its body alone (policy.c).
 *
 * The two kinds are apart: the top bit of a given key's hash is set, that of
 * a derived key's clear, so occ.gate('<a body>') or key => '<a body>' is
 * never the gate of a call of that body.  A derived key is the caller's own:
 * another role that runs the same text (which may resolve to tables of its
 * own, through its search_path) gets other gates.  A given key is a name
 * that every role of the database may use, like an advisory lock's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "pg_occ.h"

/* set in the hash of every given key, clear in that of every derived key */
#define OCC_KEY_GIVEN UINT64CONST(0x8000000000000000)

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
	return occ_hash_text(key) | OCC_KEY_GIVEN;
}

/*
 * occ_key_derive: the key of a call that gives none: the body's text, the
 * role that calls (a body can only SET ROLE to roles that its caller may
 * act as) and, unless body_alone, the text of each parameter value.
 */
static uint64
occ_key_derive(const OccRetrySpec *spec, bool body_alone)
{
	uint64		hash = hash_combine64(spec->sql_hash, (uint64) GetUserId());

	for (int i = 0; !body_alone && i < spec->nargs; i++)
	{
		Oid			typoutput;
		bool		isvarlena;
		char	   *text;

		if (spec->nulls[i] == 'n')
		{
			hash = hash_combine64(hash, 0);
			continue;
		}
		getTypeOutputInfo(spec->argtypes[i], &typoutput, &isvarlena);
		text = OidOutputFunctionCall(typoutput, spec->values[i]);
		hash = hash_combine64(hash, hash_bytes_extended((const unsigned char *) text,
														strlen(text), spec->argtypes[i]));
		pfree(text);
	}
	return hash & ~OCC_KEY_GIVEN;
}

/* occ_key_of_call: the hash of the call's key, given or derived */
uint64
occ_key_of_call(const OccRetrySpec *spec)
{
	if (spec->key != NULL)
		return occ_key_hash(spec->key, "key");
	return occ_key_derive(spec, false);
}

/*
 * occ_key_of_body: the derived key of the call's body alone, whatever its
 * parameters (where the policy escalates a derived key)
 */
uint64
occ_key_of_body(const OccRetrySpec *spec)
{
	return occ_key_derive(spec, true);
}
