/*-------------------------------------------------------------------------
 *
 * temperature.c
 *		Which contention keys are hot: decaying counts of attempts and
 *		failures per key, in shared memory.
 *
 * With pg_occ preloaded, each key of each database hashes to three slots,
 * each a pair of exponentially decaying counts (time
 * constant OCC_HEAT_TAU_USEC): attempts that ran without the gate, and
 * attempts that failed.  A key is hot while its recent failures are at least
 * OCC_HOT_MIN_FAILURES and at least OCC_HOT_FAILURE_RATIO of its ungated
 * attempts.  A slot counts for one key of one database at a time: a key is
 * counted in whichever of its slots counts it, else takes over one that is
 * not hot (the coldest), and is cold (not counted) while all count other
 * keys that are hot.  Two of a key's slots are among OCC_HEAT_SHARED_SLOTS
 * that every tenant's keys share, the third in its tenant's region (a
 * tenant is a role of a database; OCC_HEAT_REGIONS regions of
 * OCC_HEAT_REGION_SLOTS, a region shared by the tenants whose database and
 * role OIDs fall on it): a tenant that keeps thousands of keys hot fills the
 * shared slots, and another tenant's keys still get hot in their region.  So a key can only be heated by
 * its own callers' failures, never by another key's or another database's;
 * sharing slots at worst leaves a hot key uncounted, whose calls then queue
 * only after a failure.  The slots are chosen with a secret drawn at
 * startup: a role cannot compute, from the public hash functions, keys of
 * its own that land on another database's key's slots, and keep them hot so
 * that that key never gets hot.  Without preloading there are no slots and
 * no key is hot.
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
#include "queue/queue.h"

/* temperature slots in shared memory, and what makes a key hot */
#define OCC_HEAT_SHARED_SLOTS 4096
#define OCC_HEAT_REGIONS 64
#define OCC_HEAT_REGION_SLOTS 64
#define OCC_HEAT_SLOTS (OCC_HEAT_SHARED_SLOTS + OCC_HEAT_REGIONS * OCC_HEAT_REGION_SLOTS)
#define OCC_HEAT_TAU_USEC 1000000.0
#define OCC_HOT_MIN_FAILURES 1.0
#define OCC_HOT_FAILURE_RATIO 0.25

/* three slots per key, drawn with a secret: see the file header */
#define OCC_HEAT_CHOICES 3

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

typedef struct OccHeatShared
{
	uint64		secret;			/* drawn at startup, never shown */
	OccHeatSlot slots[OCC_HEAT_SLOTS];
} OccHeatShared;

static OccHeatShared *occ_heat = NULL;

/* occ_temperature_shmem_size: the shared memory of the slots */
Size
occ_temperature_shmem_size(void)
{
	return sizeof(OccHeatShared);
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
			SpinLockInit(&occ_heat->slots[i].mutex);
		if (!pg_strong_random(&occ_heat->secret, sizeof(occ_heat->secret)))
			occ_heat->secret = (uint64) GetCurrentTimestamp() ^ (uint64) MyProcPid;
	}
}

/*
 * occ_heat_slot: the choice-th slot (0 to 2) of a key of this database:
 * the first two shared, the last in the region of this role of this
 * database; occ_heat is set
 */
static OccHeatSlot *
occ_heat_slot(uint64 key_hash, int choice)
{
	uint64		h = hash_combine64(hash_combine64(key_hash, MyDatabaseId),
								   occ_heat->secret + choice);
	uint64		region;

	if (choice < OCC_HEAT_CHOICES - 1)
		return &occ_heat->slots[h % OCC_HEAT_SHARED_SLOTS];
	region = ((uint64) MyDatabaseId * 31 + GetUserId()) % OCC_HEAT_REGIONS;
	return &occ_heat->slots[OCC_HEAT_SHARED_SLOTS + region * OCC_HEAT_REGION_SLOTS +
							h % OCC_HEAT_REGION_SLOTS];
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
	TimestampTz now;

	if (occ_heat == NULL)
		return false;
	now = GetCurrentTimestamp();
	for (int c = 0; c < OCC_HEAT_CHOICES; c++)
	{
		OccHeatSlot seen;

		occ_heat_seen(occ_heat_slot(key_hash, c), now, &seen);
		if (occ_heat_counts(&seen, key_hash))
			return occ_heat_is_hot(&seen);
	}
	return false;
}

/*
 * occ_heat_choose: the slot to count the key in, and a copy of it decayed to
 * now with the key's counts (zero if it did not count them): the slot that
 * counts the key, else the coldest of those that are not hot; NULL when all
 * count other keys, hot
 */
static OccHeatSlot *
occ_heat_choose(uint64 key_hash, TimestampTz now, OccHeatSlot *seen)
{
	OccHeatSlot *chosen = NULL;

	for (int c = 0; c < OCC_HEAT_CHOICES; c++)
	{
		OccHeatSlot *slot = occ_heat_slot(key_hash, c);
		OccHeatSlot copy;

		occ_heat_seen(slot, now, &copy);
		if (occ_heat_counts(&copy, key_hash))
		{
			*seen = copy;
			return slot;
		}
		if (!occ_heat_is_hot(&copy) && (chosen == NULL || copy.failures < seen->failures))
		{
			chosen = slot;
			*seen = copy;
		}
	}
	if (chosen != NULL)
	{
		seen->ungated = 0;
		seen->failures = 0;
	}
	return chosen;
}

/*
 * occ_temperature_observe: account an attempt's outcome.  Gated attempts
 * count only when they fail (they lost to someone outside the gate);
 * ungated ones measure the failure rate.  Slots that count for other keys,
 * hot, are left to them.
 */
void
occ_temperature_observe(uint64 key_hash, bool gated, bool failed)
{
	TimestampTz now = GetCurrentTimestamp();

	if (occ_heat == NULL || (gated && !failed))
		return;
	for (;;)
	{
		OccHeatSlot seen;
		OccHeatSlot *slot = occ_heat_choose(key_hash, now, &seen);

		if (slot == NULL)
			return;
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
