/*-------------------------------------------------------------------------
 *
 * declare.c
 *		occ.make_reservable() and occ.drop_reservable(): a column's owner
 *		declares it reservable, or an ordinary column again.
 *
 * A declaration is the column's guard trigger (guard.c; reservable.c says
 * what a declaration requires): making one creates the guard, BEFORE UPDATE
 * OF the column and the key OR DELETE, enabled ALWAYS (a subscription's
 * apply counts its changes), and the table's TRUNCATE guard; dropping it
 * drops them.  Either forgets the rows' entries that escrow.c keeps for
 * the column, which an earlier declaration left and the plain changes made
 * without one have made out of date.  Ledger rows of the column that came
 * before the declaration (a restore's) are folded by it, within the
 * column's bounds; those committed before occ.drop_reservable(), by it.
 * The DDL that could undo a declaration behind its back is ddl.c's.
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
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

PG_FUNCTION_INFO_V1(occ_make_reservable);
PG_FUNCTION_INFO_V1(occ_drop_reservable);

/* the name of a column's guard trigger, and of the table's TRUNCATE guard */
#define OCC_GUARD_PREFIX "occ_reservable_"
#define OCC_TRUNCATE_GUARD "occ_reservable_truncate"

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
	/* ALTER TABLE refuses a table that this statement has open */
	table_close(rel, NoLock);
	occ_declare_run(psprintf("CREATE TRIGGER %s BEFORE UPDATE OF %s, %s OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION occ.reservable_guard(%s)",
						 quote_identifier(psprintf(OCC_GUARD_PREFIX "%s", colname)),
						 quote_identifier(colname),
						 quote_identifier(get_attname(relid, decl.pkattnum, false)),
						 qrel, quote_literal_cstr(colname)));
	/* a subscription's apply counts its changes too (guard.c) */
	occ_declare_run(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", qrel,
						 quote_identifier(psprintf(OCC_GUARD_PREFIX "%s", colname))));
	if (!truncate_guard)
		occ_declare_run(psprintf("CREATE TRIGGER " OCC_TRUNCATE_GUARD " BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION occ.reservable_guard()",
							 qrel));
	/* ledger rows that a restore brought before the declaration: now, within the bounds */
	rel = table_open(relid, NoLock);
	if (OidIsValid(occ_ledger_oid()))
		(void) occ_fold_apply(rel, colname, false, NULL);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * occ.drop_reservable(rel regclass, col name): col is an ordinary column
 * again.  The table's lock waits for the transactions with reservations in
 * flight; those committed are folded into the column first, in this
 * transaction, as the DROP TRIGGER of its guard does (ddl.c: the fold
 * leaves a column that is not reservable alone).
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
