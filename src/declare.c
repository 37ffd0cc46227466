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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
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
