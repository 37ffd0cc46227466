/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		Reservable columns under DDL: what a statement may not undo behind
 *		a declaration's back, and what it must leave exact.
 *
 * A ProcessUtility hook, around the statements that concern a table with
 * reservable columns (or the ledger, or pg_occ), in their transaction:
 *	- ALTER TABLE: after it, the declarations must still hold (the primary
 *	  key they were made with, validated bounds of a supported form, no
 *	  update trigger, no row-level security...; refused otherwise), the
 *	  rows' entries are forgotten (a guard disabled meanwhile let changes
 *	  past them), and where it locked the table exclusively (ADD CHECK, ADD
 *	  COLUMN ... CHECK, a rewrite), the committed reservations are folded
 *	  first, with the latest commits, so that a bound that a committed
 *	  value breaks fails now, not the fold ever after; the ledger rows of a
 *	  reservable column it dropped are deleted (a column of that name
 *	  added later is another);
 *	- ALTER TABLE ... RENAME COLUMN of a reservable column, and ALTER TYPE
 *	  ... RENAME ATTRIBUTE ... CASCADE of a typed table's: refused (its
 *	  guard and its ledger rows name it);
 *	- CREATE TRIGGER on such a table: the same checks (no update trigger
 *	  fires where the fold changes rows), and the entries forgotten (a
 *	  guard restored by hand, or by pg_restore, declares anew);
 *	- DROP TRIGGER of a guard: its committed reservations are folded first
 *	  (the fold leaves a column that is not reservable alone);
 *	- DROP EXTENSION pg_occ: refused while the ledger holds committed
 *	  reservations (they would be lost without a word);
 *	- CREATE or ALTER PUBLICATION: the ledger is not for logical
 *	  replication by name or schema (refused); a publication FOR ALL TABLES
 *	  takes it (a warning): the subscriber skips its rows, and gets the
 *	  reservable columns' folded values.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

/* a reservable column of a table that a statement changes */
typedef struct OccDdlColumn
{
	Oid			relid;
	char	   *name;
	AttrNumber	attnum;
} OccDdlColumn;

static ProcessUtility_hook_type occ_ddl_prev_process_utility = NULL;

/*
 * occ_ddl_tables: the table a statement names and, without ONLY, its
 * children; NIL when there is none (or pg_occ is not installed here)
 */
static List *
occ_ddl_tables(RangeVar *rv)
{
	Oid			relid;

	if (rv == NULL || !OidIsValid(occ_ledger_oid()))
		return NIL;
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(relid))
		return NIL;
	return rv->inh ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
}

/*
 * occ_ddl_typed_tables: the tables of the composite type that rv names
 * (CREATE TABLE ... OF) and their children, whose columns ALTER TYPE ...
 * RENAME ATTRIBUTE ... CASCADE renames; NIL when there is none
 */
static List *
occ_ddl_typed_tables(RangeVar *rv)
{
	Oid			typrelid;
	List	   *relids = NIL;
	ScanKeyData key;
	Relation	classes;
	TableScanDesc scan;
	HeapTuple	tuple;

	if (rv == NULL || !OidIsValid(occ_ledger_oid()))
		return NIL;
	typrelid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(typrelid))
		return NIL;
	ScanKeyInit(&key, Anum_pg_class_reloftype, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(get_rel_type_id(typrelid)));
	classes = table_open(RelationRelationId, AccessShareLock);
	scan = table_beginscan_catalog(classes, 1, &key);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
		relids = list_concat(relids, find_all_inheritors(((Form_pg_class) GETSTRUCT(tuple))->oid,
														 NoLock, NULL));
	table_endscan(scan);
	table_close(classes, AccessShareLock);
	return relids;
}

/* occ_ddl_guarded: the reservable columns of the tables relids (guards, enabled or not) */
static List *
occ_ddl_guarded(List *relids)
{
	List	   *cols = NIL;
	ListCell   *lc;

	foreach(lc, relids)
	{
		Relation	rel = try_relation_open(lfirst_oid(lc), NoLock);
		TriggerDesc *td = rel != NULL ? rel->trigdesc : NULL;

		for (int i = 0; td != NULL && i < td->numtriggers; i++)
		{
			Trigger    *t = &td->triggers[i];

			if (t->tgnargs == 1 && occ_reservable_is_guard(t, t->tgargs[0]))
			{
				OccDdlColumn *c = palloc(sizeof(OccDdlColumn));

				c->relid = lfirst_oid(lc);
				c->name = pstrdup(t->tgargs[0]);
				c->attnum = get_attnum(c->relid, c->name);
				cols = lappend(cols, c);
			}
		}
		if (rel != NULL)
			relation_close(rel, NoLock);
	}
	return cols;
}

/*
 * occ_ddl_enabled: are column col's guard of rel and the table's TRUNCATE
 * guard there and firing (a declaration in force)?  A guard disabled on
 * purpose is the owner's to re-enable; reservations wait for it.
 */
static bool
occ_ddl_enabled(Relation rel, const char *col)
{
	TriggerDesc *td = rel->trigdesc;
	bool		column = false;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];
		bool		fires = t->tgenabled == TRIGGER_FIRES_ON_ORIGIN ||
			t->tgenabled == TRIGGER_FIRES_ALWAYS;

		if (occ_reservable_is_guard(t, col))
			column = fires;
		else if (t->tgnargs == 0 && occ_reservable_is_guard(t, NULL) && !fires)
			return false;
	}
	return column;
}

/*
 * occ_ddl_refuse_unfolded: a guard that goes (DROP TRIGGER, or the primary
 * key's column dropped with CASCADE) without folding its column's
 * reservations would strand them: refuse, unless the ledger holds none
 */
static void
occ_ddl_refuse_unfolded(Relation rel, const char *col)
{
	if (occ_ledger_holds(RelationGetRelid(rel), col))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot drop the guard of reservable column \"%s\" of \"%s\": its reservations are not folded",
						col, RelationGetRelationName(rel)),
				 errdetail("The ledger rows of its reservations name its rows by their primary key, which only the guard keeps."),
				 errhint("Enable the guard if it is disabled and SELECT occ.drop_reservable('%s', '%s'), which folds them, first.",
						 RelationGetRelationName(rel), col)));
}

/* occ_ddl_has_guard: has rel a guard of column col, enabled or not? */
static bool
occ_ddl_has_guard(Relation rel, const char *col)
{
	for (int i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		if (occ_reservable_is_guard(&rel->trigdesc->triggers[i], col))
			return true;
	return false;
}

/*
 * occ_ddl_after: after a statement that changed the tables of cols (their
 * reservable columns before it): what changed must leave the declarations
 * whole and the rows' entries exact (see the file's header); fold: fold
 * the committed reservations of a table it locked exclusively
 */
static void
occ_ddl_after(List *cols, bool fold)
{
	ListCell   *lc;

	if (cols == NIL)
		return;
	/* the statement's own catalog changes, and the relcache rebuilt */
	CommandCounterIncrement();
	foreach(lc, cols)
	{
		OccDdlColumn *c = lfirst(lc);
		Relation	rel = try_relation_open(c->relid, NoLock);

		if (rel == NULL || get_attnum(c->relid, c->name) != c->attnum)
		{
			/* the column (or its table) was dropped */
			Relation	ledger = occ_ledger_open(RowExclusiveLock);

			occ_ledger_delete_rows(ledger, c->relid, c->name);
			table_close(ledger, NoLock);
		}
		else if (occ_ddl_enabled(rel, c->name))
		{
			OccReservable decl;

			/* errors unless the declaration still holds */
			occ_reservable_get(rel, c->name, &decl);
			if (fold && CheckRelationLockedByMe(rel, AccessExclusiveLock, false))
				(void) occ_fold_apply(rel, c->name, false, NULL);
		}
		else if (!occ_ddl_has_guard(rel, c->name))
			occ_ddl_refuse_unfolded(rel, c->name);
		/* under a lock that keeps reservations out (not SET STATISTICS's) */
		if (rel != NULL && c->attnum > 0 && CheckRelationLockedByMe(rel, ShareRowExclusiveLock, true))
			occ_escrow_forget(c->relid, c->attnum);
		if (rel != NULL)
			relation_close(rel, NoLock);
	}
}

/*
 * occ_ddl_check_renamed: refuse the rename of column stmt->subname if it
 * is reservable in the table renamed or (without ONLY) in one of its
 * children, or, for an attribute of a composite type, in one of the tables
 * of the type.  Called after the rename, which has locked the tables; the
 * guards' arguments still name the column as it was.
 */
static void
occ_ddl_check_renamed(RenameStmt *stmt)
{
	ListCell   *lc;
	List	   *relids = stmt->renameType == OBJECT_ATTRIBUTE ?
		occ_ddl_typed_tables(stmt->relation) : occ_ddl_tables(stmt->relation);

	foreach(lc, occ_ddl_guarded(relids))
	{
		OccDdlColumn *c = lfirst(lc);

		if (strcmp(c->name, stmt->subname) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot rename column \"%s\" of \"%s\": it is reservable",
							stmt->subname, get_rel_name(c->relid)),
					 errdetail("The ledger rows of its committed reservations name it."),
					 errhint("occ.drop_reservable() it, rename it, then occ.make_reservable() it again.")));
	}
}

/*
 * occ_ddl_before_drop_trigger: a guard about to be dropped (DROP TRIGGER):
 * fold its column's committed reservations while it is declared; a
 * disabled one, which nothing folds through, is refused while the ledger
 * holds its column's rows
 */
static void
occ_ddl_before_drop_trigger(DropStmt *stmt)
{
	ListCell   *lc;

	if (!OidIsValid(occ_ledger_oid()))
		return;
	foreach(lc, stmt->objects)
	{
		List	   *names = list_copy(lfirst(lc));
		char	   *tgname = strVal(llast(names));
		Oid			relid;
		Relation	rel;

		names = list_delete_last(names);
		relid = RangeVarGetRelid(makeRangeVarFromNameList(names), ShareRowExclusiveLock, true);
		rel = OidIsValid(relid) ? try_relation_open(relid, NoLock) : NULL;
		for (int i = 0; rel != NULL && rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *t = &rel->trigdesc->triggers[i];

			if (strcmp(t->tgname, tgname) != 0 || t->tgnargs != 1 ||
				!occ_reservable_is_guard(t, t->tgargs[0]))
				continue;
			if (t->tgenabled != TRIGGER_DISABLED)
				(void) occ_fold_apply(rel, t->tgargs[0], false, NULL);
			else
				occ_ddl_refuse_unfolded(rel, t->tgargs[0]);
		}
		if (rel != NULL)
			relation_close(rel, NoLock);
	}
}

/*
 * occ_ddl_before_drop_extension: refuse DROP EXTENSION pg_occ while the
 * ledger holds committed reservations (locked first: none commits after)
 */
static void
occ_ddl_before_drop_extension(DropStmt *stmt)
{
	Oid			ledger_oid = occ_ledger_oid();
	ListCell   *lc;
	bool		ours = false;
	Relation	ledger;
	TableScanDesc scan;
	Snapshot	snapshot;
	bool		any;

	foreach(lc, stmt->objects)
		ours |= strcmp(strVal(lfirst(lc)), "pg_occ") == 0;
	if (!ours || !OidIsValid(ledger_oid))
		return;
	ledger = table_open(ledger_oid, AccessExclusiveLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = occ_table_beginscan(ledger, snapshot, 0, NULL);
	any = heap_getnext(scan, ForwardScanDirection) != NULL;
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(ledger, NoLock);
	if (any)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop extension pg_occ: occ.reservation_ledger holds committed reservations not yet folded"),
				 errdetail("Dropping it would lose them."),
				 errhint("Wait for the fold (occ.reservations shows a row that cannot be folded), or occ.drop_reservable() each reservable column, which folds it.")));
}

/*
 * occ_ddl_check_published: refuse a publication of the ledger by name
 * or schema; warn where a new publication FOR ALL TABLES takes it
 */
static void
occ_ddl_check_published(bool created)
{
	bool		by_name = false;
	bool		by_all = false;

	if (!OidIsValid(occ_ledger_oid()))
		return;
	/* the statement's own catalog changes, visible to a new snapshot (not read-only) */
	CommandCounterIncrement();
	SPI_connect();
	/* run with the caller's search_path: every operator is pg_catalog's */
	if (SPI_execute("SELECT p.puballtables FROM pg_catalog.pg_publication_tables t"
					" JOIN pg_catalog.pg_publication p ON p.pubname OPERATOR(pg_catalog.=) t.pubname"
					" WHERE t.schemaname OPERATOR(pg_catalog.=) 'occ'"
					" AND t.tablename OPERATOR(pg_catalog.=) 'reservation_ledger'",
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
				 errmsg("a publication FOR ALL TABLES takes occ.reservation_ledger, whose rows a subscriber skips"),
				 errdetail("A subscriber gets the reservable columns' folded values, not the reservations."),
				 errhint("Publish the tables that a subscriber needs rather than all tables.")));
}

/*
 * occ_ddl_process_utility: the statements of the file's header.  What the
 * checks after the statement need is decided and copied before it runs:
 * the statement's tree may be freed by the time next() returns (a COMMIT
 * or ROLLBACK, a CALL whose procedure commits), so it is not read again.
 */
static void
occ_ddl_process_utility(PlannedStmt *pstmt, const char *queryString,
						bool readOnlyTree, ProcessUtilityContext context,
						ParamListInfo params, QueryEnvironment *queryEnv,
						DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	ProcessUtility_hook_type next = occ_ddl_prev_process_utility ?
		occ_ddl_prev_process_utility : standard_ProcessUtility;
	NodeTag		tag = nodeTag(stmt);
	List	   *cols = NIL;
	RangeVar   *trigger_rel = NULL;
	RenameStmt *renamed = NULL;

	if (tag == T_AlterTableStmt)
		cols = occ_ddl_guarded(occ_ddl_tables(((AlterTableStmt *) stmt)->relation));
	else if (tag == T_CreateTrigStmt)
		trigger_rel = copyObject(((CreateTrigStmt *) stmt)->relation);
	else if (tag == T_RenameStmt && ((RenameStmt *) stmt)->relation != NULL &&
			 (((RenameStmt *) stmt)->renameType == OBJECT_COLUMN ||
			  ((RenameStmt *) stmt)->renameType == OBJECT_ATTRIBUTE))
		renamed = copyObject((RenameStmt *) stmt);
	else if (tag == T_DropStmt && ((DropStmt *) stmt)->removeType == OBJECT_TRIGGER)
		occ_ddl_before_drop_trigger((DropStmt *) stmt);
	else if (tag == T_DropStmt && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
		occ_ddl_before_drop_extension((DropStmt *) stmt);

	next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);

	if (tag == T_AlterTableStmt)
		occ_ddl_after(cols, true);
	else if (tag == T_CreateTrigStmt)
		occ_ddl_after(occ_ddl_guarded(occ_ddl_tables(trigger_rel)), false);
	else if (renamed != NULL)
		occ_ddl_check_renamed(renamed);
	else if (tag == T_CreatePublicationStmt || tag == T_AlterPublicationStmt)
		occ_ddl_check_published(tag == T_CreatePublicationStmt);
}

/* occ_ddl_init: install the hook (from _PG_init) */
void
occ_ddl_init(void)
{
	occ_ddl_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = occ_ddl_process_utility;
}
