/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Retry statistics: shared counters per (role, database, transaction
 *		text) behind the occ.stats view, and per (role, database, key)
 *		behind occ.key_stats (stats_views.c), kept over a clean restart
 *		(stats_file.c); the session's last call behind occ.last_retry().
 *
 * Modelled on pg_stat_statements.  With pg_occ in shared_preload_libraries,
 * a shared hash table of at most occ.stats_max entries holds the counters
 * of both kinds of entries: occ.retry calls of a body, whose queryid is a
 * 64-bit hash of the exact text passed to occ.retry (bodies take their
 * values as parameters, so the text is stable), and the application's
 * transactions that set occ.key (client.c), whose queryid is the key's
 * hash and whose text is the key (stats_entries.c keeps the table).
 * Recording raises no error (client.c records from the end-of-transaction
 * callback, when the transaction has committed already): without memory,
 * it counts nothing.
 *
 * The session-local record of the last call works without preloading.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "stats/stats.h"
#include "util/util.h"
#include "stats_entries.h"

PG_FUNCTION_INFO_V1(occ_last_retry);

/* The session's last call, for occ.last_retry() */
typedef struct OccLastCall
{
	bool		valid;
	OccCallResult result;
} OccLastCall;

static OccLastCall occ_last = {false};

/*
 * occ_stats_shmem_init: create or attach to the shared entries; called at
 * startup holding AddinShmemInitLock.  The postmaster, which creates them,
 * loads the statistics saved by the last clean shutdown and arranges for
 * them to be saved at its exit.
 */
void
occ_stats_shmem_init(void)
{
	bool		found = occ_stats_entries_attach();

	/* the postmaster saves the counters when it exits, and loads them now */
	if (!IsUnderPostmaster)
		on_shmem_exit(occ_stats_save, (Datum) 0);
	if (!found)
		occ_stats_load();
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

	if (occ_stats_shared == NULL || occ_stats_hash == NULL || !occ_track_stats)
		return;

	memset(&key, 0, sizeof(key));
	key.userid = result->userid;
	key.dbid = MyDatabaseId;
	key.queryid = hash;
	key.kind = kind;

	entry = occ_stats_find_or_create(&key, text);
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
	LWLockRelease(occ_stats_shared->lock);
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
