/*-------------------------------------------------------------------------
 *
 * attempt.h
 *		src/attempt/ owns one attempt of a body: run as a whole transaction
 *		and committed (attempt.c), with its kept plans (plan_cache.c), its
 *		rows as jsonb (result.c), the foreign tables it writes to
 *		(foreign.c), a Citus deadlock's cancel (citus.c), and what it
 *		depends on and leaves in its session (session.c).  Used by the retry loop and by batch mode's leader.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_ATTEMPT_H
#define PG_OCC_ATTEMPT_H

#include "pg_occ.h"

/* attempt.c */
typedef struct OccBody OccBody;

/* What a failed attempt left: its error, and where it failed */
typedef struct OccAttemptFailure
{
	ErrorData  *edata;			/* in the attempt's memory context */
	bool		at_commit;		/* COMMIT failed, not a statement */
	const char *committed_first;	/* why part of it may have committed
									 * before COMMIT failed, or NULL */
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

/* plan_cache.c */
extern OccBody *occ_body_find(const char *sql, uint64 sql_hash, int nargs,
							  const Oid *argtypes);
extern OccBody *occ_body_open(const char *sql, uint64 sql_hash, int nargs,
							  const Oid *argtypes);
extern int	occ_body_nstmts(const OccBody *body);
extern struct _SPI_plan *occ_body_plan(OccBody *body, int i);
extern bool occ_body_shares(const OccBody *body);
extern bool occ_body_warm(const OccBody *body);
extern void occ_body_rehearse(OccBody *body);
extern void occ_body_close(OccBody *body);

/* result.c */
extern DestReceiver *occ_result_receiver(MemoryContext cxt);
extern Jsonb *occ_result_jsonb(DestReceiver *self);
extern void occ_result_free(DestReceiver *self);

/* foreign.c */
extern void occ_foreign_init(void);
extern void occ_foreign_watch(void);
extern const char *occ_foreign_unwatch(void);
extern bool occ_foreign_written_yet(void);

/* citus.c */
extern void occ_citus_deadlock_cancel(ErrorData *edata);
extern void occ_citus_commit_whole(void);
extern const char *occ_citus_prepare_commit(void);

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

#endif							/* PG_OCC_ATTEMPT_H */
