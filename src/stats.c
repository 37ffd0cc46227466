/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Retry statistics: shared counters per (role, database, transaction
 *		text) behind the occ.stats view, and per (role, database, key)
 *		behind occ.key_stats; the session's last call behind
 *		occ.last_retry().
 *
 * Modelled on pg_stat_statements.  With pg_occ in shared_preload_libraries,
 * a shared hash table of at most occ.stats_max entries holds the counters
 * of both kinds of entries: occ.retry calls of a body, whose queryid is a
 * 64-bit hash of the exact text passed to occ.retry (bodies take their
 * values as parameters, so the text is stable), and the application's
 * transactions that set occ.key (client.c), whose queryid is the key's
 * hash and whose text is the key.  Entries
 * are created under the exclusive lock and updated under the shared lock
 * plus a per-entry spinlock, so no increment is lost.  When the table is
 * full, the 5% of entries (at least 10) with the fewest calls (or
 * transactions) are evicted at once, and counted.  Recording raises no
 * error (client.c records from the end-of-transaction callback, when the
 * transaction has committed already): without memory, it counts nothing.
 *
 * The counters survive a clean shutdown, as pg_stat_statements' do: the
 * postmaster writes them at exit to pg_stat/pg_occ.stat (a temporary file
 * renamed into place) and the next start reads them back and removes the
 * file.  A crash writes nothing (the postmaster then resets shared memory
 * with a nonzero exit code), nor does an immediate shutdown (which exits
 * cleanly, but leaves pg_control saying the server was in production: the
 * next start recovers, as after a crash), and the file was removed when it
 * was read: after a crash occ.stats starts empty.  The file has a magic
 * number, a format version, the PostgreSQL major version, a fingerprint of
 * the entries' layout and a CRC; a file that is not ours, of another version
 * or layout, or damaged is ignored with a LOG line, and occ.stats starts
 * empty.  When it holds more entries than occ.stats_max (lowered since), the
 * most called are kept, and the others counted as evicted.
 *
 * occ.stats_info also shows the server-wide retry budget (budget.c).
 *
 * The session-local record of the last call works without preloading.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_control.h"
#include "catalog/pg_type.h"
#include "common/controldata_utils.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_stats);
PG_FUNCTION_INFO_V1(occ_key_stats);
PG_FUNCTION_INFO_V1(occ_stats_info);
PG_FUNCTION_INFO_V1(occ_stats_reset);
PG_FUNCTION_INFO_V1(occ_last_retry);

/* Longest query text kept, in bytes with the NUL; the hash covers the whole text */
#define OCC_QUERY_TEXT_MAX 1024

/* Attempts-per-call histogram buckets: 1, 2, 3-4, 5-8, 9-16, 17 and more */
#define OCC_HIST_BUCKETS 6

/* Columns of occ.stats: 0.4.0's; 0.2.0 and 0.3.0 have no learned_key, batched and mean_batch_size, 0.1.0 no queue columns either */
#define OCC_STATS_COLS 26
#define OCC_STATS_COLS_0_2 23
#define OCC_STATS_COLS_0_1 20

/* Columns of occ.key_stats */
#define OCC_KEY_STATS_COLS 12

/* When the table is full, evict this share of the entries, at least OCC_EVICT_MIN */
#define OCC_EVICT_PERCENT 5
#define OCC_EVICT_MIN 10

/* The statistics file, kept over a clean shutdown, and its header's constants */
#define OCC_STATS_FILE PGSTAT_STAT_PERMANENT_DIRECTORY "/pg_occ.stat"
#define OCC_STATS_FILE_MAGIC 0x4F435353 /* "OCSS" */
#define OCC_STATS_FILE_FORMAT 2 /* of the header and entries below */
#define OCC_PG_MAJOR (PG_VERSION_NUM / 100)	/* 1500 for 15: the major x 100 */

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

/*
 * The statistics file: this header, then for each entry an OccStatsFileEntry
 * followed by its query_len bytes of text (no NUL), then the CRC-32C of all
 * that.  The structs are written as they are in memory: the file is read
 * back only by the same build of pg_occ on the same machine, or is ignored.
 */
typedef struct OccStatsFileHeader
{
	uint32		magic;			/* OCC_STATS_FILE_MAGIC */
	uint32		format;			/* OCC_STATS_FILE_FORMAT */
	uint32		pg_major;		/* OCC_PG_MAJOR */
	uint32		layout;			/* occ_stats_layout() */
	int32		nentries;
	int64		dealloc;
	TimestampTz stats_reset;
} OccStatsFileHeader;

typedef struct OccStatsFileEntry
{
	OccStatsKey key;
	OccCounters counters;
	int32		query_len;
} OccStatsFileEntry;

/* The session's last call, for occ.last_retry() */
typedef struct OccLastCall
{
	bool		valid;
	OccCallResult result;
} OccLastCall;

static OccStatsShared *occ_shared = NULL;
static HTAB *occ_hash = NULL;
static OccLastCall occ_last = {false};

static void occ_stats_save(int code, Datum arg);
static void occ_stats_load(void);

/* occ_stats_shmem_size: the shared memory the statistics need */
Size
occ_stats_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(OccStatsShared)),
					hash_estimate_size(occ_stats_max, sizeof(OccStatsEntry)));
}

/*
 * occ_stats_shmem_init: create or attach to the shared state; called at
 * startup holding AddinShmemInitLock.  The postmaster, which creates it,
 * loads the statistics saved by the last clean shutdown and arranges for
 * them to be saved at its exit.
 */
void
occ_stats_shmem_init(void)
{
	HASHCTL		info;
	bool		found;

	occ_shared = ShmemInitStruct("pg_occ", sizeof(OccStatsShared), &found);
	if (!found)
	{
		occ_shared->lock = &(GetNamedLWLockTranche("pg_occ"))->lock;
		SpinLockInit(&occ_shared->mutex);
		occ_shared->dealloc = 0;
		occ_shared->stats_reset = GetCurrentTimestamp();
	}
	info.keysize = sizeof(OccStatsKey);
	info.entrysize = sizeof(OccStatsEntry);
	occ_hash = occ_shmem_init_hash("pg_occ hash", occ_stats_max,
								   &info, HASH_ELEM | HASH_BLOBS);

	/* the postmaster saves the counters when it exits, and loads them now */
	if (!IsUnderPostmaster)
		on_shmem_exit(occ_stats_save, (Datum) 0);
	if (!found)
		occ_stats_load();
}

/* occ_require_shared: the statistics need preloading; say so clearly */
static void
occ_require_shared(void)
{
	if (occ_shared == NULL || occ_hash == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_occ must be loaded via shared_preload_libraries to collect statistics"),
				 errhint("Add pg_occ to shared_preload_libraries in postgresql.conf and restart the server; "
						 "occ.retry and occ.backoff work without it.")));
}

/* occ_hist_bucket: the histogram bucket of a number of attempts */
static int
occ_hist_bucket(int attempts)
{
	int			bucket = 0;

	for (int limit = 1; attempts > limit && bucket < OCC_HIST_BUCKETS - 1; limit *= 2)
		bucket++;
	return bucket;
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

	entries = palloc_extended(sizeof(OccStatsEntry *) * hash_get_num_entries(occ_hash),
							  MCXT_ALLOC_NO_OOM);
	if (entries == NULL)
		return;					/* no room made: the insertion fails */
	hash_seq_init(&scan, occ_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
		entries[n++] = entry;	/* counters read unlocked: a hint is enough */
	qsort(entries, n, sizeof(OccStatsEntry *), occ_cmp_calls);

	nvictims = Min(n, Max(OCC_EVICT_MIN, n * OCC_EVICT_PERCENT / 100));
	for (long i = 0; i < nvictims; i++)
		hash_search(occ_hash, &entries[i]->key, HASH_REMOVE, NULL);
	pfree(entries);

	SpinLockAcquire(&occ_shared->mutex);
	occ_shared->dealloc += nvictims;
	SpinLockRelease(&occ_shared->mutex);
}

/*
 * occ_entry_enter: a new entry for key, which is not in the table, with zero
 * counters and the len bytes of query as its text (len < OCC_QUERY_TEXT_MAX);
 * evicts first when the table is full; NULL when there is no room (no
 * error: see the file header).  Caller holds the lock exclusively.
 */
static OccStatsEntry *
occ_entry_enter(const OccStatsKey *key, const char *query, int len)
{
	OccStatsEntry *entry;

	Assert(len >= 0 && len < OCC_QUERY_TEXT_MAX);
	if (hash_get_num_entries(occ_hash) >= occ_stats_max)
		occ_evict();
	entry = hash_search(occ_hash, key, HASH_ENTER_NULL, NULL);
	if (entry == NULL)
		return NULL;
	SpinLockInit(&entry->mutex);
	memset(&entry->counters, 0, sizeof(OccCounters));
	memcpy(entry->query, query, len);
	entry->query[len] = '\0';
	return entry;
}

/* occ_clear: remove every entry.  Caller holds the lock exclusively. */
static void
occ_clear(void)
{
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;

	hash_seq_init(&scan, occ_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
		hash_search(occ_hash, &entry->key, HASH_REMOVE, NULL);
}

/*
 * occ_find_or_create: the entry for key, created (evicting if needed) when
 * missing; NULL when there is no room for it.  Returns with the lock held
 * in shared mode.
 */
static OccStatsEntry *
occ_find_or_create(const OccStatsKey *key, const char *sql)
{
	OccStatsEntry *entry;
	int			len;

	LWLockAcquire(occ_shared->lock, LW_SHARED);
	entry = hash_search(occ_hash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	LWLockRelease(occ_shared->lock);
	LWLockAcquire(occ_shared->lock, LW_EXCLUSIVE);
	if (hash_search(occ_hash, key, HASH_FIND, NULL) == NULL)
	{
		/* cut on a character boundary of the database's encoding */
		len = pg_mbcliplen(sql, strlen(sql), OCC_QUERY_TEXT_MAX - 1);
		(void) occ_entry_enter(key, sql, len);
	}
	LWLockRelease(occ_shared->lock);
	LWLockAcquire(occ_shared->lock, LW_SHARED);
	/* it may have been evicted in between; then this call goes uncounted */
	return hash_search(occ_hash, key, HASH_FIND, NULL);
}

/*
 * occ_stats_failure: count a failed attempt (or an aborted transaction) by
 * its SQLSTATE
 */
void
occ_stats_failure(OccCallResult *result, int sqlerrcode)
{
	result->last_sqlerrcode = sqlerrcode;
	if (sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE)
		result->serialization_failures++;
	else if (sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		result->deadlocks++;
	else
		result->other_failures++;
}

/*
 * occ_stats_count: add result to the shared entry of kind for (the role in
 * result, this database, text), when preloaded and occ.track_stats is on
 */
static void
occ_stats_count(OccStatsKind kind, const char *text, uint64 hash,
				const OccCallResult *result)
{
	OccStatsKey key;
	OccStatsEntry *entry;

	if (occ_shared == NULL || occ_hash == NULL || !occ_track_stats)
		return;

	memset(&key, 0, sizeof(key));
	key.userid = result->userid;
	key.dbid = MyDatabaseId;
	key.queryid = hash;
	key.kind = kind;

	entry = occ_find_or_create(&key, text);
	if (entry != NULL)
	{
		OccCounters *c = &entry->counters;

		SpinLockAcquire(&entry->mutex);
		c->calls++;
		c->commits += result->committed ? 1 : 0;
		c->gave_up += result->gave_up ? 1 : 0;
		c->errors += (!result->committed && !result->gave_up) ? 1 : 0;
		c->attempts += result->attempts;
		c->serialization_failures += result->serialization_failures;
		c->deadlocks += result->deadlocks;
		c->other_failures += result->other_failures;
		c->total_sleep_time += result->sleep_ms;
		c->max_sleep_time = Max(c->max_sleep_time, result->max_sleep_ms);
		c->queued += result->queued ? 1 : 0;
		c->total_wait_time += result->wait_ms;
		c->max_wait_time = Max(c->max_wait_time, result->max_wait_ms);
		c->total_time += result->total_ms;
		c->max_attempts = Max(c->max_attempts, result->attempts);
		if (result->attempts > 0)
			c->hist[occ_hist_bucket(result->attempts)]++;
		if (result->committed && result->batch_size > 1)
		{
			c->batched++;
			c->batch_calls += result->batch_size;
		}
		SpinLockRelease(&entry->mutex);
	}
	LWLockRelease(occ_shared->lock);
}

/* occ_write: write len bytes of data to file and add them to the CRC */
static bool
occ_write(FILE *file, const void *data, size_t len, pg_crc32c *crc)
{
	COMP_CRC32C(*crc, data, len);
	return fwrite(data, 1, len, file) == len;
}

/* occ_read: read len bytes of file into data and add them to the CRC */
static bool
occ_read(FILE *file, void *data, size_t len, pg_crc32c *crc)
{
	if (fread(data, 1, len, file) != len)
		return false;
	COMP_CRC32C(*crc, data, len);
	return true;
}

/*
 * occ_stats_layout: a fingerprint of the sizes and offsets of what the file
 * holds, so that a build that changes them without bumping
 * OCC_STATS_FILE_FORMAT reads no garbage with a valid CRC (fields of one
 * type swapped would still pass: the format number is for those)
 */
static uint32
occ_stats_layout(void)
{
	const uint32 parts[] = {
		sizeof(OccStatsFileHeader), sizeof(OccStatsFileEntry),
		sizeof(OccStatsKey), offsetof(OccStatsKey, kind),
		sizeof(OccCounters), offsetof(OccCounters, total_sleep_time),
		offsetof(OccCounters, queued), offsetof(OccCounters, total_time),
		offsetof(OccCounters, hist), offsetof(OccCounters, batched),
		OCC_HIST_BUCKETS, OCC_QUERY_TEXT_MAX
	};

	return hash_bytes((const unsigned char *) parts, sizeof(parts));
}

/*
 * occ_stats_shut_down_cleanly: whether pg_control says the server shut down
 * cleanly.  An immediate shutdown exits the postmaster with code 0 like a
 * fast one, but leaves pg_control "in production" and the next start
 * recovers, as after a crash: its counters are not saved either.
 */
static bool
occ_stats_shut_down_cleanly(void)
{
	bool		clean = false;

	PG_TRY();
	{
		bool		crc_ok;
		ControlFileData *control = get_controlfile(DataDir, &crc_ok);

		clean = crc_ok && (control->state == DB_SHUTDOWNED ||
						   control->state == DB_SHUTDOWNED_IN_RECOVERY);
	}
	PG_CATCH();
	{
		/* at exit, an error is a LOG line: then save nothing */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	return clean;
}

/*
 * occ_stats_save: on_shmem_exit callback of the postmaster: write every
 * entry to OCC_STATS_FILE, through a temporary file renamed into place so
 * that the old file is replaced whole or not at all.  Not after a crash
 * (code != 0), when shared memory may be inconsistent, nor after an
 * immediate shutdown.  Nothing else runs by then, so no lock is taken.
 */
static void
occ_stats_save(int code, Datum arg)
{
	const char *tmp = OCC_STATS_FILE ".tmp";
	FILE	   *file;
	OccStatsFileHeader header;
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;
	pg_crc32c	crc;
	bool		ok;

	if (code != 0 || occ_shared == NULL || occ_hash == NULL ||
		!occ_stats_shut_down_cleanly())
		return;
	file = AllocateFile(tmp, PG_BINARY_W);
	if (file == NULL)
		goto error;

	memset(&header, 0, sizeof(header));
	header.magic = OCC_STATS_FILE_MAGIC;
	header.format = OCC_STATS_FILE_FORMAT;
	header.pg_major = OCC_PG_MAJOR;
	header.layout = occ_stats_layout();
	header.nentries = hash_get_num_entries(occ_hash);
	header.dealloc = occ_shared->dealloc;
	header.stats_reset = occ_shared->stats_reset;
	INIT_CRC32C(crc);
	ok = occ_write(file, &header, sizeof(header), &crc);

	hash_seq_init(&scan, occ_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		OccStatsFileEntry e;

		memset(&e, 0, sizeof(e));
		e.key = entry->key;
		e.counters = entry->counters;
		e.query_len = strlen(entry->query);
		ok = ok && occ_write(file, &e, sizeof(e), &crc) &&
			occ_write(file, entry->query, e.query_len, &crc);
	}
	FIN_CRC32C(crc);
	ok = ok && fwrite(&crc, sizeof(crc), 1, file) == 1;
	if (FreeFile(file) != 0 || !ok)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(tmp, OCC_STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", tmp)));
	if (file != NULL)
		FreeFile(file);
	unlink(tmp);
}

/* An entry read from the file, before it goes into the table */
typedef struct OccStatsLoaded
{
	OccStatsFileEntry e;
	char	   *query;
} OccStatsLoaded;

/* occ_cmp_loaded_calls: qsort order of loaded entries, most calls first */
static int
occ_cmp_loaded_calls(const void *a, const void *b)
{
	int64		ca = ((const OccStatsLoaded *) a)->e.counters.calls;
	int64		cb = ((const OccStatsLoaded *) b)->e.counters.calls;

	return (cb > ca) - (cb < ca);
}

/*
 * occ_stats_read_entries: read the entries that follow header in file, and
 * check the CRC that ends the file.  Returns NULL when the file is whole
 * (the entries in *loaded, their number in *n), else why it is not (for a
 * LOG line); ferror() then tells an I/O error from a file that ends early.
 * The array grows as entries are read: a damaged count allocates nothing.
 */
static const char *
occ_stats_read_entries(FILE *file, const OccStatsFileHeader *header, pg_crc32c crc,
					   OccStatsLoaded **loaded, int32 *n)
{
	pg_crc32c	stored;
	int32		size = 16;

	*loaded = palloc(sizeof(OccStatsLoaded) * size);
	for (*n = 0; *n < header->nentries; (*n)++)
	{
		OccStatsLoaded *l;

		if (*n == size)
			*loaded = repalloc(*loaded, sizeof(OccStatsLoaded) * (size *= 2));
		l = &(*loaded)[*n];
		if (!occ_read(file, &l->e, sizeof(l->e), &crc))
			return "it ends early";
		if (l->e.query_len < 0 || l->e.query_len >= OCC_QUERY_TEXT_MAX)
			return "an entry's length is out of range";
		l->query = palloc(l->e.query_len);
		if (!occ_read(file, l->query, l->e.query_len, &crc))
			return "it ends early";
	}
	FIN_CRC32C(crc);
	if (fread(&stored, sizeof(stored), 1, file) != 1)
		return "it ends early";
	if (stored != crc || fgetc(file) != EOF)
		return "its checksum does not match";
	return NULL;
}

/*
 * occ_stats_load_entries: read the entries of a file whose header was read,
 * and put them in the table, the most called first: when occ.stats_max was
 * lowered since they were saved, those that do not fit count as evicted.
 * Returns NULL, or why the file is ignored.
 */
static const char *
occ_stats_load_entries(FILE *file, const OccStatsFileHeader *header, pg_crc32c crc)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "pg_occ statistics file",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	OccStatsLoaded *loaded;
	int32		n;
	const char *problem = occ_stats_read_entries(file, header, crc, &loaded, &n);

	if (problem == NULL)
		qsort(loaded, n, sizeof(OccStatsLoaded), occ_cmp_loaded_calls);
	for (int32 i = 0; problem == NULL && i < n; i++)
	{
		OccStatsEntry *entry;

		if (hash_search(occ_hash, &loaded[i].e.key, HASH_FIND, NULL) != NULL)
			problem = "an entry appears twice";
		else if (i >= occ_stats_max)
			occ_shared->dealloc++;
		else if ((entry = occ_entry_enter(&loaded[i].e.key, loaded[i].query,
										  loaded[i].e.query_len)) == NULL)
			problem = "there is no room for its entries";
		else
			entry->counters = loaded[i].e.counters;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return problem;
}

/*
 * occ_stats_load: at startup, in the postmaster (nothing else runs yet, so
 * no lock), read the entries that the last clean shutdown saved, then remove
 * the file: a crash later must not bring back these counters.  A file that
 * is not ours, of another format or PostgreSQL version, or damaged, is
 * ignored (with a LOG line saying why): the statistics start empty.
 */
static void
occ_stats_load(void)
{
	FILE	   *file;
	OccStatsFileHeader header;
	pg_crc32c	crc;
	const char *problem = NULL;

	file = AllocateFile(OCC_STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", OCC_STATS_FILE)));
		return;
	}
	INIT_CRC32C(crc);
	if (!occ_read(file, &header, sizeof(header), &crc) || header.magic != OCC_STATS_FILE_MAGIC)
		problem = "it is not a pg_occ statistics file";
	else if (header.format != OCC_STATS_FILE_FORMAT || header.pg_major != OCC_PG_MAJOR)
		problem = psprintf("it has format %u for PostgreSQL %u, not format %u for PostgreSQL %u",
						   header.format, header.pg_major / 100,
						   OCC_STATS_FILE_FORMAT, OCC_PG_MAJOR / 100);
	else if (header.layout != occ_stats_layout())
		problem = "another build of pg_occ, with another layout of entries, wrote it";
	else if (header.nentries < 0)
		problem = "its number of entries is negative";
	else
	{
		/* before the entries: evicting some to fit occ.stats_max adds to it */
		occ_shared->dealloc = header.dealloc;
		occ_shared->stats_reset = header.stats_reset;
		problem = occ_stats_load_entries(file, &header, crc);
	}

	if (problem != NULL)
	{
		occ_clear();
		occ_shared->dealloc = 0;
		occ_shared->stats_reset = GetCurrentTimestamp();
		if (ferror(file))
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", OCC_STATS_FILE)));
		else
			ereport(LOG,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("ignoring the pg_occ statistics in file \"%s\": %s",
							OCC_STATS_FILE, problem),
					 errdetail("occ.stats starts empty.")));
	}
	FreeFile(file);
	unlink(OCC_STATS_FILE);
}

/*
 * occ_stats_record: account for one finished occ.retry call, in the session
 * and, when its text is known (sql is NULL for a call refused because its
 * sql was NULL), in shared memory, under the role that called.  A call
 * refused before its first attempt has 0 attempts: it counts in calls and
 * errors, not in the histogram.
 */
void
occ_stats_record(const char *sql, uint64 sql_hash, const OccCallResult *result)
{
	occ_last.valid = true;
	occ_last.result = *result;
	if (sql != NULL)
		occ_stats_count(OCC_STATS_RETRY, sql, sql_hash, result);
}

/*
 * occ_stats_record_key: account for one finished transaction that set
 * occ.key (one attempt, committed or not) under one of its keys, in shared
 * memory only.  Called at the end of the transaction: raises no error.
 */
void
occ_stats_record_key(const char *key, uint64 key_hash, const OccCallResult *result)
{
	occ_stats_count(OCC_STATS_KEY, key, key_hash, result);
}

/*
 * The columns of one entry after its identity (role, database, hash, text),
 * into values and nulls from there; returns how many
 */
typedef int (*OccStatsColumns) (const OccStatsEntry *entry, const OccCounters *c,
								bool visible, int natts, Datum *values, bool *nulls);

/*
 * occ_stats_scan: the rows of the entries of kind, materialised: for each,
 * the role, the database, the hash and the text (roles without
 * pg_read_all_stats see other roles' rows without text or hash; no text at
 * all without showtext), then what columns makes of its counters
 */
static void
occ_stats_scan(FunctionCallInfo fcinfo, OccStatsKind kind, bool showtext,
			   OccStatsColumns columns)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			userid = GetUserId();
	bool		all_visible = has_privs_of_role(userid, ROLE_PG_READ_ALL_STATS);
	int			natts = rsinfo->setDesc->natts;
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *nulls = palloc(sizeof(bool) * natts);

	LWLockAcquire(occ_shared->lock, LW_SHARED);
	hash_seq_init(&scan, occ_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		OccCounters c;
		bool		visible = all_visible || entry->key.userid == userid;
		int			i = 0;

		if (entry->key.kind != kind)
			continue;
		memset(nulls, 0, sizeof(bool) * natts);
		SpinLockAcquire(&entry->mutex);
		c = entry->counters;
		SpinLockRelease(&entry->mutex);

		values[i++] = ObjectIdGetDatum(entry->key.userid);
		values[i++] = ObjectIdGetDatum(entry->key.dbid);
		if (visible)
			values[i++] = Int64GetDatumFast((int64) entry->key.queryid);
		else
			nulls[i++] = true;
		if (!showtext)
			nulls[i++] = true;
		else
			values[i++] = CStringGetTextDatum(visible ? entry->query : "<insufficient privilege>");
		i += columns(entry, &c, visible, natts, values + i, nulls + i);
		Assert(i == natts);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(occ_shared->lock);
}

/* occ_stats_check_columns: the SQL declares columns we know, or we say so */
static void
occ_stats_check_columns(FunctionCallInfo fcinfo, const char *name, bool known)
{
	if (!known)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s is declared with %d columns, which this version of pg_occ does not know",
						name, ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc->natts),
				 errhint("Run ALTER EXTENSION pg_occ UPDATE.")));
}

/*
 * occ_stats_columns: the columns of occ.stats after its text: 22 as 0.4.0
 * declares them, 19 without learned_key and the batch's (0.2.0, 0.3.0), 16 without the
 * queue's columns either (0.1.0)
 */
static int
occ_stats_columns(const OccStatsEntry *entry, const OccCounters *c, bool visible,
				  int natts, Datum *values, bool *nulls)
{
	Datum		hist[OCC_HIST_BUCKETS];
	int			i = 0;

	values[i++] = Int64GetDatumFast(c->calls);
	values[i++] = Int64GetDatumFast(c->commits);
	values[i++] = Int64GetDatumFast(c->gave_up);
	values[i++] = Int64GetDatumFast(c->errors);
	values[i++] = Int64GetDatumFast(c->attempts);
	values[i++] = Int64GetDatumFast(c->serialization_failures);
	values[i++] = Int64GetDatumFast(c->deadlocks);
	values[i++] = Int64GetDatumFast(c->other_failures);
	values[i++] = Float8GetDatumFast(c->total_sleep_time);
	values[i++] = Float8GetDatumFast(c->max_sleep_time);
	values[i++] = Float8GetDatumFast(c->calls > 0 ? c->total_sleep_time / c->calls : 0);
	if (natts >= OCC_STATS_COLS_0_2)
	{
		values[i++] = Int64GetDatumFast(c->queued);
		values[i++] = Float8GetDatumFast(c->total_wait_time);
		values[i++] = Float8GetDatumFast(c->max_wait_time);
	}
	values[i++] = Float8GetDatumFast(c->total_time);
	values[i++] = Float8GetDatumFast(c->calls > 0 ? c->total_time / c->calls : 0);
	values[i++] = Float8GetDatumFast(c->calls > 0 ? (double) c->attempts / c->calls : 0);
	values[i++] = Int64GetDatumFast(c->max_attempts);
	for (int b = 0; b < OCC_HIST_BUCKETS; b++)
		hist[b] = Int64GetDatumFast(c->hist[b]);
	values[i++] = PointerGetDatum(construct_array(hist, OCC_HIST_BUCKETS, INT8OID,
												  sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	if (natts == OCC_STATS_COLS)
	{
		/* values only to the role itself: others see the positions */
		bool		own = entry->key.userid == GetUserId() || superuser();
		char	   *learned = visible ?
			occ_learner_describe(entry->key.userid, entry->key.dbid, entry->key.queryid,
								 own) : NULL;

		nulls[i] = (learned == NULL);
		values[i++] = learned ? CStringGetTextDatum(learned) : (Datum) 0;
		values[i++] = Int64GetDatumFast(c->batched);
		nulls[i] = (c->batched == 0);
		values[i++] = Float8GetDatumFast(c->batched > 0 ? (double) c->batch_calls / c->batched : 0);
	}
	return i;
}

/* occ.stats(showtext boolean): one row per tracked occ.retry body */
Datum
occ_stats(PG_FUNCTION_ARGS)
{
	int			natts;

	occ_require_shared();
	InitMaterializedSRF(fcinfo, 0);
	natts = ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc->natts;
	occ_stats_check_columns(fcinfo, "occ.stats",
							natts == OCC_STATS_COLS || natts == OCC_STATS_COLS_0_2 ||
							natts == OCC_STATS_COLS_0_1);
	occ_stats_scan(fcinfo, OCC_STATS_RETRY, PG_GETARG_BOOL(0), occ_stats_columns);
	return (Datum) 0;
}

/* occ_key_stats_columns: the columns of occ.key_stats after its key, 8 */
static int
occ_key_stats_columns(const OccStatsEntry *entry, const OccCounters *c, bool visible,
					  int natts, Datum *values, bool *nulls)
{
	int			i = 0;

	values[i++] = Int64GetDatumFast(c->calls);
	values[i++] = Int64GetDatumFast(c->commits);
	values[i++] = Int64GetDatumFast(c->serialization_failures);
	values[i++] = Int64GetDatumFast(c->deadlocks);
	values[i++] = Int64GetDatumFast(c->other_failures);
	values[i++] = Int64GetDatumFast(c->queued);
	values[i++] = Float8GetDatumFast(c->total_wait_time);
	values[i++] = Float8GetDatumFast(c->max_wait_time);
	return i;
}

/*
 * occ.key_stats(showtext boolean): one row per key of the transactions that
 * set occ.key (client.c)
 */
Datum
occ_key_stats(PG_FUNCTION_ARGS)
{
	occ_require_shared();
	InitMaterializedSRF(fcinfo, 0);
	occ_stats_check_columns(fcinfo, "occ.key_stats",
							((ReturnSetInfo *) fcinfo->resultinfo)->setDesc->natts == OCC_KEY_STATS_COLS);
	occ_stats_scan(fcinfo, OCC_STATS_KEY, PG_GETARG_BOOL(0), occ_key_stats_columns);
	return (Datum) 0;
}

/* occ.stats_info(): evicted entries and the time of the last reset */
Datum
occ_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	double		tokens;
	int64		refusals;
	TimestampTz storm_began;

	occ_require_shared();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* 0.1.0 and 0.2.0 declare only dealloc and stats_reset */
	if (tupdesc->natts != 5 && tupdesc->natts != 2)
		elog(ERROR, "occ.stats_info() declares %d columns, not 5", tupdesc->natts);
	SpinLockAcquire(&occ_shared->mutex);
	values[0] = Int64GetDatum(occ_shared->dealloc);
	values[1] = TimestampTzGetDatum(occ_shared->stats_reset);
	SpinLockRelease(&occ_shared->mutex);

	/* the retry budget: its tokens (NULL when it is off), refusals, storms */
	(void) occ_budget_read(&tokens, &refusals, &storm_began);
	values[2] = Float8GetDatum(tokens);
	nulls[2] = (occ_retry_budget <= 0);
	values[3] = Int64GetDatum(refusals);
	values[4] = TimestampTzGetDatum(storm_began);
	nulls[4] = (storm_began == 0);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* occ.stats_reset(): forget every entry */
Datum
occ_stats_reset(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();

	occ_require_shared();
	LWLockAcquire(occ_shared->lock, LW_EXCLUSIVE);
	occ_clear();
	SpinLockAcquire(&occ_shared->mutex);
	occ_shared->dealloc = 0;
	occ_shared->stats_reset = now;
	SpinLockRelease(&occ_shared->mutex);
	LWLockRelease(occ_shared->lock);
	occ_budget_reset();
	PG_RETURN_VOID();
}

/*
 * occ.last_retry(): attempts, sleep, last SQLSTATE, outcome, duration and
 * wait for the gate of this session's last occ.retry call; NULLs before the
 * first.
 */
Datum
occ_last_retry(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {true, true, true, true, true, true};
	const OccCallResult *r = &occ_last.result;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (occ_last.valid)
	{
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(r->attempts);
		values[1] = PointerGetDatum(occ_usec_to_interval(rint(r->sleep_ms * 1000.0)));
		if (r->last_sqlerrcode != 0)
			values[2] = CStringGetTextDatum(unpack_sql_state(r->last_sqlerrcode));
		else
			nulls[2] = true;
		values[3] = CStringGetTextDatum(r->committed ? "committed" :
										r->gave_up ? "gave up" : "error");
		values[4] = PointerGetDatum(occ_usec_to_interval(rint(r->total_ms * 1000.0)));
		values[5] = PointerGetDatum(occ_usec_to_interval(rint(r->wait_ms * 1000.0)));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
