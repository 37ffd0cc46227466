/*-------------------------------------------------------------------------
 *
 * pg_occ.h
 *		Declarations shared by the pg_occ source files.
 *
 * pg_occ retries optimistic transactions that fail with serialization
 * failures or deadlocks, sleeping a jittered exponential backoff between
 * attempts or queueing on a gate per contention key.  Each .c file has one
 * purpose: GUCs, SQLSTATE lists, backoff math, sleeping, the gate, the
 * retry loop, the plan cache for bodies, the body's result, and statistics.
 *
 * PostgreSQL versions are dealt with in compat.h, and only there.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_H
#define PG_OCC_H

#include "common/hashfn.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"
#include "tcop/dest.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"

/* How occ.retry handles contention, in the order of occ.contention's options */
typedef enum OccContention
{
	OCC_CONTENTION_BACKOFF,
	OCC_CONTENTION_QUEUE
} OccContention;

/* Backoff strategies, in the order of the occ.jitter GUC's options */
typedef enum OccJitter
{
	OCC_JITTER_NONE,
	OCC_JITTER_FULL,
	OCC_JITTER_EQUAL,
	OCC_JITTER_DECORRELATED,
	OCC_JITTER_BOUNDED,
	OCC_JITTER_MULTIPLICATIVE,
	OCC_JITTER_NORMAL
} OccJitter;

/* Parameters of a backoff computation, all times in microseconds */
typedef struct OccBackoff
{
	OccJitter	jitter;
	double		base;
	double		cap;
	double		factor;
} OccBackoff;

/* A list of SQLSTATEs that occ.retry retries: codes, or classes */
typedef struct OccSqlstate
{
	int			code;			/* a SQLSTATE, or a class as "XX000" */
	bool		is_class;
} OccSqlstate;

typedef struct OccSqlstates
{
	int			n;
	OccSqlstate items[FLEXIBLE_ARRAY_MEMBER];
} OccSqlstates;

#define OCC_SQLSTATES_SIZE(n) \
	(offsetof(OccSqlstates, items) + sizeof(OccSqlstate) * Max((n), 1))

/* What occ_parse_sqlstates found wrong, if anything */
typedef enum OccSqlstatesProblem
{
	OCC_SQLSTATES_OK,
	OCC_SQLSTATES_INVALID,		/* not a code or class (or NULL) */
	OCC_SQLSTATES_CANCEL		/* 57014, which is never retried */
} OccSqlstatesProblem;

/* guc.c */
extern const struct config_enum_entry occ_jitter_options[];
extern const struct config_enum_entry occ_isolation_options[];
extern const struct config_enum_entry occ_contention_options[];
extern const OccSqlstates *occ_retry_sqlstates_parsed;
extern char *occ_enum_names(const struct config_enum_entry *options);
extern double occ_base_delay;
extern double occ_max_delay;
extern int	occ_jitter;
extern int	occ_max_attempts;
extern double occ_factor;
extern int	occ_max_duration;
extern int	occ_isolation;
extern int	occ_contention;
extern char *occ_retry_sqlstates;
extern bool occ_log_retries;
extern bool occ_track_stats;
extern int	occ_stats_max;
extern int	occ_max_result_size;
extern double occ_retry_budget;
extern double occ_retry_budget_ratio;
extern double occ_retry_budget_floor;
extern void occ_define_gucs(void);

/*
 * occ_hash_text: the 64-bit hash of a text: a body's (the key of its kept
 * plans, of its occ.stats entry and, in queue mode, of its gate) or a
 * contention key's.  occ.retry hashes its body once per call.
 */
static inline uint64
occ_hash_text(const char *text)
{
	return hash_bytes_extended((const unsigned char *) text, strlen(text), 0);
}

/* backoff.c */
extern OccJitter occ_parse_jitter(const char *name);
extern double occ_interval_to_usec(const Interval *span, const char *what);
extern Interval *occ_usec_to_interval(double usec);
extern void occ_check_backoff(const OccBackoff *b);
extern void occ_backoff_args(FunctionCallInfo fcinfo, int first, OccBackoff *b);
extern double occ_backoff_delay(const OccBackoff *b, int attempt,
								double prev, double draw);
extern double occ_random_draw(void);

/* sleep.c */
extern void occ_sleep_usec(double usec);

/* plan_cache.c */
typedef struct OccBody OccBody;
extern OccBody *occ_body_open(const char *sql, uint64 sql_hash, int nargs,
							  const Oid *argtypes);
extern int	occ_body_nstmts(const OccBody *body);
extern struct _SPI_plan *occ_body_plan(OccBody *body, int i);
extern Oid	occ_body_foreign_target(const OccBody *body);
extern void occ_body_close(OccBody *body);

/* budget.c */
extern void occ_budget_init(void);
extern void occ_budget_deposit(void);
extern bool occ_budget_withdraw(void);
extern bool occ_budget_read(double *tokens, int64 *refusals, TimestampTz *storm_began);
extern void occ_budget_reset(void);

/* result.c */
extern DestReceiver *occ_result_receiver(MemoryContext cxt);
extern bool occ_result_jsonb(DestReceiver *self, Datum *jsonb);
extern void occ_result_free(DestReceiver *self);

/* gate.c */
typedef struct OccGate
{
	LOCKTAG		tag;			/* the gate's lock */
	uint64		hash;			/* of the key the gate belongs to */
	uint64		body_hash;		/* of the body alone, when derived */
	bool		derived;		/* key derived from the body and parameters */
	bool		escalated;		/* moved to the gate of the body alone */
	bool		held;			/* we hold the gate (as far as we know) */
	bool		bypassed;		/* a wait failed: the call runs ungated */
} OccGate;

typedef enum OccGateWait
{
	OCC_GATE_TAKEN,
	OCC_GATE_TIMED_OUT,			/* the timeout (max_duration) ran out */
	OCC_GATE_UNAVAILABLE		/* deadlock, lock table full, lock_timeout */
} OccGateWait;

extern void occ_gate_init(void);
extern uint64 occ_gate_key_hash(const char *key, const char *what);
extern void occ_gate_prepare(OccGate *gate, const char *key, uint64 sql_hash,
							 int nargs, const Oid *argtypes,
							 const Datum *values, const char *nulls);
extern bool occ_gate_admit(const OccGate *gate);
extern void occ_gate_observe(const OccGate *gate, bool failed);
extern OccGateWait occ_gate_wait(OccGate *gate, double timeout_usec);
extern bool occ_gate_still_held(OccGate *gate);
extern bool occ_gate_escalate(OccGate *gate);
extern void occ_gate_release(OccGate *gate);

/* sqlstate.c */
extern OccSqlstatesProblem occ_parse_sqlstates(List *items, OccSqlstates *out,
											   const char **bad);

/* stats.c */
typedef struct OccCallResult
{
	Oid			userid;			/* the role that called */
	int			attempts;		/* executions of the body, the first included;
								 * 0 for a call refused before its first */
	int64		serialization_failures; /* failed attempts with 40001 */
	int64		deadlocks;		/* failed attempts with 40P01 */
	int64		other_failures; /* failed attempts with any other SQLSTATE */
	bool		committed;		/* the last attempt committed */
	bool		gave_up;		/* retryable failure, but out of attempts or time */
	double		sleep_ms;		/* time spent sleeping */
	double		max_sleep_ms;	/* longest single sleep */
	bool		queued;			/* took the gate of its key */
	double		wait_ms;		/* time spent waiting for the gate */
	double		max_wait_ms;	/* longest single wait */
	double		total_ms;		/* wall time of the whole call */
	int			last_sqlerrcode;	/* of the last failed attempt, or 0 */
} OccCallResult;

extern void occ_stats_init(void);
extern void occ_stats_record(const char *sql, uint64 sql_hash,
							 const OccCallResult *result);

#endif							/* PG_OCC_H */
