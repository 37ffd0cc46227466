/*-------------------------------------------------------------------------
 *
 * stats_entries.c
 *		The shared table of statistics entries: at most occ.stats_max, the
 *		least called evicted when it is full.
 *
 * Entries are created under the exclusive lock and updated under the
 * shared lock plus a per-entry spinlock (stats.c), so no increment is lost.
 * When the table is full, the 5% of entries (at least 10) with the fewest
 * calls (or transactions) are evicted at once, and counted.  Nothing here
 * raises an error but occ_stats_require_shared's: without memory, an entry
 * is not made.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "stats/stats.h"
#include "stats_entries.h"

OccStatsShared *occ_stats_shared = NULL;
HTAB	   *occ_stats_hash = NULL;

/* occ_stats_shmem_size: the shared memory the statistics need */
Size
occ_stats_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(OccStatsShared)),
					hash_estimate_size(occ_stats_max, sizeof(OccStatsEntry)));
}

/*
 * occ_stats_entries_attach: create or attach to the table; true if it was
 * there already.  Called at startup holding AddinShmemInitLock.
 */
bool
occ_stats_entries_attach(void)
{
	HASHCTL		info;
	bool		found;

	occ_stats_shared = ShmemInitStruct("pg_occ", sizeof(OccStatsShared), &found);
	if (!found)
	{
		occ_stats_shared->lock = &(GetNamedLWLockTranche("pg_occ"))->lock;
		SpinLockInit(&occ_stats_shared->mutex);
		occ_stats_shared->dealloc = 0;
		occ_stats_shared->stats_reset = GetCurrentTimestamp();
	}
	info.keysize = sizeof(OccStatsKey);
	info.entrysize = sizeof(OccStatsEntry);
	occ_stats_hash = occ_shmem_init_hash("pg_occ hash", occ_stats_max,
										 &info, HASH_ELEM | HASH_BLOBS);
	return found;
}

/* occ_stats_require_shared: the statistics need preloading; say so clearly */
void
occ_stats_require_shared(void)
{
	if (occ_stats_shared == NULL || occ_stats_hash == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_occ must be loaded via shared_preload_libraries to collect statistics"),
				 errhint("Add pg_occ to shared_preload_libraries in postgresql.conf and restart the server; "
						 "occ.retry and occ.backoff work without it.")));
}

/* occ_cmp_calls: qsort order of entries, fewest calls first */
static int
occ_cmp_calls(const void *a, const void *b)
{
	int64		ca = (*(OccStatsEntry *const *) a)->counters.calls;
	int64		cb = (*(OccStatsEntry *const *) b)->counters.calls;

	return (ca > cb) - (ca < cb);
}

/*
 * occ_evict: make room by removing, in one pass, OCC_EVICT_PERCENT of the
 * entries (at least OCC_EVICT_MIN) with the fewest calls, as
 * pg_stat_statements does: the scan and sort cost O(n log n) once per
 * n / 20 insertions, O(1) amortised per insertion, instead of a scan of the
 * whole table for each one.  Caller holds the lock exclusively.
 */
static void
occ_evict(void)
{
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;
	OccStatsEntry **entries;
	long		n = 0;
	long		nvictims;

	entries = palloc_extended(sizeof(OccStatsEntry *) * hash_get_num_entries(occ_stats_hash),
							  MCXT_ALLOC_NO_OOM);
	if (entries == NULL)
		return;					/* no room made: the insertion fails */
	hash_seq_init(&scan, occ_stats_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
		entries[n++] = entry;	/* counters read unlocked: a hint is enough */
	qsort(entries, n, sizeof(OccStatsEntry *), occ_cmp_calls);

	nvictims = Min(n, Max(OCC_EVICT_MIN, n * OCC_EVICT_PERCENT / 100));
	for (long i = 0; i < nvictims; i++)
		hash_search(occ_stats_hash, &entries[i]->key, HASH_REMOVE, NULL);
	pfree(entries);

	SpinLockAcquire(&occ_stats_shared->mutex);
	occ_stats_shared->dealloc += nvictims;
	SpinLockRelease(&occ_stats_shared->mutex);
}

/*
 * occ_stats_enter: a new entry for key, which is not in the table, with zero
 * counters and the len bytes of query as its text (len < OCC_QUERY_TEXT_MAX);
 * evicts first when the table is full; NULL when there is no room (no
 * error: see the file header).  Caller holds the lock exclusively.
 */
OccStatsEntry *
occ_stats_enter(const OccStatsKey *key, const char *query, int len)
{
	OccStatsEntry *entry;

	Assert(len >= 0 && len < OCC_QUERY_TEXT_MAX);
	if (hash_get_num_entries(occ_stats_hash) >= occ_stats_max)
		occ_evict();
	entry = hash_search(occ_stats_hash, key, HASH_ENTER_NULL, NULL);
	if (entry == NULL)
		return NULL;
	SpinLockInit(&entry->mutex);
	memset(&entry->counters, 0, sizeof(OccCounters));
	memcpy(entry->query, query, len);
	entry->query[len] = '\0';
	return entry;
}

/* occ_stats_clear: remove every entry.  Caller holds the lock exclusively. */
void
occ_stats_clear(void)
{
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;

	hash_seq_init(&scan, occ_stats_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
		hash_search(occ_stats_hash, &entry->key, HASH_REMOVE, NULL);
}

/*
 * occ_find_or_create: the entry for key, created (evicting if needed) when
 * missing; NULL when there is no room for it.  Returns with the lock held
 * in shared mode.
 */
OccStatsEntry *
occ_stats_find_or_create(const OccStatsKey *key, const char *sql)
{
	OccStatsEntry *entry;
	int			len;

	LWLockAcquire(occ_stats_shared->lock, LW_SHARED);
	entry = hash_search(occ_stats_hash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	LWLockRelease(occ_stats_shared->lock);
	LWLockAcquire(occ_stats_shared->lock, LW_EXCLUSIVE);
	if (hash_search(occ_stats_hash, key, HASH_FIND, NULL) == NULL)
	{
		/* cut on a character boundary of the database's encoding */
		len = pg_mbcliplen(sql, strlen(sql), OCC_QUERY_TEXT_MAX - 1);
		(void) occ_stats_enter(key, sql, len);
	}
	LWLockRelease(occ_stats_shared->lock);
	LWLockAcquire(occ_stats_shared->lock, LW_SHARED);
	/* it may have been evicted in between; then this call goes uncounted */
	return hash_search(occ_stats_hash, key, HASH_FIND, NULL);
}

