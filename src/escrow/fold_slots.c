/*-------------------------------------------------------------------------
 *
 * fold_slots.c
 *		The fold workers' slots in shared memory, one per database: how a
 *		worker is started, and what the slots tell backends.
 *
 * A commit with reservations starts its database's worker (fold.c) unless
 * it runs.  The generation of each database's slot tells escrow_load.c's
 * loads that they read no half fold: a fold of a table marks the slot
 * before its first change and bumps the generation after its commit; a load
 * of a row of that table retries unless the generation is the same before
 * and after and no fold of the table was marked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "escrow/escrow.h"
#include "fold_slots.h"

/* how long a worker that failed to start keeps others from trying */
#define OCC_FOLD_RETRY_USEC (10 * USECS_PER_SEC)

OccFoldShared *occ_fold = NULL;

/* occ_fold_shmem_size: the slots' shared memory */
Size
occ_fold_shmem_size(void)
{
	return sizeof(OccFoldShared);
}

/* occ_fold_shmem_init: create or attach to the slots */
void
occ_fold_shmem_init(void)
{
	bool		found;

	occ_fold = ShmemInitStruct("pg_occ fold", sizeof(OccFoldShared), &found);
	if (!found)
	{
		memset(occ_fold, 0, sizeof(OccFoldShared));
		SpinLockInit(&occ_fold->mutex);
	}
}

/* occ_fold_slot: the slot of database dbid, taken if free (under mutex); NULL if none */
OccFoldSlot *
occ_fold_slot(Oid dbid, bool take)
{
	OccFoldSlot *free = NULL;

	for (int i = 0; i < OCC_FOLD_DBS; i++)
	{
		OccFoldSlot *slot = &occ_fold->slots[i];

		if (slot->dbid == dbid)
			return slot;
		if (free == NULL && slot->pid == 0 && slot->starting == 0 && slot->folding == InvalidOid &&
			!slot->restart)
			free = slot;
	}
	if (!take || free == NULL)
		return NULL;
	free->dbid = dbid;
	free->commits = 0;
	return free;
}

/*
 * occ_fold_stable_begin: may a load of a row of relid read now?  False while
 * a fold of relid is under way in this database; *generation to give back
 * to occ_fold_stable_end
 */
bool
occ_fold_stable_begin(Oid relid, uint64 *generation)
{
	OccFoldSlot *slot;
	bool		stable = true;

	*generation = 0;
	SpinLockAcquire(&occ_fold->mutex);
	slot = occ_fold_slot(MyDatabaseId, false);
	if (slot != NULL)
	{
		*generation = slot->generation;
		stable = slot->folding != relid;
	}
	SpinLockRelease(&occ_fold->mutex);
	return stable;
}

/* occ_fold_stable_end: did no fold of relid begin or end since the begin? */
bool
occ_fold_stable_end(Oid relid, uint64 generation)
{
	OccFoldSlot *slot;
	bool		stable = true;

	SpinLockAcquire(&occ_fold->mutex);
	slot = occ_fold_slot(MyDatabaseId, false);
	if (slot != NULL)
		stable = slot->folding != relid && slot->generation == generation;
	SpinLockRelease(&occ_fold->mutex);
	return stable;
}

/*
 * occ_fold_bgworker: a worker of pg_occ's, connected (to a database or
 * none), started once recovery has finished: its function, type (and name),
 * and restart time
 */
void
occ_fold_bgworker(BackgroundWorker *worker, const char *function, const char *type, int restart)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart;
	strlcpy(worker->bgw_library_name, "pg_occ", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker->bgw_name, type, BGW_MAXLEN);
	strlcpy(worker->bgw_type, type, BGW_MAXLEN);
}

/*
 * occ_fold_start: start database dbid's worker unless it runs or was asked
 * for less than OCC_FOLD_RETRY_USEC ago (counting a commit of reservations
 * if commit); false when no worker slot was free
 */
bool
occ_fold_start(Oid dbid, bool commit)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	OccFoldSlot *slot;
	TimestampTz now = GetCurrentTimestamp();
	bool		start = false;

	SpinLockAcquire(&occ_fold->mutex);
	slot = occ_fold_slot(dbid, true);
	if (slot != NULL)
	{
		slot->commits += commit ? 1 : 0;
		if (slot->pid == 0 &&
			(slot->starting == 0 || now - slot->starting > OCC_FOLD_RETRY_USEC))
		{
			slot->starting = now;
			start = true;
		}
	}
	SpinLockRelease(&occ_fold->mutex);
	if (!start)
		return true;
	occ_fold_bgworker(&worker, "occ_fold_main", "pg_occ fold", BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_occ fold of database %u", dbid);
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	/* failed, it is tried again after the retry delay (starting stays) */
	return RegisterDynamicBackgroundWorker(&worker, &handle);
}

/*
 * occ_fold_committed: a transaction of this database committed reservations
 * (or a load found ledger rows): start the database's worker unless it runs
 */
void
occ_fold_committed(void)
{
	if (occ_fold == NULL)
		return;
	if (!occ_fold_start(MyDatabaseId, true))
		ereport(LOG,
				(errmsg("pg_occ could not start the fold worker of database %u", MyDatabaseId),
				 errhint("Raise max_worker_processes.")));
}
