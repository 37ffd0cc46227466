/*-------------------------------------------------------------------------
 *
 * fold_launcher.c
 *		The fold launcher: a background worker registered at preload that
 *		starts a fold worker in each database at startup (and after a
 *		crash), and starts again a worker that ended other than idle.
 *
 * Reservations committed and not folded when the server stopped or
 * crashed are folded without waiting for the next reservation of their
 * database: at startup the launcher starts each database's worker, which
 * exits at once where there is nothing to fold.  Then it stays, and every
 * second starts the worker of a database whose last worker ended with an
 * error or was terminated (fold.c marks its slot), so that what it had to
 * fold is not left until the next reservation.  It connects to no
 * database and runs no query: it reads pg_database, a shared catalog, and
 * the slots.  The postmaster starts it again after a crash.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"
#include "fold_slots.h"

PGDLLEXPORT void occ_fold_launcher_main(Datum arg);

/* how often the launcher looks for a worker to start again, in ms */
#define OCC_FOLD_LAUNCHER_NAP_MS 1000

/* the launcher's restart time after it ended other than by shutdown, in s */
#define OCC_FOLD_LAUNCHER_RESTART_S 5

/* occ_fold_databases: the databases that accept connections, in TopMemoryContext */
static List *
occ_fold_databases(void)
{
	List	   *dbids = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tuple = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		if (db->datallowconn && !db->datistemplate)
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			dbids = lappend_oid(dbids, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dbids;
}

/* occ_fold_launcher_nap: wait ms, or for the latch */
static void
occ_fold_launcher_nap(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* occ_fold_launch_all: start the worker of each database, a few tries each */
static void
occ_fold_launch_all(void)
{
	List	   *dbids = occ_fold_databases();
	ListCell   *lc;

	foreach(lc, dbids)
	{
		for (int tries = 1; !occ_fold_start(lfirst_oid(lc), false); tries++)
		{
			if (tries == 6)
			{
				ereport(LOG,
						(errmsg("pg_occ could not start the fold worker of database %u", lfirst_oid(lc)),
						 errhint("Raise max_worker_processes; the next reservation there starts it.")));
				break;
			}
			occ_fold_launcher_nap(10 * OCC_FOLD_LAUNCHER_NAP_MS);
		}
	}
	list_free(dbids);
}

/* occ_fold_relaunch: start the workers that ended other than idle */
static void
occ_fold_relaunch(void)
{
	Oid			dbids[OCC_FOLD_DBS];
	int			n = 0;

	SpinLockAcquire(&occ_fold->mutex);
	for (int i = 0; i < OCC_FOLD_DBS; i++)
		if (occ_fold->slots[i].restart && occ_fold->slots[i].pid == 0)
			dbids[n++] = occ_fold->slots[i].dbid;
	SpinLockRelease(&occ_fold->mutex);
	for (int i = 0; i < n; i++)
		(void) occ_fold_start(dbids[i], false);
}

/* occ_fold_launcher_main: the launcher */
void
occ_fold_launcher_main(Datum arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	occ_fold_launch_all();
	for (;;)
	{
		occ_fold_launcher_nap(OCC_FOLD_LAUNCHER_NAP_MS);
		occ_fold_relaunch();
	}
}

/* occ_fold_register_launcher: register the launcher (from _PG_init, preloading) */
void
occ_fold_register_launcher(void)
{
	BackgroundWorker worker;

	occ_fold_bgworker(&worker, "occ_fold_launcher_main", "pg_occ fold launcher", OCC_FOLD_LAUNCHER_RESTART_S);
	RegisterBackgroundWorker(&worker);
}
