/*-------------------------------------------------------------------------
 *
 * reservable.c
 *		Reservable columns: which columns are declared so, and what a
 *		reservation of one needs to know about its table (its bounds, its
 *		primary key).
 *
 * occ.make_reservable(rel, col) (declare.c) declares an integer column of
 * a table with a one-column primary key reservable: from then on, it
 * changes only by reservations (occ.reserve, reserve.c), applied to the row
 * by the fold (fold.c).  The declaration is a trigger, the column's guard
 * (guard.c), BEFORE UPDATE OF the column and the key OR DELETE FOR EACH ROW,
 * with a statement trigger BEFORE TRUNCATE.  Being a trigger, it goes with
 * the table: pg_dump, DROP TABLE and ALTER TABLE handle it as they handle
 * any trigger (ddl.c refuses what would undo it).  Only a trigger of that
 * shape calling our C function declares: one of another shape, or another
 * function of that name, declares nothing.
 *
 * The bounds come from the table's CHECK constraints on the column, read
 * from the relcache each time it is rebuilt: c >= k, c > k, c <= k, c < k,
 * k <= c ..., c BETWEEN k AND l, and ANDs of them, k an integer constant.  A
 * CHECK constraint that names the column in any other way is refused (its
 * worst case could not be computed).  What a backend found is kept per
 * (table, column) until the table's relcache entry is invalidated (ALTER
 * TABLE, CREATE or DROP TRIGGER).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_language.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

/* this backend's declarations, by (table, column) */
typedef struct OccReservableKey
{
	Oid			relid;
	AttrNumber	attnum;
} OccReservableKey;

typedef struct OccReservableEntry
{
	OccReservableKey key;
	OccReservable decl;
} OccReservableEntry;

static HTAB *occ_reservables = NULL;

/* occ_rsv_invalidate: a relcache callback; forget relid's (or all) */
static void
occ_rsv_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	OccReservableEntry *entry;

	if (occ_reservables == NULL)
		return;
	hash_seq_init(&status, occ_reservables);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || entry->key.relid == relid)
			hash_search(occ_reservables, &entry->key, HASH_REMOVE, NULL);
}

/*
 * occ_rsv_is_ours: is function foid occ.reservable_guard()?  A C function
 * whose symbol is ours: only a superuser creates a C function.
 */
static bool
occ_rsv_is_ours(Oid foid)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(foid));
	bool		ours = false;

	if (HeapTupleIsValid(tuple))
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tuple);
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);

		ours = proc->prolang == ClanguageId && !isnull &&
			strcmp(TextDatumGetCString(src), "occ_reservable_guard") == 0;
		ReleaseSysCache(tuple);
	}
	return ours;
}

/*
 * occ_reservable_is_guard: is trigger a guard: the TRUNCATE guard or a
 * column's (colname NULL), or the guard of column colname, as
 * occ.make_reservable() creates it (BEFORE UPDATE OR DELETE FOR EACH ROW,
 * the column's name its argument)?  A trigger of another shape that calls
 * the function declares nothing.
 */
bool
occ_reservable_is_guard(const Trigger *trigger, const char *colname)
{
	int16		type = trigger->tgtype;

	if (!occ_rsv_is_ours(trigger->tgfoid))
		return false;
	if (colname == NULL)
		return true;
	return TRIGGER_FOR_ROW(type) && TRIGGER_FOR_BEFORE(type) && TRIGGER_FOR_UPDATE(type) &&
		TRIGGER_FOR_DELETE(type) && !TRIGGER_FOR_INSERT(type) &&
		trigger->tgnargs == 1 && strcmp(trigger->tgargs[0], colname) == 0;
}

/*
 * occ_rsv_guards_columns: does guard fire on every UPDATE that changes
 * column attnum or pkattnum (UPDATE OF a list naming both, or no list)?
 */
static bool
occ_rsv_guards_columns(const Trigger *guard, AttrNumber attnum, AttrNumber pkattnum)
{
	bool		column = guard->tgnattr == 0;
	bool		key = guard->tgnattr == 0;

	for (int i = 0; i < guard->tgnattr; i++)
	{
		column |= guard->tgattr[i] == attnum;
		key |= guard->tgattr[i] == pkattnum;
	}
	return column && key;
}

/* What the triggers of a table say of a column */
typedef enum OccRsvTriggers
{
	OCC_RSV_UNDECLARED,			/* no guard of the column */
	OCC_RSV_DECLARED,			/* its guard, firing, and no other row trigger */
	OCC_RSV_UNGUARDED,			/* a guard of it that does not fire */
	OCC_RSV_TRIGGERED			/* another row trigger would fire on the fold */
} OccRsvTriggers;

/* occ_rsv_triggers: what rel's triggers say of colname; *culprit the trigger in the way */
static OccRsvTriggers
occ_rsv_triggers(Relation rel, const char *colname, Trigger **culprit)
{
	TriggerDesc *td = rel->trigdesc;
	bool		declared = false;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		*culprit = t;
		if (occ_reservable_is_guard(t, NULL))
		{
			bool		ours = occ_reservable_is_guard(t, colname) || t->tgnargs == 0;

			if (ours && t->tgenabled != TRIGGER_FIRES_ON_ORIGIN && t->tgenabled != TRIGGER_FIRES_ALWAYS)
				return OCC_RSV_UNGUARDED;
			declared |= occ_reservable_is_guard(t, colname);
		}
		else if (!t->tgisinternal && t->tgenabled != TRIGGER_DISABLED &&
				 TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_UPDATE(t->tgtype))
			return OCC_RSV_TRIGGERED;
	}
	return declared ? OCC_RSV_DECLARED : OCC_RSV_UNDECLARED;
}

/*
 * occ_reservable_declared: is the column declared (its guard is there, and
 * fires), and no other row trigger would fire on the fold's UPDATE?  Errors
 * when a guard does not fire (changes would pass the reservations) or
 * another row trigger would fire.
 */
bool
occ_reservable_declared(Relation rel, const char *colname)
{
	Trigger    *t = NULL;

	switch (occ_rsv_triggers(rel, colname, &t))
	{
		case OCC_RSV_UNGUARDED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("trigger \"%s\" of \"%s\" is disabled: its reservable column is not guarded",
							t->tgname, RelationGetRelationName(rel)),
					 errhint("ALTER TABLE ... ENABLE TRIGGER %s; or occ.drop_reservable().", t->tgname)));
			break;
		case OCC_RSV_TRIGGERED:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" has an update trigger, \"%s\": a reservable column changes without firing triggers",
							RelationGetRelationName(rel), t->tgname),
					 errhint("Drop or disable the trigger, or keep the column out of occ.make_reservable().")));
			break;
		case OCC_RSV_DECLARED:
			return true;
		case OCC_RSV_UNDECLARED:
			break;
	}
	return false;
}

/*
 * occ_reservable_in_force: is the column declared, its guard firing and no
 * other row trigger in the way?  The same as occ_reservable_declared, but
 * false where that errors: for the planner, which leaves such an UPDATE to
 * the triggers.
 */
bool
occ_reservable_in_force(Relation rel, const char *colname)
{
	Trigger    *t = NULL;

	return occ_rsv_triggers(rel, colname, &t) == OCC_RSV_DECLARED;
}

/*
 * occ_rsv_const: the integer value of a non-null Const of type int2, int4 or
 * int8; false for anything else
 */
static bool
occ_rsv_const(Node *node, int64 *value)
{
	Const	   *c;

	if (node == NULL || !IsA(node, Const))
		return false;
	c = (Const *) node;
	if (c->constisnull)
		return false;
	switch (c->consttype)
	{
		case INT2OID:
			*value = DatumGetInt16(c->constvalue);
			return true;
		case INT4OID:
			*value = DatumGetInt32(c->constvalue);
			return true;
		case INT8OID:
			*value = DatumGetInt64(c->constvalue);
			return true;
	}
	return false;
}

/* occ_rsv_is_column: is node the column attnum (as a plain Var)? */
static bool
occ_rsv_is_column(Node *node, AttrNumber attnum)
{
	return node != NULL && IsA(node, Var) && ((Var *) node)->varattno == attnum;
}

/* occ_rsv_tighten: take bound k of constraint conname if it is tighter */
static void
occ_rsv_tighten(OccReservable *decl, bool lower, int64 k, const char *conname)
{
	if (lower && (!decl->has_lower || k > decl->lower))
	{
		decl->has_lower = true;
		decl->lower = k;
		strlcpy(decl->lower_name, conname, NAMEDATALEN);
	}
	else if (!lower && (!decl->has_upper || k < decl->upper))
	{
		decl->has_upper = true;
		decl->upper = k;
		strlcpy(decl->upper_name, conname, NAMEDATALEN);
	}
}

/*
 * occ_rsv_bound: fold CHECK expression expr (c op k, k op c, ANDs of them)
 * into decl's bounds; false when it has another form
 */
static bool
occ_rsv_bound(Node *expr, OccReservable *decl, const char *conname)
{
	OpExpr	   *op;
	char	   *opname;
	int64		k;
	bool		flip;

	if (IsA(expr, BoolExpr) && ((BoolExpr *) expr)->boolop == AND_EXPR)
	{
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) expr)->args)
			if (!occ_rsv_bound(lfirst(lc), decl, conname))
				return false;
		return true;
	}
	if (!IsA(expr, OpExpr) || list_length(((OpExpr *) expr)->args) != 2)
		return false;
	op = (OpExpr *) expr;
	if (occ_rsv_is_column(linitial(op->args), decl->attnum) && occ_rsv_const(lsecond(op->args), &k))
		flip = false;
	else if (occ_rsv_is_column(lsecond(op->args), decl->attnum) && occ_rsv_const(linitial(op->args), &k))
		flip = true;
	else
		return false;
	opname = get_opname(op->opno);
	if (opname == NULL || get_op_opfamily_strategy(op->opno, INTEGER_BTREE_FAM_OID) == 0)
		return false;
	if (flip)
		opname = strcmp(opname, ">=") == 0 ? "<=" : strcmp(opname, "<=") == 0 ? ">=" :
			strcmp(opname, ">") == 0 ? "<" : strcmp(opname, "<") == 0 ? ">" : opname;
	if (strcmp(opname, ">=") == 0)
		occ_rsv_tighten(decl, true, k, conname);
	else if (strcmp(opname, ">") == 0 && k < PG_INT64_MAX)
		occ_rsv_tighten(decl, true, k + 1, conname);
	else if (strcmp(opname, "<=") == 0)
		occ_rsv_tighten(decl, false, k, conname);
	else if (strcmp(opname, "<") == 0 && k > PG_INT64_MIN)
		occ_rsv_tighten(decl, false, k - 1, conname);
	else
		return false;
	return true;
}

/* occ_rsv_bounds: decl's bounds, from rel's CHECK constraints on the column */
static void
occ_rsv_bounds(Relation rel, OccReservable *decl)
{
	TupleConstr *constr = rel->rd_att->constr;

	for (int i = 0; constr != NULL && i < constr->num_check; i++)
	{
		ConstrCheck *check = &constr->check[i];
		Node	   *expr = stringToNode(check->ccbin);
		Bitmapset  *attnos = NULL;

		pull_varattnos(expr, 1, &attnos);
		if (!bms_is_member(decl->attnum - FirstLowInvalidHeapAttributeNumber, attnos))
			continue;
		if (!check->ccvalid)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("check constraint \"%s\" of table \"%s\" is not validated: it cannot bound a reservable column",
							check->ccname, RelationGetRelationName(rel)),
					 errdetail("A row may break it already, and the fold could then change that row no more."),
					 errhint("ALTER TABLE ... VALIDATE CONSTRAINT %s, or drop it.", check->ccname)));
		if (bms_num_members(attnos) != 1 || !occ_rsv_bound(expr, decl, check->ccname))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("check constraint \"%s\" of table \"%s\" is not a bound of a reservable column",
							check->ccname, RelationGetRelationName(rel)),
					 errhint("A reservable column's CHECK constraints compare it with integer constants (c >= 0, c BETWEEN 0 AND 100); move other conditions to another constraint or drop them.")));
	}
}

/*
 * occ_reservable_describe: what a reservation of column attnum of rel
 * needs, checking what occ.make_reservable requires (errors otherwise)
 */
void
occ_reservable_describe(Relation rel, AttrNumber attnum, OccReservable *decl)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	Oid			pkindex;
	Relation	idx;
	Oid			eqop;
	bool		varlena;

	memset(decl, 0, sizeof(*decl));
	decl->relid = RelationGetRelid(rel);
	decl->attnum = attnum;
	decl->atttype = att->atttypid;
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table: only a plain table's column can be reservable",
						RelationGetRelationName(rel)),
				 errhint("Partitioned tables, foreign tables, views and materialized views are not supported; declare the column of each partition.")));
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is not logged: a reservable column needs a permanent table",
						RelationGetRelationName(rel)),
				 errhint("Reservations are kept in a logged ledger; ALTER TABLE ... SET LOGGED first.")));
	if (rel->rd_rel->relrowsecurity)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has row-level security enabled: it cannot have a reservable column",
						RelationGetRelationName(rel)),
				 errhint("Reservations are applied by a background worker as the table's owner, which policies would hide rows from.")));
	if (att->atttypid != INT2OID && att->atttypid != INT4OID && att->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of \"%s\" is of type %s: a reservable column is smallint, integer or bigint",
						NameStr(att->attname), RelationGetRelationName(rel), format_type_be(att->atttypid)),
				 errhint("Keep amounts in integer units (cents, items).")));
	if (!att->attnotnull || att->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of \"%s\" must be NOT NULL and not generated to be reservable",
						NameStr(att->attname), RelationGetRelationName(rel)),
				 errhint("ALTER TABLE ... ALTER COLUMN ... SET NOT NULL.")));
	pkindex = occ_primary_key_index(rel);
	if (!OidIsValid(pkindex))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has no primary key: a reservation names its row by its primary key",
						RelationGetRelationName(rel)),
				 errhint("Add a one-column primary key.")));
	idx = index_open(pkindex, AccessShareLock);
	if (idx->rd_index->indnkeyatts != 1 || idx->rd_index->indkey.values[0] == attnum)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the primary key of \"%s\" must be one column, other than \"%s\"",
						RelationGetRelationName(rel), NameStr(att->attname)),
				 errhint("Reservations name their row by a one-column primary key.")));
	decl->pkattnum = idx->rd_index->indkey.values[0];
	decl->pkindex = pkindex;
	decl->pktype = TupleDescAttr(RelationGetDescr(rel), decl->pkattnum - 1)->atttypid;
	decl->pkcollation = idx->rd_indcollation[0];
	eqop = get_opfamily_member(idx->rd_opfamily[0], idx->rd_opcintype[0], idx->rd_opcintype[0],
							   BTEqualStrategyNumber);
	decl->pkeqproc = get_opcode(eqop);
	index_close(idx, AccessShareLock);

	/*
	 * The key's text names the row's entry and its ledger rows: a key type
	 * whose equal values may print differently (numeric 1 and 1.0, char(n)
	 * with and without its padding, a timestamp under two TimeZone settings,
	 * text under a nondeterministic collation) would give one row several
	 * entries, each checking the bounds alone.
	 */
	switch (getBaseType(decl->pktype))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case TEXTOID:
		case VARCHAROID:
		case UUIDOID:
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the primary key of \"%s\" is of type %s: a reservable row's key is smallint, integer, bigint, text, varchar or uuid",
							RelationGetRelationName(rel), format_type_be(decl->pktype)),
					 errhint("Equal keys of other types may have different texts, which would name one row twice.")));
	}
	if (OidIsValid(decl->pkcollation) && !get_collation_isdeterministic(decl->pkcollation))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the primary key of \"%s\" has a nondeterministic collation: a reservable row's key is compared as bytes",
						RelationGetRelationName(rel)),
				 errhint("Equal keys of a nondeterministic collation may have different texts, which would name one row twice.")));
	getTypeInputInfo(decl->pktype, &decl->pkinput, &decl->pkioparam);
	getTypeOutputInfo(decl->pktype, &decl->pkoutput, &varlena);
	occ_rsv_bounds(rel, decl);
}

/*
 * occ_rsv_check_guard: error unless the guard of column colname fires on
 * every change of the column and of the primary key: a key changed since
 * the declaration (ALTER TABLE ... DROP CONSTRAINT, ADD PRIMARY KEY) would
 * give the ledger rows of the old key's rows to the new key's
 */
static void
occ_rsv_check_guard(Relation rel, const OccReservable *decl, const char *colname)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
		if (occ_reservable_is_guard(&td->triggers[i], colname) &&
			!occ_rsv_guards_columns(&td->triggers[i], decl->attnum, decl->pkattnum))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the primary key of \"%s\" is not the one that its reservable column \"%s\" was declared with",
							RelationGetRelationName(rel), colname),
					 errdetail("The ledger rows of its reservations name their rows by the key they were taken with."),
					 errhint("Restore the primary key; or occ.drop_reservable() the column before changing the key, and declare it again after.")));
}

/*
 * occ_reservable_get: the declaration of column colname of rel (opened by the
 * caller), copied into *decl; errors unless it is reservable.  A copy, not
 * a pointer into the cache: a relcache invalidation (a GRANT, any DDL, in
 * user code that runs before the caller is done with it: a CHECK, a
 * delta's expression, a key's input function) removes the cache's entry,
 * and the next one entered, another table's, would take its place.
 */
void
occ_reservable_get(Relation rel, const char *colname, OccReservable *decl)
{
	OccReservableKey key;
	OccReservableEntry *entry;
	bool		found;

	key.relid = RelationGetRelid(rel);
	key.attnum = get_attnum(key.relid, colname);
	if (key.attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						colname, RelationGetRelationName(rel))));
	if (occ_reservables == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(OccReservableKey);
		ctl.entrysize = sizeof(OccReservableEntry);
		ctl.hcxt = TopMemoryContext;
		occ_reservables = hash_create("pg_occ reservable columns", 16, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(occ_rsv_invalidate, (Datum) 0);
	}
	entry = hash_search(occ_reservables, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		*decl = entry->decl;
		return;
	}
	if (!occ_reservable_declared(rel, colname))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of \"%s\" is not reservable", colname, RelationGetRelationName(rel)),
				 errhint("Its owner declares it with SELECT occ.make_reservable('%s', '%s').",
						 RelationGetRelationName(rel), colname)));
	occ_reservable_describe(rel, key.attnum, decl);
	occ_rsv_check_guard(rel, decl, colname);
	entry = hash_search(occ_reservables, &key, HASH_ENTER, &found);
	entry->decl = *decl;
}

/* occ_reservable_may: may the current role use column attnum of relid as mode? */
static bool
occ_reservable_may(Oid relid, AttrNumber attnum, AclMode mode)
{
	return pg_class_aclcheck(relid, GetUserId(), mode) == ACLCHECK_OK ||
		pg_attribute_aclcheck(relid, attnum, GetUserId(), mode) == ACLCHECK_OK;
}

/*
 * occ_reservable_may_read: may the current role read column attnum of relid
 * and the primary key column pkattnum that names its rows, as SELECT pk, c
 * FROM rel would need?
 */
bool
occ_reservable_may_read(Oid relid, AttrNumber attnum, AttrNumber pkattnum)
{
	return occ_reservable_may(relid, attnum, ACL_SELECT) &&
		occ_reservable_may(relid, pkattnum, ACL_SELECT);
}

/*
 * occ_reservable_check_any: may the current role read (write: and change)
 * rel at all?  Checked before anything of its declaration is looked up, so
 * that a role without a privilege on the table learns nothing of it (is a
 * column reservable, the names of its constraints).
 */
void
occ_reservable_check_any(Relation rel, bool write)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			role = GetUserId();

	if ((pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK &&
		 pg_attribute_aclcheck_all(relid, role, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK) ||
		(write && pg_class_aclcheck(relid, role, ACL_UPDATE) != ACLCHECK_OK &&
		 pg_attribute_aclcheck_all(relid, role, ACL_UPDATE, ACLMASK_ANY) != ACLCHECK_OK))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errhint("A reservation needs UPDATE and SELECT on the column and SELECT on the primary key, as UPDATE ... SET c = c + d WHERE pk = ... would.")));
}

/*
 * occ_reservable_check_access: may the current role change (and read) the
 * column?  As UPDATE t SET c = c + d WHERE pk = k would need: UPDATE and
 * SELECT on c, SELECT on pk.
 */
void
occ_reservable_check_access(Relation rel, const OccReservable *decl, bool write)
{
	Oid			relid = RelationGetRelid(rel);

	if (!occ_reservable_may_read(relid, decl->attnum, decl->pkattnum) ||
		(write && !occ_reservable_may(relid, decl->attnum, ACL_UPDATE)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errhint("A reservation needs UPDATE and SELECT on the column and SELECT on the primary key, as UPDATE ... SET c = c + d WHERE pk = ... would.")));
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has row-level security enabled: it cannot have a reservable column",
						RelationGetRelationName(rel))));
}

/*
 * occ_reservable_require_args: a NULL argument is an error (a reservation
 * that silently did nothing would be a falsehood)
 */
void
occ_reservable_require_args(FunctionCallInfo fcinfo, int nargs, const char *fname)
{
	for (int i = 0; i < nargs; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("the arguments of %s must not be null", fname),
					 errhint("Give the table, the column, the row's key%s.",
							 nargs == 4 ? " and the change" : "")));
}
