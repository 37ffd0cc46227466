/*-------------------------------------------------------------------------
 *
 * batch.c
 *		Batch mode's queue: the calls of a hot key that hand their body to
 *		the key's leader, and learn what became of it.
 *
 * In batch mode (contention => 'batch') a call that queue mode would make
 * wait for its key's gate joins the key's batch queue instead.  The first
 * call of a key to join is its leader: it takes the gate as in queue mode
 * and, in each attempt, after its own body, takes the calls waiting behind
 * it with the same body and the same signature (role, database, isolation,
 * retryable SQLSTATEs, settings: session.c) and runs their bodies in its
 * transaction (lead.c), before one commit.  The others are followers: they
 * post their call (the body, its parameters) in their slot and sleep on the
 * slot's condition variable until the leader tells them the outcome, or
 * hands them the lead when it is done.
 *
 * Shared memory holds one slot per backend, indexed by its PGPROC number,
 * under one LWLock.  A slot's states:
 *
 *	IDLE		not in batch mode's queue
 *	LEADING		leads its key (waits for, or holds, the gate)
 *	LEAD		told to lead by the leader before it (wakes up LEADING)
 *	POSTED		a follower waiting for a leader to take its call
 *	CLAIMED		taken by a leader: being run, or run and awaiting the commit
 *	ABANDONED	claimed, but its backend has gone: the leader frees it
 *	DONE		the outcome is final (the leader has committed or rolled back)
 *	ORPHANED	the leader went away before telling: the outcome is the
 *				batch transaction's (xid) fate
 *
 * Outcomes are written into a claimed slot before the batch commits, and
 * the batch's transaction id with them, before the commit: a leader that
 * is terminated or fails anywhere leaves its followers ORPHANED, and each
 * then waits for that transaction to end (XactLockTableWait) and takes its
 * outcome only if it committed; otherwise nothing of its call was done, and
 * it runs again.  (A leader killed with SIGKILL takes the whole server down
 * with it, followers included: crash recovery keeps the batch's commit or
 * not, as for any transaction.)
 *
 * A follower that is cancelled while POSTED leaves with nothing done.
 * Once CLAIMED it waits for the outcome, holding cancels off (not
 * terminations): if its call committed, it says so in a WARNING and
 * returns the outcome, as a cancelled wait for synchronous replication
 * does, the cancels that came meanwhile answered; a body's own error, in
 * a batch that committed, is raised; otherwise the cancel is raised.  A
 * follower that is terminated, or whose client has gone (it
 * looks every OCC_BATCH_CLIENT_CHECK_MS while it waits), leaves its slot
 * ABANDONED: its leader, which looks before its commit, rolls back the
 * bodies it ran and runs the others again, so that no work commits for a
 * caller that has gone (only the moment of COMMIT itself is in doubt, as
 * for any transaction).
 *
 * Batches are taken only where they are equivalent to their calls run one
 * after another: at SERIALIZABLE (the batch is serializable, and its calls
 * are in a row within it) and READ COMMITTED (each statement sees what
 * committed before it).  At REPEATABLE READ a call that sees the one
 * before it in the batch would not see what committed since the batch's
 * snapshot, which no snapshot of its own could give: such calls, calls on
 * a hot standby (a batch there commits nothing) and calls whose parameters
 * are anonymous records (their type is known only to their backend) run
 * alone, as in queue mode.
 *
 * Calls and outcomes are bounded: a body and its parameters of more than
 * OCC_BATCH_REQUEST_BYTES, or a result or error of more than
 * OCC_BATCH_OUTCOME_BYTES, run alone, as in queue mode.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/wait_event.h"

#include "pg_occ.h"

/* The most a call's request and its outcome may take in its slot */
#define OCC_BATCH_REQUEST_BYTES 8192
#define OCC_BATCH_OUTCOME_BYTES 8192
StaticAssertDecl(OCC_BATCH_OUTCOME_BYTES >= OCC_HANDOVER_ERROR_BYTES,
				 "an outcome holds any error");

/* How often a follower looks whether its client is still there, waiting */
#define OCC_BATCH_CLIENT_CHECK_MS 100

typedef enum OccSlotState
{
	OCC_SLOT_IDLE = 0,
	OCC_SLOT_LEADING,
	OCC_SLOT_LEAD,
	OCC_SLOT_POSTED,
	OCC_SLOT_CLAIMED,
	OCC_SLOT_ABANDONED,
	OCC_SLOT_DONE,
	OCC_SLOT_ORPHANED
} OccSlotState;

/* A backend's slot */
typedef struct OccBatchSlot
{
	ConditionVariable cv;		/* the follower sleeps on it */
	int			pid;			/* of the backend that posted */
	OccSlotState state;
	Oid			dbid;
	Oid			userid;
	uint64		key;
	uint64		signature;
	uint64		seq;			/* place in the queue */
	int			attempt;		/* the number of the attempt a leader runs */
	bool		want_result;
	TimestampTz deadline;		/* its statement_timeout's, or 0 */
	int			leader_pid;
	TransactionId xid;			/* the batch's, set before its commit */
	int			batch_size;
	double		body_usec;		/* a leader's: its key's bodies' last mean time */
	OccBatchKind kind;			/* the outcome (tentative until DONE) */
	int			sqlerrcode;
	bool		at_commit;
	int32		request_len;
	int32		outcome_len;
	char		request[OCC_BATCH_REQUEST_BYTES];
	char		outcome[OCC_BATCH_OUTCOME_BYTES];
} OccBatchSlot;

typedef struct OccBatchShared
{
	LWLock	   *lock;
	uint64		next_seq;
	int			nslots;
	OccBatchSlot slots[FLEXIBLE_ARRAY_MEMBER];
} OccBatchShared;

static OccBatchShared *occ_batch = NULL;

/* The calls this backend leads now, for its exit callback */
static OccBatchMember *occ_led = NULL;
static int	occ_nled = 0;
static bool occ_exit_registered = false;

static void occ_batch_exit(int code, Datum arg);

/* occ_batch_shmem_size: the slots, one per backend */
Size
occ_batch_shmem_size(void)
{
	return add_size(offsetof(OccBatchShared, slots),
					mul_size(MaxBackends, sizeof(OccBatchSlot)));
}

/* occ_batch_shmem_request: our LWLock */
void
occ_batch_shmem_request(void)
{
	RequestNamedLWLockTranche("pg_occ batch", 1);
}

/* occ_batch_shmem_init: create or attach to the slots */
void
occ_batch_shmem_init(void)
{
	bool		found;

	occ_batch = ShmemInitStruct("pg_occ batch", occ_batch_shmem_size(), &found);
	if (found)
		return;
	occ_batch->lock = &(GetNamedLWLockTranche("pg_occ batch"))->lock;
	occ_batch->next_seq = 1;
	occ_batch->nslots = MaxBackends;
	for (int i = 0; i < MaxBackends; i++)
	{
		memset(&occ_batch->slots[i], 0, offsetof(OccBatchSlot, request));
		ConditionVariableInit(&occ_batch->slots[i].cv);
	}
}

/* occ_my_slot: this backend's slot, or NULL (not preloaded, not a backend) */
static OccBatchSlot *
occ_my_slot(void)
{
	int			procno;

	if (occ_batch == NULL || MyProc == NULL)
		return NULL;
	procno = occ_my_procno();
	if (procno < 0 || procno >= occ_batch->nslots)
		return NULL;
	if (!occ_exit_registered)
	{
		before_shmem_exit(occ_batch_exit, (Datum) 0);
		occ_exit_registered = true;
	}
	return &occ_batch->slots[procno];
}

/* occ_batch_available: can calls batch here (is pg_occ preloaded)? */
bool
occ_batch_available(void)
{
	return occ_my_slot() != NULL;
}

/*
 * occ_batch_signature: what a leader and its followers share, besides the
 * database and the role: the body, its parameter types, the isolation
 * level, the retryable SQLSTATEs and the settings.  The caller has set the
 * session's transaction_isolation to the call's, as an attempt does.
 */
uint64
occ_batch_signature(const OccRetrySpec *spec, uint64 fingerprint)
{
	uint64		h = spec->sql_hash ^ fingerprint;

	h ^= hash_bytes_extended((const unsigned char *) spec->argtypes,
							 sizeof(Oid) * spec->nargs, 1);
	h ^= hash_bytes_extended((const unsigned char *) spec->isolation,
							 strlen(spec->isolation), 2);
	for (int i = 0; i < spec->retry_on->n; i++)
		h = hash_combine64(h, (uint64) spec->retry_on->items[i].code << 1 |
						   spec->retry_on->items[i].is_class);
	return h;
}

/* occ_find_leader: the slot that leads key in this database, or NULL */
static OccBatchSlot *
occ_find_leader(uint64 key)
{
	for (int i = 0; i < occ_batch->nslots; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[i];

		if ((s->state == OCC_SLOT_LEADING || s->state == OCC_SLOT_LEAD) &&
			s->key == key && s->dbid == MyDatabaseId)
			return s;
	}
	return NULL;
}

/*
 * occ_hand_on: under the lock, a leader is done: the oldest call posted
 * for its key leads next
 */
static void
occ_hand_on(OccBatchSlot *slot)
{
	OccBatchSlot *next = NULL;

	for (int i = 0; i < occ_batch->nslots; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[i];

		if (s->state == OCC_SLOT_POSTED && s->key == slot->key &&
			s->dbid == slot->dbid && (next == NULL || s->seq < next->seq))
			next = s;
	}
	slot->state = OCC_SLOT_IDLE;
	if (next == NULL)
		return;
	next->state = OCC_SLOT_LEAD;
	next->body_usec = slot->body_usec;
	ConditionVariableSignal(&next->cv);
}

/*
 * occ_batch_body_usec: how long a body of the key this backend leads took,
 * on average, in the last batch that ran any (its own, or its predecessors'
 * in the lead); 0 if unknown
 */
double
occ_batch_body_usec(void)
{
	OccBatchSlot *slot = occ_my_slot();
	double		usec;

	if (slot == NULL)
		return 0;
	LWLockAcquire(occ_batch->lock, LW_SHARED);
	usec = slot->body_usec;
	LWLockRelease(occ_batch->lock);
	return usec;
}

/*
 * occ_batch_leave: the call that leads its key (if this one does) is over,
 * or stops leading: the next call in the queue leads.  Call it before the
 * gate is released.
 */
void
occ_batch_leave(void)
{
	OccBatchSlot *slot = occ_my_slot();

	if (slot == NULL)
		return;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (slot->state == OCC_SLOT_LEADING || slot->state == OCC_SLOT_LEAD)
		occ_hand_on(slot);
	LWLockRelease(occ_batch->lock);
}

/* occ_slot_state: a slot's state, read under the lock */
static OccSlotState
occ_slot_state(OccBatchSlot *slot)
{
	OccSlotState state;

	LWLockAcquire(occ_batch->lock, LW_SHARED);
	state = slot->state;
	LWLockRelease(occ_batch->lock);
	return state;
}

/*
 * occ_batch_sleep: sleep until the slot is no longer POSTED or CLAIMED (or
 * the timeout, microseconds if positive, ran out: returns false), looking
 * every OCC_BATCH_CLIENT_CHECK_MS whether the client is still there (if
 * not, the session ends, and its leader leaves its call out)
 */
static bool
occ_batch_sleep(OccBatchSlot *slot, double timeout_usec)
{
	instr_time	start;
	bool		ended = true;

	INSTR_TIME_SET_CURRENT(start);
	ConditionVariablePrepareToSleep(&slot->cv);
	for (;;)
	{
		OccSlotState state = occ_slot_state(slot);
		double		left = OCC_BATCH_CLIENT_CHECK_MS * 1000.0;

		if (state != OCC_SLOT_POSTED && state != OCC_SLOT_CLAIMED)
			break;
		if (timeout_usec > 0)
		{
			left = Min(left, timeout_usec - occ_elapsed_usec(start));
			if (left <= 0)
			{
				ended = false;
				break;
			}
		}
		if (ConditionVariableTimedSleep(&slot->cv, (long) Max(left / 1000.0, 1.0),
										PG_WAIT_EXTENSION))
			occ_check_client();
	}
	ConditionVariableCancelSleep();
	return ended;
}

/*
 * occ_batch_take_outcome: under no lock, the slot DONE (or resolved
 * ORPHANED): read the outcome into out, in the current memory context, and
 * make the slot IDLE.  Returns what became of the call.
 */
static OccBatchJoin
occ_batch_take_outcome(OccBatchSlot *slot, OccBatchOutcome *out)
{
	OccBatchKind kind = slot->kind;

	memset(out, 0, sizeof(*out));
	out->batch_size = slot->batch_size;
	out->leader_pid = slot->leader_pid;
	out->at_commit = slot->at_commit;
	out->committed = (kind == OCC_BATCH_COMMITTED || kind == OCC_BATCH_ERROR);
	if (kind == OCC_BATCH_COMMITTED && slot->outcome_len > 0)
	{
		out->result = palloc(slot->outcome_len);
		memcpy(out->result, slot->outcome, slot->outcome_len);
	}
	if (kind == OCC_BATCH_ERROR || kind == OCC_BATCH_FAILED)
		out->edata = occ_handover_error_read(slot->outcome, slot->sqlerrcode);
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	slot->state = OCC_SLOT_IDLE;
	LWLockRelease(occ_batch->lock);
	switch (kind)
	{
		case OCC_BATCH_COMMITTED:
		case OCC_BATCH_ERROR:
		case OCC_BATCH_FAILED:
			return OCC_BATCH_RAN;
		case OCC_BATCH_ALONE:
			return OCC_BATCH_JOIN_ALONE;
		case OCC_BATCH_UNRUN:
			break;
	}
	return OCC_BATCH_NOT_RUN;
}

/*
 * occ_batch_resolve: the slot is ORPHANED: its leader went away.  Wait for
 * the batch's transaction to end; the outcome stands if it committed,
 * otherwise the call was not run.
 */
static void
occ_batch_resolve(OccBatchSlot *slot)
{
	TransactionId xid = slot->xid;
	bool		committed = false;

	if (TransactionIdIsValid(xid))
	{
		XactLockTableWait(xid, NULL, NULL, XLTW_None);
		committed = TransactionIdDidCommit(xid);
	}
	if (!committed)
		slot->kind = OCC_BATCH_UNRUN;
}

/*
 * occ_batch_conclude: the slot left POSTED and CLAIMED: become the leader
 * (LEAD), or take the outcome
 */
static OccBatchJoin
occ_batch_conclude(OccBatchSlot *slot, OccBatchOutcome *out)
{
	OccSlotState state;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	state = slot->state;
	if (state == OCC_SLOT_LEAD)
		slot->state = OCC_SLOT_LEADING;
	LWLockRelease(occ_batch->lock);
	if (state == OCC_SLOT_LEAD)
		return OCC_BATCH_LEAD;
	if (state == OCC_SLOT_ORPHANED)
		occ_batch_resolve(slot);
	return occ_batch_take_outcome(slot, out);
}

/*
 * occ_batch_cancelled: the follower's wait was interrupted (edata): leave
 * the queue if no leader took the call; otherwise wait for the outcome,
 * holding cancels off (a termination, or the client gone, still ends the
 * session, and the leader leaves the call out), and report it: a committed
 * call is returned with a WARNING that the cancel came too late (the
 * cancels that came meanwhile answered by it: processed after, they would
 * report a failure of committed work); a body's own error, final in a batch
 * that committed, is returned, for the call to raise; any other outcome
 * raises the interrupt, nothing of the call having been done.
 */
static OccBatchJoin
occ_batch_cancelled(OccBatchSlot *slot, ErrorData *edata, OccBatchOutcome *out)
{
	OccBatchJoin join;
	bool		ran;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (slot->state == OCC_SLOT_POSTED)
		slot->state = OCC_SLOT_IDLE;
	else if (slot->state == OCC_SLOT_LEAD)
		occ_hand_on(slot);
	if (slot->state == OCC_SLOT_IDLE)
	{
		LWLockRelease(occ_batch->lock);
		ReThrowError(edata);
	}
	LWLockRelease(occ_batch->lock);

	HOLD_CANCEL_INTERRUPTS();
	ereport(WARNING,
			(errmsg("%s: the call waits for the outcome of the batch that runs it", edata->message),
			 errdetail("Process %d took the call into its batch transaction; the call reports whether it committed.",
					   slot->leader_pid)));
	(void) occ_batch_sleep(slot, 0);
	join = occ_batch_conclude(slot, out);
	ran = (join == OCC_BATCH_RAN && out->committed);
	if (ran && out->edata == NULL)
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("%s came too late: the call had already run in a batch, which committed", edata->message),
				 errdetail("Process %d ran the call's body in its batch transaction.", out->leader_pid),
				 errhint("The call's outcome is returned as if it had not been interrupted.")));
	QueryCancelPending = false;
	RESUME_CANCEL_INTERRUPTS();
	if (!ran)
		ReThrowError(edata);
	return join;
}

/*
 * occ_batch_join: the call (spec, attempt number attempt) would wait for
 * the gate of key: join its batch queue, at most timeout_usec if positive.
 * *seq keeps the call's place between joins (0 for a new one).  Returns
 *	OCC_BATCH_LEAD			the call leads: take the gate, run the attempt,
 *	OCC_BATCH_RAN			a leader ran it: *out says how it ended,
 *	OCC_BATCH_NOT_RUN		the leader's batch ended without running it,
 *	OCC_BATCH_JOIN_ALONE	it cannot share a transaction: run it alone,
 *	OCC_BATCH_TIMED_OUT		the timeout ran out before a leader took it.
 * Interrupts throw, with the call out of the queue and nothing done (or see
 * occ_batch_cancelled).  out's parts are made in the current context.
 */
OccBatchJoin
occ_batch_join(const OccRetrySpec *spec, uint64 key, uint64 signature, int attempt,
			   bool want_result, uint64 *seq, double timeout_usec,
			   OccBatchOutcome *out)
{
	OccBatchSlot *slot = occ_my_slot();
	MemoryContext cxt = CurrentMemoryContext;
	volatile OccBatchJoin join = OCC_BATCH_LEAD;
	int			len;

	/*
	 * A session with temporary tables, or advisory locks of its own (a
	 * body that takes them again would wait in the leader for this
	 * follower, which waits for the leader, unseen by the deadlock
	 * detector), runs alone; so do calls at REPEATABLE READ and on a hot
	 * standby (see the file header)
	 */
	if (slot == NULL || occ_session_has_temp() || occ_user_locks_held(NULL, NULL, 0) > 0 ||
		strcmp(spec->isolation, "repeatable read") == 0 || RecoveryInProgress())
		return OCC_BATCH_JOIN_ALONE;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (slot->state == OCC_SLOT_LEADING && slot->key == key && slot->dbid == MyDatabaseId)
	{
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_LEAD;
	}
	if (slot->state == OCC_SLOT_LEADING)
		occ_hand_on(slot);		/* the call's key has changed */
	if (slot->state != OCC_SLOT_IDLE)
	{
		/* ABANDONED by the backend before us: its leader has not let go */
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_JOIN_ALONE;
	}
	slot->key = key;
	slot->dbid = MyDatabaseId;
	slot->pid = MyProcPid;
	if (occ_find_leader(key) == NULL)
	{
		slot->state = OCC_SLOT_LEADING;
		slot->body_usec = 0;
		LWLockRelease(occ_batch->lock);
		return OCC_BATCH_LEAD;
	}
	LWLockRelease(occ_batch->lock);

	/* the slot is IDLE: ours to fill until it is POSTED */
	len = occ_handover_request_write(spec, slot->request, OCC_BATCH_REQUEST_BYTES);
	if (len < 0)
		return OCC_BATCH_JOIN_ALONE;
	slot->request_len = len;
	slot->userid = GetUserId();
	slot->signature = signature;
	slot->attempt = attempt;
	slot->want_result = want_result;
	slot->deadline = get_timeout_active(STATEMENT_TIMEOUT) ?
		get_timeout_finish_time(STATEMENT_TIMEOUT) : 0;
	slot->xid = InvalidTransactionId;
	slot->kind = OCC_BATCH_UNRUN;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (*seq == 0)
		*seq = occ_batch->next_seq++;
	slot->seq = *seq;
	if (occ_find_leader(key) == NULL)
	{
		slot->state = OCC_SLOT_LEADING; /* the leader left meanwhile */
		slot->body_usec = 0;
	}
	else
		slot->state = OCC_SLOT_POSTED;
	LWLockRelease(occ_batch->lock);
	if (slot->state == OCC_SLOT_LEADING)
		return OCC_BATCH_LEAD;

	PG_TRY();
	{
		if (occ_batch_sleep(slot, timeout_usec))
			join = occ_batch_conclude(slot, out);
		else
		{
			LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
			if (slot->state == OCC_SLOT_POSTED)
			{
				slot->state = OCC_SLOT_IDLE;
				join = OCC_BATCH_TIMED_OUT;
			}
			LWLockRelease(occ_batch->lock);
			if (join != OCC_BATCH_TIMED_OUT)
			{
				/* taken just now: its outcome is what counts */
				(void) occ_batch_sleep(slot, 0);
				join = occ_batch_conclude(slot, out);
			}
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		ConditionVariableCancelSleep();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		join = occ_batch_cancelled(slot, edata, out);
	}
	PG_END_TRY();
	return join;
}

/*
 * occ_batch_claim: the leader of key takes up to max calls posted for it
 * with its signature and role, in queue order, into members (their
 * requests read in the current memory context); returns how many
 */
int
occ_batch_claim(uint64 key, uint64 signature, int max, OccBatchMember *members)
{
	OccBatchSlot *slot = occ_my_slot();
	int			n = 0;

	if (slot == NULL || max <= 0)
		return 0;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	for (int i = 0; i < occ_batch->nslots; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[i];
		int			at;

		if (s->state != OCC_SLOT_POSTED || s->key != key || s->dbid != MyDatabaseId ||
			s->signature != signature || s->userid != GetUserId())
			continue;
		/* keep the max oldest, in queue order: insertion into members */
		at = n;
		while (at > 0 && occ_batch->slots[members[at - 1].slot].seq > s->seq)
			at--;
		if (at >= max)
			continue;
		if (n == max)
			n--;
		memmove(&members[at + 1], &members[at], sizeof(OccBatchMember) * (n - at));
		memset(&members[at], 0, sizeof(OccBatchMember));
		members[at].slot = i;
		n++;
	}
	for (int i = 0; i < n; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[members[i].slot];

		s->state = OCC_SLOT_CLAIMED;
		s->leader_pid = MyProcPid;
		s->xid = InvalidTransactionId;
		s->kind = OCC_BATCH_UNRUN;
		members[i].pid = s->pid;
		members[i].attempt = s->attempt;
		members[i].want_result = s->want_result;
		members[i].deadline = s->deadline;
	}
	LWLockRelease(occ_batch->lock);

	/* they are ours: if anything fails from here, they are orphaned */
	occ_led = members;
	occ_nled = n;
	for (int i = 0; i < n; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[members[i].slot];

		occ_handover_request_read(s->request, s->request_len, &members[i]);
	}
	return n;
}

/*
 * occ_batch_note: the leader ran member m's body: record its tentative
 * outcome (final once the batch commits).  An error is kept with its
 * SQLSTATE, message, detail and hint, each cut to fit.  Returns false when
 * the outcome does not fit (a result too large): the call must run alone.
 */
bool
occ_batch_note(OccBatchMember *m, OccBatchKind kind, const Jsonb *result,
			   const ErrorData *edata)
{
	OccBatchSlot *slot = &occ_batch->slots[m->slot];

	slot->outcome_len = 0;
	if (result != NULL)
	{
		if (VARSIZE(result) > OCC_BATCH_OUTCOME_BYTES)
			return false;
		memcpy(slot->outcome, result, VARSIZE(result));
		slot->outcome_len = VARSIZE(result);
	}
	if (edata != NULL)
	{
		slot->sqlerrcode = edata->sqlerrcode;
		slot->outcome_len = occ_handover_error_write(edata, slot->outcome);
	}
	slot->kind = kind;
	m->kind = kind;
	return true;
}

/*
 * occ_batch_finish: under the lock, member m's outcome is final.  Returns
 * whether its call waits for it: the caller wakes it (occ_batch_wake) once
 * it has let go of the lock, which every follower's wake-up takes.
 */
static bool
occ_batch_finish(OccBatchMember *m)
{
	OccBatchSlot *slot = &occ_batch->slots[m->slot];
	bool		waits = false;

	if (slot->state == OCC_SLOT_ABANDONED)
		slot->state = OCC_SLOT_IDLE;
	else if (slot->state == OCC_SLOT_CLAIMED && slot->pid == m->pid)
	{
		slot->state = OCC_SLOT_DONE;
		waits = true;
	}
	m->finished = true;
	return waits;
}

/*
 * occ_batch_wake: wake the call of member m, finished (a late wake-up of
 * the slot's next call only makes it look at its state again)
 */
static void
occ_batch_wake(const OccBatchMember *m)
{
	ConditionVariableSignal(&occ_batch->slots[m->slot].cv);
}

/*
 * occ_batch_send: member m's outcome does not depend on the batch's: tell
 * it now.  Its body was rolled back, or not run: it runs alone (ALONE),
 * joins again (UNRUN), or decides by its own policy on its failure edata
 * (FAILED).
 */
void
occ_batch_send(OccBatchMember *m, OccBatchKind kind, const ErrorData *edata)
{
	bool		waits;

	if (edata != NULL)
		(void) occ_batch_note(m, kind, NULL, edata);
	else
		occ_batch_slot_kind(m, kind);
	occ_batch->slots[m->slot].at_commit = false;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	waits = occ_batch_finish(m);
	LWLockRelease(occ_batch->lock);
	if (waits)
		occ_batch_wake(m);
}

/*
 * occ_batch_gone: before the commit, the members whose backend has gone
 * (terminated, or its client lost) since they were taken: each is freed
 * and finished (its body must not commit).  Returns how many.
 */
int
occ_batch_gone(OccBatchMember *members, int n)
{
	int			gone = 0;

	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[members[i].slot];

		if (members[i].finished ||
			(s->state == OCC_SLOT_CLAIMED && s->pid == members[i].pid))
			continue;
		(void) occ_batch_finish(&members[i]);	/* gone: no one waits */
		gone++;
	}
	LWLockRelease(occ_batch->lock);
	return gone;
}

/*
 * occ_batch_slot_kind: set member m's outcome kind, without its data
 */
void
occ_batch_slot_kind(OccBatchMember *m, OccBatchKind kind)
{
	occ_batch->slots[m->slot].kind = kind;
	occ_batch->slots[m->slot].outcome_len = 0;
	m->kind = kind;
}

/*
 * occ_batch_seal: every member has run: record the batch's transaction
 * id, before its commit, for followers whose leader goes away, and the
 * mean time its bodies took (body_usec, 0 if none ran), for the key's next
 * leaders.  The id is assigned now if the bodies have none yet: a NOTIFY
 * assigns one only at COMMIT, and a batch sealed without one would pass
 * for not committed.
 */
void
occ_batch_seal(OccBatchMember *members, int n, double body_usec)
{
	OccBatchSlot *slot = occ_my_slot();
	bool		any = false;
	TransactionId xid;

	for (int i = 0; i < n; i++)
		any |= !members[i].finished;
	xid = any ? GetTopTransactionId() : InvalidTransactionId;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	if (body_usec > 0)
		slot->body_usec = body_usec;
	for (int i = 0; i < n; i++)
		if (!members[i].finished)
			occ_batch->slots[members[i].slot].xid = xid;
	LWLockRelease(occ_batch->lock);
}

/*
 * occ_batch_publish: the batch committed (committed) or was rolled back:
 * make every member's outcome final and wake it.  batch_size counts the
 * calls that committed together.  When rolled back after a failure at
 * COMMIT that they share (at_commit), every member that ran gets the
 * failure (edata); otherwise they were not run.
 */
void
occ_batch_publish(OccBatchMember *members, int n, bool committed, int batch_size,
				  const ErrorData *edata, bool at_commit)
{
	for (int i = 0; i < n; i++)
	{
		OccBatchMember *m = &members[i];

		if (m->finished)
			continue;
		if (!committed)
		{
			if (at_commit && m->kind != OCC_BATCH_UNRUN)
				(void) occ_batch_note(m, OCC_BATCH_FAILED, NULL, edata);
			else
				occ_batch_slot_kind(m, OCC_BATCH_UNRUN);
			occ_batch->slots[m->slot].at_commit = at_commit;
		}
		occ_batch->slots[m->slot].batch_size = batch_size;
	}
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
		members[i].wake = !members[i].finished && occ_batch_finish(&members[i]);
	LWLockRelease(occ_batch->lock);
	occ_led = NULL;
	occ_nled = 0;
	for (int i = 0; i < n; i++)
		if (members[i].wake)
			occ_batch_wake(&members[i]);
}

/*
 * occ_orphan_led: under the lock, the leader will not tell the calls it
 * took: leave them ORPHANED (each learns its outcome from the batch
 * transaction's fate), free the slots of those whose backend has gone
 */
static void
occ_orphan_led(void)
{
	for (int i = 0; i < occ_nled; i++)
	{
		OccBatchSlot *s = &occ_batch->slots[occ_led[i].slot];

		if (occ_led[i].finished)
			continue;
		if (s->state == OCC_SLOT_ABANDONED)
			s->state = OCC_SLOT_IDLE;
		else if (s->state == OCC_SLOT_CLAIMED && s->pid == occ_led[i].pid)
		{
			s->state = OCC_SLOT_ORPHANED;
			ConditionVariableSignal(&s->cv);
		}
	}
	occ_led = NULL;
	occ_nled = 0;
}

/*
 * occ_batch_orphan: an error escaped the leader's attempt before it told
 * the calls it took: they learn their outcome from the batch transaction's
 * fate, as if the leader had gone away
 */
void
occ_batch_orphan(void)
{
	if (occ_batch == NULL || occ_nled == 0)
		return;
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	occ_orphan_led();
	LWLockRelease(occ_batch->lock);
}

/*
 * occ_batch_exit: the backend exits.  As a follower: leave the queue (a
 * leader that took the call frees the slot).  As a leader: hand the lead
 * on, and leave the calls it took ORPHANED.
 */
static void
occ_batch_exit(int code, Datum arg)
{
	OccBatchSlot *slot;
	int			procno = occ_my_procno();

	if (occ_batch == NULL || procno < 0 || procno >= occ_batch->nslots)
		return;
	slot = &occ_batch->slots[procno];
	LWLockReleaseAll();
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	occ_orphan_led();
	switch (slot->state)
	{
		case OCC_SLOT_LEADING:
		case OCC_SLOT_LEAD:
			occ_hand_on(slot);
			break;
		case OCC_SLOT_CLAIMED:
			slot->state = OCC_SLOT_ABANDONED;
			break;
		case OCC_SLOT_ABANDONED:
			break;
		default:
			slot->state = OCC_SLOT_IDLE;
			break;
	}
	LWLockRelease(occ_batch->lock);
}
