/*-------------------------------------------------------------------------
 *
 * client.c
 *		Queueing the application's own transactions: SET LOCAL occ.key.
 *
 * Applications that run their transactions from the client (an ORM, round
 * trips, application logic between a read and a write) retry them in the
 * client.  A transaction that begins with
 *
 *		BEGIN ISOLATION LEVEL REPEATABLE READ;
 *		SET LOCAL occ.key = 'account:42';
 *
 * waits its turn on the gate of that key (gate.c: the same gate as
 * occ.retry's key argument and occ.gate()'s, through key.c's hash, so that
 * every kind of caller shares one FIFO queue) when the key is hot or when
 * this session's previous transaction with that key failed with a
 * retryable SQLSTATE (occ.retry_sqlstates), and holds it until the
 * transaction ends: it is a transaction-level lock, which commit, abort and
 * the backend's exit release.  SET LOCAL occ.key = 'account:1', 'account:2'
 * gives several keys, whose gates are taken in the one order of every
 * caller.  Nothing outlives the transaction but the session's memory of its
 * last failed keys, so it works through PgBouncer's transaction pooling.
 *
 * The wait must come before the transaction's snapshot: a transaction that
 * took its snapshot before waiting would, in REPEATABLE READ and
 * SERIALIZABLE, not see the commit of the transaction before it in the
 * queue, and fail all the same.  PostgreSQL takes no snapshot for SET
 * (PostgreSQL 15 source):
 *
 *	- simple protocol, postgres.c exec_simple_query(): a snapshot is pushed
 *	  for parse analysis only if analyze_requires_snapshot(), which is
 *	  stmt_requires_parse_analysis() (analyze.c): false for every utility
 *	  statement but DECLARE CURSOR, EXPLAIN, CREATE TABLE AS and CALL;
 *	- extended protocol (psycopg, node-postgres with parameters, JDBC):
 *	  exec_parse_message() has the same test; exec_bind_message() pushes one
 *	  only if the statement has parameters (SET takes none) or
 *	  analyze_requires_snapshot(); GetCachedPlan() revalidates a utility
 *	  statement without one (plancache.c, the same test);
 *	- execution, pquery.c: SET's portal is PORTAL_MULTI_QUERY, which
 *	  PortalStart() does not snapshot, and PortalRunUtility() sets one only
 *	  if PlannedStmtRequiresSnapshot(), false for TransactionStmt, LockStmt
 *	  and VariableSetStmt: "Transaction control, LOCK, and SET must *not* set
 *	  a snapshot, since they need to be executable at the start of a
 *	  transaction-snapshot-mode transaction without freezing a snapshot."
 *
 * So the ProcessUtility hook below waits before any snapshot of the
 * transaction, and the first statement after the SET takes the snapshot,
 * after the wait.  FirstSnapshotSet (snapmgr.c) says whether the
 * transaction has taken one already: then the SET is refused with an error,
 * never ignored.  A session SET, a SET outside a transaction block, and a
 * SET from a function or a procedure (not the top level) are refused too;
 * the setting's check hook (guc.c) refuses every other way to set it
 * (set_config(), a function's SET clause, ALTER ROLE ... SET).
 *
 * When the transaction ends, its outcome heats or cools the key's
 * temperature (temperature.c), as occ.retry's attempts do: a commit counts
 * as an ungated attempt (when it did not take the gate), an abort counts as
 * a failure only when the error that aborted it has a retryable SQLSTATE.
 * The SQLSTATE is that of the last ERROR the transaction reported, which
 * emit_log_hook sees: PostgreSQL calls it for every error it logs, which
 * with log_min_messages at its default (warning), or at error or below, is
 * every error.  With log_min_messages at log, fatal or panic, errors are not
 * logged and reach no hook: failures then do not heat keys, and a WARNING
 * says so, once per session.  The counts go to occ.key_stats (stats.c),
 * under each key of the transaction.
 *
 * Whether a transaction queues is decided as for occ.retry's first attempt
 * (policy.c); holding the gate is gate.c's.
 *
 * The application retries a keyed transaction whole after a serialization
 * failure, so none may leave part of it committed: on Citus, a SERIALIZABLE
 * one commits its work on other nodes in two phases, asked for at
 * pre-commit (citus.c), as occ.retry's attempts do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "portability/instr_time.h"
#include "tcop/utility.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "pg_occ.h"
#include "attempt/attempt.h"
#include "policy/policy.h"
#include "queue/queue.h"
#include "retry/retry.h"
#include "stats/stats.h"
#include "util/util.h"

/* keys whose last transaction in this session failed, remembered at most */
#define OCC_FAILED_KEYS 8

/* The running transaction's keys, from its SET LOCAL occ.key to its end */
typedef struct OccClientXact
{
	int			nkeys;			/* 0: the transaction has set no key */
	uint64	   *hashes;			/* each key once, in the order given */
	char	  **keys;			/* their text, for occ.key_stats */
	Oid			userid;			/* the role that set them */
	bool		gated;			/* took the gates of the keys */
	double		wait_ms;		/* waiting for them */
	int			sqlerrcode;		/* of the last error it reported, or 0 */
} OccClientXact;

/* A key whose last transaction in this session failed with a retryable error */
typedef struct OccFailedKey
{
	bool		used;
	uint64		key_hash;
} OccFailedKey;

static OccClientXact occ_xact;
static bool occ_warned_unlogged = false;	/* the WARNING below, once */
static MemoryContext occ_xact_cxt = NULL;	/* occ_xact's keys, reset at its end */
static OccFailedKey occ_failed[OCC_FAILED_KEYS];
static int	occ_failed_next = 0;	/* the slot to fill next, in a ring */

static ProcessUtility_hook_type occ_prev_process_utility = NULL;
static emit_log_hook_type occ_prev_emit_log = NULL;

/* occ_failed_find: the slot of a key that failed last time, or -1 */
static int
occ_failed_find(uint64 key_hash)
{
	for (int i = 0; i < OCC_FAILED_KEYS; i++)
		if (occ_failed[i].used && occ_failed[i].key_hash == key_hash)
			return i;
	return -1;
}

/*
 * occ_failed_note: remember whether the key's last transaction failed with
 * a retryable error; the oldest of OCC_FAILED_KEYS keys makes room
 */
static void
occ_failed_note(uint64 key_hash, bool failed)
{
	int			i = occ_failed_find(key_hash);

	if (!failed)
	{
		if (i >= 0)
			occ_failed[i].used = false;
		return;
	}
	if (i >= 0)
		return;
	occ_failed[occ_failed_next].used = true;
	occ_failed[occ_failed_next].key_hash = key_hash;
	occ_failed_next = (occ_failed_next + 1) % OCC_FAILED_KEYS;
}

/* occ_keys_contain: is key_hash one of keys? */
static bool
occ_keys_contain(const uint64 *keys, int nkeys, uint64 key_hash)
{
	for (int i = 0; i < nkeys; i++)
		if (keys[i] == key_hash)
			return true;
	return false;
}

/*
 * occ_client_keys: the keys of SET LOCAL occ.key = 'a', 'b', ..., each
 * once (each value spelled as SET spells it: a number is a key too), at
 * most OCC_KEYS_MAX; returns how many
 */
static int
occ_client_keys(VariableSetStmt *stmt, uint64 **hashes, char ***keys)
{
	int			n = 0;
	ListCell   *lc;
	Oid			owner = occ_key_owner();

	occ_key_check_count(list_length(stmt->args), "SET LOCAL occ.key");
	*hashes = palloc(sizeof(uint64) * list_length(stmt->args));
	*keys = palloc(sizeof(char *) * list_length(stmt->args));
	foreach(lc, stmt->args)
	{
		VariableSetStmt one = *stmt;
		char	   *key;
		uint64		key_hash;

		CHECK_FOR_INTERRUPTS();
		one.args = list_make1(lfirst(lc));
		key = ExtractSetVariableArgs(&one);
		key_hash = occ_key_hash(key, "occ.key", owner);
		if (occ_keys_contain(*hashes, n, key_hash))
			continue;
		(*hashes)[n] = key_hash;
		(*keys)[n++] = key;
	}
	return n;
}

/*
 * occ_client_same_keys: does SET LOCAL occ.key give the keys the
 * transaction has set already (in any order)?
 */
static bool
occ_client_same_keys(const uint64 *hashes, int nkeys)
{
	for (int i = 0; i < nkeys; i++)
		if (!occ_keys_contain(occ_xact.hashes, occ_xact.nkeys, hashes[i]))
			return false;
	for (int i = 0; i < occ_xact.nkeys; i++)
		if (!occ_keys_contain(hashes, nkeys, occ_xact.hashes[i]))
			return false;
	return true;
}

/*
 * occ_client_check: refuse a SET of occ.key that cannot queue its
 * transaction, with why and what to do
 */
static void
occ_client_check(VariableSetStmt *stmt, ProcessUtilityContext context)
{
	const char *hint = "Run SET LOCAL occ.key = '...' as the first statement after BEGIN.";

	if (!stmt->is_local)
		ereport(ERROR,
				(errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
				 errmsg("occ.key can only be set with SET LOCAL"),
				 errdetail("A key set for the session would outlive the transaction, and through a connection pooler pass to other clients."),
				 errhint("%s", hint)));
	if (context != PROCESS_UTILITY_TOPLEVEL)
		ereport(ERROR,
				(errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
				 errmsg("SET LOCAL occ.key can only be sent by the client, not run by a function or a procedure"),
				 errhint("%s", hint)));
	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("SET LOCAL occ.key can only be used in transaction blocks"),
				 errhint("%s", hint)));
	if (occ_xact.nkeys > 0)
		return;					/* set again: the keys are compared later */
	if (FirstSnapshotSet)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("SET LOCAL occ.key must be the first statement of the transaction"),
				 errdetail("The transaction has taken its snapshot: after waiting for the gate it would not see the commits of the transactions before it."),
				 errhint("%s", hint)));
	/* a gate taken in a subtransaction would go with its rollback */
	if (IsSubTransaction())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("SET LOCAL occ.key must be the first statement of the transaction, before any SAVEPOINT"),
				 errhint("%s", hint)));
}

/*
 * occ_client_check_logged: errors reach emit_log_hook only when the server
 * logs them: at log_min_messages error or below (LOG sorts below ERROR but
 * logs fewer messages); else say once that failures go unseen
 */
static void
occ_client_check_logged(void)
{
	if (occ_warned_unlogged || (occ_log_min_messages() != LOG && occ_log_min_messages() <= ERROR))
		return;
	occ_warned_unlogged = true;
	ereport(WARNING,
			(errmsg("failed transactions with occ.key go unseen while log_min_messages is \"%s\"",
					GetConfigOption("log_min_messages", false, false)),
			 errdetail("pg_occ reads the SQLSTATE of a failure from the server's log hook, which sees only the errors that are logged: the failures of these transactions neither heat their keys nor make this session's next transaction queue."),
			 errhint("Set log_min_messages to error or lower (its default is warning).")));
}

/*
 * occ_client_begin: the transaction has set its keys: take their gates, in
 * the one order of every caller (gate.c), waiting in FIFO order, when one
 * of them is hot (as occ.retry's first attempt would) or failed in its last
 * transaction in this session
 */
static void
occ_client_begin(const uint64 *hashes, char **keys, int nkeys)
{
	bool		failed = false;
	uint64	   *order;
	instr_time	start;

	occ_xact.hashes = MemoryContextAlloc(occ_xact_cxt, sizeof(uint64) * nkeys);
	memcpy(occ_xact.hashes, hashes, sizeof(uint64) * nkeys);
	occ_xact.keys = MemoryContextAlloc(occ_xact_cxt, sizeof(char *) * nkeys);
	for (int i = 0; i < nkeys; i++)
		occ_xact.keys[i] = MemoryContextStrdup(occ_xact_cxt, keys[i]);
	occ_xact.userid = GetUserId();
	occ_xact.nkeys = nkeys;
	occ_client_check_logged();
	for (int i = 0; i < nkeys; i++)
		failed |= (occ_failed_find(hashes[i]) >= 0);
	if (!failed && !occ_policy_gate_first(hashes, nkeys))
		return;
	order = palloc(sizeof(uint64) * nkeys);
	memcpy(order, hashes, sizeof(uint64) * nkeys);
	INSTR_TIME_SET_CURRENT(start);
	occ_gate_lock_keys(order, nkeys);
	occ_xact.wait_ms = occ_elapsed_usec(start) / 1000.0;
	occ_xact.gated = true;
}

/*
 * occ_client_end: the transaction has committed or aborted: heat or cool
 * its keys, remember whether it failed, and count it under each key.  Runs
 * in the end-of-transaction callback: raises no error.
 */
static void
occ_client_end(bool committed)
{
	OccClientXact x = occ_xact;
	OccCallResult r;
	bool		retryable;

	memset(&occ_xact, 0, sizeof(occ_xact));
	retryable = !committed && x.sqlerrcode != 0 &&
		occ_sqlstates_match(occ_retry_sqlstates_parsed, x.sqlerrcode);

	memset(&r, 0, sizeof(r));
	r.userid = x.userid;
	r.attempts = 1;
	r.committed = committed;
	if (!committed && x.sqlerrcode != 0)
		occ_stats_failure(&r, x.sqlerrcode);
	r.queued = x.gated;
	r.wait_ms = r.max_wait_ms = x.wait_ms;
	for (int i = 0; i < x.nkeys; i++)
	{
		if (committed || retryable)
			occ_temperature_observe(x.hashes[i], x.gated, retryable);
		occ_failed_note(x.hashes[i], retryable);
		occ_stats_record_key(x.keys[i], x.hashes[i], &r);
	}
	MemoryContextReset(occ_xact_cxt);
}

/*
 * occ_client_process_utility: SET LOCAL occ.key = ...: check it, set it
 * (guc.c's check hook lets it through), then queue; every other statement
 * passes through.  A transaction may set its keys again, the same ones.
 */
static void
occ_client_process_utility(PlannedStmt *pstmt, const char *queryString,
						   bool readOnlyTree, ProcessUtilityContext context,
						   ParamListInfo params, QueryEnvironment *queryEnv,
						   DestReceiver *dest, QueryCompletion *qc)
{
	VariableSetStmt *stmt = (VariableSetStmt *) pstmt->utilityStmt;
	ProcessUtility_hook_type next = occ_prev_process_utility ?
		occ_prev_process_utility : standard_ProcessUtility;
	uint64	   *hashes;
	char	  **keys;
	int			nkeys;

	if (!IsA(stmt, VariableSetStmt) || stmt->kind != VAR_SET_VALUE ||
		pg_strcasecmp(stmt->name, "occ.key") != 0)
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		return;
	}

	occ_client_check(stmt, context);
	nkeys = occ_client_keys(stmt, &hashes, &keys);
	if (occ_xact.nkeys > 0 && !occ_client_same_keys(hashes, nkeys))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("occ.key is set to other keys in this transaction already"),
				 errhint("Set the keys of a transaction once, all in one SET LOCAL occ.key = 'a', 'b'.")));
	occ_key_setting = true;
	PG_TRY();
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		occ_key_setting = false;
	}
	PG_END_TRY();
	if (occ_xact.nkeys == 0)
		occ_client_begin(hashes, keys, nkeys);
}

/*
 * occ_client_emit_log: note the SQLSTATE of each error that a transaction
 * with keys reports; the last one is what aborted it
 */
static void
occ_client_emit_log(ErrorData *edata)
{
	if (occ_xact.nkeys > 0 && edata->elevel >= ERROR)
		occ_xact.sqlerrcode = edata->sqlerrcode;
	if (occ_prev_emit_log)
		occ_prev_emit_log(edata);
}

/* occ_client_xact_callback: a transaction with keys ends */
static void
occ_client_xact_callback(XactEvent event, void *arg)
{
	if (occ_xact.nkeys == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that has set occ.key"),
					 errdetail("The gates of its keys would stay held by the prepared transaction until COMMIT PREPARED or ROLLBACK PREPARED, stopping every transaction of those keys meanwhile, and it would count as committed already."),
					 errhint("Use occ.key in transactions that commit or roll back here; run a two-phase transaction without it.")));
			break;
		case XACT_EVENT_PRE_COMMIT:
			/* before Citus's callback, which commits other nodes' work */
			occ_citus_commit_whole();
			break;
		case XACT_EVENT_COMMIT:
			occ_client_end(true);
			break;
		case XACT_EVENT_ABORT:
			occ_client_end(false);
			break;
		default:
			break;
	}
}

/*
 * occ_client_init: install the hooks (from _PG_init, preloaded or not: a
 * session that has not loaded the library takes occ.key for a placeholder)
 */
void
occ_client_init(void)
{
	occ_xact_cxt = AllocSetContextCreate(TopMemoryContext, "pg_occ occ.key",
										 ALLOCSET_SMALL_SIZES);
	occ_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = occ_client_process_utility;
	occ_prev_emit_log = emit_log_hook;
	emit_log_hook = occ_client_emit_log;
	RegisterXactCallback(occ_client_xact_callback, NULL);
}
