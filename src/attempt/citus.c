/*-------------------------------------------------------------------------
 *
 * citus.c
 *		An attempt cancelled by Citus's distributed deadlock detector
 *		failed with a deadlock, not a cancel.
 *
 * Two transactions that wait for each other's rows on two workers of a
 * Citus cluster deadlock where no worker's detector sees it.  Citus's own
 * detector (its maintenance daemon, every citus.distributed_deadlock_
 * detection_factor x deadlock_timeout) ends such a cycle by cancelling one
 * transaction's backend with a plain query cancel (SIGINT), after setting
 * a flag in the backend's Citus data; the backend's ERROR is then 57014,
 * "canceling statement due to user request", which Citus rewrites to 40P01
 * only in its emit_log_hook, when the error is reported.  An attempt that
 * catches its error sees the cancel: occ.retry would stop, where a deadlock
 * is retried.  So the attempt asks Citus, as its hook does, whether the
 * cancel was its detector's (MyBackendGotCancelledDueToDeadlock(true),
 * which also clears the flag, so that the next cancel is a cancel), before
 * its transaction rolls back (the flag counts only within the distributed
 * transaction), and makes the error the deadlock that Citus reports.
 *
 * pg_occ does not link to Citus: the function is found among the symbols
 * of the libraries loaded (Citus is preloaded, and loaded with
 * RTLD_GLOBAL), once per backend; without Citus there is none, and a
 * cancel stays a cancel.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>

#include "attempt/attempt.h"

/* Citus 10 and later: bool MyBackendGotCancelledDueToDeadlock(bool clearState) */
typedef bool (*OccCitusDeadlockCheck) (bool clear_state);

static OccCitusDeadlockCheck occ_citus_deadlock_check;
static bool occ_citus_looked_up = false;

/*
 * occ_citus_deadlock_cancel: if edata is the cancel of Citus's distributed
 * deadlock detector, make it the deadlock Citus reports (40P01)
 */
void
occ_citus_deadlock_cancel(ErrorData *edata)
{
	if (edata->elevel != ERROR || edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
		return;
	if (!occ_citus_looked_up)
	{
		occ_citus_deadlock_check = (OccCitusDeadlockCheck)
			dlsym(RTLD_DEFAULT, "MyBackendGotCancelledDueToDeadlock");
		occ_citus_looked_up = true;
	}
	if (occ_citus_deadlock_check == NULL || !occ_citus_deadlock_check(true))
		return;
	edata->sqlerrcode = ERRCODE_T_R_DEADLOCK_DETECTED;
	edata->message = pstrdup("canceling the transaction since it was involved in a distributed deadlock");
}
