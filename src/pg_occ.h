/*-------------------------------------------------------------------------
 *
 * pg_occ.h
 *		Declarations shared by the pg_occ source files.
 *
 * pg_occ retries optimistic transactions that fail with serialization
 * failures or deadlocks, sleeping a jittered exponential backoff between
 * attempts or queueing on a gate per contention key.  Each .c file has one
 * purpose, and the calls go one way:
 *
 *	retry.c		the entry points and the retry loop, which uses
 *	  args.c		the call's arguments,
 *	  attempt.c		one attempt as a transaction (with plan_cache.c, the
 *					kept plans of bodies, result.c, the body's rows, and
 *					foreign.c, the foreign tables it writes to),
 *	  follow.c		batch mode's follower: a call hands its body to its
 *					key's leader and learns the outcome (handover.c, the
 *					bytes of the request and of an error),
 *	  lead.c		the leader's part: the calls it took, run in its
 *					attempt (with attempt.c, and session.c, what a body
 *					depends on and leaves in its session), and their
 *					outcomes told (outcome.c),
 *	  batch.c		under both, batch mode's queue: its slots in shared
 *					memory (batch_slots.h), the lead and the calls taken,
 *	  policy.c		the decision after a failed attempt, which uses
 *		key.c			the call's contention keys, given or carried,
 *		learner.c		which values a body's failures concentrate on,
 *		gate.c			the FIFO gates of keys (locks),
 *		temperature.c	which keys are hot,
 *		budget.c		the server-wide retry budget,
 *		backoff.c		the delays (and occ.backoff()),
 *	  sleep.c		sleeping between attempts, checking the client,
 *	  stats.c		occ.stats and occ.last_retry();
 *	client.c		the application's own transactions that SET LOCAL
 *					occ.key, which uses the policy's admission, gate.c,
 *					temperature.c and stats.c (occ.key_stats);
 *	guc.c			the occ.* settings; sqlstate.c, lists of SQLSTATEs;
 *	module.c		the module: settings, hooks and shared memory.
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

/* the fold adds up reservations in 128 bits (fold_apply.c) */
#ifndef HAVE_INT128
#error "pg_occ needs a 128-bit integer type"
#endif

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

/* ----------------------------------------------------------------
 * What one call of occ.retry asks for (read by args.c)
 * ----------------------------------------------------------------
 */

/*
 * The outputs of the form called: its INOUT arguments, which are the columns
 * of the row that the CALL returns (-1: the form has no such column)
 */
typedef struct OccOutputs
{
	TupleDesc	tupdesc;		/* NULL for the form without outputs */
	int			result;
	int			attempts;
	int			slept;
} OccOutputs;

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
extern int	occ_max_result_size;
extern double occ_retry_budget;
extern double occ_retry_budget_ratio;
extern double occ_retry_budget_floor;
extern char *occ_key;
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

/* args.c */
extern void occ_args_sql(FunctionCallInfo fcinfo, OccRetrySpec *spec);
extern void occ_args_outputs(FunctionCallInfo fcinfo, OccOutputs *out);
extern void occ_args_spec(FunctionCallInfo fcinfo, int shift, OccRetrySpec *spec);
extern void occ_args_backoff(FunctionCallInfo fcinfo, int first, OccBackoff *b);
extern double occ_interval_to_usec(const Interval *span, const char *what);

/* attempt.c */
typedef struct OccBody OccBody;

/* What a failed attempt left: its error, and where it failed */
typedef struct OccAttemptFailure
{
	ErrorData  *edata;			/* in the attempt's memory context */
	bool		at_commit;		/* COMMIT failed, not a statement */
	const char *foreign_table;	/* a foreign table it wrote to, or NULL */
} OccAttemptFailure;

extern void occ_attempt_check_context(FunctionCallInfo fcinfo);
extern void occ_attempt_check_isolation(const OccRetrySpec *spec);
extern void occ_attempt_set_isolation(const OccRetrySpec *spec);
extern bool occ_attempt_run(const OccRetrySpec *spec, int number, OccBody **body,
							MemoryContext attemptcxt, Jsonb **result,
							OccAttemptFailure *failure,
							void (*before_commit) (void *), void *arg);
extern void occ_attempt_body(OccBody *body, ParamListInfo params, int number,
							 DestReceiver *dest);
extern int	occ_attempt_running(void);
extern void occ_attempt_warm(const OccRetrySpec *spec, OccBody **body);

/* backoff.c */
extern Interval *occ_usec_to_interval(double usec);
extern double occ_backoff_delay(const OccBackoff *b, int attempt,
								double prev, double draw);
extern double occ_random_draw(void);

/* sleep.c */
extern void occ_sleep_usec(double usec);
extern void occ_check_client(void);

/* plan_cache.c */
extern OccBody *occ_body_find(const char *sql, uint64 sql_hash, int nargs,
							  const Oid *argtypes);
extern OccBody *occ_body_open(const char *sql, uint64 sql_hash, int nargs,
							  const Oid *argtypes);
extern int	occ_body_nstmts(const OccBody *body);
extern struct _SPI_plan *occ_body_plan(OccBody *body, int i);
extern bool occ_body_shares(const OccBody *body);
extern bool occ_body_warm(const OccBody *body);
extern void occ_body_analyze(OccBody *body);
extern void occ_body_close(OccBody *body);

/* foreign.c */
extern void occ_foreign_init(void);
extern void occ_foreign_watch(void);
extern const char *occ_foreign_unwatch(void);
extern bool occ_foreign_written_yet(void);

/* budget.c */
extern Size occ_budget_shmem_size(void);
extern void occ_budget_shmem_init(void);
extern void occ_budget_deposit(void);
extern bool occ_budget_withdraw(void);
extern bool occ_budget_read(double *tokens, int64 *refusals, TimestampTz *storm_began);
extern void occ_budget_reset(void);

/* result.c */
extern DestReceiver *occ_result_receiver(MemoryContext cxt);
extern Jsonb *occ_result_jsonb(DestReceiver *self);
extern void occ_result_free(DestReceiver *self);

/* key.c */

/* Longest text of a value kept for occ.stats, in bytes with the NUL */
#define OCC_KEY_TEXT_MAX 32

/* A value that a call's parameter carries: a candidate contention key */
typedef struct OccKeyValue
{
	uint64		hash;			/* canonical: see key.c */
	int			position;		/* of the parameter: $n */
	char		text[OCC_KEY_TEXT_MAX]; /* when asked for, else "" */
} OccKeyValue;

typedef struct OccKeyValues
{
	int			n;
	int			size;
	OccKeyValue *values;
} OccKeyValues;

/* The most contention keys one call or transaction may give */
#define OCC_KEYS_MAX 1000

extern Oid	occ_key_owner(void);
extern uint64 occ_key_hash(const char *key, const char *what, Oid owner);
extern void occ_key_check_count(int nkeys, const char *what);
extern int	occ_key_given(const OccRetrySpec *spec, uint64 *keys);
extern OccKeyValues *occ_key_values(const OccRetrySpec *spec, bool with_text);
extern uint64 occ_key_of_body(uint64 body_hash);
extern uint64 occ_key_of_value(uint64 body_hash, uint64 value_hash);

/* learner.c */
extern Size occ_learner_shmem_size(void);
extern void occ_learner_shmem_request(void);
extern void occ_learner_shmem_init(void);
extern bool occ_learner_knows(uint64 body);
extern void occ_learner_observe(uint64 body, const OccKeyValues *values,
								bool gated, bool failed);
extern int	occ_learner_keys(uint64 body, const OccKeyValues *values, uint64 *keys);
extern char *occ_learner_describe(Oid userid, Oid dbid, uint64 body, bool values);

/* gate.c: the gates of a call's keys, taken in one global order */
typedef struct OccGates OccGates;

typedef enum OccGateWait
{
	OCC_GATE_TAKEN,
	OCC_GATE_TIMED_OUT,			/* the timeout (max_duration) ran out */
	OCC_GATE_UNAVAILABLE		/* deadlock, lock table full, lock_timeout */
} OccGateWait;

extern OccGates *occ_gates_create(const uint64 *keys, int nkeys);
extern int	occ_gates_count(const OccGates *gates);
extern uint64 occ_gates_key(const OccGates *gates, int i);
extern bool occ_gates_same(const OccGates *gates, const uint64 *keys, int nkeys);
extern OccGateWait occ_gates_wait(OccGates *gates, double timeout_usec,
								  bool lock_timeout);
extern bool occ_gates_held(OccGates *gates);
extern void occ_gates_release(OccGates *gates);
extern void occ_gate_lock_keys(uint64 *keys, int nkeys);

/* temperature.c */
extern Size occ_temperature_shmem_size(void);
extern void occ_temperature_shmem_init(void);
extern bool occ_temperature_is_hot(uint64 key_hash);
extern void occ_temperature_observe(uint64 key_hash, bool gated, bool failed);

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
	const char *foreign_table;	/* written to by the attempt, or NULL */
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

/* subxact.c */
extern ErrorData *occ_subxact_run(bool (*step) (void *arg), void *arg);

/* sqlstate.c */
extern OccSqlstatesProblem occ_parse_sqlstates(List *items, OccSqlstates *out,
											   const char **bad);
extern bool occ_sqlstates_match(const OccSqlstates *list, int sqlerrcode);

/* stats.c */
extern Size occ_stats_shmem_size(void);
extern void occ_stats_shmem_init(void);
extern void occ_stats_failure(OccCallResult *result, int sqlerrcode);
extern void occ_stats_record(const char *sql, uint64 sql_hash,
							 const OccCallResult *result);
extern void occ_stats_record_key(const char *key, uint64 key_hash,
								 const OccCallResult *result);

/* session.c: what a body depends on and leaves in its session */
#define OCC_SESSION_LOCKS_MAX 64

typedef struct OccSessionLocks
{
	int			n;				/* how many (more than MAX: only counted) */
	LOCKTAG		tags[OCC_SESSION_LOCKS_MAX];
	LOCKMASK	masks[OCC_SESSION_LOCKS_MAX];
} OccSessionLocks;

extern uint64 occ_session_fingerprint(void);
extern int	occ_session_settings_open(void);
extern bool occ_session_settings_local(int level, uint64 fingerprint);
extern bool occ_session_settings_close(int level, uint64 fingerprint, bool undo);
extern bool occ_session_has_temp(void);
extern bool occ_session_stmt_keeps(Node *stmt);
extern void occ_session_note_utility(Node *stmt);
extern void occ_session_utility_reset(bool forget_notifies);
extern bool occ_session_utility_kept(void);
extern OccSessionLocks *occ_session_locks(void);
extern bool occ_session_locks_changed(const OccSessionLocks *before);
extern void occ_session_locks_restore(const OccSessionLocks *before);

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

/* client.c */
extern bool occ_client_setting_key;
extern void occ_client_init(void);

/* reservable.c: which columns are reservable, and their bounds */
typedef struct OccReservable
{
	Oid			relid;
	AttrNumber	attnum;			/* the reservable column */
	Oid			atttype;		/* smallint, integer or bigint */
	AttrNumber	pkattnum;		/* the one-column primary key */
	Oid			pkindex;
	Oid			pktype;
	Oid			pkcollation;
	RegProcedure pkeqproc;
	Oid			pkinput;
	Oid			pkioparam;
	Oid			pkoutput;
	bool		has_lower;		/* c >= lower, by constraint lower_name */
	bool		has_upper;		/* c <= upper, by constraint upper_name */
	int64		lower;
	int64		upper;
	char		lower_name[NAMEDATALEN];
	char		upper_name[NAMEDATALEN];
} OccReservable;

extern const OccReservable *occ_reservable_get(Relation rel, const char *colname);
extern bool occ_reservable_is_guard(const Trigger *trigger, const char *colname);
extern bool occ_reservable_declared(Relation rel, const char *colname);
extern void occ_reservable_describe(Relation rel, AttrNumber attnum, OccReservable *decl);
extern void occ_reservable_require_args(FunctionCallInfo fcinfo, int nargs, const char *fname);
extern bool occ_reservable_may_read(Oid relid, AttrNumber attnum, AttrNumber pkattnum);
extern void occ_reservable_check_any(Relation rel, bool write);
extern void occ_reservable_check_access(Relation rel, const OccReservable *decl, bool write);

/* ledger.c: occ.reservation_ledger, below SQL */
typedef struct OccLedgerRow
{
	Oid			relid;
	char	   *col;
	char	   *key;
	int64		delta;
	ItemPointerData tid;
	bool		ours;			/* inserted by the current transaction */
} OccLedgerRow;

extern Oid	occ_ledger_oid(void);
extern Relation occ_ledger_open(LOCKMODE mode);
extern void occ_ledger_append(Oid relid, const char *col, const char *key, int64 delta);
extern struct TableScanDescData *occ_ledger_scan(Relation ledger, Snapshot snapshot, Oid relid,
												 const char *col, const char *key);
extern void occ_ledger_row(Relation ledger, HeapTuple tuple, OccLedgerRow *row);
extern void occ_ledger_delete_rows(Relation ledger, Oid relid, const char *col);

/* escrow.c: the rows' entries, and the transaction's reservations;
 * escrow_load.c: a row's committed value, read from the tables */
#define OCC_ESCROW_KEYLEN 256	/* a primary key's text, at most, with its NUL */

typedef struct OccEscrowTag
{
	Oid			dbid;
	Oid			relid;
	AttrNumber	attnum;
	char		key[OCC_ESCROW_KEYLEN]; /* the key's text, zero-padded */
} OccEscrowTag;

typedef struct OccEscrowRow
{
	OccEscrowTag tag;
	slock_t		mutex;			/* the fields below */
	bool		loaded;			/* committed is known */
	pid_t		loader;			/* the backend loading it, until loaded */
	int64		committed;		/* column + committed ledger rows */
	int64		down;			/* in-flight decrements, <= 0 */
	int64		up;				/* in-flight increments, >= 0 */
	int32		in_flight;		/* reservations in flight */
	int64		reservations;	/* taken, since it entered */
	int64		refusals;
	int64		waits;			/* for another's load or a fold */
	int64		fold_failures;	/* folds of the row that failed */
	char		fold_error[96]; /* the last one's error, "" once folded */
} OccEscrowRow;

extern int	occ_reservable_rows;
extern Size occ_escrow_shmem_size(void);
extern void occ_escrow_shmem_request(void);
extern void occ_escrow_shmem_init(void);
extern bool occ_escrow_ready(void);
extern void occ_escrow_require_preload(void);
extern void occ_escrow_forget(Oid relid, AttrNumber attnum);
extern void occ_escrow_pause(void);
extern int64 occ_escrow_read_snapshot(Relation rel, const OccReservable *decl, Datum key,
									  const char *keytext, Snapshot snapshot, int *ledger_rows,
									  bool *ours);
extern int64 occ_escrow_read_stable(Relation rel, const OccReservable *decl, Datum key,
									const char *keytext, int *waits);
extern OccEscrowRow *occ_escrow_row(const OccEscrowTag *tag, Relation rel,
									const OccReservable *decl, Datum key, int *waits);
extern void occ_escrow_release(void);
extern int64 occ_escrow_committed(OccEscrowRow *row);
extern int64 occ_escrow_own(OccEscrowRow *row);
extern void occ_escrow_take(OccEscrowRow *row, Relation rel, const OccReservable *decl,
							const char *keytext, int64 delta, bool forced, int waits);
extern void occ_escrow_report_fold(Oid relid, AttrNumber attnum, const char *key,
								   const char *error);
extern int	occ_escrow_copy(OccEscrowRow *copies, int max);

/* reserve.c: occ.reserve() and the other SQL of reservations */
extern void occ_escrow_replicated(Relation rel, const OccReservable *decl, const char *key,
								  int64 delta);

/* guard.c: the guard trigger */
extern void occ_guard_allow_fold(const OccReservable *decl, const char *key, int128 delta);

/* ddl.c: reservable columns under DDL */
extern void occ_ddl_init(void);

/* fold_apply.c: a column's committed reservations applied to its table */
typedef void (*OccFoldReport) (Oid relid, AttrNumber attnum, const char *key, ErrorData *edata);
extern int	occ_fold_apply(Relation rel, const char *col, bool each_row, OccFoldReport report);

/* fold.c: the background worker that applies committed reservations */
extern int	occ_fold_interval;
extern Size occ_fold_shmem_size(void);
extern void occ_fold_shmem_init(void);
extern bool occ_fold_stable_begin(Oid relid, uint64 *generation);
extern bool occ_fold_stable_end(Oid relid, uint64 generation);
extern void occ_fold_committed(void);

/* fold_launcher.c: the workers started after a restart, or a worker's exit */
extern void occ_fold_register_launcher(void);

#endif							/* PG_OCC_H */
