/*-------------------------------------------------------------------------
 *
 * learner.c
 *		Where a body's failures concentrate: which values its parameters
 *		carry when its attempts fail, learned in shared memory, so that
 *		queue mode finds a call's contention keys by itself.
 *
 * Calls that give no key run optimistically until their body fails.  From
 * then on, for each body (per role and database) that has failed recently, the
 * learner keeps decaying counts (time constant OCC_LEARN_TAU_USEC) of its
 * attempts and failures, and the same for up to OCC_LEARN_VALUES (position,
 * value) pairs that its failed attempts carried, chosen as the
 * Space-Saving algorithm chooses heavy hitters: a pair not tracked yet
 * replaces the pair with the fewest failures, taking over its count (an
 * overestimate, kept as the pair's error: decisions use the failures seen
 * since the pair was tracked).  Only failures the call would retry count.
 *
 * A pair that (nearly) every attempt carries (OCC_LEARN_MAX_CARRY: a
 * constant such as a work time, or the only branch of a small bank) is
 * constant: it says no more than the body itself, which has its own rule.
 * Any other pair becomes hot when failures concentrate on it: at least
 * OCC_LEARN_MIN_SHARE of the body's failures carry it, and the share of
 * failures that carry it exceeds the share of attempts that do (a lift of
 * OCC_LEARN_MIN_LIFT: under heavy contention nearly everything fails, and
 * the lift of even the hottest row stays small); and so does a value,
 * counted at every position where it is not constant (the ids of a
 * multi-row update come in any order).  A hot pair or value stays hot while
 * its ungated attempts (the probes, see policy.c) still fail at least
 * OCC_LEARN_STAY_RATE of the time, and more often than the body's ungated
 * attempts in general: it is serialised for a reason.
 * When no pair or value is hot but the body's ungated attempts fail at
 * least OCC_LEARN_BODY_RATE of the time (every call touches the same row,
 * its parameters varying elsewhere, or carrying the row's value in every
 * call), the body itself is hot, and stays so while its probes fail as
 * often.  It takes OCC_LEARN_BODY_MIN failures, so that values have their
 * chance first: serialising the whole body is the last resort; a probe
 * that runs beside a holder of the body's gate fails that often only when
 * every call touches the same row.  While the body is hot, no value becomes
 * hot: its failures are then those of a few probes (and of the calls that
 * a successful probe overtook), too few to say where they concentrate, and
 * a value made hot by chance would end the body's heat and let every call
 * that does not carry it run ungated, into the row they all touch.  Values
 * have their chance again once the body's probes stop failing.
 *
 * A call's keys are then the body with each value it carries at a position
 * where it is hot, as a pair or as a value (the rows of a transfer, the ids
 * of a multi-row update, share a gate whatever their position), or the body
 * alone when the body is hot; none otherwise: it runs optimistically,
 * without a gate.
 *
 * Bodies hash into sets of OCC_LEARN_WAYS of the OCC_LEARN_BODIES slots;
 * a body takes an empty or cold slot of its set (a set, not a single slot:
 * a body that shares its slot with one that has just been busy, say the
 * same body in a database just dropped, would otherwise go unlearned for
 * seconds).  One that finds every slot of its set taken by bodies still
 * warm takes the coldest of a tenant (a role of a database) that holds at
 * least two slots more than its own, and is not learned otherwise until
 * one cools: a tenant that keeps many bodies failing, in its database or
 * another, keeps at most its share of each set, and never switches
 * learning (queue mode without a key) off for the others.  The sets are
 * split over OCC_LEARN_LOCKS LWLocks (the counts decay with exp(), which an
 * LWLock, unlike a spinlock, may cover).  Without preloading there is
 * nothing to learn from: calls without a key run without a gate.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "pg_occ.h"
#include "queue/queue.h"

#define OCC_LEARN_BODIES 256
#define OCC_LEARN_WAYS 4			/* slots a body may take */
#define OCC_LEARN_VALUES 64
#define OCC_LEARN_LOCKS 16
#define OCC_LEARN_TAU_USEC 1000000.0
#define OCC_LEARN_DECIDE_USEC 10000	/* decisions after commits, at most */
#define OCC_LEARN_MIN_FAILURES 1.5	/* since tracked, decayed: two, one recent */
#define OCC_LEARN_MIN_SHARE 0.25
#define OCC_LEARN_MAX_CARRY 0.9
#define OCC_LEARN_MIN_LIFT 1.1
#define OCC_LEARN_STAY_RATE 0.25
#define OCC_LEARN_BODY_RATE 0.25
#define OCC_LEARN_BODY_MIN 8.0		/* decayed failures: values first */

/* below this many (decayed) attempts a slot is cold: another body may take it */
#define OCC_LEARN_COLD 0.5

/* Decaying counts of attempts */
typedef struct OccLearnCounts
{
	double		attempts;		/* all attempts */
	double		failures;		/* failed attempts (retryable failures) */
	double		ungated;		/* attempts run without a gate */
	double		ungated_failures;	/* of which failed */
} OccLearnCounts;

/* A (position, value) pair that failed attempts carried */
typedef struct OccLearnPair
{
	uint64		value;			/* the value's hash */
	int			position;		/* $n; 0: an empty entry */
	bool		hot;			/* hot at this position */
	bool		value_hot;		/* the value is hot, at whatever position */
	bool		constant;		/* (nearly) every attempt carries it */
	OccLearnCounts n;			/* failures include those taken over */
	double		error;			/* failures taken over from the pair replaced */
	char		text[OCC_KEY_TEXT_MAX]; /* for occ.stats */
} OccLearnPair;

/* A body's slot */
typedef struct OccLearnBody
{
	Oid			dbid;
	Oid			userid;			/* the role that calls: bodies are per role */
	uint64		body;			/* the body's hash; dbid 0: an empty slot */
	TimestampTz updated;		/* when the counts were last decayed */
	TimestampTz decided;		/* when the hot flags were last decided */
	bool		hot;			/* the body itself is hot */
	OccLearnCounts n;
	OccLearnPair pairs[OCC_LEARN_VALUES];
} OccLearnBody;

typedef struct OccLearnShared
{
	LWLockPadded *locks;
	OccLearnBody bodies[OCC_LEARN_BODIES];
} OccLearnShared;

static OccLearnShared *occ_learn = NULL;

/* occ_learner_shmem_size: the shared memory of the slots */
Size
occ_learner_shmem_size(void)
{
	return sizeof(OccLearnShared);
}

/* occ_learner_shmem_request: the learner's LWLocks, from the request hook */
void
occ_learner_shmem_request(void)
{
	RequestNamedLWLockTranche("pg_occ learner", OCC_LEARN_LOCKS);
}

/*
 * occ_learner_shmem_init: create or attach to the slots; called at startup
 * holding AddinShmemInitLock
 */
void
occ_learner_shmem_init(void)
{
	bool		found;

	occ_learn = ShmemInitStruct("pg_occ learner", sizeof(OccLearnShared), &found);
	if (!found)
	{
		memset(occ_learn->bodies, 0, sizeof(occ_learn->bodies));
		occ_learn->locks = GetNamedLWLockTranche("pg_occ learner");
	}
}

/* occ_learn_lock: the lock of a slot's set */
static LWLock *
occ_learn_lock(const OccLearnBody *slot)
{
	return &occ_learn->locks[(slot - occ_learn->bodies) / OCC_LEARN_WAYS % OCC_LEARN_LOCKS].lock;
}

/* occ_learn_set_of: the first slot of the set of a body of a role in a database */
static OccLearnBody *
occ_learn_set_of(Oid userid, Oid dbid, uint64 body)
{
	uint64		h = hash_combine64(hash_combine64(body, dbid), userid);

	return &occ_learn->bodies[h % (OCC_LEARN_BODIES / OCC_LEARN_WAYS) * OCC_LEARN_WAYS];
}

/* occ_learn_set: the first slot of the set of a body of this role here */
static OccLearnBody *
occ_learn_set(uint64 body)
{
	return occ_learn_set_of(GetUserId(), MyDatabaseId, body);
}

/*
 * occ_learn_find_of: the slot of a body of a role in a database in its set,
 * or NULL (holding the set's lock)
 */
static OccLearnBody *
occ_learn_find_of(OccLearnBody *set, Oid userid, Oid dbid, uint64 body)
{
	for (int i = 0; i < OCC_LEARN_WAYS; i++)
		if (set[i].dbid == dbid && set[i].userid == userid && set[i].body == body)
			return &set[i];
	return NULL;
}

/* occ_learn_find: the slot of a body of this role here, or NULL */
static OccLearnBody *
occ_learn_find(OccLearnBody *set, uint64 body)
{
	return occ_learn_find_of(set, GetUserId(), MyDatabaseId, body);
}

/* occ_learn_decay_counts: multiply counts by factor */
static void
occ_learn_decay_counts(OccLearnCounts *n, double factor)
{
	n->attempts *= factor;
	n->failures *= factor;
	n->ungated *= factor;
	n->ungated_failures *= factor;
}

/* occ_learn_decay: bring a slot's counts to now (holding its lock) */
static void
occ_learn_decay(OccLearnBody *slot, TimestampTz now)
{
	double		factor;

	if (now <= slot->updated)
		return;
	factor = exp(-(double) (now - slot->updated) / OCC_LEARN_TAU_USEC);
	occ_learn_decay_counts(&slot->n, factor);
	for (int i = 0; i < OCC_LEARN_VALUES; i++)
	{
		occ_learn_decay_counts(&slot->pairs[i].n, factor);
		slot->pairs[i].error *= factor;
	}
	slot->updated = now;
}

/* occ_learn_count: count an attempt in n */
static void
occ_learn_count(OccLearnCounts *n, bool gated, bool failed)
{
	n->attempts += 1;
	n->failures += failed ? 1 : 0;
	n->ungated += gated ? 0 : 1;
	n->ungated_failures += (failed && !gated) ? 1 : 0;
}

/* occ_learn_pair: the tracked pair of a value at a position, or NULL */
static OccLearnPair *
occ_learn_pair(OccLearnBody *slot, const OccKeyValue *v)
{
	for (int i = 0; i < OCC_LEARN_VALUES; i++)
		if (slot->pairs[i].position == v->position && slot->pairs[i].value == v->hash)
			return &slot->pairs[i];
	return NULL;
}

/*
 * occ_learn_track: a failed attempt carried v, which is not tracked: track
 * it in an empty entry or instead of the pair with the fewest failures
 * (Space-Saving: it takes over that count, an overestimate)
 */
static OccLearnPair *
occ_learn_track(OccLearnBody *slot, const OccKeyValue *v)
{
	OccLearnPair *least = &slot->pairs[0];
	double		count;

	for (int i = 0; i < OCC_LEARN_VALUES; i++)
	{
		OccLearnPair *p = &slot->pairs[i];

		if (p->position == 0)
		{
			least = p;
			break;
		}
		if (p->n.failures < least->n.failures)
			least = p;
	}
	count = least->position == 0 ? 0 : least->n.failures;
	memset(least, 0, sizeof(*least));
	least->value = v->hash;
	least->position = v->position;
	least->n.failures = count;
	least->error = count;
	strlcpy(least->text, v->text, sizeof(least->text));
	return least;
}

/* occ_learn_rate_holds: do ungated attempts fail at least rate of the time? */
static bool
occ_learn_rate_holds(const OccLearnCounts *n, double rate, double min_failures)
{
	return n->ungated_failures >= min_failures && n->ungated_failures >= rate * n->ungated;
}

/*
 * occ_learn_concentrates: do the body's failures concentrate on what n
 * counts (a pair, or a value at any position)?  See the file header.
 */
static bool
occ_learn_concentrates(const OccLearnBody *slot, const OccLearnCounts *n, double error)
{
	double		failures = n->failures - error;	/* at least, since tracked */

	return failures >= OCC_LEARN_MIN_FAILURES &&
		n->attempts < OCC_LEARN_MAX_CARRY * slot->n.attempts &&
		failures >= OCC_LEARN_MIN_SHARE * slot->n.failures &&
		failures * slot->n.attempts >= OCC_LEARN_MIN_LIFT * n->attempts * slot->n.failures;
}

/*
 * occ_learn_stays: is what n counts, hot, still hot?  While its probes fail
 * often (OCC_LEARN_STAY_RATE) and more often than the body's ungated
 * attempts do (a lift of OCC_LEARN_MIN_LIFT: under heavy contention
 * everything fails often, and only a hot value makes its probes fail more),
 * unless it became constant.
 */
static bool
occ_learn_stays(const OccLearnBody *slot, const OccLearnCounts *n)
{
	return n->attempts < OCC_LEARN_MAX_CARRY * slot->n.attempts &&
		occ_learn_rate_holds(n, OCC_LEARN_STAY_RATE, 0.5) &&
		n->ungated_failures * slot->n.ungated >=
		OCC_LEARN_MIN_LIFT * n->ungated * slot->n.ungated_failures;
}

/*
 * occ_learn_value_counts: the counts of a value at every position it was
 * tracked at
 */
static void
occ_learn_value_counts(const OccLearnBody *slot, uint64 value, OccLearnCounts *sum,
					   double *error)
{
	memset(sum, 0, sizeof(*sum));
	*error = 0;
	for (int i = 0; i < OCC_LEARN_VALUES; i++)
	{
		const OccLearnPair *p = &slot->pairs[i];

		if (p->position == 0 || p->value != value || p->constant)
			continue;
		sum->attempts += p->n.attempts;
		sum->failures += p->n.failures;
		sum->ungated += p->n.ungated;
		sum->ungated_failures += p->n.ungated_failures;
		*error += p->error;
	}
}

/*
 * occ_learn_decide: update which pairs and values, or whether the body, are
 * hot (holding the slot's lock)
 */
static void
occ_learn_decide(OccLearnBody *slot)
{
	bool		body_hot = slot->hot;
	bool		any = false;

	for (int i = 0; i < OCC_LEARN_VALUES; i++)
		slot->pairs[i].constant =
			slot->pairs[i].n.attempts >= OCC_LEARN_MAX_CARRY * slot->n.attempts;
	for (int i = 0; i < OCC_LEARN_VALUES; i++)
	{
		OccLearnPair *p = &slot->pairs[i];
		OccLearnCounts value;
		double		error;

		if (p->position == 0)
			continue;
		occ_learn_value_counts(slot, p->value, &value, &error);
		p->hot = p->hot ? occ_learn_stays(slot, &p->n) :
			!body_hot && occ_learn_concentrates(slot, &p->n, p->error);
		p->value_hot = p->value_hot ? occ_learn_stays(slot, &value) :
			!body_hot && occ_learn_concentrates(slot, &value, error);
		any |= (p->hot || p->value_hot) && !p->constant;
	}
	if (any)
		slot->hot = false;
	else if (slot->hot)
		slot->hot = occ_learn_rate_holds(&slot->n, OCC_LEARN_BODY_RATE, 0.5);
	else
		slot->hot = occ_learn_rate_holds(&slot->n, OCC_LEARN_BODY_RATE, OCC_LEARN_BODY_MIN);
}

/* occ_learn_tenant_slots: how many slots of the set a role of a database holds */
static int
occ_learn_tenant_slots(const OccLearnBody *set, Oid userid, Oid dbid)
{
	int			n = 0;

	for (int i = 0; i < OCC_LEARN_WAYS; i++)
		n += (set[i].dbid == dbid && set[i].userid == userid);
	return n;
}

/*
 * occ_learn_evictable: in a set whose slots are all warm, the coldest slot
 * of the role (of a database) holding the most of them, if it holds at least
 * two more than this role here: so that no tenant keeps another out of a
 * set by keeping its own bodies failing (each tenant gets its share of the
 * set); NULL if there is none
 */
static OccLearnBody *
occ_learn_evictable(OccLearnBody *set)
{
	int			mine = occ_learn_tenant_slots(set, GetUserId(), MyDatabaseId);
	OccLearnBody *victim = NULL;
	int			most = mine + 1;

	for (int i = 0; i < OCC_LEARN_WAYS; i++)
	{
		int			theirs = occ_learn_tenant_slots(set, set[i].userid, set[i].dbid);

		if (theirs > most ||
			(theirs == most && victim != NULL && set[i].n.attempts < victim->n.attempts))
		{
			most = theirs;
			victim = &set[i];
		}
	}
	return victim;
}

/*
 * occ_learn_take: a slot of the set for a body of this role here that
 * failed: an empty one or the coldest cold one, else one that another role
 * (or database) holds more than its share of (occ_learn_evictable), or
 * NULL (holding the set's lock exclusively)
 */
static OccLearnBody *
occ_learn_take(OccLearnBody *set, uint64 body, TimestampTz now)
{
	OccLearnBody *slot = NULL;

	for (int i = 0; i < OCC_LEARN_WAYS; i++)
	{
		occ_learn_decay(&set[i], now);
		if (set[i].dbid == InvalidOid || set[i].n.attempts < OCC_LEARN_COLD)
			if (slot == NULL || set[i].n.attempts < slot->n.attempts)
				slot = &set[i];
	}
	if (slot == NULL)
		slot = occ_learn_evictable(set);
	if (slot == NULL)
		return NULL;
	memset(slot, 0, sizeof(*slot));
	slot->dbid = MyDatabaseId;
	slot->userid = GetUserId();
	slot->body = body;
	slot->updated = now;
	return slot;
}

/*
 * occ_learner_knows: has the body failed recently, so that its calls
 * should hash their values for the learner?
 */
bool
occ_learner_knows(uint64 body)
{
	OccLearnBody *set;
	bool		knows;

	if (occ_learn == NULL)
		return false;
	set = occ_learn_set(body);
	LWLockAcquire(occ_learn_lock(set), LW_SHARED);
	knows = occ_learn_find(set, body) != NULL;
	LWLockRelease(occ_learn_lock(set));
	return knows;
}

/*
 * occ_learner_observe: an attempt of the body ended; it carried values
 * (NULL if they were not hashed: its body was not known before), it ran
 * gated or not, it failed retryably or not.  A failure makes the body
 * known, taking a cold slot.
 */
void
occ_learner_observe(uint64 body, const OccKeyValues *values, bool gated, bool failed)
{
	TimestampTz now = GetCurrentTimestamp();
	OccLearnBody *set;
	OccLearnBody *slot;

	if (occ_learn == NULL)
		return;
	set = occ_learn_set(body);
	LWLockAcquire(occ_learn_lock(set), LW_EXCLUSIVE);
	slot = occ_learn_find(set, body);
	if (slot == NULL && failed)
		slot = occ_learn_take(set, body, now);
	if (slot == NULL)
	{
		LWLockRelease(occ_learn_lock(set));
		return;
	}
	occ_learn_decay(slot, now);
	occ_learn_count(&slot->n, gated, failed);
	for (int i = 0; values != NULL && i < values->n; i++)
	{
		OccLearnPair *p = occ_learn_pair(slot, &values->values[i]);

		if (p == NULL && failed)
			p = occ_learn_track(slot, &values->values[i]);
		if (p != NULL)
			occ_learn_count(&p->n, gated, failed);
	}
	/*
	 * Deciding scans every pair for its value: after each failure, but
	 * after a commit at most every OCC_LEARN_DECIDE_USEC, so that a hot
	 * body's commits do not queue on its lock
	 */
	if (failed || now - slot->decided >= OCC_LEARN_DECIDE_USEC)
	{
		occ_learn_decide(slot);
		slot->decided = now;
	}
	LWLockRelease(occ_learn_lock(set));
}

/*
 * occ_learn_gates: does a call that carries v take the gate of v?  When v
 * is hot at its position, or hot at any position.
 */
static bool
occ_learn_gates(const OccLearnBody *slot, const OccKeyValue *v)
{
	for (int i = 0; i < OCC_LEARN_VALUES; i++)
	{
		const OccLearnPair *p = &slot->pairs[i];

		if (p->position == v->position && p->value == v->hash && !p->constant &&
			(p->value_hot || p->hot))
			return true;
	}
	return false;
}

/*
 * occ_learner_keys: the learned keys of a call of the body that carries
 * values, into keys (room for values->n + 1); returns their number, 0 when
 * the call should run without a gate
 */
int
occ_learner_keys(uint64 body, const OccKeyValues *values, uint64 *keys)
{
	OccLearnBody *set;
	OccLearnBody *slot;
	int			n = 0;

	if (occ_learn == NULL)
		return 0;
	set = occ_learn_set(body);
	LWLockAcquire(occ_learn_lock(set), LW_SHARED);
	slot = occ_learn_find(set, body);
	if (slot != NULL)
	{
		if (slot->hot)
			keys[n++] = occ_key_of_body(body);
		for (int i = 0; !slot->hot && i < values->n; i++)
			if (occ_learn_gates(slot, &values->values[i]))
				keys[n++] = occ_key_of_value(body, values->values[i].hash);
	}
	LWLockRelease(occ_learn_lock(set));
	return n;
}

/*
 * occ_learner_describe: what the learner decided for a body of a role in a
 * database, for occ.stats: "$2 = 42" for each hot pair ("$2" without values:
 * for roles other than the caller's, values are what pg_stat_statements
 * normalises away), "body" when the body is hot, NULL when nothing is
 */
char *
occ_learner_describe(Oid userid, Oid dbid, uint64 body, bool values)
{
	OccLearnBody *set;
	OccLearnBody *slot;
	StringInfoData s;

	if (occ_learn == NULL)
		return NULL;
	initStringInfo(&s);
	set = occ_learn_set_of(userid, dbid, body);
	LWLockAcquire(occ_learn_lock(set), LW_SHARED);
	slot = occ_learn_find_of(set, userid, dbid, body);
	if (slot != NULL)
	{
		if (slot->hot)
			appendStringInfoString(&s, "body");
		for (int i = 0; i < OCC_LEARN_VALUES; i++)
			if (slot->pairs[i].position > 0 && !slot->pairs[i].constant &&
				(slot->pairs[i].hot || slot->pairs[i].value_hot))
			{
				appendStringInfo(&s, "%s$%d", s.len > 0 ? ", " : "",
								 slot->pairs[i].position);
				if (values)
					appendStringInfo(&s, " = %s", slot->pairs[i].text);
			}
	}
	LWLockRelease(occ_learn_lock(set));
	if (s.len == 0)
	{
		pfree(s.data);
		return NULL;
	}
	return s.data;
}
