/*-------------------------------------------------------------------------
 *
 * module.c
 *		Module entry point of pg_occ: the settings, and the shared memory.
 *
 * Loading the library defines the occ.* settings and installs the hooks:
 * the executor's and ProcessUtility's, that see which foreign tables an
 * attempt writes to (foreign.c) and what a body leaves in its session
 * (session.c), and those that queue the transactions that set occ.key
 * (client.c).  Loaded through
 * shared_preload_libraries, it also sets up the shared memory of the
 * modules that have some: occ.stats (stats.c), the temperature of queue
 * mode's keys (temperature.c), what the learner found (learner.c) and the
 * retry budget (budget.c), batch mode's queue (batch.c), the rows with
 * reservations (escrow.c) and the fold workers' slots (fold.c), through one
 * pair of hooks that asks each module its size and has it initialise its
 * part.  Loaded any other way (CREATE EXTENSION, the first call),
 * everything but the statistics and the budget works, and queue mode queues
 * a call only after its first failure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "pg_occ.h"
#include "attempt/attempt.h"
#include "batch/batch.h"
#include "escrow/escrow.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "retry/retry.h"
#include "stats/stats.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type occ_prev_shmem_request_hook = NULL;
static shmem_startup_hook_type occ_prev_shmem_startup_hook = NULL;

/* occ_shmem_request: reserve the modules' shared memory and our lock */
static void
occ_shmem_request(void)
{
	Size		size = 0;

	if (occ_prev_shmem_request_hook)
		occ_prev_shmem_request_hook();
	size = add_size(size, occ_stats_shmem_size());
	size = add_size(size, occ_temperature_shmem_size());
	size = add_size(size, occ_learner_shmem_size());
	size = add_size(size, occ_budget_shmem_size());
	size = add_size(size, occ_batch_shmem_size());
	size = add_size(size, occ_escrow_shmem_size());
	size = add_size(size, occ_fold_shmem_size());
	RequestAddinShmemSpace(size);
	RequestNamedLWLockTranche("pg_occ", 1);
	occ_learner_shmem_request();
	occ_batch_shmem_request();
	occ_escrow_shmem_request();
}

/* occ_shmem_startup: have each module create or attach to its part */
static void
occ_shmem_startup(void)
{
	if (occ_prev_shmem_startup_hook)
		occ_prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	occ_stats_shmem_init();
	occ_temperature_shmem_init();
	occ_learner_shmem_init();
	occ_budget_shmem_init();
	occ_batch_shmem_init();
	occ_escrow_shmem_init();
	occ_fold_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * _PG_init: define the settings, install the hooks; hook shared
 * memory when preloading
 */
void
_PG_init(void)
{
	occ_define_gucs();
	occ_foreign_init();
	occ_client_init();
	occ_ddl_init();
	occ_reserve_update_init();
	if (!process_shared_preload_libraries_in_progress)
		return;
	occ_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = occ_shmem_request;
	occ_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = occ_shmem_startup;
	occ_fold_register_launcher();
}
