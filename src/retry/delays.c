/*-------------------------------------------------------------------------
 *
 * delays.c
 *		occ.backoff() and occ.setseed(): the policy's delays for retry loops
 *		that run outside the database, in the application.
 *
 * The formulas and the session's generator are the policy's (backoff.c);
 * these functions read their arguments as occ.retry's are read (args.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/timestamp.h"

#include "pg_occ.h"
#include "policy/policy.h"
#include "retry/retry.h"
#include "util/util.h"

PG_FUNCTION_INFO_V1(occ_backoff);
PG_FUNCTION_INFO_V1(occ_setseed);

/*
 * occ.backoff(attempt, base, cap, jitter, factor, prev, draw) returns interval
 *
 * Not strict: a NULL attempt gives NULL; base, cap, jitter and factor default
 * to their settings, prev to base, and draw to a fresh random draw.
 */
Datum
occ_backoff(PG_FUNCTION_ARGS)
{
	OccBackoff	b;
	int32		attempt;
	double		prev;
	double		draw;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	attempt = PG_GETARG_INT32(0);
	if (attempt < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("attempt must not be negative"),
				 errhint("Attempt 0 is the delay before the first retry.")));
	occ_args_backoff(fcinfo, 1, &b);

	prev = b.base;
	if (!PG_ARGISNULL(5))
	{
		prev = occ_interval_to_usec(PG_GETARG_INTERVAL_P(5), "prev");
		if (prev < b.base)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("prev must not be less than the base delay"),
					 errhint("Pass the delay returned for the previous attempt, or NULL before the first retry.")));
	}

	if (PG_ARGISNULL(6))
		draw = occ_random_draw();
	else
	{
		draw = PG_GETARG_FLOAT8(6);
		if (!(draw >= 0 && draw <= 1))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("draw must be between 0 and 1"),
					 errhint("Pass NULL to draw from the session's generator (see occ.setseed).")));
	}

	PG_RETURN_INTERVAL_P(occ_usec_to_interval(occ_backoff_delay(&b, attempt, prev, draw)));
}

/*
 * occ.setseed(seed double precision): seed the session's generator, like
 * setseed() does for random(), so the following draws repeat.
 */
Datum
occ_setseed(PG_FUNCTION_ARGS)
{
	float8		seed = PG_GETARG_FLOAT8(0);

	if (seed < -1 || seed > 1 || isnan(seed))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("seed %g out of allowed range [-1,1]", seed),
				 errhint("Pass a seed between -1 and 1, as for setseed().")));
	occ_random_seed(seed);
	PG_RETURN_VOID();
}
