/*-------------------------------------------------------------------------
 *
 * batch.h
 *		src/batch/ owns batch mode: the calls of a hot key run in one
 *		transaction by their leader: the queue (batch.c), a follower
 *		(follow.c), the outcomes told (outcome.c), the bytes handed over
 *		(handover.c), the leader (lead.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_BATCH_H
#define PG_OCC_BATCH_H

#include "pg_occ.h"
#include "attempt/attempt.h"

/* batch.c: batch mode's queue */

/* What became of a call that a leader took (tentative until it commits) */
typedef enum OccBatchKind
{
	OCC_BATCH_UNRUN,			/* not run: the batch ended first */
	OCC_BATCH_COMMITTED,		/* its body ran; result attached */
	OCC_BATCH_ERROR,			/* its body raised an error it does not retry */
	OCC_BATCH_FAILED,			/* the batch failed on its body, or at COMMIT */
	OCC_BATCH_ALONE				/* it cannot share a transaction */
} OccBatchKind;

/* What occ_batch_join found */
typedef enum OccBatchJoin
{
	OCC_BATCH_LEAD,				/* the call leads its key: run it */
	OCC_BATCH_RAN,				/* a leader ran it: see the outcome */
	OCC_BATCH_NOT_RUN,			/* the leader's batch ended without it */
	OCC_BATCH_JOIN_ALONE,		/* it must run alone, as in queue mode */
	OCC_BATCH_TIMED_OUT			/* no leader took it in time */
} OccBatchJoin;

/* A follower's outcome, as told by its leader */
typedef struct OccBatchOutcome
{
	bool		committed;		/* the batch committed with its body */
	ErrorData  *edata;			/* its body's error, or the batch's failure */
	bool		at_commit;		/* the failure was at COMMIT */
	Jsonb	   *result;			/* its result, if it asked for one */
	int			batch_size;		/* calls that committed together */
	int			leader_pid;
} OccBatchOutcome;

/* A call a leader took, in the leader's memory */
typedef struct OccBatchMember
{
	int			slot;
	int			pid;
	int			attempt;		/* the attempt number it runs as */
	bool		want_result;
	TimestampTz deadline;		/* its statement_timeout's, or 0 */
	char	   *sql;
	int			nargs;
	Oid		   *argtypes;
	ParamListInfo params;
	OccBatchKind kind;			/* its outcome so far */
	bool		finished;		/* told already */
	bool		wake;			/* to wake once the lock is let go (publish) */
} OccBatchMember;

extern Size occ_batch_shmem_size(void);
extern void occ_batch_shmem_request(void);
extern void occ_batch_shmem_init(void);
extern bool occ_batch_available(void);
extern uint64 occ_batch_signature(const OccRetrySpec *spec, uint64 fingerprint);
extern void occ_batch_leave(void);
extern int	occ_batch_claim(uint64 key, uint64 signature, int max,
							OccBatchMember *members);
extern void occ_batch_orphan(void);
extern double occ_batch_body_usec(void);

/* follow.c: a follower in batch mode */
extern OccBatchJoin occ_batch_join(const OccRetrySpec *spec, uint64 key,
								   uint64 signature, int attempt, bool want_result,
								   uint64 *seq, double timeout_usec,
								   OccBatchOutcome *out);

/* outcome.c: the outcomes a leader tells the calls it took */
extern bool occ_batch_note(OccBatchMember *m, OccBatchKind kind,
						   const Jsonb *result, const ErrorData *edata);
extern void occ_batch_slot_kind(OccBatchMember *m, OccBatchKind kind);
extern void occ_batch_send(OccBatchMember *m, OccBatchKind kind,
						   const ErrorData *edata);
extern int	occ_batch_gone(OccBatchMember *members, int n);
extern void occ_batch_seal(OccBatchMember *members, int n, double body_usec);
extern void occ_batch_publish(OccBatchMember *members, int n, bool committed,
							  int batch_size, const ErrorData *edata,
							  bool at_commit);

/* handover.c: a call's request and its body's error, as a slot's bytes */
#define OCC_HANDOVER_ERROR_BYTES 7808	/* the rooms of its parts, NULs included */

extern int	occ_handover_request_write(const OccRetrySpec *spec, char *buf, int room);
extern void occ_handover_request_read(const char *buf, int len, OccBatchMember *m);
extern int	occ_handover_error_write(const ErrorData *edata, char *buf);
extern ErrorData *occ_handover_error_read(const char *buf, int sqlerrcode);

/* lead.c: the leader of a batch */
typedef struct OccLead
{
	const OccRetrySpec *spec;
	OccBody   **body;			/* the leader's kept plans, the members' too */
	uint64		key;
	uint64		fingerprint;	/* of the session at the attempt's start */
	int			settings;		/* the level of settings of its own body */
	int			synchronous_commit; /* at the attempt's start */
	int			lock_timeout;	/* the callers', in ms (the same for all) */
	uint64		signature;
	OccSessionLocks *locks;		/* its user locks (its gate) at the start */
	OccBatchMember *members;	/* the calls taken, in the attempt's memory */
	int			n;
	int			ran;			/* members whose bodies are in the batch */
} OccLead;

extern void occ_lead_begin(OccLead *lead, const OccRetrySpec *spec,
						   OccBody **body, uint64 key);
extern void occ_lead_run(void *arg);
extern int	occ_lead_end(OccLead *lead, bool committed,
						 const OccAttemptFailure *failure);

#endif							/* PG_OCC_BATCH_H */
