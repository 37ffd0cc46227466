/*-------------------------------------------------------------------------
 *
 * plan_cache.c
 *		Prepared plans for occ.retry bodies, kept for the session.
 *
 * A body is usually the same text every call, so parsing and planning it
 * each time would make CALL occ.retry(...) noticeably slower than running
 * the statements directly.  We keep one saved SPI plan per (text, parameter
 * types).  The plan cache revalidates saved plans on DDL and search_path
 * changes, so a kept plan is never stale.  The cache is bounded; once full,
 * new bodies are planned per call instead.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "executor/spi.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "pg_occ.h"

/* Bodies kept per session; beyond this they are planned per call */
#define OCC_PLAN_CACHE_SIZE 256

typedef struct OccPlanKey
{
	uint64		sql_hash;		/* hash of the body's text */
	int			nargs;
	Oid			argtypes[FUNC_MAX_ARGS];
} OccPlanKey;

typedef struct OccPlanEntry
{
	OccPlanKey	key;			/* hash key, must be first */
	char	   *sql;			/* the text, to rule out hash collisions */
	SPIPlanPtr	plan;
} OccPlanEntry;

static HTAB *occ_plans = NULL;

/*
 * occ_body_plan: a plan for sql with the given parameter types; a kept one
 * when possible.  Called within an SPI connection; parse errors throw.
 */
SPIPlanPtr
occ_body_plan(const char *sql, int nargs, Oid *argtypes)
{
	OccPlanKey	key;
	OccPlanEntry *entry;
	SPIPlanPtr	plan;
	bool		found;

	if (occ_plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(OccPlanKey);
		ctl.entrysize = sizeof(OccPlanEntry);
		ctl.hcxt = CacheMemoryContext;
		occ_plans = hash_create("pg_occ body plans", OCC_PLAN_CACHE_SIZE, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	memset(&key, 0, sizeof(key));
	key.sql_hash = hash_bytes_extended((const unsigned char *) sql, strlen(sql), 0);
	key.nargs = nargs;
	memcpy(key.argtypes, argtypes, nargs * sizeof(Oid));

	entry = hash_search(occ_plans, &key, HASH_FIND, NULL);
	if (entry != NULL && strcmp(entry->sql, sql) == 0)
		return entry->plan;

	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for occ.retry body: %s",
			 SPI_result_code_string(SPI_result));

	if (entry != NULL || hash_get_num_entries(occ_plans) >= OCC_PLAN_CACHE_SIZE)
		return plan;			/* collision or full: plan per call */

	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	entry = hash_search(occ_plans, &key, HASH_ENTER, &found);
	entry->sql = MemoryContextStrdup(CacheMemoryContext, sql);
	entry->plan = plan;
	return plan;
}
