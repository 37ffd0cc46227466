/*-------------------------------------------------------------------------
 *
 * temperature.c
 *		Which contention keys are hot: decaying counts of attempts and
 *		failures per key, in shared memory.
 *
 * With pg_occ preloaded, each key of each database hashes to one of
 * OCC_HEAT_SLOTS slots, each a pair of exponentially decaying counts (time
 * constant OCC_HEAT_TAU_USEC): attempts that ran without the gate, and
 * attempts that failed.  A key is hot while its recent failures are at least
 * OCC_HOT_MIN_FAILURES and at least OCC_HOT_FAILURE_RATIO of its ungated
 * attempts.  A slot counts for one key of one database at a time: another
 * key that hashes to it takes it over once the counts are no longer hot, and
 * is cold (not counted) until then.  So a key can only be heated by its own
 * callers' failures, never by another key's or another database's; sharing a
 * slot at worst leaves a hot key uncounted, whose calls then queue only after
 * a failure.  Without preloading there are no slots and no key is hot.
 *
 * This file measures; what to do with a hot key is the policy's (policy.c).
 *
 * Decaying needs the clock and exp(), which do not belong under a spinlock:
 * a slot is copied under its spinlock and the decay computed outside; a
 * change is written back only if no one changed the slot meanwhile (its
 * version), else the whole is done again.  Reading does not write: a decay
 * stored or not gives the same counts later.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "pg_occ.h"

/* temperature slots in shared memory, and what makes a key hot */
#define OCC_HEAT_SLOTS 4096
#define OCC_HEAT_TAU_USEC 1000000.0
#define OCC_HOT_MIN_FAILURES 1.0
#define OCC_HOT_FAILURE_RATIO 0.25

typedef struct OccHeatSlot
{
	slock_t		mutex;
	uint64		version;		/* bumped at every change */
	Oid			dbid;			/* the database of the key counted, or 0 */
	uint64		key_hash;		/* the key counted */
	TimestampTz updated;		/* when the counts below were last decayed */
	double		ungated;		/* decaying count of attempts run ungated */
	double		failures;		/* decaying count of failed attempts */
} OccHeatSlot;

static OccHeatSlot *occ_heat = NULL;

/* occ_temperature_shmem_size: the shared memory of the slots */
Size
occ_temperature_shmem_size(void)
{
	return mul_size(OCC_HEAT_SLOTS, sizeof(OccHeatSlot));
}

/*
 * occ_temperature_shmem_init: create or attach to the slots; called at
 * startup holding AddinShmemInitLock
 */
void
occ_temperature_shmem_init(void)
{
	bool		found;

	occ_heat = ShmemInitStruct("pg_occ gate temperature",
							   occ_temperature_shmem_size(), &found);
	if (!found)
	{
		memset(occ_heat, 0, occ_temperature_shmem_size());
		for (int i = 0; i < OCC_HEAT_SLOTS; i++)
			SpinLockInit(&occ_heat[i].mutex);
	}
}

/* occ_heat_slot: the slot of a key of this database, or NULL without preloading */
static OccHeatSlot *
occ_heat_slot(uint64 key_hash)
{
	if (occ_heat == NULL)
		return NULL;
	return &occ_heat[hash_combine64(key_hash, MyDatabaseId) % OCC_HEAT_SLOTS];
}

/*
 * occ_heat_seen: a copy of the slot, its counts decayed to now, without
 * writing to it
 */
static void
occ_heat_seen(OccHeatSlot *slot, TimestampTz now, OccHeatSlot *seen)
{
	SpinLockAcquire(&slot->mutex);
	*seen = *slot;
	SpinLockRelease(&slot->mutex);

	if (now > seen->updated)
	{
		double		factor = exp(-(double) (now - seen->updated) / OCC_HEAT_TAU_USEC);

		seen->ungated *= factor;
		seen->failures *= factor;
		seen->updated = now;
	}
}

/* occ_heat_is_hot: do the counts make a key hot? */
static bool
occ_heat_is_hot(const OccHeatSlot *counts)
{
	return counts->failures >= OCC_HOT_MIN_FAILURES &&
		counts->failures >= OCC_HOT_FAILURE_RATIO * counts->ungated;
}

/* occ_heat_counts: are the slot's counts the key's (of this database)? */
static bool
occ_heat_counts(const OccHeatSlot *seen, uint64 key_hash)
{
	return seen->dbid == MyDatabaseId && seen->key_hash == key_hash;
}

/* occ_temperature_is_hot: have recent attempts on this key failed often? */
bool
occ_temperature_is_hot(uint64 key_hash)
{
	OccHeatSlot *slot = occ_heat_slot(key_hash);
	OccHeatSlot seen;

	if (slot == NULL)
		return false;
	occ_heat_seen(slot, GetCurrentTimestamp(), &seen);
	return occ_heat_counts(&seen, key_hash) && occ_heat_is_hot(&seen);
}

/*
 * occ_temperature_observe: account an attempt's outcome.  Gated attempts
 * count only when they fail (they lost to someone outside the gate);
 * ungated ones measure the failure rate.  A slot that counts for another
 * key, hot, is left to it.
 */
void
occ_temperature_observe(uint64 key_hash, bool gated, bool failed)
{
	OccHeatSlot *slot = occ_heat_slot(key_hash);
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL || (gated && !failed))
		return;
	for (;;)
	{
		OccHeatSlot seen;

		occ_heat_seen(slot, now, &seen);
		if (!occ_heat_counts(&seen, key_hash))
		{
			if (occ_heat_is_hot(&seen))
				return;
			seen.ungated = 0;
			seen.failures = 0;
		}

		SpinLockAcquire(&slot->mutex);
		if (slot->version == seen.version)
		{
			slot->version++;
			slot->dbid = MyDatabaseId;
			slot->key_hash = key_hash;
			slot->updated = seen.updated;
			slot->ungated = seen.ungated + (gated ? 0 : 1);
			slot->failures = seen.failures + (failed ? 1 : 0);
			SpinLockRelease(&slot->mutex);
			return;
		}
		SpinLockRelease(&slot->mutex);
	}
}
