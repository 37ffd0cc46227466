/*-------------------------------------------------------------------------
 *
 * interval.c
 *		Intervals as microseconds, and back: the unit of every delay,
 *		timeout and wait in pg_occ.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "datatype/timestamp.h"

#include "util/util.h"

/*
 * Longest delay we accept, in microseconds: 100 days.  A longer cap is
 * nonsense for a retry, and refusing it keeps every result exactly
 * representable as an interval of microseconds.
 */
#define OCC_MAX_DELAY_USEC (100.0 * USECS_PER_DAY)

/*
 * occ_interval_to_usec: an interval as microseconds, counting a day as 24
 * hours and a month as 30 days, as interval arithmetic does.  Negative and
 * absurdly long spans are refused; "what" names the argument in the error.
 */
double
occ_interval_to_usec(const Interval *span, const char *what)
{
	double		usec = (double) span->time +
		((double) span->month * DAYS_PER_MONTH + span->day) * USECS_PER_DAY;

	if (usec < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", what),
				 errhint("Pass a positive interval, such as '10 ms'.")));
	if (usec > OCC_MAX_DELAY_USEC)
		ereport(ERROR,
				(errcode(ERRCODE_INTERVAL_FIELD_OVERFLOW),
				 errmsg("%s must not exceed 100 days", what),
				 errhint("Retry delays are meant to be short; pass a smaller interval.")));
	return usec;
}

/* occ_usec_to_interval: microseconds (already rounded) as a time-only interval */
Interval *
occ_usec_to_interval(double usec)
{
	Interval   *result = palloc0(sizeof(Interval));

	result->time = (int64) usec;
	return result;
}
