/*-------------------------------------------------------------------------
 *
 * temperature.c
 *		Which contention keys are hot: decaying counts of attempts and
 *		failures per key, in shared memory.
 *
 * With pg_occ preloaded, each key hashes to one of OCC_HEAT_SLOTS slots,
 * each a pair of exponentially decaying counts (time constant
 * OCC_HEAT_TAU_USEC): attempts that ran without the gate, and attempts that
 * failed.  A key is hot while its recent failures are at least
 * OCC_HOT_MIN_FAILURES and at least OCC_HOT_FAILURE_RATIO of its ungated
 * attempts.  Two keys may share a slot: they then heat each other, which
 * costs at most a queueing that was not needed.  Without preloading there
 * are no slots and no key is hot.
 *
 * This file measures; what to do with a hot key is the policy's (policy.c).
 *
 * Decaying needs the clock and exp(), which do not belong under a spinlock:
 * a slot is read under its spinlock, the decay is computed outside, and the
 * result is written back only if no one changed the slot meanwhile (its
 * version), else the whole is done again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

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

/* occ_heat_slot: the slot of a key, or NULL without preloading */
static OccHeatSlot *
occ_heat_slot(uint64 key_hash)
{
	if (occ_heat == NULL)
		return NULL;
	return &occ_heat[key_hash % OCC_HEAT_SLOTS];
}

/*
 * occ_heat_update: decay the slot's counts to now and add ungated and
 * failures to them; returns the counts after.  The decay is computed
 * outside the spinlock (see the file header).
 */
static void
occ_heat_update(OccHeatSlot *slot, double ungated, double failures, OccHeatSlot *after)
{
	TimestampTz now = GetCurrentTimestamp();

	for (;;)
	{
		OccHeatSlot seen;
		double		factor = 1.0;

		SpinLockAcquire(&slot->mutex);
		seen = *slot;
		SpinLockRelease(&slot->mutex);

		if (now > seen.updated)
			factor = exp(-(double) (now - seen.updated) / OCC_HEAT_TAU_USEC);
		after->ungated = seen.ungated * factor + ungated;
		after->failures = seen.failures * factor + failures;

		SpinLockAcquire(&slot->mutex);
		if (slot->version == seen.version)
		{
			slot->version++;
			slot->updated = Max(now, seen.updated);
			slot->ungated = after->ungated;
			slot->failures = after->failures;
			SpinLockRelease(&slot->mutex);
			return;
		}
		SpinLockRelease(&slot->mutex);
	}
}

/* occ_temperature_is_hot: have recent attempts on this key failed often? */
bool
occ_temperature_is_hot(uint64 key_hash)
{
	OccHeatSlot *slot = occ_heat_slot(key_hash);
	OccHeatSlot now;

	if (slot == NULL)
		return false;
	occ_heat_update(slot, 0, 0, &now);
	return now.failures >= OCC_HOT_MIN_FAILURES &&
		now.failures >= OCC_HOT_FAILURE_RATIO * now.ungated;
}

/*
 * occ_temperature_observe: account an attempt's outcome.  Gated attempts
 * count only when they fail (they lost to someone outside the gate);
 * ungated ones measure the failure rate.
 */
void
occ_temperature_observe(uint64 key_hash, bool gated, bool failed)
{
	OccHeatSlot *slot = occ_heat_slot(key_hash);
	OccHeatSlot after;

	if (slot == NULL || (gated && !failed))
		return;
	occ_heat_update(slot, gated ? 0 : 1, failed ? 1 : 0, &after);
}
