/*-------------------------------------------------------------------------
 *
 * citus.c
 *		What an attempt must know of Citus: a cancel of its distributed
 *		deadlock detector is a deadlock; its one-phase commit commits other
 *		nodes' work before this node's commit.
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
 * Citus commits a distributed transaction that wrote through one
 * connection only in one phase, at pre-commit: its work on the other node
 * commits before this node's commit, which can still fail, a serializable
 * transaction's serialization check among the last steps; the other node's
 * part stays committed and running the body again would repeat it.  So
 * before an attempt's COMMIT, a serializable attempt asks Citus for its
 * two-phase commit (whose prepared transactions roll back when this node's
 * commit fails: the failure is whole, and retried), and tells whether a
 * failure at COMMIT may still come after work committed elsewhere (then
 * the policy gives up: 40003).  At READ COMMITTED and REPEATABLE READ no
 * retryable failure comes after the pre-commit.  An application's
 * SERIALIZABLE transaction that set occ.key, which the application retries
 * whole after a 40001, commits in two phases likewise.
 *
 * pg_occ does not link to Citus: its functions are found among the symbols
 * of the libraries loaded (Citus is preloaded, and loaded with
 * RTLD_GLOBAL), once per backend; without Citus there are none, a cancel
 * stays a cancel, and nothing commits first.  From PostgreSQL 16 on, PGXS
 * builds a library with its symbols hidden (-fvisibility=hidden), Citus's
 * too: where Citus is loaded (its setting citus.version exists) but its
 * functions are not found, a cancel stays a cancel, and every attempt's
 * failure at COMMIT is taken to come after work committed elsewhere (the
 * policy gives up with 40003, never runs a body again whose part on a
 * worker may have committed).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>

#include "access/xact.h"
#include "utils/guc.h"

#include "attempt/attempt.h"

/*
 * Citus 10 and later: bool MyBackendGotCancelledDueToDeadlock(bool
 * clearState), bool InCoordinatedTransaction(void), void
 * Use2PCForCoordinatedTransaction(void), bool
 * GetCoordinatedTransactionShouldUse2PC(void)
 */
typedef bool (*OccCitusDeadlockCheck) (bool clear_state);
typedef bool (*OccCitusTest) (void);
typedef void (*OccCitusAction) (void);

static OccCitusDeadlockCheck occ_citus_deadlock_check;
static OccCitusTest occ_citus_in_transaction;
static OccCitusAction occ_citus_use_2pc;
static OccCitusTest occ_citus_uses_2pc;
static bool occ_citus_looked_up = false;
static bool occ_citus_hidden = false;	/* Citus loaded, its functions not found */

/* occ_citus_look_up: find Citus's functions, once per backend */
static void
occ_citus_look_up(void)
{
	if (occ_citus_looked_up)
		return;
	occ_citus_deadlock_check = (OccCitusDeadlockCheck)
		dlsym(RTLD_DEFAULT, "MyBackendGotCancelledDueToDeadlock");
	occ_citus_in_transaction = (OccCitusTest) dlsym(RTLD_DEFAULT, "InCoordinatedTransaction");
	occ_citus_use_2pc = (OccCitusAction) dlsym(RTLD_DEFAULT, "Use2PCForCoordinatedTransaction");
	occ_citus_uses_2pc = (OccCitusTest) dlsym(RTLD_DEFAULT, "GetCoordinatedTransactionShouldUse2PC");
	occ_citus_hidden = GetConfigOption("citus.version", true, false) != NULL &&
		(occ_citus_in_transaction == NULL || occ_citus_use_2pc == NULL ||
		 occ_citus_uses_2pc == NULL);
	occ_citus_looked_up = true;
}

/*
 * occ_citus_deadlock_cancel: if edata is the cancel of Citus's distributed
 * deadlock detector, make it the deadlock Citus reports (40P01)
 */
void
occ_citus_deadlock_cancel(ErrorData *edata)
{
	if (edata->elevel != ERROR || edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
		return;
	occ_citus_look_up();
	if (occ_citus_deadlock_check == NULL || !occ_citus_deadlock_check(true))
		return;
	edata->sqlerrcode = ERRCODE_T_R_DEADLOCK_DETECTED;
	edata->message = pstrdup("canceling the transaction since it was involved in a distributed deadlock");
}

/*
 * occ_citus_commit_whole: before the COMMIT of a SERIALIZABLE transaction
 * (an attempt's, or an application's that set occ.key: client.c, at
 * pre-commit, before Citus's callback), make Citus commit its work on
 * other nodes in two phases
 */
void
occ_citus_commit_whole(void)
{
	occ_citus_look_up();
	if (XactIsoLevel == XACT_SERIALIZABLE && occ_citus_use_2pc != NULL &&
		occ_citus_in_transaction != NULL && occ_citus_in_transaction())
		occ_citus_use_2pc();
}

/*
 * occ_citus_prepare_commit: right before an attempt's COMMIT: commit whole
 * (above); return why Citus may still commit work on other nodes in one
 * phase, before this node's commit, or NULL if it will not.  Where Citus is
 * loaded but its functions are hidden, it may always: a failure at COMMIT
 * is then never retried.
 */
const char *
occ_citus_prepare_commit(void)
{
	occ_citus_commit_whole();
	if (occ_citus_hidden)
		return "pg_occ cannot see whether Citus committed work of this transaction on other nodes before this node's commit (its functions are hidden in this build of Citus), and it may have";
	if (occ_citus_in_transaction == NULL || !occ_citus_in_transaction())
		return NULL;
	if (occ_citus_uses_2pc != NULL && occ_citus_uses_2pc())
		return NULL;
	return "Citus commits the work of a transaction that wrote on one other node there, before this node's commit, and it may have committed already";
}
