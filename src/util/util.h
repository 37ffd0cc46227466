/*-------------------------------------------------------------------------
 *
 * util.h
 *		src/util/ owns what every folder uses: a step in a subtransaction
 *		(subxact.c), lists of SQLSTATEs (sqlstate.c), microsecond sleeps
 *		that check the client (sleep.c), intervals as microseconds
 *		(interval.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_UTIL_H
#define PG_OCC_UTIL_H

#include "pg_occ.h"

/* subxact.c */
extern ErrorData *occ_subxact_run(bool (*step) (void *arg), void *arg);

/* sqlstate.c */
extern OccSqlstatesProblem occ_parse_sqlstates(List *items, OccSqlstates *out,
											   const char **bad);
extern bool occ_sqlstates_match(const OccSqlstates *list, int sqlerrcode);

/* sleep.c */
extern void occ_sleep_usec(double usec);
extern void occ_check_client(void);

/* interval.c: intervals as microseconds, and back */
extern double occ_interval_to_usec(const Interval *span, const char *what);
extern Interval *occ_usec_to_interval(double usec);

#endif							/* PG_OCC_UTIL_H */
