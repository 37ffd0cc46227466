/*-------------------------------------------------------------------------
 *
 * session.c
 *		What a body's meaning depends on in its session, and what a body
 *		leaves in its session: whether two calls can share a transaction.
 *
 * A batch (batch.c, lead.c) runs the bodies of several sessions' calls in
 * one session, the leader's.  That is the same as running them in their
 * own sessions only when
 *
 *	- the sessions agree on every setting that can change what a body means
 *	  (search_path, TimeZone, DateStyle, a custom app.tenant that a policy
 *	  reads, ...): occ_session_fingerprint() hashes every setting that is
 *	  not at its built-in default, as a parallel query's leader sends them
 *	  to its workers (SerializeGUCState), and the calling role;
 *	- neither has temporary tables, whose names the other would resolve
 *	  differently (occ_session_has_temp());
 *	- the body leaves nothing in the session that would have stayed in its
 *	  own: settings SET for the session (a body's SET LOCAL, which would
 *	  last until the batch's commit, is undone after the body, within a
 *	  level of settings of its own: occ_session_settings_open, _close),
 *	  temporary tables, advisory locks and occ.gate() (occ_session_locks(),
 *	  the locks of the user method this backend holds, before and after),
 *	  and prepared statements, cursors WITH HOLD, LISTEN and the like
 *	  (occ_session_stmt_keeps()), which plan_cache.c finds in the body's
 *	  own statements before it runs (occ_body_shares()), and the
 *	  ProcessUtility hook (foreign.c) in the functions it calls, as they
 *	  run (occ_session_note_utility());
 *	- a NOTIFY that another body of the transaction sent already, with the
 *	  same channel and payload: PostgreSQL delivers it once per transaction,
 *	  where each call's own transaction would deliver its own (pg_notify(),
 *	  a function, is not seen: README).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/guc.h"

#include "pg_occ.h"
#include "attempt/attempt.h"

/* The most NOTIFYs of a transaction whose channel and payload are kept */
#define OCC_SESSION_NOTIFIES_MAX 64

/*
 * What the utility statements run since occ_session_utility_reset said:
 * one kept state in the session, and the NOTIFYs sent (hashes of their
 * channel and payload; more than the most: any further NOTIFY counts as
 * sent already)
 */
static bool occ_session_kept = false;
static int	occ_session_nnotifies = 0;
static uint64 occ_session_notifies[OCC_SESSION_NOTIFIES_MAX];

/*
 * Settings the fingerprint leaves out: application_name, which differs
 * between sessions without changing what a body means (each client names
 * itself), occ.batch_max_time, which only its leader reads, and
 * transaction_isolation, which a batch's signature holds apart, as the
 * call's isolation (a follower does not set it to compare, and sets
 * nothing that its commit would have to undo)
 */
static const char *const occ_unhashed_settings[] = {
	"application_name", "occ.batch_max_time", "transaction_isolation", NULL
};

/* occ_unhashed: is name one of occ_unhashed_settings? */
static bool
occ_unhashed(const char *name)
{
	for (int i = 0; occ_unhashed_settings[i] != NULL; i++)
		if (strcmp(name, occ_unhashed_settings[i]) == 0)
			return true;
	return false;
}

/*
 * occ_hash_settings: the hash of the names and values in SerializeGUCState's
 * output (len bytes from p): for each setting its name, value and source
 * file as strings, the line when there is a file, then its source, the
 * context and the role that set it (guc.c, serialize_variable).  Where
 * from is left out: the same value means the same, whoever set it.
 * Returns false if the state does not parse so.
 */
static bool
occ_hash_settings(const char *p, Size len, uint64 *hash)
{
	const char *end = p + len;
	uint64		h = 0;

	while (p < end)
	{
		const char *name = p;
		const char *value = memchr(name, '\0', end - name);
		const char *file = NULL;
		const char *next = NULL;

		if (value != NULL)
			file = memchr(value + 1, '\0', end - value - 1);
		if (file != NULL)
			next = memchr(file + 1, '\0', end - file - 1);
		if (next == NULL)
			return false;
		file++;
		next += 1 + (*file ? sizeof(int) : 0) + sizeof(GucSource) +
			sizeof(GucContext) + sizeof(Oid);
		if (next > end)
			return false;
		if (!occ_unhashed(name))
			h = hash_combine64(h, hash_bytes_extended((const unsigned char *) name,
													  file - 1 - name, 0));
		p = next;
	}
	*hash = h;
	return true;
}

/*
 * occ_session_fingerprint: a hash of the settings that are not at their
 * built-in default (names and values; not occ_unhashed_settings) and of
 * the current role.  Two sessions with the same fingerprint give a body the
 * same meaning, as far as settings go.
 */
uint64
occ_session_fingerprint(void)
{
	uint64		hash;
	Oid			userid = GetUserId();

	if (!occ_guc_walk_hash(&hash, occ_unhashed))
	{
		Size		size = EstimateGUCStateSpace();
		char	   *state = palloc0(size);
		Size		used;

		/* the state begins with its length; the estimate may be larger */
		SerializeGUCState(size, state);
		memcpy(&used, state, sizeof(used));
		used = Min(used, size - sizeof(used));
		if (!occ_hash_settings(state + sizeof(used), used, &hash))
			hash = hash_bytes_extended((const unsigned char *) state + sizeof(used), used, 0);
		pfree(state);
	}
	return hash_combine64(hash, hash_bytes_extended((const unsigned char *) &userid,
													sizeof(userid), 0));
}

/*
 * occ_session_settings_open: a level of settings, in the current
 * transaction, whose changes occ_session_settings_close sorts out
 */
int
occ_session_settings_open(void)
{
	return NewGUCNestLevel();
}

/*
 * occ_settings_kept: was a setting SET for the session (SET without LOCAL,
 * set_config(..., false)) at level or within it?  Not transaction_isolation,
 * which every attempt sets (attempt.c).
 */
static bool
occ_settings_kept(int level)
{
	int			n;
	struct config_generic **vars = occ_guc_variables(&n);
	bool		kept = false;

	for (int i = 0; i < n && !kept; i++)
	{
		if (strcmp(vars[i]->name, "transaction_isolation") == 0)
			continue;
		for (GucStack *st = vars[i]->stack; st != NULL && st->nest_level >= level && !kept;
			 st = st->prev)
			kept = (st->state == GUC_SET || st->state == GUC_SET_LOCAL);
	}
	occ_guc_variables_free(vars);
	return kept;
}

/*
 * occ_session_settings_local: are the settings as they were (fingerprint)
 * when level was opened, or changed within it for its transaction only?
 */
bool
occ_session_settings_local(int level, uint64 fingerprint)
{
	return occ_session_fingerprint() == fingerprint || !occ_settings_kept(level);
}

/*
 * occ_session_settings_close: close level, opened when the settings had
 * this fingerprint.  When a body run within it only changed settings for
 * its transaction (SET LOCAL, set_config(..., true)), undo them (undo), so
 * that the next body of the batch does not see them; a setting changed for
 * the session stays.  Returns whether the settings are back to fingerprint.
 */
bool
occ_session_settings_close(int level, uint64 fingerprint, bool undo)
{
	if (occ_session_fingerprint() == fingerprint)
	{
		AtEOXact_GUC(true, level);
		return true;
	}
	if (!undo || occ_settings_kept(level))
	{
		AtEOXact_GUC(true, level);
		return false;
	}
	AtEOXact_GUC(false, level);
	return occ_session_fingerprint() == fingerprint;
}

/* occ_session_has_temp: has this session a temporary schema? */
bool
occ_session_has_temp(void)
{
	Oid			temp;
	Oid			toast;

	GetTempNamespaceState(&temp, &toast);
	return OidIsValid(temp);
}

/*
 * occ_session_locks: the locks of the user method (advisory locks, gates)
 * this backend holds, in the current memory context
 */
OccSessionLocks *
occ_session_locks(void)
{
	OccSessionLocks *locks = palloc(sizeof(OccSessionLocks));

	locks->n = occ_user_locks_held(locks->tags, locks->masks, OCC_SESSION_LOCKS_MAX);
	return locks;
}

/* occ_session_locks_changed: does this backend hold other user locks now? */
bool
occ_session_locks_changed(const OccSessionLocks *before)
{
	OccSessionLocks now;

	now.n = occ_user_locks_held(now.tags, now.masks, OCC_SESSION_LOCKS_MAX);
	if (now.n != before->n || now.n > OCC_SESSION_LOCKS_MAX)
		return true;
	for (int i = 0; i < now.n; i++)
		if (memcmp(&now.tags[i], &before->tags[i], sizeof(LOCKTAG)) != 0 ||
			now.masks[i] != before->masks[i])
			return true;
	return false;
}

/*
 * occ_session_locks_restore: after a rolled-back subtransaction (which
 * released its transaction-level locks), release the session-level user
 * locks taken since before (an advisory lock that another session's body
 * took in this one), and take back, without waiting, those held before
 * and released since (the leader's gate, by a body's
 * pg_advisory_unlock_all()): if another call has it meanwhile, the batch
 * goes on without it, the gate being an order of waiting, not a lock on
 * data
 */
void
occ_session_locks_restore(const OccSessionLocks *before)
{
	OccSessionLocks now;
	int			nbefore = Min(before->n, OCC_SESSION_LOCKS_MAX);

	now.n = Min(occ_user_locks_held(now.tags, now.masks, OCC_SESSION_LOCKS_MAX),
				OCC_SESSION_LOCKS_MAX);
	for (int i = 0; i < now.n; i++)
	{
		bool		known = false;

		for (int j = 0; j < nbefore && !known; j++)
			known = memcmp(&now.tags[i], &before->tags[j], sizeof(LOCKTAG)) == 0;
		for (LOCKMODE mode = 1; !known && mode <= MaxLockMode; mode++)
			if (now.masks[i] & LOCKBIT_ON(mode))
				LockRelease(&now.tags[i], mode, true);
	}
	for (int j = 0; j < nbefore; j++)
		for (LOCKMODE mode = 1; mode <= MaxLockMode; mode++)
			if ((before->masks[j] & LOCKBIT_ON(mode)) &&
				!occ_lock_held_by_me(&before->tags[j], mode))
				(void) LockAcquire(&before->tags[j], mode, true, true);
}

/*
 * occ_session_stmt_keeps: does this statement leave something in the
 * session beyond its transaction (a prepared statement, a cursor WITH
 * HOLD, LISTEN, a SET without LOCAL, ...), or use what the session holds
 * (EXECUTE a prepared statement, FETCH, MOVE or CLOSE a cursor)?  Such a
 * body cannot run in another session's batch.
 */
bool
occ_session_stmt_keeps(Node *stmt)
{
	switch (nodeTag(stmt))
	{
		case T_PrepareStmt:
		case T_ExecuteStmt:
		case T_FetchStmt:
		case T_ClosePortalStmt:
		case T_DeallocateStmt:
		case T_ListenStmt:
		case T_UnlistenStmt:
		case T_DiscardStmt:
		case T_LoadStmt:
			return true;
		case T_VariableSetStmt:
			return !((VariableSetStmt *) stmt)->is_local;
		case T_DeclareCursorStmt:
			return (((DeclareCursorStmt *) stmt)->options & CURSOR_OPT_HOLD) != 0;
		default:
			return false;
	}
}

/*
 * occ_notify_sent_before: note a NOTIFY; was it sent already since the
 * reset (as far as the hashes tell: a collision only makes a body run
 * alone)?
 */
static bool
occ_notify_sent_before(const NotifyStmt *stmt)
{
	uint64		h = hash_combine64(occ_hash_text(stmt->conditionname),
								   occ_hash_text(stmt->payload ? stmt->payload : ""));

	for (int i = 0; i < occ_session_nnotifies; i++)
		if (occ_session_notifies[i] == h)
			return true;
	if (occ_session_nnotifies == OCC_SESSION_NOTIFIES_MAX)
		return true;
	occ_session_notifies[occ_session_nnotifies++] = h;
	return false;
}

/*
 * occ_session_note_utility: a utility statement runs (the ProcessUtility
 * hook, for every statement of the backend): note whether it keeps state
 * in the session, or repeats a NOTIFY
 */
void
occ_session_note_utility(Node *stmt)
{
	if (occ_session_stmt_keeps(stmt) ||
		(IsA(stmt, NotifyStmt) && occ_notify_sent_before((NotifyStmt *) stmt)))
		occ_session_kept = true;
}

/*
 * occ_session_utility_reset: look at the utility statements from now on;
 * forget_notifies: and at the NOTIFYs sent from now on (a new transaction)
 */
void
occ_session_utility_reset(bool forget_notifies)
{
	occ_session_kept = false;
	if (forget_notifies)
		occ_session_nnotifies = 0;
}

/*
 * occ_session_utility_kept: did a utility statement since the reset keep
 * state in the session, or repeat a NOTIFY?
 */
bool
occ_session_utility_kept(void)
{
	return occ_session_kept;
}
