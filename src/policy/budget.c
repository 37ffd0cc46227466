/*-------------------------------------------------------------------------
 *
 * budget.c
 *		The server-wide retry budget: a token bucket in shared memory that
 *		every occ.retry call of the server draws on.
 *
 * A retry storm is a server-wide event, and only the server sees all its
 * clients.  In the style of gRPC's retry throttling and Finagle's
 * RetryBudget: each commit of occ.retry deposits occ.retry_budget_ratio of
 * a token, time deposits occ.retry_budget_floor tokens per second (a
 * minimum retry rate, also when nothing commits), the bucket holds at most
 * occ.retry_budget tokens, and each retry (an attempt after the first)
 * withdraws one.  First attempts are never throttled.  A retry the budget
 * refuses does not run beside the others: the policy (policy.c) makes it
 * wait on its key's gate, queue mode's FIFO queue, so that a storm becomes
 * a queue; a call that holds the gate already and is refused again gives up.
 *
 * A storm begins with a refusal after at least OCC_STORM_QUIET without
 * one; occ.stats_info shows when the last one began.  While the budget
 * refuses, a LOG line says so at most every OCC_BUDGET_LOG_INTERVAL.
 *
 * The bucket starts full.  The settings are the caller's (superusers can
 * set them per session; set them server-wide in postgresql.conf): a
 * session's deposits and withdrawals use its own values.  Without
 * shared_preload_libraries = pg_occ there is no budget: every retry is
 * allowed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "pg_occ.h"
#include "policy/policy.h"

/* A refusal this long after the previous one begins a new storm */
#define OCC_STORM_QUIET (10 * USECS_PER_SEC)

/* At most one LOG line per interval while refusing */
#define OCC_BUDGET_LOG_INTERVAL (10 * USECS_PER_SEC)

typedef struct OccBudgetShared
{
	slock_t		mutex;			/* protects everything below */
	double		tokens;
	TimestampTz refilled;		/* time of the last floor deposit */
	int64		refusals;		/* since the last occ.stats_reset() */
	TimestampTz last_refusal;	/* 0 if none */
	TimestampTz storm_began;	/* 0 if none since the last reset */
	int64		storm_refusals; /* refusals since storm_began */
	TimestampTz logged;			/* time of the last LOG line, 0 if none */
} OccBudgetShared;

static OccBudgetShared *occ_budget = NULL;

/* occ_budget_shmem_size: the shared memory of the bucket */
Size
occ_budget_shmem_size(void)
{
	return MAXALIGN(sizeof(OccBudgetShared));
}

/*
 * occ_budget_shmem_init: create the bucket, full, or attach to it; called
 * at startup holding AddinShmemInitLock
 */
void
occ_budget_shmem_init(void)
{
	bool		found;

	occ_budget = ShmemInitStruct("pg_occ retry budget", sizeof(OccBudgetShared), &found);
	if (!found)
	{
		memset(occ_budget, 0, sizeof(OccBudgetShared));
		SpinLockInit(&occ_budget->mutex);
		occ_budget->tokens = occ_retry_budget;
		occ_budget->refilled = GetCurrentTimestamp();
	}
}

/*
 * occ_budget_refilled: tokens, refilled at the time of the last deposit,
 * with the floor's tokens for the time since, within the capacity (this
 * session's settings)
 */
static double
occ_budget_refilled(double tokens, TimestampTz refilled, TimestampTz now)
{
	if (now > refilled)
		tokens += (double) (now - refilled) / USECS_PER_SEC * occ_retry_budget_floor;
	return Min(tokens, occ_retry_budget);
}

/*
 * occ_budget_refill: deposit the floor's tokens for the time since the last
 * deposit, within the capacity.  Holding the mutex; now was read before
 * taking it (the clock does not belong under a spinlock).
 */
static void
occ_budget_refill(TimestampTz now)
{
	occ_budget->tokens = occ_budget_refilled(occ_budget->tokens, occ_budget->refilled, now);
	occ_budget->refilled = Max(occ_budget->refilled, now);
}

/*
 * occ_budget_enabled: is there a budget to draw on?  A budget set without
 * preloading is not: say so, once per session.
 */
static bool
occ_budget_enabled(void)
{
	static bool warned = false;

	if (occ_retry_budget <= 0)
		return false;
	if (occ_budget == NULL && !warned)
	{
		warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("occ.retry_budget is set, but there is no retry budget without preloading"),
				 errhint("Add pg_occ to shared_preload_libraries in postgresql.conf and restart the server.")));
	}
	return occ_budget != NULL;
}

/* occ_budget_deposit: a call committed: deposit occ.retry_budget_ratio */
void
occ_budget_deposit(void)
{
	TimestampTz now;

	if (!occ_budget_enabled())
		return;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&occ_budget->mutex);
	occ_budget->tokens += occ_retry_budget_ratio;
	occ_budget_refill(now);
	SpinLockRelease(&occ_budget->mutex);
}

/*
 * occ_budget_withdraw: a call is about to retry: take a token.  False when
 * the budget is exhausted (the retry is refused); then counted, and logged
 * at most every OCC_BUDGET_LOG_INTERVAL.
 */
bool
occ_budget_withdraw(void)
{
	TimestampTz now;
	bool		allowed;
	bool		log = false;
	int64		refused = 0;
	TimestampTz since = 0;

	if (!occ_budget_enabled())
		return true;

	now = GetCurrentTimestamp();
	SpinLockAcquire(&occ_budget->mutex);
	occ_budget_refill(now);
	allowed = (occ_budget->tokens >= 1.0);
	if (allowed)
		occ_budget->tokens -= 1.0;
	else
	{
		occ_budget->refusals++;
		if (occ_budget->last_refusal == 0 ||
			now - occ_budget->last_refusal >= OCC_STORM_QUIET)
		{
			occ_budget->storm_began = now;
			occ_budget->storm_refusals = 0;
		}
		occ_budget->storm_refusals++;
		occ_budget->last_refusal = now;
		if (occ_budget->logged == 0 || now - occ_budget->logged >= OCC_BUDGET_LOG_INTERVAL)
		{
			log = true;
			refused = occ_budget->storm_refusals;
			since = occ_budget->storm_began;
			occ_budget->logged = now;
		}
	}
	SpinLockRelease(&occ_budget->mutex);

	if (log)
		ereport(LOG,
				(errmsg("occ.retry: the server's retry budget is exhausted: " INT64_FORMAT " retr%s refused in this storm",
						refused, refused == 1 ? "y" : "ies"),
				 errdetail("The storm began at %s.  Refused retries wait on the gate of their key; a call refused while it holds the gate gives up.",
						   timestamptz_to_str(since)),
				 errhint("The budget holds occ.retry_budget = %g tokens; commits deposit occ.retry_budget_ratio = %g, time occ.retry_budget_floor = %g per second.",
						 occ_retry_budget, occ_retry_budget_ratio, occ_retry_budget_floor)));
	return allowed;
}

/*
 * occ_budget_read: the budget's state for occ.stats_info: false without
 * preloading.  *tokens is what a retry of this session could draw now
 * (refilled to now, within its capacity), or 0 when its budget is off.
 * Reading changes nothing: the bucket is refilled only by those who draw on
 * it, so a reader's settings (a capacity of 0, say) never drain it.
 */
bool
occ_budget_read(double *tokens, int64 *refusals, TimestampTz *storm_began)
{
	TimestampTz now;
	TimestampTz refilled;

	if (occ_budget == NULL)
		return false;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&occ_budget->mutex);
	*tokens = occ_budget->tokens;
	refilled = occ_budget->refilled;
	*refusals = occ_budget->refusals;
	*storm_began = occ_budget->storm_began;
	SpinLockRelease(&occ_budget->mutex);
	*tokens = occ_retry_budget > 0 ? occ_budget_refilled(*tokens, refilled, now) : 0;
	return true;
}

/*
 * occ_budget_reset: occ.stats_reset(): forget the refusals and storms (the
 * tokens are not statistics: they stay)
 */
void
occ_budget_reset(void)
{
	if (occ_budget == NULL)
		return;
	SpinLockAcquire(&occ_budget->mutex);
	occ_budget->refusals = 0;
	occ_budget->last_refusal = 0;
	occ_budget->storm_began = 0;
	occ_budget->storm_refusals = 0;
	occ_budget->logged = 0;
	SpinLockRelease(&occ_budget->mutex);
}
