/*-------------------------------------------------------------------------
 *
 * fold.c
 *		The fold: a background worker per database that moves committed
 *		reservations from the ledger into their rows.
 *
 * A reservation commits as a row of occ.reservation_ledger (escrow.c); the
 * worker of its database deletes the committed ledger rows of a column and
 * adds their sum to each row, in one transaction per (table, column), every
 * occ.fold_interval.  A plain SELECT of a reservable column thus shows a
 * committed value at most about one interval old; occ.reserved_value() the
 * latest.  The fold locks each row it changes only for the moment of its
 * UPDATE (lock_timeout 100ms: a row locked longer is folded next time), and
 * runs the UPDATE as the table's owner, in a restricted security context,
 * with pg_catalog as its search_path (no one's operator or cast of the
 * same name runs in its place).
 *
 * The first commit of a reservation in a database starts its worker; the
 * worker exits when its ledger has stayed empty for OCC_FOLD_IDLE_ROUNDS
 * intervals with no reservation committed meanwhile (so that it holds no
 * database that DROP DATABASE waits for).  At startup, and again after a
 * crash, a launcher starts a worker for each database, so that reservations
 * committed before and not folded are folded without waiting for the next
 * one; a worker that finds nothing to fold and no reservation committed
 * since startup exits at once.
 *
 * The generation of each database's slot tells escrow.c's loads that they
 * read no half fold: a fold of a table marks the slot before its first
 * change and bumps the generation after its commit; a load of a row of
 * that table retries unless the generation is the same before and after
 * and no fold of the table was marked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pg_occ.h"

PGDLLEXPORT void occ_fold_main(Datum arg);
PGDLLEXPORT void occ_fold_launcher_main(Datum arg);

/* databases with a worker at once, at most */
#define OCC_FOLD_DBS 64

/* intervals without anything to fold after which a worker exits */
#define OCC_FOLD_IDLE_ROUNDS 20

/* how long a worker that failed to start keeps others from trying */
#define OCC_FOLD_RETRY_USEC (10 * USECS_PER_SEC)

/* how long a table whose fold failed waits for its next one */
#define OCC_FOLD_FAILED_USEC USECS_PER_SEC

/*
 * The launcher's restart time, in seconds: it exits with status 1 once it
 * has started the workers, and the postmaster starts it again after this
 * long (23 days; its milliseconds must fit an int) or at once after a crash
 * (a crash resets every worker's restart time; one that exits with status
 * 0 or is never restarted would be forgotten, and not run after a crash).
 */
#define OCC_FOLD_LAUNCHER_RESTART_S 2000000

int			occ_fold_interval = 100;

typedef struct OccFoldSlot
{
	Oid			dbid;			/* InvalidOid: free */
	pid_t		pid;			/* the worker's, 0 when none runs */
	TimestampTz starting;		/* when one was asked for, 0 when not */
	uint64		commits;		/* commits with reservations, ever */
	Oid			folding;		/* the table whose fold is under way */
	uint64		generation;		/* folds ended */
} OccFoldSlot;

typedef struct OccFoldShared
{
	slock_t		mutex;			/* every slot */
	OccFoldSlot slots[OCC_FOLD_DBS];
} OccFoldShared;

static OccFoldShared *occ_fold = NULL;
static OccFoldSlot *occ_fold_mine = NULL;	/* the worker's slot */

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
static OccFoldSlot *
occ_fold_slot(Oid dbid, bool take)
{
	OccFoldSlot *free = NULL;

	for (int i = 0; i < OCC_FOLD_DBS; i++)
	{
		OccFoldSlot *slot = &occ_fold->slots[i];

		if (slot->dbid == dbid)
			return slot;
		if (free == NULL && slot->pid == 0 && slot->starting == 0 && slot->folding == InvalidOid)
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

/* occ_fold_worker: the worker of database dbid, to register */
static void
occ_fold_worker(BackgroundWorker *worker, Oid dbid)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker->bgw_library_name, "pg_occ", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, "occ_fold_main", BGW_MAXLEN);
	snprintf(worker->bgw_name, BGW_MAXLEN, "pg_occ fold of database %u", dbid);
	strlcpy(worker->bgw_type, "pg_occ fold", BGW_MAXLEN);
	worker->bgw_main_arg = ObjectIdGetDatum(dbid);
}

/*
 * occ_fold_start: start database dbid's worker unless it runs or was asked
 * for less than OCC_FOLD_RETRY_USEC ago (counting a commit of reservations
 * if commit); false when no worker slot was free
 */
static bool
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
	occ_fold_worker(&worker, dbid);
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

/* occ_fold_unmark: the fold under way, if any, has ended */
static void
occ_fold_unmark(void)
{
	SpinLockAcquire(&occ_fold->mutex);
	if (occ_fold_mine->folding != InvalidOid)
		occ_fold_mine->generation++;
	occ_fold_mine->folding = InvalidOid;
	SpinLockRelease(&occ_fold->mutex);
	occ_folding = false;
}

/* occ_fold_exit: the worker leaves its slot */
static void
occ_fold_exit(int code, Datum arg)
{
	if (occ_fold_mine == NULL)
		return;
	occ_fold_unmark();
	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine->pid = 0;
	occ_fold_mine->starting = 0;
	SpinLockRelease(&occ_fold->mutex);
	occ_fold_mine = NULL;
}

/* occ_fold_sql: run sql with arguments; error unless it returns rc */
static void
occ_fold_sql(const char *sql, int nargs, Oid *types, Datum *values, int rc)
{
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0) != rc)
		elog(ERROR, "pg_occ fold: unexpected result of %s", sql);
}

/*
 * occ_fold_rows: add each key's sum to its row of rel (locked), as the
 * table's owner; error (the fold rolls back) if a row is missing
 */
static void
occ_fold_rows(Relation rel, const char *col, SPITupleTable *sums, uint64 n)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			save_user;
	int			save_sec;
	Oid			pkindex = occ_primary_key_index(rel);
	Relation	idx;
	AttrNumber	pkatt;
	char	   *sql;
	Oid			types[2] = {TEXTOID, INT8OID};
	SPIPlanPtr	plan;

	if (!OidIsValid(pkindex))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_occ fold: table \"%s\" has no primary key", RelationGetRelationName(rel)),
				 errhint("Its reservations stay in occ.reservation_ledger until its primary key is back.")));
	idx = index_open(pkindex, AccessShareLock);
	pkatt = idx->rd_index->indkey.values[0];
	index_close(idx, AccessShareLock);
	sql = psprintf("UPDATE %s SET %s = %s + $2 WHERE %s = $1::%s",
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel)),
				   quote_identifier(col), quote_identifier(col),
				   quote_identifier(get_attname(relid, pkatt, false)),
				   format_type_be_qualified(get_atttype(relid, pkatt)));
	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	plan = SPI_prepare(sql, 2, types);
	occ_folding = true;
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		values[2];

		values[0] = SPI_getbinval(sums->vals[i], sums->tupdesc, 1, &isnull);
		values[1] = SPI_getbinval(sums->vals[i], sums->tupdesc, 2, &isnull);
		if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE || SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA_FOUND),
					 errmsg("pg_occ fold: no row of \"%s\" has the key %s",
							RelationGetRelationName(rel), TextDatumGetCString(values[0])),
					 errhint("Reservations of a row that has gone stay in occ.reservation_ledger.")));
	}
	occ_folding = false;
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * occ_fold_table: fold the committed ledger rows of column col of rel
 * (locked) in the current transaction, SPI connected
 */
static void
occ_fold_table(Relation rel, const char *col)
{
	Oid			types[2] = {OIDOID, NAMEOID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	values[1] = DirectFunctionCall1(namein, CStringGetDatum(col));
	occ_fold_sql("WITH d AS (DELETE FROM occ.reservation_ledger WHERE rel = $1 AND col = $2"
				 " RETURNING key, delta)"
				 " SELECT key, sum(delta)::bigint FROM d GROUP BY key ORDER BY key",
				 2, types, values, SPI_OK_SELECT);
	if (SPI_processed > 0)
		occ_fold_rows(rel, col, SPI_tuptable, SPI_processed);
}

/*
 * occ_fold_now: fold every reservable column of rel in the current
 * transaction, for ALTER TABLE ... ADD CHECK (declare.c), which validates
 * the rows' values: they must be the committed ones, or a bound that the
 * committed value breaks would be taken, and the fold fail ever after.
 * rel is locked in AccessExclusiveLock, so no load reads it meanwhile.  The
 * ledger's rows are deleted as its owner (the worker's role), the rows
 * updated as the table's, with pg_catalog as the search_path.
 */
void
occ_fold_now(Relation rel, Oid ledger_owner)
{
	TriggerDesc *td = rel->trigdesc;
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;

	GetUserIdAndSecContext(&save_user, &save_sec);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(ledger_owner, save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	SPI_connect();
	PG_TRY();
	{
		for (int i = 0; td != NULL && i < td->numtriggers; i++)
			if (occ_reservable_is_guard(&td->triggers[i], NULL) && td->triggers[i].tgnargs == 1)
				occ_fold_table(rel, td->triggers[i].tgargs[0]);
	}
	PG_CATCH();
	{
		/* the guard lets no other UPDATE through */
		occ_folding = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	AtEOXact_GUC(true, save_nestlevel);
}

/*
 * occ_fold_one: fold the ledger rows of (relid, col) in one transaction;
 * those of a table or column dropped since are dropped with it
 */
static void
occ_fold_one(Oid relid, const char *col)
{
	Oid			types[2] = {OIDOID, NAMEOID};
	Datum		values[2];
	Relation	rel;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = DirectFunctionCall1(namein, CStringGetDatum(col));
	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine->folding = relid;
	SpinLockRelease(&occ_fold->mutex);

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "pg_occ fold");
	/* wait little for a row's lock; resolve names in pg_catalog only */
	occ_fold_sql("SET LOCAL lock_timeout = '100ms'", 0, NULL, NULL, SPI_OK_UTILITY);
	occ_fold_sql("SET LOCAL search_path = pg_catalog, pg_temp", 0, NULL, NULL, SPI_OK_UTILITY);

	/*
	 * The table's lock before anything else: a table or column that exists
	 * now (the lock brought the catalog's latest changes) stays until the
	 * fold commits.
	 */
	rel = try_table_open(relid, RowExclusiveLock);
	if (rel == NULL)
		occ_fold_sql("DELETE FROM occ.reservation_ledger WHERE rel = $1", 1, types, values,
					 SPI_OK_DELETE);
	else if (get_attnum(relid, col) == InvalidAttrNumber)
		occ_fold_sql("DELETE FROM occ.reservation_ledger WHERE rel = $1 AND col = $2", 2, types, values,
					 SPI_OK_DELETE);
	else
		occ_fold_table(rel, col);
	if (rel != NULL)
		table_close(rel, NoLock);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	occ_fold_unmark();
}

/* a table whose last fold failed, and when */
typedef struct OccFoldFailure
{
	Oid			relid;
	TimestampTz at;
} OccFoldFailure;

/*
 * occ_fold_guarded: fold (relid, col) unless its last fold failed less than
 * OCC_FOLD_FAILED_USEC ago; a failure (a row gone, a lock held too long, a
 * bound that the owner's own ledger rows would break) is logged and ends
 * only this table's fold, never the others'
 */
static void
occ_fold_guarded(Oid relid, const char *col)
{
	static HTAB *failed = NULL;
	OccFoldFailure *last;
	TimestampTz now = GetCurrentTimestamp();

	if (failed == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(OccFoldFailure);
		failed = hash_create("pg_occ failed folds", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	last = hash_search(failed, &relid, HASH_FIND, NULL);
	if (last != NULL && now - last->at < OCC_FOLD_FAILED_USEC)
		return;
	PG_TRY();
	{
		occ_fold_one(relid, col);
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		occ_fold_unmark();
		RESUME_INTERRUPTS();
		last = hash_search(failed, &relid, HASH_ENTER, NULL);
		last->at = now;
	}
	PG_END_TRY();
}

/*
 * occ_fold_all: fold every (table, column) with ledger rows; false when
 * there were none, or pg_occ is not installed here any more
 */
static bool
occ_fold_all(void)
{
	List	   *rels = NIL;
	List	   *cols = NIL;
	ListCell   *lr,
			   *lc;
	Oid			nsp;

	StartTransactionCommand();
	nsp = get_namespace_oid("occ", true);
	if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("reservation_ledger", nsp)))
	{
		CommitTransactionCommand();
		return false;
	}
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	occ_fold_sql("SELECT rel::oid, col::text FROM occ.reservation_ledger GROUP BY 1, 2",
				 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		rels = lappend_oid(rels, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																SPI_tuptable->tupdesc, 1, &isnull)));
		cols = lappend(cols, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	forboth(lr, rels, lc, cols)
		occ_fold_guarded(lfirst_oid(lr), lfirst(lc));
	list_free(rels);
	list_free_deep(cols);
	return rels != NIL;
}

/*
 * occ_fold_idle_exit: leave the slot if no reservation committed since
 * commits was read; true when the worker is to exit
 */
static bool
occ_fold_idle_exit(uint64 commits)
{
	bool		leave;

	SpinLockAcquire(&occ_fold->mutex);
	leave = occ_fold_mine->commits == commits;
	if (leave)
	{
		occ_fold_mine->pid = 0;
		occ_fold_mine->starting = 0;
	}
	SpinLockRelease(&occ_fold->mutex);
	if (leave)
		occ_fold_mine = NULL;
	return leave;
}

/* occ_fold_main: the worker of database arg */
void
occ_fold_main(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);
	sigjmp_buf	local_sigjmp_buf;
	int			idle = 0;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine = occ_fold_slot(dbid, true);
	if (occ_fold_mine != NULL && occ_fold_mine->pid == 0)
		occ_fold_mine->pid = MyProcPid;
	else
		occ_fold_mine = NULL;	/* another runs already */
	SpinLockRelease(&occ_fold->mutex);
	if (occ_fold_mine == NULL)
		proc_exit(0);
	before_shmem_exit(occ_fold_exit, (Datum) 0);
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);

	/* an error ends the round: the fold rolls back and is tried again later */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		/* the callbacks of the failed statement (SPI's) are on a stack gone */
		error_context_stack = NULL;
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		occ_fold_unmark();
		RESUME_INTERRUPTS();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L * occ_fold_interval, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
	{
		uint64		commits;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		SpinLockAcquire(&occ_fold->mutex);
		commits = occ_fold_mine->commits;
		SpinLockRelease(&occ_fold->mutex);
		idle = occ_fold_all() ? 0 : idle + 1;
		/* started by the launcher where no reservation has committed: done */
		if (idle >= (commits == 0 ? 1 : OCC_FOLD_IDLE_ROUNDS) && occ_fold_idle_exit(commits))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 occ_fold_interval, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

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

/*
 * occ_fold_launcher_main: start the worker of each database (a few tries
 * each, while worker slots are short), then exit with status 1 (see
 * OCC_FOLD_LAUNCHER_RESTART_S)
 */
void
occ_fold_launcher_main(Datum arg)
{
	List	   *dbids;
	ListCell   *lc;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	dbids = occ_fold_databases();
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
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 OCC_FOLD_RETRY_USEC / 1000 + 1000, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	proc_exit(1);
}

/* occ_fold_register_launcher: register the launcher (from _PG_init, preloading) */
void
occ_fold_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = OCC_FOLD_LAUNCHER_RESTART_S;
	strlcpy(worker.bgw_library_name, "pg_occ", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "occ_fold_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pg_occ fold launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pg_occ fold launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}
