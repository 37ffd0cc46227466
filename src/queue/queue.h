/*-------------------------------------------------------------------------
 *
 * queue.h
 *		src/queue/ owns hot keys and their gates: a call's contention keys
 *		(key.c), which values its failures concentrate on (learner.c), the
 *		FIFO gates of keys (gate.c) and which keys are hot (temperature.c).
 *		The policy decides with them; nothing here decides.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_QUEUE_H
#define PG_OCC_QUEUE_H

#include "pg_occ.h"

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

#endif							/* PG_OCC_QUEUE_H */
