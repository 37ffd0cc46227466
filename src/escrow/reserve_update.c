/*-------------------------------------------------------------------------
 *
 * reserve_update.c
 *		UPDATE t SET c = c - 3 WHERE id = 42 on a reservable column, run as
 *		a reservation: planned as a node that reserves, not as an UPDATE.
 *
 * Applications, ORMs and drivers send that statement for a counter.  When
 * its shape is a reservation's (update_shape.c), the planner hook plans it
 * as usual (for its range table, privileges and dependencies) and puts a
 * custom scan node, OccReserve, in place of the plan's tree: the executor
 * checks the UPDATE's privileges as for the plan it replaces, and the node
 * evaluates the key and the deltas (parameters included: a generic plan
 * works), takes the reservations as occ.reserve() does, and counts the row
 * in es_processed, so that the command tag says UPDATE 1, or UPDATE 0 when
 * no row has the key.  The row is neither read by the UPDATE nor locked.
 *
 * A cached plan depends on the table (its OID is among the plan's
 * relations): occ.make_reservable() and occ.drop_reservable() change its
 * triggers, which invalidates the plan, and the next execution plans again.
 * Without preloading there are no entries to reserve with: the statement
 * is planned as written, and the guard refuses it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_occ.h"
#include "escrow/escrow.h"
#include OCC_EXPLAIN_FORMAT_H
#include OCC_EXPLAIN_STATE_H

/* The node's state: the key's and the deltas' expressions, what it did */
typedef struct OccReserveState
{
	CustomScanState css;
	ExprState  *key;
	List	   *deltas;			/* ExprState, one per column */
	int			rows;			/* rows reserved: 1 or 0; -1 before it ran */
} OccReserveState;

static Node *occ_reserve_create_state(CustomScan *cscan);
static void occ_reserve_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *occ_reserve_exec(CustomScanState *node);
static void occ_reserve_end(CustomScanState *node);
static void occ_reserve_rescan(CustomScanState *node);
static void occ_reserve_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomScanMethods occ_reserve_plan_methods = {
	.CustomName = "OccReserve",
	.CreateCustomScanState = occ_reserve_create_state,
};

static const CustomExecMethods occ_reserve_exec_methods = {
	.CustomName = "OccReserve",
	.BeginCustomScan = occ_reserve_begin,
	.ExecCustomScan = occ_reserve_exec,
	.EndCustomScan = occ_reserve_end,
	.ReScanCustomScan = occ_reserve_rescan,
	.ExplainCustomScan = occ_reserve_explain,
};

static planner_hook_type occ_prev_planner_hook = NULL;

/*
 * occ_reserve_plan_node: the OccReserve node for shape: custom_exprs the
 * key then the deltas, custom_private the columns and their signs
 */
static Plan *
occ_reserve_plan_node(const OccUpdateShape *shape)
{
	CustomScan *cscan = makeNode(CustomScan);
	ListCell   *lc;

	cscan->scan.plan.total_cost = 1;
	cscan->scan.plan.plan_rows = 1;
	cscan->scan.plan.parallel_safe = false;
	cscan->scan.scanrelid = shape->rti;
	cscan->custom_exprs = list_make1(expression_planner(shape->key));
	foreach(lc, shape->deltas)
		cscan->custom_exprs = lappend(cscan->custom_exprs, expression_planner(lfirst(lc)));
	cscan->custom_private = list_make2(shape->attnums, shape->signs);
	cscan->custom_relids = bms_make_singleton(shape->rti);
	cscan->methods = &occ_reserve_plan_methods;
	return (Plan *) cscan;
}

/*
 * occ_reserve_planned: the plan of an UPDATE that reserves, made without
 * the planner, whose scan of the row the node would not run: the query's
 * range table and permissions (the executor checks the UPDATE's), the node,
 * and the table as the plan's relation (a cached plan is made again when
 * the table changes; the query's own dependencies, its functions', are its
 * plan source's)
 */
static PlannedStmt *
occ_reserve_planned(Query *parse, const OccUpdateShape *shape)
{
	PlannedStmt *stmt = makeNode(PlannedStmt);

	stmt->commandType = CMD_UPDATE;
	stmt->queryId = parse->queryId;
	stmt->canSetTag = parse->canSetTag;
	stmt->planTree = occ_reserve_plan_node(shape);
	stmt->rtable = parse->rtable;
	occ_planned_relations(stmt, parse, shape->rti);
	stmt->relationOids = list_make1_oid(shape->relid);
	stmt->stmt_location = parse->stmt_location;
	stmt->stmt_len = parse->stmt_len;
	return stmt;
}

/*
 * occ_reserve_planner: the planner hook: an UPDATE of a reservable column
 * of the shape of a reservation is planned as an OccReserve node (by
 * another hook's planner and then its tree replaced, where another
 * extension hooks the planner: it sees every statement planned)
 */
static PlannedStmt *
occ_reserve_planner(OCC_PLANNER_PARAMS)
{
	OccUpdateShape shape;
	PlannedStmt *stmt;

	if (parse->commandType != CMD_UPDATE || !occ_escrow_ready() ||
		!occ_update_shape(parse, &shape))
		return occ_prev_planner_hook ?
			occ_prev_planner_hook(OCC_PLANNER_ARGS) : standard_planner(OCC_PLANNER_ARGS);
	if (occ_prev_planner_hook == NULL)
		return occ_reserve_planned(parse, &shape);
	stmt = occ_prev_planner_hook(OCC_PLANNER_ARGS);
	stmt->planTree = occ_reserve_plan_node(&shape);
	stmt->parallelModeNeeded = false;
	return stmt;
}

/* occ_reserve_create_state: the node's state, made by the executor */
static Node *
occ_reserve_create_state(CustomScan *cscan)
{
	OccReserveState *state = palloc0(sizeof(OccReserveState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &occ_reserve_exec_methods;
	return (Node *) state;
}

/* occ_reserve_begin: the expressions made ready (the table is open) */
static void
occ_reserve_begin(CustomScanState *node, EState *estate, int eflags)
{
	OccReserveState *state = (OccReserveState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc;

	state->key = ExecInitExpr(linitial(cscan->custom_exprs), &node->ss.ps);
	for_each_from(lc, cscan->custom_exprs, 1)
		state->deltas = lappend(state->deltas, ExecInitExpr(lfirst(lc), &node->ss.ps));
	state->rows = -1;
}

/*
 * occ_reserve_delta: the delta of a column (as its expression evaluates,
 * times sign), an integer of any width; never NULL
 */
static int64
occ_reserve_delta(ExprState *expr, ExprContext *econtext, int sign, Relation rel,
				  const OccReservable *decl)
{
	bool		isnull;
	Datum		value = ExecEvalExprSwitchContext(expr, econtext, &isnull);
	Oid			type = getBaseType(exprType((Node *) expr->expr));
	int64		delta;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
						get_attname(decl->relid, decl->attnum, false), RelationGetRelationName(rel)),
				 errhint("The value added to a reservable column must not be null.")));
	delta = type == INT2OID ? DatumGetInt16(value) :
		type == INT4OID ? DatumGetInt32(value) : DatumGetInt64(value);
	if (sign < 0 && delta == PG_INT64_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range"),
				 errhint("Subtract at most 9223372036854775807 from a reservable column at once.")));
	return sign < 0 ? -delta : delta;
}

/*
 * occ_reserve_exec: the reservations, once: each column's delta, of the row
 * of the key, counted as the UPDATE's row; no tuple returned
 */
static TupleTableSlot *
occ_reserve_exec(CustomScanState *node)
{
	OccReserveState *state = (OccReserveState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Relation	rel = node->ss.ss_currentRelation;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	int			n = list_length(state->deltas);
	OccReservable *decls;
	int64	   *deltas;
	ListCell   *lc;
	bool		isnull;
	Datum		key;

	if (state->rows >= 0)
		return NULL;
	state->rows = 0;
	decls = palloc(sizeof(OccReservable) * n);
	deltas = palloc(sizeof(int64) * n);
	key = ExecEvalExprSwitchContext(state->key, econtext, &isnull);
	if (isnull)
		return NULL;			/* WHERE pk = NULL: no row */
	foreach(lc, state->deltas)
	{
		int			i = foreach_current_index(lc);
		AttrNumber	attnum = list_nth_int(linitial(cscan->custom_private), i);

		/* the executor checked the UPDATE's privileges: occ.reserve's, no more */
		occ_reservable_get(rel, NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname), &decls[i]);
		deltas[i] = occ_reserve_delta(lfirst(lc), econtext,
									  list_nth_int(lsecond(cscan->custom_private), i), rel, &decls[i]);
	}
	if (occ_reserve_update(rel, decls, deltas, n, key, exprType((Node *) state->key->expr)))
	{
		state->rows = 1;
		node->ss.ps.state->es_processed++;
	}
	return NULL;
}

/* occ_reserve_end: nothing of the node's own to release */
static void
occ_reserve_end(CustomScanState *node)
{
}

/* occ_reserve_rescan: run again (never asked of a statement's top node) */
static void
occ_reserve_rescan(CustomScanState *node)
{
	((OccReserveState *) node)->rows = -1;
}

/* occ_reserve_explain: which columns it reserves; with ANALYZE, the rows it did */
static void
occ_reserve_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	OccReserveState *state = (OccReserveState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Oid			relid = RelationGetRelid(node->ss.ss_currentRelation);
	StringInfoData cols;
	ListCell   *lc;

	initStringInfo(&cols);
	foreach(lc, (List *) linitial(cscan->custom_private))
		appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
						 get_attname(relid, lfirst_int(lc), false));
	ExplainPropertyText("Reserves", cols.data, es);
	if (es->analyze && state->rows >= 0)
		ExplainPropertyInteger("Rows Reserved", NULL, state->rows, es);
}

/* occ_reserve_update_init: install the planner hook and name the node */
void
occ_reserve_update_init(void)
{
	RegisterCustomScanMethods(&occ_reserve_plan_methods);
	occ_prev_planner_hook = planner_hook;
	planner_hook = occ_reserve_planner;
}
