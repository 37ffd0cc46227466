/*-------------------------------------------------------------------------
 *
 * stats_views.c
 *		The SQL functions behind occ.stats, occ.key_stats and
 *		occ.stats_info, and occ.stats_reset(): the shared entries
 *		(stats.c) as rows, other roles' text and hashes masked.
 *
 * occ.stats_info also shows the server-wide retry budget (budget.c), and
 * occ.stats_reset() resets it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "policy/policy.h"
#include "queue/queue.h"
#include "stats_entries.h"

PG_FUNCTION_INFO_V1(occ_stats);
PG_FUNCTION_INFO_V1(occ_key_stats);
PG_FUNCTION_INFO_V1(occ_stats_info);
PG_FUNCTION_INFO_V1(occ_stats_reset);

/* Columns of occ.stats: 0.4.0's; 0.2.0 and 0.3.0 have no learned_key, batched and mean_batch_size, 0.1.0 no queue columns either */
#define OCC_STATS_COLS 26
#define OCC_STATS_COLS_0_2 23
#define OCC_STATS_COLS_0_1 20

/* Columns of occ.key_stats */
#define OCC_KEY_STATS_COLS 12

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

	LWLockAcquire(occ_stats_shared->lock, LW_SHARED);
	hash_seq_init(&scan, occ_stats_hash);
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
	LWLockRelease(occ_stats_shared->lock);
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

	occ_stats_require_shared();
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
	occ_stats_require_shared();
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

	occ_stats_require_shared();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* 0.1.0 and 0.2.0 declare only dealloc and stats_reset */
	if (tupdesc->natts != 5 && tupdesc->natts != 2)
		elog(ERROR, "occ.stats_info() declares %d columns, not 5", tupdesc->natts);
	SpinLockAcquire(&occ_stats_shared->mutex);
	values[0] = Int64GetDatum(occ_stats_shared->dealloc);
	values[1] = TimestampTzGetDatum(occ_stats_shared->stats_reset);
	SpinLockRelease(&occ_stats_shared->mutex);

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

	occ_stats_require_shared();
	LWLockAcquire(occ_stats_shared->lock, LW_EXCLUSIVE);
	occ_stats_clear();
	SpinLockAcquire(&occ_stats_shared->mutex);
	occ_stats_shared->dealloc = 0;
	occ_stats_shared->stats_reset = now;
	SpinLockRelease(&occ_stats_shared->mutex);
	LWLockRelease(occ_stats_shared->lock);
	occ_budget_reset();
	PG_RETURN_VOID();
}

