/*-------------------------------------------------------------------------
 *
 * stats_entries.h
 *		The shared table of statistics entries (stats_entries.c): private
 *		to the files of stats/ (stats.c counts into it, stats_file.c keeps
 *		it over a clean restart, stats_views.c shows it).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_STATS_ENTRIES_H
#define PG_OCC_STATS_ENTRIES_H

#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/hsearch.h"

#include "pg_occ.h"

/* Longest query text kept, in bytes with the NUL; the hash covers the whole text */
#define OCC_QUERY_TEXT_MAX 1024

/* Attempts-per-call histogram buckets: 1, 2, 3-4, 5-8, 9-16, 17 and more */
#define OCC_HIST_BUCKETS 6

/* When the table is full, evict this share of the entries, at least OCC_EVICT_MIN */
#define OCC_EVICT_PERCENT 5
#define OCC_EVICT_MIN 10

/* What an entry counts */
typedef enum OccStatsKind
{
	OCC_STATS_RETRY,			/* occ.retry calls of a body */
	OCC_STATS_KEY				/* transactions that set occ.key */
} OccStatsKind;

typedef struct OccStatsKey
{
	Oid			userid;
	Oid			dbid;
	uint64		queryid;		/* the hash of the body, or of the key */
	int32		kind;			/* an OccStatsKind */
} OccStatsKey;

/* For OCC_STATS_KEY entries, a call is a transaction, a failure its abort */
typedef struct OccCounters
{
	int64		calls;
	int64		commits;
	int64		gave_up;
	int64		errors;			/* calls ended by a non-retryable error */
	int64		attempts;
	int64		serialization_failures;
	int64		deadlocks;
	int64		other_failures;
	double		total_sleep_time;	/* ms */
	double		max_sleep_time; /* ms */
	int64		queued;			/* calls that took the gate of their key */
	double		total_wait_time;	/* ms, waiting for the gate */
	double		max_wait_time;	/* ms */
	double		total_time;		/* ms */
	int64		max_attempts;	/* most attempts in one call */
	int64		hist[OCC_HIST_BUCKETS];
	int64		batched;		/* calls that committed in a batch with others */
	int64		batch_calls;	/* the sizes of their batches, summed */
} OccCounters;

typedef struct OccStatsEntry
{
	OccStatsKey key;			/* hash key, must be first */
	slock_t		mutex;			/* protects the counters */
	OccCounters counters;
	char		query[OCC_QUERY_TEXT_MAX];	/* the body, or the key */
} OccStatsEntry;

typedef struct OccStatsShared
{
	LWLock	   *lock;			/* protects the hash table's shape */
	slock_t		mutex;			/* protects the fields below */
	int64		dealloc;		/* entries evicted */
	TimestampTz stats_reset;
} OccStatsShared;

extern OccStatsShared *occ_stats_shared;
extern HTAB *occ_stats_hash;

/* stats_entries.c */
extern bool occ_stats_entries_attach(void);
extern void occ_stats_require_shared(void);
extern OccStatsEntry *occ_stats_enter(const OccStatsKey *key, const char *query, int len);
extern OccStatsEntry *occ_stats_find_or_create(const OccStatsKey *key, const char *sql);
extern void occ_stats_clear(void);

/* stats_file.c */
extern void occ_stats_save(int code, Datum arg);
extern void occ_stats_load(void);

#endif							/* PG_OCC_STATS_ENTRIES_H */
