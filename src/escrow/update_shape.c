/*-------------------------------------------------------------------------
 *
 * update_shape.c
 *		Which UPDATEs of a reservable column are reservations: the shape of
 *		the statement, read from its query tree before it is planned.
 *
 * UPDATE t SET c = c + e (or c - e, e + c, COALESCE(c, k) +/- e; several
 * reservable columns of t at once) WHERE pk = v, and nothing else: no other
 * column set, no FROM, no RETURNING, no WITH, no other condition, no
 * subquery, e and v not reading t.  The + and - are PostgreSQL's own on
 * integer types (an operator of anyone else's, on a domain or in another
 * schema, makes no reservation), the = is the primary key index's own
 * equality, in its collation.  Anything else is planned as written, and
 * the column's guard refuses it if it changes the column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_occ.h"
#include "escrow/escrow.h"

/* occ_shape_integer: smallint, integer or bigint */
static bool
occ_shape_integer(Oid type)
{
	return type == INT2OID || type == INT4OID || type == INT8OID;
}

/*
 * occ_shape_reads_nothing: does expr read no table and return one value?
 * (no column, subquery or set-returning function; the statement has no
 * subquery at all, checked before)
 */
static bool
occ_shape_reads_nothing(Node *expr)
{
	return !contain_var_clause(expr) && !expression_returns_set(expr);
}

/*
 * occ_shape_uncast: expr without the built-in integer cast that assigns it
 * to a column of type coltype (c = c - 3::bigint into an integer column)
 */
static Node *
occ_shape_uncast(Node *expr, Oid coltype)
{
	FuncExpr   *f = (FuncExpr *) expr;

	if (IsA(expr, FuncExpr) && f->funcformat == COERCE_IMPLICIT_CAST &&
		f->funcid < FirstGenbkiObjectId && f->funcresulttype == coltype &&
		list_length(f->args) == 1 && occ_shape_integer(exprType(linitial(f->args))))
		return linitial(f->args);
	return expr;
}

/* occ_shape_is_var: is expr column attnum of the statement's table? */
static bool
occ_shape_is_var(Node *expr, Index rti, AttrNumber attnum)
{
	Var		   *var = (Var *) expr;

	return IsA(expr, Var) && var->varno == rti && var->varattno == attnum &&
		var->varlevelsup == 0;
}

/*
 * occ_shape_is_column: is expr column attnum of the statement's table, or
 * COALESCE of it (a NOT NULL column: the other arguments are never used)?
 */
static bool
occ_shape_is_column(Node *expr, Index rti, AttrNumber attnum)
{
	CoalesceExpr *c = (CoalesceExpr *) expr;

	if (IsA(expr, CoalesceExpr))
		return occ_shape_reads_nothing((Node *) list_copy_tail(c->args, 1)) &&
			occ_shape_is_var(linitial(c->args), rti, attnum);
	return occ_shape_is_var(expr, rti, attnum);
}

/*
 * occ_shape_sign: +1 for PostgreSQL's own + on integers, -1 for its -, 0
 * for anything else
 */
static int
occ_shape_sign(const OpExpr *op)
{
	Oid			left;
	Oid			right;
	char	   *name;

	if (op->opno >= FirstGenbkiObjectId || list_length(op->args) != 2)
		return 0;
	op_input_types(op->opno, &left, &right);
	if (!occ_shape_integer(left) || !occ_shape_integer(right))
		return 0;
	name = get_opname(op->opno);
	return strcmp(name, "+") == 0 ? 1 : strcmp(name, "-") == 0 ? -1 : 0;
}

/*
 * occ_shape_set: does target set column decl to itself plus or minus an
 * expression that reads nothing?  Adds the column, the expression and its
 * sign to shape.
 */
static bool
occ_shape_set(const TargetEntry *target, const OccReservable *decl, OccUpdateShape *shape)
{
	Node	   *expr = occ_shape_uncast((Node *) target->expr, decl->atttype);
	OpExpr	   *op = (OpExpr *) expr;
	int			sign;
	Node	   *delta;

	if (!IsA(expr, OpExpr) || (sign = occ_shape_sign(op)) == 0)
		return false;
	if (occ_shape_is_column(linitial(op->args), shape->rti, decl->attnum))
		delta = lsecond(op->args);
	else if (sign > 0 && occ_shape_is_column(lsecond(op->args), shape->rti, decl->attnum))
		delta = linitial(op->args);
	else
		return false;
	if (!occ_shape_reads_nothing(delta) || !occ_shape_integer(getBaseType(exprType(delta))))
		return false;
	shape->attnums = lappend_int(shape->attnums, decl->attnum);
	shape->signs = lappend_int(shape->signs, sign);
	shape->deltas = lappend(shape->deltas, copyObject(delta));
	return true;
}

/*
 * occ_shape_where: is quals exactly pk = v (or v = pk), with the primary
 * key index's equality in its collation and a v that reads nothing?  Sets
 * shape->key to v.
 */
static bool
occ_shape_where(Node *quals, const OccReservable *decl, OccUpdateShape *shape)
{
	OpExpr	   *op = (OpExpr *) quals;
	Oid			opfamily;
	Node	   *left;
	Node	   *right;

	if (quals != NULL && IsA(quals, List) && list_length((List *) quals) == 1)
		op = linitial((List *) quals);
	if (op == NULL || !IsA(op, OpExpr) || list_length(op->args) != 2 ||
		op->inputcollid != decl->pkcollation)
		return false;
	opfamily = get_opclass_family(get_index_column_opclass(decl->pkindex, 1));
	if (get_op_opfamily_strategy(op->opno, opfamily) != BTEqualStrategyNumber)
		return false;
	left = strip_implicit_coercions(linitial(op->args));
	right = strip_implicit_coercions(lsecond(op->args));
	if (occ_shape_is_var(left, shape->rti, decl->pkattnum))
		shape->key = (Expr *) copyObject(lsecond(op->args));
	else if (occ_shape_is_var(right, shape->rti, decl->pkattnum))
		shape->key = (Expr *) copyObject(linitial(op->args));
	else
		return false;
	return occ_shape_reads_nothing((Node *) shape->key);
}

/*
 * occ_shape_statement: is parse, as a statement, an UPDATE of one plain
 * table with nothing but SET and WHERE?
 */
static bool
occ_shape_statement(const Query *parse)
{
	RangeTblEntry *rte;

	if (parse->commandType != CMD_UPDATE || parse->resultRelation <= 0 ||
		parse->returningList != NIL || parse->cteList != NIL || parse->hasSubLinks ||
		parse->hasModifyingCTE || parse->hasTargetSRFs || parse->hasAggs ||
		parse->hasWindowFuncs || parse->rowMarks != NIL || list_length(parse->rtable) != 1 ||
		parse->jointree == NULL || list_length(parse->jointree->fromlist) != 1)
		return false;
	rte = rt_fetch(parse->resultRelation, parse->rtable);
	return rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_RELATION &&
		rte->tablesample == NULL && rte->securityQuals == NIL;
}

/*
 * occ_update_shape: is parse an UPDATE that reserves (see the header)?  If
 * so, shape says what it reserves, in copies of parse's expressions (the
 * planner then scribbles on parse).  The table is locked already.
 */
bool
occ_update_shape(Query *parse, OccUpdateShape *shape)
{
	Relation	rel;
	OccReservable copy;
	const OccReservable *decl = NULL;
	bool		reserves = true;
	ListCell   *lc;

	memset(shape, 0, sizeof(*shape));
	if (!occ_shape_statement(parse))
		return false;
	shape->rti = parse->resultRelation;
	shape->relid = rt_fetch(parse->resultRelation, parse->rtable)->relid;
	rel = table_open(shape->relid, NoLock);
	if (rel->trigdesc == NULL || rel->rd_rel->relhassubclass ||
		rel->trigdesc->trig_update_before_statement || rel->trigdesc->trig_update_after_statement)
		reserves = false;
	foreach(lc, parse->targetList)
	{
		TargetEntry *target = lfirst(lc);
		char	   *colname;

		if (!reserves || target->resjunk)
			continue;
		colname = get_attname(shape->relid, target->resno, false);
		reserves = occ_reservable_in_force(rel, colname);
		if (reserves)
		{
			occ_reservable_get(rel, colname, &copy);
			decl = &copy;
			reserves = occ_shape_set(target, decl, shape);
		}
	}
	reserves = reserves && decl != NULL &&
		occ_shape_where(parse->jointree->quals, decl, shape);
	table_close(rel, NoLock);
	return reserves;
}
