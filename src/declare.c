/*-------------------------------------------------------------------------
 *
 * declare.c
 *		occ.make_reservable() and occ.drop_reservable(): a column's owner
 *		declares it reservable, or an ordinary column again.
 *
 * A declaration is the column's guard trigger (reservable.c says what it
 * is and checks what it requires): making one creates the guard, BEFORE
 * UPDATE OF the column and the key OR DELETE, and the table's TRUNCATE
 * guard; dropping it drops them.  Either forgets the rows' entries that
 * escrow.c keeps for the column, which an earlier declaration left and the
 * plain changes made without one have made out of date.
 *
 * It also refuses the DDL that would undo a declaration behind its back
 * (occ_declare_process_utility, after the statement ran, in its
 * transaction): renaming a reservable column, which the guard and the
 * ledger rows of its committed reservations name, and publishing the ledger
 * by name or schema; and it folds a table's reservations in the transaction
 * of an ALTER TABLE ... ADD CHECK, whose validation reads the rows' values.
 * A subscriber gets the reservable columns' folded
 * values, the fold's UPDATEs; the ledger's rows are the reservations of the
 * server that made them, and a subscriber's own fold would apply them a
 * second time (its guard refuses them in a subscription's apply).  A
 * publication FOR ALL TABLES takes the ledger too: a warning says so, and
 * REPLICA IDENTITY FULL lets the fold delete its rows all the same.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "pg_occ.h"

PG_FUNCTION_INFO_V1(occ_make_reservable);
PG_FUNCTION_INFO_V1(occ_drop_reservable);

/* the name of a column's guard trigger, and of the table's TRUNCATE guard */
#define OCC_GUARD_PREFIX "occ_reservable_"
#define OCC_TRUNCATE_GUARD "occ_reservable_truncate"

static ProcessUtility_hook_type occ_declare_prev_process_utility = NULL;

/* occ_declare_owned: error unless the current role owns rel */
static void
occ_declare_owned(Relation rel)
{
	if (!occ_class_ownercheck(RelationGetRelid(rel), GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", RelationGetRelationName(rel)),
				 errhint("Only the table's owner declares a column reservable or not.")));
}

/* occ_declare_colname: the column's name, checked for length */
static const char *
occ_declare_colname(Relation rel, Name col)
{
	if (strlen(NameStr(*col)) > NAMEDATALEN - 1 - strlen(OCC_GUARD_PREFIX))
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("column name \"%s\" is too long for a reservable column", NameStr(*col)),
				 errhint("A reservable column's name has at most %d bytes: its guard trigger is named after it.",
						 (int) (NAMEDATALEN - 1 - strlen(OCC_GUARD_PREFIX)))));
	return NameStr(*col);
}

/* occ_declare_run: run a utility statement through SPI */
static void
occ_declare_run(const char *sql)
{
	SPI_connect();
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "SPI_execute failed: %s", sql);
	SPI_finish();
}

/* occ.make_reservable(rel regclass, col name): declare col reservable */
Datum
occ_make_reservable(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	const char *colname;
	AttrNumber	attnum;
	OccReservable decl;
	char	   *qrel;
	bool		truncate_guard = false;

	occ_reservable_require_args(fcinfo, 2, "occ.make_reservable()");
	relid = PG_GETARG_OID(0);
	rel = table_open(relid, ShareRowExclusiveLock);
	colname = occ_declare_colname(rel, PG_GETARG_NAME(1));
	attnum = get_attnum(relid, colname);
	occ_declare_owned(rel);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						colname, RelationGetRelationName(rel))));
	if (occ_reservable_declared(rel, colname))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("column \"%s\" of \"%s\" is already reservable", colname, RelationGetRelationName(rel))));
	occ_reservable_describe(rel, attnum, &decl);
	/* an entry loaded before an earlier drop_reservable is out of date */
	occ_escrow_forget(relid, attnum);
	for (int i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		truncate_guard |= strcmp(rel->trigdesc->triggers[i].tgname, OCC_TRUNCATE_GUARD) == 0;
	qrel = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
	occ_declare_run(psprintf("CREATE TRIGGER %s BEFORE UPDATE OF %s, %s OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION occ.reservable_guard(%s)",
						 quote_identifier(psprintf(OCC_GUARD_PREFIX "%s", colname)),
						 quote_identifier(colname),
						 quote_identifier(get_attname(relid, decl.pkattnum, false)),
						 qrel, quote_literal_cstr(colname)));
	if (!truncate_guard)
		occ_declare_run(psprintf("CREATE TRIGGER " OCC_TRUNCATE_GUARD " BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION occ.reservable_guard()",
							 qrel));
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * occ.drop_reservable(rel regclass, col name): col is an ordinary column
 * again.  The table's lock waits for the transactions with reservations in
 * flight; those committed are applied by the fold all the same.
 */
Datum
occ_drop_reservable(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	const char *colname;
	char	   *qrel;
	int			others = 0;

	occ_reservable_require_args(fcinfo, 2, "occ.drop_reservable()");
	relid = PG_GETARG_OID(0);
	rel = table_open(relid, ShareRowExclusiveLock);
	colname = occ_declare_colname(rel, PG_GETARG_NAME(1));
	occ_declare_owned(rel);
	if (!occ_reservable_declared(rel, colname))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("column \"%s\" of \"%s\" is not reservable", colname, RelationGetRelationName(rel))));
	/* the other columns' guards: row triggers (the TRUNCATE guard is not one) */
	for (int i = 0; i < rel->trigdesc->numtriggers; i++)
		others += occ_reservable_is_guard(&rel->trigdesc->triggers[i], NULL) &&
			TRIGGER_FOR_ROW(rel->trigdesc->triggers[i].tgtype) &&
			!occ_reservable_is_guard(&rel->trigdesc->triggers[i], colname);
	qrel = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
	occ_declare_run(psprintf("DROP TRIGGER %s ON %s",
						 quote_identifier(psprintf(OCC_GUARD_PREFIX "%s", colname)), qrel));
	if (others == 0)
		occ_declare_run(psprintf("DROP TRIGGER IF EXISTS " OCC_TRUNCATE_GUARD " ON %s", qrel));
	occ_escrow_forget(relid, get_attnum(relid, colname));
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * occ_declare_check_renamed: refuse the rename of column stmt->subname if it
 * is reservable in the table renamed or (without ONLY) in one of its
 * children.  Renamed, its guard would guard nothing, and the fold would take
 * the ledger rows of its committed reservations for those of a dropped
 * column.  Called after the rename, which has locked the tables; the guards'
 * arguments still name the column as it was.
 */
static void
occ_declare_check_renamed(RenameStmt *stmt)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	List	   *rels;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	rels = stmt->relation->inh ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
	foreach(lc, rels)
	{
		Relation	rel = relation_open(lfirst_oid(lc), NoLock);
		TriggerDesc *td = rel->trigdesc;

		for (int i = 0; td != NULL && i < td->numtriggers; i++)
			if (occ_reservable_is_guard(&td->triggers[i], stmt->subname))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("cannot rename column \"%s\" of \"%s\": it is reservable",
								stmt->subname, RelationGetRelationName(rel)),
						 errdetail("The ledger rows of its committed reservations name it."),
						 errhint("occ.drop_reservable() it, rename it, then occ.make_reservable() it again.")));
		relation_close(rel, NoLock);
	}
}

/*
 * occ_declare_check_published: refuse a publication of the ledger by name
 * or schema; warn where a new publication FOR ALL TABLES takes it
 */
static void
occ_declare_check_published(bool created)
{
	bool		by_name = false;
	bool		by_all = false;

	if (!OidIsValid(occ_escrow_ledger_oid()))
		return;
	/* the statement's own catalog changes, visible to a new snapshot (not read-only) */
	CommandCounterIncrement();
	SPI_connect();
	if (SPI_execute("SELECT p.puballtables FROM pg_catalog.pg_publication_tables t"
					" JOIN pg_catalog.pg_publication p USING (pubname)"
					" WHERE t.schemaname = 'occ' AND t.tablename = 'reservation_ledger'",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "pg_occ could not read pg_publication_tables");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		bool		all = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

		by_all |= all;
		by_name |= !all;
	}
	SPI_finish();
	if (by_name)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("occ.reservation_ledger is not for logical replication"),
				 errdetail("Its rows are the reservations of this server; a subscriber gets the reservable columns' folded values."),
				 errhint("Publish the tables that a subscriber needs, not the schema occ or its ledger.")));
	if (by_all && created)
		ereport(WARNING,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a publication FOR ALL TABLES takes occ.reservation_ledger, which a subscriber refuses"),
				 errdetail("A subscription's apply of a ledger row fails: a subscriber gets the reservable columns' folded values."),
				 errhint("Publish the tables that a subscriber needs rather than all tables.")));
}

/* occ_declare_adds_check: does stmt add a CHECK constraint? */
static bool
occ_declare_adds_check(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (cmd->subtype == AT_AddConstraint && IsA(cmd->def, Constraint) &&
			((Constraint *) cmd->def)->contype == CONSTR_CHECK)
			return true;
	}
	return false;
}

/*
 * occ_declare_fold_checked: fold the reservable columns of the tables that
 * ALTER TABLE ... ADD CHECK changed (and, without ONLY, of their children)
 * in its transaction.  It validated the rows' values, the committed ones
 * only once folded: a bound that a committed value breaks fails here, with
 * the constraint's error, rather than the fold ever after.
 */
static void
occ_declare_fold_checked(AlterTableStmt *stmt)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	Oid			ledger = occ_escrow_ledger_oid();
	Oid			ledger_owner;
	Relation	rel;
	List	   *rels;
	ListCell   *lc;

	if (!OidIsValid(relid) || !OidIsValid(ledger))
		return;
	rel = relation_open(ledger, AccessShareLock);
	ledger_owner = rel->rd_rel->relowner;
	relation_close(rel, NoLock);
	rels = stmt->relation->inh ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
	foreach(lc, rels)
	{
		rel = relation_open(lfirst_oid(lc), NoLock);
		if (CheckRelationLockedByMe(rel, AccessExclusiveLock, false))
			occ_fold_now(rel, ledger_owner);
		relation_close(rel, NoLock);
	}
}

/* occ_declare_process_utility: RENAME COLUMN, publications, ADD CHECK: after they ran */
static void
occ_declare_process_utility(PlannedStmt *pstmt, const char *queryString,
							bool readOnlyTree, ProcessUtilityContext context,
							ParamListInfo params, QueryEnvironment *queryEnv,
							DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	ProcessUtility_hook_type next = occ_declare_prev_process_utility ?
		occ_declare_prev_process_utility : standard_ProcessUtility;

	next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	if (IsA(stmt, RenameStmt) && ((RenameStmt *) stmt)->renameType == OBJECT_COLUMN &&
		((RenameStmt *) stmt)->relation != NULL)
		occ_declare_check_renamed((RenameStmt *) stmt);
	else if (IsA(stmt, CreatePublicationStmt) || IsA(stmt, AlterPublicationStmt))
		occ_declare_check_published(IsA(stmt, CreatePublicationStmt));
	else if (IsA(stmt, AlterTableStmt) && occ_declare_adds_check((AlterTableStmt *) stmt))
		occ_declare_fold_checked((AlterTableStmt *) stmt);
}

/* occ_declare_init: install the hook (from _PG_init) */
void
occ_declare_init(void)
{
	occ_declare_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = occ_declare_process_utility;
}
