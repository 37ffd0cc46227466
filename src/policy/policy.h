/*-------------------------------------------------------------------------
 *
 * policy.h
 *		src/policy/ owns what occ.retry and SET LOCAL occ.key do after a
 *		failed attempt (policy.c): retry now, sleep a backoff (backoff.c),
 *		wait for a gate, or give up, within the server's retry budget
 *		(budget.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_POLICY_H
#define PG_OCC_POLICY_H

#include "pg_occ.h"
#include "queue/queue.h"

/* backoff.c */
extern double occ_backoff_delay(const OccBackoff *b, int attempt,
								double prev, double draw);
extern double occ_random_draw(void);
extern void occ_random_seed(double seed);

/* budget.c */
extern Size occ_budget_shmem_size(void);
extern void occ_budget_shmem_init(void);
extern void occ_budget_deposit(void);
extern bool occ_budget_withdraw(void);
extern bool occ_budget_read(double *tokens, int64 *refusals, TimestampTz *storm_began);
extern void occ_budget_reset(void);

/* policy.c */

/* What the retry loop does next */
typedef enum OccStep
{
	OCC_STEP_RETRY,				/* run the body again now */
	OCC_STEP_SLEEP,				/* sleep usec, then run it again */
	OCC_STEP_WAIT,				/* wait for the gate (at most usec if > 0) */
	OCC_STEP_GIVE_UP,			/* re-raise the failure, saying why (or, when
								 * the outcome is unknown, raise 40003) */
	OCC_STEP_RAISE				/* re-raise the failure as it is */
} OccStep;

typedef struct OccDecision
{
	OccStep		step;
	double		usec;			/* SLEEP: the delay; WAIT: the timeout */
	const char *why;			/* GIVE_UP: for the error's detail */
	bool		gave_up;		/* GIVE_UP: counted as a give-up */
	bool		outcome_unknown;	/* GIVE_UP: the body may have committed in
									 * part: raise statement_completion_unknown
									 * (40003), which no client retries */
} OccDecision;

/* The failed attempt the policy decides on */
typedef struct OccFailure
{
	int			sqlerrcode;
	int			attempts;		/* attempts so far, this one included */
	bool		at_commit;		/* COMMIT failed */
	const char *committed_first;	/* why part of it may have committed, or NULL */
} OccFailure;

/* A call's policy: what it has decided so far */
typedef struct OccPolicy
{
	const OccRetrySpec *spec;
	instr_time	start;			/* of the call, for max_duration */
	MemoryContext cxt;			/* where gates and values are made */
	OccGates   *gates;			/* the call's gates, NULL while it has none */
	OccKeyValues *values;		/* the values it carries, NULL until hashed */
	bool		values_text;	/* with their text */
	uint64	   *keys;			/* room for its keys, made once: an attempt */
	int			keys_room;		/* allocates nothing */
	bool		bypassed;		/* a wait failed: the call runs ungated */
	bool		refused;		/* the budget refused the pending retry */
	double		prev;			/* the previous delay (decorrelated jitter) */
	int			gated_failures; /* failures while holding the gates */
} OccPolicy;

extern void occ_policy_begin(OccPolicy *p, const OccRetrySpec *spec,
							 instr_time start, MemoryContext cxt);
extern bool occ_policy_gate_first(const uint64 *keys, int nkeys);
extern OccDecision occ_policy_before_first(OccPolicy *p);
extern void occ_policy_observe(OccPolicy *p, int sqlerrcode, bool batched);
extern void occ_policy_observe_batch(OccPolicy *p, int others);
extern OccDecision occ_policy_after_failure(OccPolicy *p, const OccFailure *f);
extern OccDecision occ_policy_after_wait(OccPolicy *p, const OccFailure *f,
										 OccGateWait outcome);
extern void occ_policy_end(OccPolicy *p);

#endif							/* PG_OCC_POLICY_H */
