/*-------------------------------------------------------------------------
 *
 * backoff.c
 *		Backoff delays: the formulas, and the session's random generator.
 *
 * With t = min(cap, base * factor^attempt), the strategies are
 *
 *	none			t								(seed 000: capped exponential)
 *	full			uniform(0, t)					(seed 000: full jitter)
 *	equal			t/2 + uniform(0, t/2)			(seed 000: equal jitter)
 *	decorrelated	min(cap, uniform(base, 3*prev))	(seed 000: decorrelated jitter)
 *	bounded			uniform(base, t)				(seed 004: bounded jitter)
 *	multiplicative	min(cap, R * base * factor^attempt), R = uniform(1, 2)
 *													(seed 002: delay = MIN(R*T*F^N, M))
 *	normal			clamp(t + N(0, (0.1 t)^2), 0, cap)
 *													(seed 001: normally distributed jitter)
 *
 * Every strategy consumes exactly one uniform draw u in [0, 1], so passing u
 * explicitly makes each formula checkable, and occ.setseed (delays.c) makes
 * the sequence of draws repeatable.  The normal strategy turns u into a standard
 * normal deviate with the inverse normal CDF.
 *
 * Times are microseconds held in doubles: the exponent saturates before
 * pow() could overflow, and the result is clamped after the noise.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "pg_occ.h"
#include "policy/policy.h"

/* Relative standard deviation of the normal strategy (seed 001's Jitter) */
#define OCC_NORMAL_SPREAD 0.1

/* The session's generator; seeded on first use unless occ.setseed ran */
static pg_prng_state occ_prng;
static bool occ_prng_seeded = false;

/*
 * occ_normal_quantile: the inverse CDF of the standard normal distribution
 * (Acklam's rational approximation, relative error below 1.2e-9).  p is
 * clamped away from 0 and 1 so the result stays finite.
 */
static double
occ_normal_quantile(double p)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
		-2.759285104469687e+02, 1.383577518672690e+02,
	-3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
		-1.556989798598866e+02, 6.680131188771972e+01,
	-1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
		-2.400758277161838e+00, -2.549732539343734e+00,
	4.374664141464968e+00, 2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
	2.445134137142996e+00, 3.754408661907416e+00};
	const double low = 0.02425;
	double		q,
				r;

	p = Max(p, 1e-12);
	p = Min(p, 1 - 1e-12);
	if (p < low || p > 1 - low)
	{
		/* the tails */
		q = sqrt(-2 * log(p < low ? p : 1 - p));
		r = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
			((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
		return p < low ? r : -r;
	}
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
		(((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/*
 * occ_exponential: base * factor^attempt, saturated at cap.  Comparing
 * logarithms first means pow() is only called when its result is at most
 * cap, so no attempt number can overflow.
 */
static double
occ_exponential(const OccBackoff *b, int attempt)
{
	if (b->factor == 1 || attempt == 0)
		return Min(b->base, b->cap);
	if (attempt * log(b->factor) >= log(b->cap / b->base))
		return b->cap;
	return Min(b->base * pow(b->factor, attempt), b->cap);
}

/*
 * occ_backoff_delay: the delay before retry number "attempt" (0 = the first
 * retry), in whole microseconds, never negative and never above cap.  prev
 * is the previous delay (decorrelated only) and draw the uniform draw in
 * [0, 1].  The caller has checked the parameters.
 */
double
occ_backoff_delay(const OccBackoff *b, int attempt, double prev, double draw)
{
	double		t = occ_exponential(b, attempt);
	double		delay;

	switch (b->jitter)
	{
		case OCC_JITTER_NONE:
			delay = t;
			break;
		case OCC_JITTER_FULL:
			delay = draw * t;
			break;
		case OCC_JITTER_EQUAL:
			delay = t / 2 + draw * (t / 2);
			break;
		case OCC_JITTER_DECORRELATED:
			delay = b->base + draw * (3 * prev - b->base);
			break;
		case OCC_JITTER_BOUNDED:
			delay = b->base + draw * (t - b->base);
			break;
		case OCC_JITTER_MULTIPLICATIVE:
			/* t is already capped, and capping R*t is the same as R*uncapped */
			delay = (1 + draw) * t;
			break;
		case OCC_JITTER_NORMAL:
			delay = t + OCC_NORMAL_SPREAD * t * occ_normal_quantile(draw);
			break;
		default:
			elog(ERROR, "unrecognized backoff strategy %d", (int) b->jitter);
	}
	/* clamp after the noise; cap is whole microseconds, so rounding keeps it */
	return rint(Min(Max(delay, 0), b->cap));
}

/* occ_random_draw: the next uniform draw in [0, 1) from the session's generator */
double
occ_random_draw(void)
{
	if (!occ_prng_seeded)
	{
		if (!pg_prng_strong_seed(&occ_prng))
			pg_prng_seed(&occ_prng, (uint64) MyProcPid ^ (uint64) GetCurrentTimestamp());
		occ_prng_seeded = true;
	}
	return pg_prng_double(&occ_prng);
}

/* occ_random_seed: seed the session's generator with seed in [-1, 1] */
void
occ_random_seed(double seed)
{
	pg_prng_fseed(&occ_prng, seed);
	occ_prng_seeded = true;
}
