/*-------------------------------------------------------------------------
 *
 * fold.c
 *		The fold: a background worker per database that moves committed
 *		reservations from the ledger into their rows.
 *
 * A reservation commits as a row of occ.reservation_ledger (reserve.c); the
 * worker of its database applies the committed ledger rows of each column
 * (fold_apply.c: one transaction per column, a subtransaction per row)
 * every occ.fold_interval.  A plain SELECT of a reservable column thus
 * shows a committed value at most about one interval old;
 * occ.reserved_value() the latest.  A row that cannot be folded (locked for
 * longer than the fold waits, gone, a constraint of its owner's) keeps its
 * ledger rows, is shown by occ.reservations (fold_failures, fold_error) and
 * logged once; the other rows are folded.  A column that is not reservable
 * (any more, or not yet: a restore's ledger rows before its guard) is
 * left alone, and logged once.
 *
 * The worker runs as the bootstrap superuser in a database whose owner may
 * set its settings (ALTER DATABASE ... SET) and create objects of any name:
 * before its first query it pins every setting its work depends on (its
 * search_path to pg_catalog, pg_temp; read committed; no timeout but its
 * own lock_timeout; not read-only; origin replication role), takes the
 * ledger only as a member of this database's pg_occ (ledger.c), reads and
 * deletes its rows through the heap, and runs the one UPDATE of a row as
 * the table's owner (fold_apply.c).
 *
 * The first commit of a reservation in a database starts its worker; the
 * worker exits when its ledger has stayed empty for OCC_FOLD_IDLE_ROUNDS
 * intervals with no reservation committed meanwhile (so that it holds no
 * database that DROP DATABASE waits for).  One that ends otherwise (an
 * error, a termination) leaves its slot marked, and the launcher
 * (fold_launcher.c) starts it again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
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
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"
#include "fold_slots.h"

PGDLLEXPORT void occ_fold_main(Datum arg);

/* intervals without anything to fold after which a worker exits */
#define OCC_FOLD_IDLE_ROUNDS 20

/* how long a table whose fold failed waits for its next one */
#define OCC_FOLD_FAILED_USEC USECS_PER_SEC

/*
 * how long the worker folds one table before it turns to the next: the row
 * being folded then is cancelled (57014, which occ.reservations shows),
 * the rows folded before it are kept, and the table has its next turn in
 * the next round.  A table's own code (a CHECK, a trigger) that takes long,
 * or waits on purpose, delays the other tables' folds by this much a round,
 * not for ever.
 */
#define OCC_FOLD_TURN_MS 1000

/* how long a row stays locked (or cut) before its fold's failure is logged */
#define OCC_FOLD_LOG_LOCKED_USEC USECS_PER_SEC

static OccFoldSlot *occ_fold_mine = NULL;	/* the worker's slot */
static bool occ_fold_connected = false; /* the worker's database is there */

/* occ_fold_unmark: the fold under way, if any, has ended */
static void
occ_fold_unmark(void)
{
	SpinLockAcquire(&occ_fold->mutex);
	if (occ_fold_mine->folding != InvalidOid)
		occ_fold_mine->generation++;
	occ_fold_mine->folding = InvalidOid;
	SpinLockRelease(&occ_fold->mutex);
}

/*
 * occ_fold_exit: the worker leaves its slot other than idle (an error, a
 * termination): marked for the launcher to start it again, unless its
 * database could not be reached (dropped), whose slot is freed
 */
static void
occ_fold_exit(int code, Datum arg)
{
	if (occ_fold_mine == NULL)
		return;
	occ_fold_unmark();
	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine->pid = 0;
	occ_fold_mine->starting = 0;
	occ_fold_mine->restart = occ_fold_connected;
	if (!occ_fold_connected)
		occ_fold_mine->dbid = InvalidOid;
	SpinLockRelease(&occ_fold->mutex);
	occ_fold_mine = NULL;
}

/*
 * occ_fold_pin_settings: the settings that the fold's work depends on, over
 * whatever the database's and the role's settings say
 */
static void
occ_fold_pin_settings(void)
{
	static const char *const settings[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_deferrable", "off"},
		{"session_replication_role", "origin"},
		{"statement_timeout", "0"},
		{"lock_timeout", "50ms"},
		{"idle_in_transaction_session_timeout", "0"},
		{"transaction_timeout", "0"},	/* 17 on */
		{"row_security", "on"},
		{"synchronous_commit", "on"},
	};

	for (int i = 0; i < lengthof(settings); i++)
		if (GetConfigOption(settings[i][0], true, false) != NULL)
			(void) set_config_option(settings[i][0], settings[i][1], PGC_SUSET, PGC_S_OVERRIDE,
									 GUC_ACTION_SET, true, 0, false);
}

/* a row whose fold failed (attnum 0, key "": the whole table's), since when */
typedef struct OccFoldFailure
{
	Oid			relid;
	AttrNumber	attnum;
	char		key[OCC_ESCROW_KEYLEN];
	TimestampTz since;			/* the first failure */
	TimestampTz last;			/* the latest */
	bool		logged;
} OccFoldFailure;

static HTAB *occ_fold_failures = NULL;

/* the memory of a round of folds, reset before the next */
static MemoryContext occ_fold_round = NULL;

/*
 * occ_fold_report: a row's fold succeeded (edata NULL) or failed: shown by
 * occ.reservations, and logged once (a lock held by another, or the end of
 * the table's turn, only if the row still fails a second later)
 */
static void
occ_fold_report(Oid relid, AttrNumber attnum, const char *key, ErrorData *edata)
{
	OccFoldFailure probe;
	OccFoldFailure *f;
	bool		found;
	TimestampTz now = GetCurrentTimestamp();

	memset(&probe, 0, sizeof(probe));
	probe.relid = relid;
	probe.attnum = attnum;
	strlcpy(probe.key, key, OCC_ESCROW_KEYLEN);
	if (edata == NULL)
	{
		hash_search(occ_fold_failures, &probe, HASH_REMOVE, NULL);
		occ_escrow_report_fold(relid, attnum, key, NULL);
		return;
	}
	occ_escrow_report_fold(relid, attnum, key,
						   psprintf("%s: %s", unpack_sql_state(edata->sqlerrcode), edata->message));
	f = hash_search(occ_fold_failures, &probe, HASH_ENTER, &found);
	if (!found)
	{
		f->since = now;
		f->logged = false;
	}
	f->last = now;
	if (!f->logged && ((edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
						edata->sqlerrcode != ERRCODE_QUERY_CANCELED) ||
					   now - f->since >= OCC_FOLD_LOG_LOCKED_USEC))
	{
		char	   *relname = IsTransactionState() ? get_rel_name(relid) : NULL;

		ereport(LOG,
				(errmsg("pg_occ could not fold the reservations of %s%s of %s%s%s: %s",
						*key ? "key " : "a column", key, relname ? "\"" : "table ",
						relname ? relname : psprintf("%u", relid), relname ? "\"" : "",
						edata->message),
				 errdetail("SQLSTATE %s; they stay in occ.reservation_ledger and are tried again; occ.reservations shows the row.",
						   unpack_sql_state(edata->sqlerrcode))));
		f->logged = true;
	}
	FreeErrorData(edata);
}

/*
 * occ_fold_column: fold the ledger rows of (relid, col) in one transaction;
 * those of a table or column dropped since are dropped with it, those of a
 * column not reservable are left
 */
static void
occ_fold_column(Oid relid, const char *col)
{
	Relation	rel;

	/* the table's lock before anything else: what exists now stays until commit */
	rel = try_table_open(relid, RowExclusiveLock);
	if (rel == NULL || get_attnum(relid, col) == InvalidAttrNumber)
	{
		Relation	ledger = occ_ledger_open(RowExclusiveLock);

		occ_ledger_delete_rows(ledger, relid, rel == NULL ? NULL : col);
		table_close(ledger, NoLock);
	}
	else if (!occ_reservable_declared(rel, col))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" is not reservable", col),
				 errhint("Its ledger rows are folded once occ.make_reservable() declares it (a restore's, once its guard trigger is restored).")));
	else
		(void) occ_fold_apply(rel, col, true, occ_fold_report);
	if (rel != NULL)
		table_close(rel, NoLock);
}

/*
 * occ_fold_turn_end: the end of a table's turn: its timer stopped, and a
 * cancel that the timer sent after the turn's work was done dropped
 */
static void
occ_fold_turn_end(void)
{
	disable_timeout(STATEMENT_TIMEOUT, true);
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
		QueryCancelPending = false;
}

/*
 * occ_fold_guarded: fold (relid, col) unless its last fold failed less than
 * OCC_FOLD_FAILED_USEC ago; a failure of the whole column (its table
 * locked, its declaration broken) is reported and ends only its fold
 */
static void
occ_fold_guarded(Oid relid, const char *col)
{
	OccFoldFailure probe;
	OccFoldFailure *last;

	memset(&probe, 0, sizeof(probe));
	probe.relid = relid;
	last = hash_search(occ_fold_failures, &probe, HASH_FIND, NULL);
	if (last != NULL && GetCurrentTimestamp() - last->last < OCC_FOLD_FAILED_USEC)
		return;
	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine->folding = relid;
	SpinLockRelease(&occ_fold->mutex);
	StartTransactionCommand();
	PG_TRY();
	{
		pgstat_report_activity(STATE_RUNNING, "pg_occ fold");
		PushActiveSnapshot(GetTransactionSnapshot());
		enable_timeout_after(STATEMENT_TIMEOUT, OCC_FOLD_TURN_MS);
		occ_fold_column(relid, col);
		occ_fold_turn_end();
		PopActiveSnapshot();
		CommitTransactionCommand();
		hash_search(occ_fold_failures, &probe, HASH_REMOVE, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		occ_fold_turn_end();
		MemoryContextSwitchTo(occ_fold_round);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		RESUME_INTERRUPTS();
		occ_fold_report(relid, 0, "", edata);
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	occ_fold_unmark();
}

/*
 * occ_fold_all: fold every (table, column) with ledger rows; false when
 * there were none, or pg_occ is not installed here (any more)
 */
static bool
occ_fold_all(void)
{
	List	   *rels = NIL;
	List	   *cols = NIL;
	ListCell   *lr,
			   *lc;
	Relation	ledger;
	TableScanDesc scan;
	HeapTuple	tuple;

	StartTransactionCommand();
	if (!OidIsValid(occ_ledger_oid()))
	{
		CommitTransactionCommand();
		return false;
	}
	PushActiveSnapshot(GetTransactionSnapshot());
	ledger = occ_ledger_open(AccessShareLock);
	scan = occ_table_beginscan(ledger, GetActiveSnapshot(), 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		OccLedgerRow row;
		bool		seen = false;
		MemoryContext old;

		occ_ledger_row(ledger, tuple, &row);
		forboth(lr, rels, lc, cols)
			seen |= lfirst_oid(lr) == row.relid && strcmp(lfirst(lc), row.col) == 0;
		if (seen)
			continue;
		old = MemoryContextSwitchTo(occ_fold_round);
		rels = lappend_oid(rels, row.relid);
		cols = lappend(cols, pstrdup(row.col));
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(ledger, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(occ_fold_round);
	forboth(lr, rels, lc, cols)
		occ_fold_guarded(lfirst_oid(lr), lfirst(lc));
	/* the counts of the ledger's deletes, for autovacuum */
	pgstat_report_stat(false);
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

/* occ_fold_take_slot: the worker of dbid takes its slot; false if another runs */
static bool
occ_fold_take_slot(Oid dbid)
{
	SpinLockAcquire(&occ_fold->mutex);
	occ_fold_mine = occ_fold_slot(dbid, true);
	if (occ_fold_mine != NULL && occ_fold_mine->pid == 0)
	{
		occ_fold_mine->pid = MyProcPid;
		occ_fold_mine->restart = false;
	}
	else
		occ_fold_mine = NULL;	/* another runs already */
	SpinLockRelease(&occ_fold->mutex);
	return occ_fold_mine != NULL;
}

/* occ_fold_main: the worker of database arg */
void
occ_fold_main(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);
	int			idle = 0;
	HASHCTL		ctl;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	if (!occ_fold_take_slot(dbid))
		proc_exit(0);
	before_shmem_exit(occ_fold_exit, (Datum) 0);
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	occ_fold_connected = true;
	occ_fold_pin_settings();
	ctl.keysize = offsetof(OccFoldFailure, since);
	ctl.entrysize = sizeof(OccFoldFailure);
	occ_fold_failures = hash_create("pg_occ fold failures", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	occ_fold_round = AllocSetContextCreate(TopMemoryContext, "pg_occ fold round",
										   ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		uint64		commits;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			occ_fold_pin_settings();
		}
		SpinLockAcquire(&occ_fold->mutex);
		commits = occ_fold_mine->commits;
		SpinLockRelease(&occ_fold->mutex);
		MemoryContextReset(occ_fold_round);
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
