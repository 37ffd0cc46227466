/*-------------------------------------------------------------------------
 *
 * batch.c
 *		Batch mode's queue: the calls of a hot key that hand their body to
 *		the key's leader, in a slot of shared memory each.
 *
 * In batch mode (contention => 'batch') a call that queue mode would make
 * wait for its key's gate joins the key's batch queue instead.  The first
 * call of a key to join is its leader: it takes the gate as in queue mode
 * and, in each attempt, after its own body, takes the calls waiting behind
 * it with the same body and the same signature (role, database, isolation,
 * retryable SQLSTATEs, settings: session.c) and runs their bodies in its
 * transaction (lead.c), before one commit.  The others are followers
 * (follow.c): they post their call (the body, its parameters) in their
 * slot and sleep on the slot's condition variable until the leader tells
 * them the outcome (outcome.c), or hands them the lead when it is done.
 * This file keeps the slots: who leads, the order of the queue, the
 * taking of calls, and what a backend that exits leaves behind.
 *
 * Shared memory holds two slots per backend's PGPROC, under one LWLock
 * (batch_slots.h): a backend takes the first, its spare if the first is
 * ABANDONED (below) by the backend that had the PGPROC before it, whose
 * leader has not let go of it yet; a new session would otherwise run its
 * calls alone until then.  Scans visit only the slots of the PGPROCs whose
 * backends ever took one, the first or the spare (occ_slot_scan_next): so
 * the spares cost nothing until one is taken.  A slot's states:
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
 * A leader that exits, or whose attempt fails, before it told the calls it
 * took leaves them ORPHANED; a follower that exits while its call is
 * claimed leaves its slot ABANDONED, for its leader to free.
 *
 * Calls and outcomes are bounded: a body and its parameters of more than
 * OCC_BATCH_REQUEST_BYTES, or a result or error of more than
 * OCC_BATCH_OUTCOME_BYTES, run alone, as in queue mode.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "batch/batch.h"
#include "batch_slots.h"

OccBatchShared *occ_batch = NULL;

/* This backend's slot: OCC_BATCH_NO_SLOT until it first needs one */
#define OCC_BATCH_NO_SLOT (-1)
static int	occ_my_slotno = OCC_BATCH_NO_SLOT;

/* The calls this backend leads now, for its exit callback */
static OccBatchMember *occ_led = NULL;
static int	occ_nled = 0;
static bool occ_exit_registered = false;

static int	occ_slot_scan_next(int i);
static void occ_batch_exit(int code, Datum arg);

/* occ_batch_nslots: two slots per backend (see the file header) */
static int
occ_batch_nslots(void)
{
	return 2 * MaxBackends;
}

/* occ_batch_slots_size: the slots, without their bytes */
static Size
occ_batch_slots_size(void)
{
	return MAXALIGN(add_size(offsetof(OccBatchShared, slots),
							 mul_size(occ_batch_nslots(), sizeof(OccBatchSlot))));
}

/* occ_batch_shmem_size: the slots and their bytes */
Size
occ_batch_shmem_size(void)
{
	return add_size(occ_batch_slots_size(),
					mul_size(occ_batch_nslots(), OCC_BATCH_REQUEST_BYTES + OCC_BATCH_OUTCOME_BYTES));
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
	char	   *bytes;

	occ_batch = ShmemInitStruct("pg_occ batch", occ_batch_shmem_size(), &found);
	if (found)
		return;
	occ_batch->lock = &(GetNamedLWLockTranche("pg_occ batch"))->lock;
	occ_batch->next_seq = 1;
	occ_batch->nslots = occ_batch_nslots();
	for (int h = 0; h < 2; h++)
	{
		occ_batch->taken_lo[h] = occ_batch->nslots / 2;
		occ_batch->taken_hi[h] = 0;
	}
	bytes = (char *) occ_batch + occ_batch_slots_size();
	for (int i = 0; i < occ_batch->nslots; i++)
	{
		OccBatchSlot *slot = &occ_batch->slots[i];

		memset(slot, 0, sizeof(OccBatchSlot));
		ConditionVariableInit(&slot->cv);
		slot->request = bytes;
		slot->outcome = bytes + OCC_BATCH_REQUEST_BYTES;
		bytes += OCC_BATCH_REQUEST_BYTES + OCC_BATCH_OUTCOME_BYTES;
	}
}

/*
 * occ_my_slot: this backend's slot, or NULL (not preloaded, not a
 * backend): the first of its PGPROC's two, unless the backend before it
 * left that one ABANDONED (then the second, unless that one is too)
 */
OccBatchSlot *
occ_my_slot(void)
{
	int			procno;
	int			spare;

	if (occ_my_slotno != OCC_BATCH_NO_SLOT)
		return &occ_batch->slots[occ_my_slotno];
	if (occ_batch == NULL || MyProc == NULL)
		return NULL;
	procno = occ_my_procno();
	if (procno < 0 || procno >= occ_batch->nslots / 2)
		return NULL;
	if (!occ_exit_registered)
	{
		before_shmem_exit(occ_batch_exit, (Datum) 0);
		occ_exit_registered = true;
	}
	LWLockAcquire(occ_batch->lock, LW_EXCLUSIVE);
	spare = occ_batch->slots[procno].state == OCC_SLOT_ABANDONED &&
		occ_batch->slots[procno + occ_batch->nslots / 2].state != OCC_SLOT_ABANDONED;
	occ_my_slotno = procno + (spare ? occ_batch->nslots / 2 : 0);
	occ_batch->taken_lo[spare] = Min(occ_batch->taken_lo[spare], procno);
	occ_batch->taken_hi[spare] = Max(occ_batch->taken_hi[spare], procno + 1);
	LWLockRelease(occ_batch->lock);
	return &occ_batch->slots[occ_my_slotno];
}

/*
 * occ_slot_scan_next: under the lock, the slot a scan of every slot ever
 * taken visits after slot i (-1 to begin), or -1 when it is done
 */
static int
occ_slot_scan_next(int i)
{
	int			half = occ_batch->nslots / 2;
	int			h = (i + 1) / half;
	int			procno = (i + 1) % half;

	for (; h < 2; h++, procno = 0)
	{
		procno = Max(procno, occ_batch->taken_lo[h]);
		if (procno < occ_batch->taken_hi[h])
			return h * half + procno;
	}
	return -1;
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
 * level, the retryable SQLSTATEs and the settings (fingerprint, which
 * leaves the session's transaction_isolation out).
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
OccBatchSlot *
occ_find_leader(uint64 key)
{
	for (int i = occ_slot_scan_next(-1); i >= 0; i = occ_slot_scan_next(i))
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
void
occ_hand_on(OccBatchSlot *slot)
{
	OccBatchSlot *next = NULL;

	for (int i = occ_slot_scan_next(-1); i >= 0; i = occ_slot_scan_next(i))
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
OccSlotState
occ_slot_state(OccBatchSlot *slot)
{
	OccSlotState state;

	LWLockAcquire(occ_batch->lock, LW_SHARED);
	state = slot->state;
	LWLockRelease(occ_batch->lock);
	return state;
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
	for (int i = occ_slot_scan_next(-1); i >= 0; i = occ_slot_scan_next(i))
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
 * occ_batch_told: the leader has told every call it took its outcome
 * (outcome.c): none is left for its exit to orphan
 */
void
occ_batch_told(void)
{
	occ_led = NULL;
	occ_nled = 0;
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

	if (occ_my_slotno == OCC_BATCH_NO_SLOT)
		return;
	slot = &occ_batch->slots[occ_my_slotno];
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
