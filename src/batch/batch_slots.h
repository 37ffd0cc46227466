/*-------------------------------------------------------------------------
 *
 * batch_slots.h
 *		Batch mode's slots in shared memory, for the files of batch mode
 *		only: the queue (batch.c), a follower's side (follow.c) and the
 *		outcomes a leader tells (outcome.c).
 *
 * Every field of a slot is read and written under occ_batch->lock, except
 * what its owner fills while the slot is not in the queue (the request)
 * and what the leader that claimed it writes before telling (the
 * outcome): see batch.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_BATCH_SLOTS_H
#define PG_OCC_BATCH_SLOTS_H

#include "storage/condition_variable.h"
#include "storage/lwlock.h"

#include "pg_occ.h"

/* The most a call's request and its outcome may take in its slot */
#define OCC_BATCH_REQUEST_BYTES 8192
#define OCC_BATCH_OUTCOME_BYTES 8192
StaticAssertDecl(OCC_BATCH_OUTCOME_BYTES >= OCC_HANDOVER_ERROR_BYTES,
				 "an outcome holds any error");

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
	char	   *request;		/* OCC_BATCH_REQUEST_BYTES, apart */
	char	   *outcome;		/* OCC_BATCH_OUTCOME_BYTES, apart */
} OccBatchSlot;

/*
 * The slots, then their requests and outcomes: the slots, which every
 * join and every leader's taking scan under the lock, lie together (with
 * the bytes of each slot's call beside it, a scan would read a page per
 * backend)
 */
typedef struct OccBatchShared
{
	LWLock	   *lock;
	uint64		next_seq;
	int			nslots;
	/*
	 * The PGPROC numbers whose first (0) or spare (1) slot a backend has
	 * ever taken are within [taken_lo, taken_hi): scans visit those only
	 * (a server's backends use a small range of its PGPROCs, and spares
	 * are rare)
	 */
	int			taken_lo[2];
	int			taken_hi[2];
	OccBatchSlot slots[FLEXIBLE_ARRAY_MEMBER];
} OccBatchShared;

extern OccBatchShared *occ_batch;

extern OccBatchSlot *occ_my_slot(void);
extern OccBatchSlot *occ_find_leader(uint64 key);
extern void occ_hand_on(OccBatchSlot *slot);
extern OccSlotState occ_slot_state(OccBatchSlot *slot);
extern void occ_batch_told(void);

#endif							/* PG_OCC_BATCH_SLOTS_H */
