/*-------------------------------------------------------------------------
 *
 * guc.c
 *		The occ.* configuration parameters.
 *
 * The parameters give occ.backoff and occ.retry their defaults; the SQL
 * declarations read them with current_setting(), so they can be set per
 * session, role or database like any other setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/parallel.h"
#include "access/xact.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "pg_occ.h"
#include "util/util.h"

double		occ_base_delay = 1.0;
double		occ_max_delay = 200.0;
int			occ_jitter = OCC_JITTER_FULL;
int			occ_max_attempts = 30;
double		occ_factor = 2.0;
int			occ_max_duration = 0;
int			occ_isolation = XACT_SERIALIZABLE;
int			occ_contention = OCC_CONTENTION_QUEUE;
char	   *occ_retry_sqlstates = NULL;
bool		occ_log_retries = false;
bool		occ_track_stats = true;
int			occ_stats_max = 1000;
int			occ_batch_max_calls = 64;
int			occ_batch_max_time = 10;
int			occ_max_result_size = 65536;
double		occ_retry_budget = 0.0;
double		occ_retry_budget_ratio = 0.2;
double		occ_retry_budget_floor = 10.0;
char	   *occ_key = NULL;
int			occ_reservable_rows = 10000;
int			occ_fold_interval = 100;

/* The SET LOCAL occ.key being run (client.c): occ_check_key lets it through */
bool		occ_key_setting = false;

/* The parsed value of occ.retry_sqlstates (its GUC "extra") */
const OccSqlstates *occ_retry_sqlstates_parsed = NULL;

/* The spellings accepted by occ.jitter, occ.backoff and occ.retry */
const struct config_enum_entry occ_jitter_options[] = {
	{"none", OCC_JITTER_NONE, false},
	{"full", OCC_JITTER_FULL, false},
	{"equal", OCC_JITTER_EQUAL, false},
	{"decorrelated", OCC_JITTER_DECORRELATED, false},
	{"bounded", OCC_JITTER_BOUNDED, false},
	{"multiplicative", OCC_JITTER_MULTIPLICATIVE, false},
	{"normal", OCC_JITTER_NORMAL, false},
	{NULL, 0, false}
};

/* Same spellings as transaction_isolation, for occ.isolation and occ.retry */
const struct config_enum_entry occ_isolation_options[] = {
	{"serializable", XACT_SERIALIZABLE, false},
	{"repeatable read", XACT_REPEATABLE_READ, false},
	{"read committed", XACT_READ_COMMITTED, false},
	{NULL, 0, false}
};

/* The spellings accepted by occ.contention and occ.retry's contention */
const struct config_enum_entry occ_contention_options[] = {
	{"backoff", OCC_CONTENTION_BACKOFF, false},
	{"queue", OCC_CONTENTION_QUEUE, false},
	{"batch", OCC_CONTENTION_BATCH, false},
	{NULL, 0, false}
};

/* occ_enum_names: "a, b, c", the spellings of an enum table, for hints */
char *
occ_enum_names(const struct config_enum_entry *options)
{
	StringInfoData names;

	initStringInfo(&names);
	for (const struct config_enum_entry *e = options; e->name != NULL; e++)
		appendStringInfo(&names, "%s%s", e == options ? "" : ", ", e->name);
	return names.data;
}

/*
 * occ_check_sqlstates: check hook for occ.retry_sqlstates: a list of
 * SQLSTATEs and classes, as occ.retry's retry_on argument takes them.  The
 * parsed list becomes the setting's extra, so calls need not parse it again.
 */
static bool
occ_check_sqlstates(char **newval, void **extra, GucSource source)
{
	char	   *copy = pstrdup(*newval);
	List	   *items;
	OccSqlstates *parsed = NULL;
	const char *bad;
	bool		ok = SplitGUCList(copy, ',', &items);

	if (!ok)
		GUC_check_errdetail("List syntax is invalid.");
	else if ((parsed = occ_guc_malloc(OCC_SQLSTATES_SIZE(list_length(items)))) == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		ok = false;
	}
	else
	{
		switch (occ_parse_sqlstates(items, parsed, &bad))
		{
			case OCC_SQLSTATES_OK:
				*extra = parsed;
				break;
			case OCC_SQLSTATES_INVALID:
				GUC_check_errdetail("\"%s\" is not a SQLSTATE or a SQLSTATE class.", bad);
				GUC_check_errhint("Give 5-character codes such as 40001 or 2-character classes such as 40.");
				ok = false;
				break;
			case OCC_SQLSTATES_CANCEL:
				GUC_check_errdetail("query_canceled (57014) cannot be retried.");
				ok = false;
				break;
		}
		if (!ok)
			occ_guc_free(parsed);
	}
	list_free(items);
	pfree(copy);
	return ok;
}

/*
 * occ_check_key: check hook for occ.key: a key is set only by SET LOCAL
 * occ.key at the start of a transaction, which client.c checks and lets
 * through; any other way to set one (set_config(), a function's SET clause,
 * ALTER ROLE ... SET, the connection's options) would not queue the
 * transaction, so it is refused rather than ignored.  Resetting it is
 * always allowed, and so is a parallel worker's restoring its leader's
 * settings (the leader's transaction set the key, and queued).
 */
static bool
occ_check_key(char **newval, void **extra, GucSource source)
{
	if (**newval == '\0' || occ_key_setting || InitializingParallelWorker)
		return true;
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errdetail("occ.key can only be set with SET LOCAL occ.key, sent by the client as the first statement of a transaction.");
	GUC_check_errhint("Run SET LOCAL occ.key = '...' as the first statement after BEGIN.");
	return false;
}

/* occ_assign_sqlstates: assign hook for occ.retry_sqlstates */
static void
occ_assign_sqlstates(const char *newval, void *extra)
{
	occ_retry_sqlstates_parsed = extra;
}

/*
 * occ_define_gucs: define every occ.* parameter and reserve the prefix, so a
 * misspelled occ.something is an error rather than a silent placeholder.
 */
void
occ_define_gucs(void)
{
	DefineCustomRealVariable("occ.base_delay",
							 "Base delay of the exponential backoff.",
							 "The delay before the first retry is drawn from this.",
							 &occ_base_delay, 1.0, 0.001, 3600000.0,
							 PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("occ.max_delay",
							 "Cap on a single backoff delay.",
							 NULL,
							 &occ_max_delay, 200.0, 0.001, 3600000.0,
							 PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomEnumVariable("occ.jitter",
							 "Backoff strategy.",
							 NULL,
							 &occ_jitter, OCC_JITTER_FULL, occ_jitter_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("occ.factor",
							 "Growth factor of the exponential backoff.",
							 NULL,
							 &occ_factor, 2.0, 1.0, 1000.0,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("occ.max_attempts",
							"Maximum executions of a transaction by occ.retry, the first included.",
							NULL,
							&occ_max_attempts, 30, 1, INT_MAX,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("occ.max_duration",
							"Time budget of one occ.retry call; 0 means no limit.",
							"occ.retry does not start a sleep that would end after the budget.",
							&occ_max_duration, 0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomEnumVariable("occ.isolation",
							 "Isolation level of the transactions run by occ.retry.",
							 NULL,
							 &occ_isolation, XACT_SERIALIZABLE, occ_isolation_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("occ.contention",
							 "How occ.retry waits between attempts: backoff sleeps, queue waits on the gate of the key, batch also runs the calls waiting for a key in one transaction.",
							 NULL,
							 &occ_contention, OCC_CONTENTION_QUEUE, occ_contention_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("occ.batch_max_calls",
							"Maximum calls that one batch of contention mode batch runs in one transaction, its leader's included.",
							"1 runs every call alone, as queue mode does.",
							&occ_batch_max_calls, 64, 1, 1000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("occ.batch_max_time",
							"About how long a batch's leader runs the bodies of the calls it took, before the others join the queue again.",
							"The leader's own setting counts; its first follower's body always runs.",
							&occ_batch_max_time, 10, 1, 60000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("occ.retry_sqlstates",
							   "SQLSTATEs and SQLSTATE classes that occ.retry retries.",
							   "A comma-separated list of 5-character codes or 2-character classes.",
							   &occ_retry_sqlstates, "40001,40P01",
							   PGC_USERSET, GUC_LIST_INPUT, occ_check_sqlstates, occ_assign_sqlstates, NULL);
	DefineCustomBoolVariable("occ.log_retries",
							 "Logs each retry and each give-up of occ.retry.",
							 NULL,
							 &occ_log_retries, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("occ.track_stats",
							 "Collects occ.retry statistics (needs shared_preload_libraries).",
							 NULL,
							 &occ_track_stats, true,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	/* jsonb holds at most 256 MB (JENTRY_OFFLENMASK bytes) */
	DefineCustomIntVariable("occ.max_result_size",
							"Maximum size of the result that occ.retry returns, as JSON text.",
							"A body whose rows exceed it fails with SQLSTATE 54000 and is rolled back.",
							&occ_max_result_size, 65536, 1, 262143,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	/* the budget is server-wide: superusers set it (see budget.c) */
	DefineCustomRealVariable("occ.retry_budget",
							 "Capacity of the server-wide retry budget, in retries; 0 disables it.",
							 "Each retry of occ.retry withdraws a token; when none is left, a retry waits on the gate of its key. Needs shared_preload_libraries.",
							 &occ_retry_budget, 0.0, 0.0, 1000000000.0,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("occ.retry_budget_ratio",
							 "Tokens of the retry budget that each commit of occ.retry deposits.",
							 NULL,
							 &occ_retry_budget_ratio, 0.2, 0.0, 1000.0,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("occ.retry_budget_floor",
							 "Tokens of the retry budget deposited per second, a minimum retry rate.",
							 NULL,
							 &occ_retry_budget_floor, 10.0, 0.0, 1000000000.0,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("occ.key",
							   "Contention key of the transaction: it waits its turn on the key's gate when the key is hot.",
							   "Set it with SET LOCAL as the first statement after BEGIN; a list gives several keys.",
							   &occ_key, "",
							   PGC_USERSET, GUC_LIST_INPUT | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   occ_check_key, NULL, NULL);
	/* sizes shared memory, so it exists only when preloading */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("occ.stats_max",
								"Maximum number of transactions tracked by occ.stats.",
								NULL,
								&occ_stats_max, 1000, 100, INT_MAX / 2,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("occ.fold_interval",
							"Time between two folds of committed reservations into their rows.",
							"A plain SELECT of a reservable column shows a value at most about this old.",
							&occ_fold_interval, 100, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("occ.reservable_rows",
								"Maximum number of rows with reservations tracked in shared memory.",
								NULL,
								&occ_reservable_rows, 10000, 100, INT_MAX / 2,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);

	MarkGUCPrefixReserved("occ");
}
