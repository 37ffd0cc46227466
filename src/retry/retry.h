/*-------------------------------------------------------------------------
 *
 * retry.h
 *		src/retry/ owns the retry loops: CALL occ.retry (retry.c, its
 *		arguments args.c), the application's own transactions under SET
 *		LOCAL occ.key (client.c), and occ.backoff() for loops in the
 *		application (delays.c).  This header has what they share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_RETRY_H
#define PG_OCC_RETRY_H

#include "pg_occ.h"

/* ----------------------------------------------------------------
 * What one call of occ.retry asks for (read by args.c)
 * ----------------------------------------------------------------
 */

/*
 * The outputs of the form called: its INOUT arguments, which are the columns
 * of the row that the CALL returns (-1: the form has no such column)
 */
typedef struct OccOutputs
{
	TupleDesc	tupdesc;		/* NULL for the form without outputs */
	int			result;
	int			attempts;
	int			slept;
} OccOutputs;

/* args.c */
extern void occ_args_sql(FunctionCallInfo fcinfo, OccRetrySpec *spec);
extern void occ_args_outputs(FunctionCallInfo fcinfo, OccOutputs *out);
extern void occ_args_spec(FunctionCallInfo fcinfo, int shift, OccRetrySpec *spec);
extern void occ_args_backoff(FunctionCallInfo fcinfo, int first, OccBackoff *b);

/* client.c */
extern void occ_client_init(void);

#endif							/* PG_OCC_RETRY_H */
