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
 * A table of Citus (a distributed, reference or Citus local table) is
 * refused: its rows are in shards, on the workers or in another table of
 * the coordinator, not in the table whose rows the reservations read
 * (escrow_load.c), and Citus refuses the guard's CREATE TRIGGER besides.
 * pg_occ does not link to Citus: it reads Citus's catalog by name.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

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

/*
 * occ_declare_citus_field: column att (of type type) of tuple, a row of
 * Citus's catalog dist; false where the catalog has no such column, or
 * another type, or the value is NULL
 */
static bool
occ_declare_citus_field(Relation dist, HeapTuple tuple, AttrNumber att, Oid type, Datum *value)
{
	bool		isnull;

	if (att <= 0 || att > RelationGetDescr(dist)->natts ||
		TupleDescAttr(RelationGetDescr(dist), att - 1)->atttypid != type)
		return false;
	*value = heap_getattr(tuple, att, RelationGetDescr(dist), &isnull);
	return !isnull;
}

/*
 * occ_declare_citus_kind: which kind of Citus table relid is,
 * "distributed", "reference" or "local" (a Citus local table), or NULL if it
 * is none or Citus is not installed in this database.  Read from Citus's
 * catalog pg_catalog.pg_dist_partition, looked up by name: pg_occ neither
 * links to Citus nor needs it, and runs no SQL for it (no search_path to
 * pin, no privilege on the catalog needed).  A row (logicalrelid) makes the
 * table Citus's; its partition method, replication model and colocation
 * group make it a kind as Citus 13.2's IsCitusTableTypeInternal() does:
 * method 'n' (none) replicated by 2PC ('t') is a reference table, 'n' in no
 * colocation group (0) a Citus local table, any other (hash, range, append,
 * and single-shard tables, 'n' in a group) a distributed table.  The scan
 * sees the latest commits and this transaction's own (a table distributed
 * earlier in it).
 */
static const char *
occ_declare_citus_kind(Oid relid)
{
	Oid			distid = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	AttrNumber	relatt;
	Relation	dist;
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	const char *kind = NULL;

	if (!OidIsValid(distid) || get_rel_relkind(distid) != RELKIND_RELATION)
		return NULL;
	relatt = get_attnum(distid, "logicalrelid");
	if (relatt <= 0)
		return NULL;
	dist = table_open(distid, AccessShareLock);
	if (TupleDescAttr(RelationGetDescr(dist), relatt - 1)->atttypid != REGCLASSOID &&
		TupleDescAttr(RelationGetDescr(dist), relatt - 1)->atttypid != OIDOID)
	{
		table_close(dist, AccessShareLock);
		return NULL;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&key, relatt, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(dist, InvalidOid, false, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Datum		method = CharGetDatum(0);
		Datum		model = CharGetDatum(0);
		Datum		group = Int32GetDatum(-1);

		(void) occ_declare_citus_field(dist, tuple, get_attnum(distid, "partmethod"), CHAROID, &method);
		(void) occ_declare_citus_field(dist, tuple, get_attnum(distid, "repmodel"), CHAROID, &model);
		(void) occ_declare_citus_field(dist, tuple, get_attnum(distid, "colocationid"), INT4OID, &group);
		if (DatumGetChar(method) == 'n' && DatumGetChar(model) == 't')
			kind = "reference";
		else if (DatumGetChar(method) == 'n' && DatumGetInt32(group) == 0)
			kind = "local";
		else
			kind = "distributed";
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(dist, AccessShareLock);
	return kind;
}

/*
 * occ_declare_not_citus: error if rel is a table of Citus, with the ways
 * that work instead (README: Running on Citus)
 */
static void
occ_declare_not_citus(Relation rel)
{
	const char *kind = occ_declare_citus_kind(RelationGetRelid(rel));
	const char *detail;
	const char *hint;

	if (kind == NULL)
		return;
	if (strcmp(kind, "local") == 0)
	{
		detail = "Its rows are in its shard, another table on the coordinator, not in the table itself.";
		hint = "Keep the hot counter in a plain table that Citus does not manage, or change it with occ.retry in queue mode.";
	}
	else if (strcmp(kind, "reference") == 0)
	{
		detail = "Its rows are in its shards, one on each node, not in the table itself.";
		hint = "Keep the hot counter in a local table on the coordinator (one that Citus does not manage), or change it with occ.retry in queue mode on the coordinator.";
	}
	else
	{
		detail = "Its rows are in its shards on the worker nodes, not in the table itself.";
		hint = "Keep the hot counter in a local table on the coordinator (one that Citus does not manage), or change it with occ.retry in queue mode from a procedure distributed by the row's key (create_distributed_function), which runs on the worker that holds the row.";
	}
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("reservable columns are not supported on the citus %s table \"%s\"",
					kind, RelationGetRelationName(rel)),
			 errdetail("%s", detail),
			 errhint("%s", hint)));
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
	occ_declare_not_citus(rel);
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
