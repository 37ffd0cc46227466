/*-------------------------------------------------------------------------
 *
 * pg_occ.h
 *		Declarations shared by every folder of pg_occ's source.
 *
 * pg_occ retries optimistic transactions that fail with serialization
 * failures or deadlocks, sleeping a jittered exponential backoff between
 * attempts or queueing on a gate per contention key, runs a hot key's calls
 * in batches, and changes reservable columns without their row lock.  Each
 * folder is one mechanism, with a header that says what it offers; the
 * calls go one way, down this list:
 *
 *	module.c	the module: settings, hooks, shared memory, workers;
 *	retry/		the retry loops: CALL occ.retry (retry.c, args.c), the
 *				application's own transactions under SET LOCAL occ.key
 *				(client.c), occ.backoff() (delays.c);
 *	stats/		occ.stats, occ.key_stats, occ.last_retry();
 *	batch/		batch mode: a hot key's calls run by their leader;
 *	policy/		the decision after a failed attempt, backoff, the budget;
 *	queue/		contention keys, learned keys, FIFO gates, hot keys;
 *	attempt/	one attempt of a body, its plans, result and session;
 *	escrow/		reservable columns, their ledger and fold worker;
 *	util/		subtransaction steps, sleeps, SQLSTATE lists, intervals;
 *	guc.c		the occ.* settings, declared here with what every folder
 *				shares: what one call asks for, and how it ended.
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
#include "nodes/params.h"
#include "nodes/pg_list.h"
#include "portability/instr_time.h"
#include "storage/itemptr.h"
#include "storage/lock.h"
#include "storage/spin.h"
#include "tcop/dest.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"
#include "utils/reltrigger.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"

#include "compat.h"

/* How occ.retry handles contention, in the order of occ.contention's options */
typedef enum OccContention
{
	OCC_CONTENTION_BACKOFF,
	OCC_CONTENTION_QUEUE,
	OCC_CONTENTION_BATCH		/* queue, and run a hot key's calls in batches */
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

/* Everything one call needs, checked before the first transaction ends */
typedef struct OccRetrySpec
{
	char	   *sql;
	uint64		sql_hash;		/* occ_hash_text(sql), once per call */
	int			nargs;
	Oid		   *argtypes;
	Datum	   *values;
	char	   *nulls;
	ParamListInfo params;		/* the same values, for SPI; NULL if none */
	int			max_attempts;
	OccBackoff	backoff;
	double		max_duration;	/* microseconds, 0 = no limit */
	const char *isolation;		/* transaction_isolation spelling */
	OccSqlstates *retry_on;
	OccContention contention;
	char	  **keys;			/* contention keys given (key), or NULL */
	int			nkeys;
	Oid			key_owner;		/* whose keys they are: occ_key_owner() */
} OccRetrySpec;

/* How a call ended and what it cost, for occ.stats and occ.last_retry() */
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
	int			batch_size;		/* calls that committed in its batch, 0 if
								 * it did not commit in one */
} OccCallResult;

/* occ_elapsed_usec: microseconds since start */
static inline double
occ_elapsed_usec(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_DOUBLE(now) * 1000000.0;
}

/* occ_plural: "s" unless n is 1, for messages that count attempts */
static inline const char *
occ_plural(int n)
{
	return n == 1 ? "" : "s";
}

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
extern int	occ_batch_max_calls;
extern int	occ_batch_max_time;
extern int	occ_max_result_size;
extern double occ_retry_budget;
extern double occ_retry_budget_ratio;
extern double occ_retry_budget_floor;
extern char *occ_key;
extern bool occ_key_setting;
extern int	occ_reservable_rows;
extern int	occ_fold_interval;
extern void occ_define_gucs(void);

/*
 * occ_hash_text: the 64-bit hash of a text: a body's (the key of its kept
 * plans, of its occ.stats entry and, in queue mode, the start of its derived
 * key) or a contention key's (key.c).  occ.retry hashes its body once per
 * call.
 */
static inline uint64
occ_hash_text(const char *text)
{
	return hash_bytes_extended((const unsigned char *) text, strlen(text), 0);
}

#endif							/* PG_OCC_H */
