/*-------------------------------------------------------------------------
 *
 * plan_cache.c
 *		Prepared plans for occ.retry bodies, kept for the session.
 *
 * A body is usually the same text every call, so parsing and planning it
 * each time would make CALL occ.retry(...) noticeably slower than running
 * the statements directly.  We keep one entry per (text, parameter types):
 * the body split into its statements, and a saved SPI plan per statement.
 * The plan cache revalidates saved plans on DDL and search_path changes, so
 * a kept plan is never stale.
 *
 * Statements are prepared one by one, each from its own text, when they
 * first run.  That keeps a body's cost linear in its size (one SPI plan for
 * the whole text would copy the whole text into each statement's plan
 * source), and a statement is analysed after the ones before it have run,
 * so a body may use a table that an earlier statement creates.
 *
 * The cache is bounded by count (OCC_PLAN_CACHE_SIZE bodies) and by memory
 * (OCC_PLAN_CACHE_BYTES, measured on the plans' memory contexts); when
 * either is exceeded, the least recently used bodies are evicted.  A body
 * whose plans alone take more than OCC_PLAN_BODY_MAX_BYTES is not kept: it
 * is prepared once per call, and freed when the call ends.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "executor/spi_priv.h"
#include "lib/ilist.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scansup.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/plancache.h"

#include "pg_occ.h"
#include "attempt/attempt.h"

/* Bodies kept per session, and the memory their plans may take */
#define OCC_PLAN_CACHE_SIZE 256
#define OCC_PLAN_CACHE_BYTES (4 * 1024 * 1024)

/* A body whose plans take more than this is planned once per call, not kept */
#define OCC_PLAN_BODY_MAX_BYTES (1024 * 1024)

typedef struct OccPlanKey
{
	uint64		sql_hash;		/* hash of the body's text */
	int			nargs;
	Oid			argtypes[FUNC_MAX_ARGS];
} OccPlanKey;

/* One statement of a body: where its text is, and its plan once prepared */
typedef struct OccBodyStmt
{
	int			location;		/* offset of its text in the body */
	int			length;			/* length of its text */
	SPIPlanPtr	plan;			/* saved plan, NULL until it first runs */
} OccBodyStmt;

struct OccBody
{
	OccPlanKey	key;
	MemoryContext cxt;			/* holds this struct, the text, the statements */
	char	   *sql;			/* the whole text, to rule out hash collisions */
	int			nstmts;
	OccBodyStmt *stmts;
	bool		shares;			/* no statement keeps state in the session */
	bool		analysed;		/* occ_body_rehearse ran without an error */
	bool		planned;		/* a plan was asked for since the last measure */
	Size		bytes;			/* memory of cxt and of the prepared plans */
	bool		kept;			/* in the session's cache (else the call's) */
	dlist_node	lru;			/* in occ_lru, most recently used first */
};

typedef struct OccPlanEntry
{
	OccPlanKey	key;			/* hash key, must be first */
	OccBody    *body;
} OccPlanEntry;

static HTAB *occ_plans = NULL;
static dlist_head occ_lru = DLIST_STATIC_INIT(occ_lru);
static Size occ_plans_bytes = 0;	/* sum of the kept bodies' bytes */

/*
 * occ_body_error_callback: report a syntax error in a body at its position
 * in the body's text, as SPI does, rather than in the CALL statement's.
 */
static void
occ_body_error_callback(void *arg)
{
	const char *sql = (const char *) arg;
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery(sql);
	}
	else
		errcontext("SQL statement \"%s\"", sql);
}

/*
 * occ_check_stmt: refuse, before anything runs, a statement that SPI cannot
 * run: COPY from or to the client (there is no client in a body).  location
 * is where the statement starts in the body, for the error's cursor.
 */
static void
occ_check_stmt(Node *stmt, int location)
{
	if (IsA(stmt, CopyStmt) && ((CopyStmt *) stmt)->filename == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("COPY FROM STDIN and COPY TO STDOUT are not supported in an occ.retry body"),
				 errhint("The body runs on the server, with no client to copy from or to: COPY the data into a table first, "
						 "in a transaction of its own, and use it from the body (INSERT ... SELECT)."),
				 errposition(location + 1)));
}

/*
 * occ_split: the body's statements, from one raw parse of the whole text
 * (linear in its length).  Leading white space is left out of each
 * statement's text.  Syntax errors and statements that SPI cannot run throw.  The parse trees are left in the
 * caller's (per-attempt) memory context.
 */
static void
occ_split(OccBody *body)
{
	ErrorContextCallback errcallback;
	List	   *raw;
	ListCell   *lc;
	int			len = strlen(body->sql);
	int			n = 0;

	errcallback.callback = occ_body_error_callback;
	errcallback.arg = body->sql;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	raw = raw_parser(body->sql, RAW_PARSE_DEFAULT);

	body->stmts = MemoryContextAllocZero(body->cxt,
										 sizeof(OccBodyStmt) * Max(list_length(raw), 1));
	foreach(lc, raw)
	{
		RawStmt    *stmt = lfirst_node(RawStmt, lc);
		int			from = Max(stmt->stmt_location, 0);
		int			to = stmt->stmt_len > 0 ? from + stmt->stmt_len : len;

		while (from < to && scanner_isspace(body->sql[from]))
			from++;
		occ_check_stmt(stmt->stmt, from);
		if (occ_session_stmt_keeps(stmt->stmt))
			body->shares = false;
		body->stmts[n].location = from;
		body->stmts[n].length = to - from;
		n++;
	}
	body->nstmts = n;
	error_context_stack = errcallback.previous;
}

/* occ_plan_bytes: the memory a saved SPI plan takes */
static Size
occ_plan_bytes(SPIPlanPtr plan)
{
	Size		bytes = MemoryContextMemAllocated(plan->plancxt, true);
	ListCell   *lc;

	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *source = (CachedPlanSource *) lfirst(lc);

		/* the query trees' context is a child of the source's */
		bytes += MemoryContextMemAllocated(source->context, true);
		if (source->gplan != NULL)
			bytes += MemoryContextMemAllocated(source->gplan->context, true);
	}
	return bytes;
}

/* occ_body_measure: bring body->bytes, and the cache's total, up to date */
static void
occ_body_measure(OccBody *body)
{
	Size		bytes = MemoryContextMemAllocated(body->cxt, true);

	for (int i = 0; i < body->nstmts; i++)
		if (body->stmts[i].plan != NULL)
			bytes += occ_plan_bytes(body->stmts[i].plan);
	if (body->kept)
		occ_plans_bytes = occ_plans_bytes - body->bytes + bytes;
	body->bytes = bytes;
}

/* occ_body_free: free a body that is not (or no longer) in the cache */
static void
occ_body_free(OccBody *body)
{
	Assert(!body->kept);
	for (int i = 0; i < body->nstmts; i++)
		if (body->stmts[i].plan != NULL)
			SPI_freeplan(body->stmts[i].plan);
	MemoryContextDelete(body->cxt);
}

/* occ_body_unkeep: take a body out of the cache, without freeing it */
static void
occ_body_unkeep(OccBody *body)
{
	Assert(body->kept);
	hash_search(occ_plans, &body->key, HASH_REMOVE, NULL);
	dlist_delete(&body->lru);
	occ_plans_bytes -= body->bytes;
	body->kept = false;
}

/*
 * occ_trim: evict the least recently used bodies, other than the one in use,
 * until the cache is within its bounds (with room for one more body when
 * making room); then, if the body in use alone is too big, stop keeping it:
 * its caller frees it when the call ends.
 */
static void
occ_trim(OccBody *in_use, bool making_room)
{
	int			max_count = OCC_PLAN_CACHE_SIZE - (making_room ? 1 : 0);

	while (!dlist_is_empty(&occ_lru))
	{
		OccBody    *victim = dlist_tail_element(OccBody, lru, &occ_lru);

		if (victim == in_use ||
			(hash_get_num_entries(occ_plans) <= max_count &&
			 occ_plans_bytes <= OCC_PLAN_CACHE_BYTES))
			break;
		occ_body_unkeep(victim);
		occ_body_free(victim);
	}
	if (in_use != NULL && in_use->kept && in_use->bytes > OCC_PLAN_BODY_MAX_BYTES)
		occ_body_unkeep(in_use);
}

/* occ_plan_key: the cache's key of a body */
static void
occ_plan_key(OccPlanKey *key, uint64 sql_hash, int nargs, const Oid *argtypes)
{
	memset(key, 0, sizeof(*key));
	key->sql_hash = sql_hash;
	key->nargs = nargs;
	memcpy(key->argtypes, argtypes, nargs * sizeof(Oid));
}

/*
 * occ_body_find: the body of sql with these parameter types if this
 * session keeps it, else NULL; never throws
 */
OccBody *
occ_body_find(const char *sql, uint64 sql_hash, int nargs, const Oid *argtypes)
{
	OccPlanKey	key;
	OccPlanEntry *entry;

	if (occ_plans == NULL)
		return NULL;
	occ_plan_key(&key, sql_hash, nargs, argtypes);
	entry = hash_search(occ_plans, &key, HASH_FIND, NULL);
	if (entry == NULL || strcmp(entry->body->sql, sql) != 0)
		return NULL;
	return entry->body;
}

/*
 * occ_body_open: the body of sql with the given parameter types, for one
 * call: the kept one when there is one, else a new one, split into its
 * statements and kept (evicting others if needed).  Called within an SPI
 * connection; syntax errors throw.  Pair with occ_body_close.
 */
OccBody *
occ_body_open(const char *sql, uint64 sql_hash, int nargs, const Oid *argtypes)
{
	OccPlanKey	key;
	OccPlanEntry *entry;
	OccBody    *body;
	MemoryContext cxt;
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

	occ_plan_key(&key, sql_hash, nargs, argtypes);
	entry = hash_search(occ_plans, &key, HASH_FIND, NULL);
	if (entry != NULL && strcmp(entry->body->sql, sql) == 0)
	{
		dlist_move_head(&occ_lru, &entry->body->lru);
		return entry->body;
	}

	/* a new body, in a context of its own: under ours until it is complete */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_occ body",
								ALLOCSET_SMALL_SIZES);
	body = MemoryContextAllocZero(cxt, sizeof(OccBody));
	body->key = key;
	body->cxt = cxt;
	body->sql = MemoryContextStrdup(cxt, sql);
	body->shares = true;
	occ_split(body);
	MemoryContextSetParent(cxt, CacheMemoryContext);
	occ_body_measure(body);

	if (entry != NULL)
		return body;			/* a hash collision: the call's own body */

	occ_trim(NULL, true);
	entry = hash_search(occ_plans, &key, HASH_ENTER, &found);
	entry->body = body;
	body->kept = true;
	occ_plans_bytes += body->bytes;
	dlist_push_head(&occ_lru, &body->lru);
	occ_trim(body, false);
	return body;
}

/*
 * occ_body_shares: can the body run in another session's transaction, as
 * far as its own statements say?
 */
bool
occ_body_shares(const OccBody *body)
{
	return body->shares;
}

/* occ_body_nstmts: how many statements the body has */
int
occ_body_nstmts(const OccBody *body)
{
	return body->nstmts;
}

/*
 * occ_body_warm: has this session read what the body's statements need of
 * the catalogs: has every one a plan, or were they rehearsed already
 * (occ_body_rehearse)?  A batch's follower, whose body its leader runs,
 * prepares none of them.
 */
bool
occ_body_warm(const OccBody *body)
{
	if (body->analysed)
		return true;
	for (int i = 0; i < body->nstmts; i++)
		if (body->stmts[i].plan == NULL)
			return false;
	return true;
}

/*
 * occ_body_rehearse: parse, analyse and plan the statements not prepared
 * yet, and forget them: what that reads of the catalogs (the tables, their
 * indexes and statistics, the functions and operators) stays cached in this
 * backend, so preparing and planning them again as they run costs little;
 * no plan is kept, so each statement is still analysed after the ones
 * before it have run, and planned then.  Once done, the body is warm for
 * the session.  Errors throw.
 */
void
occ_body_rehearse(OccBody *body)
{
	for (int i = 0; i < body->nstmts; i++)
	{
		OccBodyStmt *stmt = &body->stmts[i];
		char	   *text;
		SPIPlanPtr	plan;
		CachedPlan *cplan;

		if (stmt->plan != NULL)
			continue;
		text = pnstrdup(body->sql + stmt->location, stmt->length);
		plan = SPI_prepare(text, body->key.nargs, body->key.argtypes);
		pfree(text);
		if (plan == NULL)
			continue;
		/* an unsaved plan's CachedPlan belongs to no resource owner */
		cplan = SPI_plan_get_cached_plan(plan);
		if (cplan != NULL)
			ReleaseCachedPlan(cplan, NULL);
		SPI_freeplan(plan);
	}
	body->analysed = true;
}

/*
 * occ_body_plan: the plan of statement i, prepared (from its own text, when
 * it first runs) and saved.  Parse analysis errors throw.
 */
SPIPlanPtr
occ_body_plan(OccBody *body, int i)
{
	OccBodyStmt *stmt = &body->stmts[i];
	char	   *text;
	SPIPlanPtr	plan;
	Size		added;

	Assert(i >= 0 && i < body->nstmts);
	body->planned = true;
	if (stmt->plan != NULL)
		return stmt->plan;

	text = pnstrdup(body->sql + stmt->location, stmt->length);
	plan = SPI_prepare(text, body->key.nargs, body->key.argtypes);
	pfree(text);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for occ.retry body: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	stmt->plan = plan;

	/* account for this plan alone: measuring them all would be quadratic */
	added = occ_plan_bytes(plan);
	body->bytes += added;
	if (body->kept)
	{
		occ_plans_bytes += added;
		occ_trim(body, false);
	}
	return plan;
}

/*
 * occ_body_close: the call that opened the body is over.  A kept body that
 * ran is measured again (generic plans may have been made meanwhile), not
 * one whose call a batch's leader ran; one that is not kept is freed.
 */
void
occ_body_close(OccBody *body)
{
	if (body->kept && body->planned)
	{
		body->planned = false;
		occ_body_measure(body);
		occ_trim(body, false);
	}
	if (!body->kept)
		occ_body_free(body);
}
