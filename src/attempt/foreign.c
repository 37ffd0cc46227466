/*-------------------------------------------------------------------------
 *
 * foreign.c
 *		Which foreign table the running attempt wrote to.
 *
 * postgres_fdw commits an attempt's remote transaction at pre-commit,
 * before the local serializable check: when COMMIT then fails, the remote
 * half may have committed, and running the body again would repeat it
 * (policy.c gives up instead).  Whether an attempt wrote to a foreign table
 * is seen as it runs, not read from the body's plans, which are kept for
 * the session while tables are dropped, created and attached, and do not
 * show what the functions and triggers they call do:
 *
 *	- every run of the executor ends in ExecutorEnd, the body's statements
 *	  and those of the functions, procedures and triggers they call alike;
 *	  the result relations of its EState (those it opened, and the
 *	  partitions it routed rows to) are the tables it wrote to;
 *	- COPY FROM and TRUNCATE write without the executor: ProcessUtility
 *	  sees them, and counts a partitioned table (COPY FROM) or a table with
 *	  its descendants (TRUNCATE) as written to if any of its descendants is
 *	  a foreign table.
 *
 * A write counts even if its subtransaction was rolled back, or it wrote no
 * rows: when unsure, the body is not run again.  Remote writes that go
 * through no foreign table (dblink, PL/Proxy and the like) cannot be seen.
 *
 * The hooks are installed when the library is loaded, preloaded or not, and
 * cost a test of one flag outside attempts.  The ProcessUtility hook also
 * tells session.c of every utility statement (what a body leaves in its
 * session, for batch mode), the module having one such hook.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_occ.h"
#include "attempt/attempt.h"

/* Which descendants of a table a statement writes to along with it */
typedef enum OccDescendants
{
	OCC_DESCENDANTS_NONE,
	OCC_DESCENDANTS_PARTITIONS, /* its partitions, if it is partitioned */
	OCC_DESCENDANTS_ALL			/* its partitions or inheritance children */
} OccDescendants;

static ExecutorEnd_hook_type occ_prev_executor_end = NULL;
static ProcessUtility_hook_type occ_prev_process_utility = NULL;

/* An attempt is running: note what it writes */
static bool occ_foreign_watching = false;

/* The first foreign table the attempt wrote to, or "" */
static char occ_foreign_written[NAMEDATALEN];

/* occ_foreign_note: the attempt wrote to the foreign table relname */
static void
occ_foreign_note(const char *relname)
{
	if (occ_foreign_written[0] == '\0')
		strlcpy(occ_foreign_written, relname, sizeof(occ_foreign_written));
}

/* occ_foreign_note_results: note the foreign tables among result relations */
static void
occ_foreign_note_results(List *result_relations)
{
	ListCell   *lc;

	foreach(lc, result_relations)
	{
		Relation	rel = ((ResultRelInfo *) lfirst(lc))->ri_RelationDesc;

		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		{
			occ_foreign_note(RelationGetRelationName(rel));
			return;
		}
	}
}

/*
 * occ_foreign_note_relation: note rv if it is a foreign table, or else the
 * first foreign table among its descendants: when descendants is
 * OCC_DESCENDANTS_ALL, or it is partitioned and descendants is
 * OCC_DESCENDANTS_PARTITIONS.  The statement that wrote to it has locked it.
 */
static void
occ_foreign_note_relation(RangeVar *rv, OccDescendants descendants)
{
	Oid			relid = RangeVarGetRelid(rv, NoLock, true);
	char		relkind;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	relkind = get_rel_relkind(relid);
	if (relkind == RELKIND_FOREIGN_TABLE)
	{
		occ_foreign_note(rv->relname);
		return;
	}
	if (descendants == OCC_DESCENDANTS_NONE ||
		(descendants == OCC_DESCENDANTS_PARTITIONS && relkind != RELKIND_PARTITIONED_TABLE))
		return;
	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
	{
		char	   *relname;

		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_FOREIGN_TABLE)
			continue;
		relname = get_rel_name(lfirst_oid(lc));
		occ_foreign_note(relname ? relname : rv->relname);
		return;
	}
}

/* occ_foreign_executor_end: note the foreign tables the executor wrote to */
static void
occ_foreign_executor_end(QueryDesc *queryDesc)
{
	if (occ_foreign_watching && occ_foreign_written[0] == '\0')
	{
		occ_foreign_note_results(queryDesc->estate->es_opened_result_relations);
		occ_foreign_note_results(queryDesc->estate->es_tuple_routing_result_relations);
	}
	if (occ_prev_executor_end)
		occ_prev_executor_end(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * occ_foreign_process_utility: note the foreign tables that COPY FROM and
 * TRUNCATE wrote to, once they have run (one that fails is rolled back, on
 * the remote side too).  The statement is copied before it runs: its tree
 * may be freed by the time it returns, so it is not read again.
 */
static void
occ_foreign_process_utility(PlannedStmt *pstmt, const char *queryString,
							bool readOnlyTree, ProcessUtilityContext context,
							ParamListInfo params, QueryEnvironment *queryEnv,
							DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	Node	   *noted = NULL;

	occ_session_note_utility(stmt);
	if (occ_foreign_watching && occ_foreign_written[0] == '\0' &&
		(IsA(stmt, CopyStmt) || IsA(stmt, TruncateStmt)))
		noted = copyObject(stmt);
	if (occ_prev_process_utility)
		occ_prev_process_utility(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	if (noted == NULL || occ_foreign_written[0] != '\0')
		return;
	if (IsA(noted, CopyStmt) && ((CopyStmt *) noted)->is_from &&
		((CopyStmt *) noted)->relation != NULL)
		occ_foreign_note_relation(((CopyStmt *) noted)->relation, OCC_DESCENDANTS_PARTITIONS);
	else if (IsA(noted, TruncateStmt))
	{
		ListCell   *lc;

		foreach(lc, ((TruncateStmt *) noted)->relations)
		{
			RangeVar   *rv = lfirst_node(RangeVar, lc);

			occ_foreign_note_relation(rv, rv->inh ? OCC_DESCENDANTS_ALL : OCC_DESCENDANTS_NONE);
		}
	}
}

/* occ_foreign_init: install the hooks (from _PG_init) */
void
occ_foreign_init(void)
{
	occ_prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = occ_foreign_executor_end;
	occ_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = occ_foreign_process_utility;
}

/* occ_foreign_watch: an attempt begins: note its writes, from none */
void
occ_foreign_watch(void)
{
	occ_foreign_written[0] = '\0';
	occ_foreign_watching = true;
}

/*
 * occ_foreign_unwatch: the attempt is over (committed, or rolled back):
 * the name of the first foreign table it wrote to, or NULL
 */
const char *
occ_foreign_unwatch(void)
{
	occ_foreign_watching = false;
	return occ_foreign_written[0] != '\0' ? occ_foreign_written : NULL;
}

/*
 * occ_foreign_written_yet: has the attempt written to a foreign table so
 * far?  (A batch runs no other call's body after one has.)
 */
bool
occ_foreign_written_yet(void)
{
	return occ_foreign_written[0] != '\0';
}
