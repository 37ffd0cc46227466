/*-------------------------------------------------------------------------
 *
 * guard.c
 *		occ.reservable_guard(): the trigger that declares a column
 *		reservable and refuses the changes that would bypass its
 *		reservations.
 *
 * occ.make_reservable() (declare.c) creates a column's guard, BEFORE UPDATE
 * OF the column and the key OR DELETE FOR EACH ROW, enabled ALWAYS, and the
 * table's BEFORE TRUNCATE guard.  The guard refuses a DELETE, a TRUNCATE,
 * and an UPDATE that changes the column or the key (an UPDATE that leaves
 * both as they were, an ORM saving a whole row, goes through), except:
 *	- the fold's UPDATE of one row (fold_apply.c), let through once: that
 *	  relation, that column, that key, changed by that sum, and not the
 *	  UPDATEs that the table's own code (a CHECK constraint's function)
 *	  may run meanwhile;
 *	- a subscription's apply (replica mode), whose change committed on the
 *	  publisher: counted as a reservation that must be taken (escrow.c),
 *	  so that the row's entry on this server stays exact.
 *
 * PUBLIC may execute the function, so anyone who owns a table may attach it
 * to the table in any way: it checks how it was fired, and refuses with an
 * error what occ.make_reservable() does not create.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

PG_FUNCTION_INFO_V1(occ_reservable_guard);

/*
 * The fold's UPDATE of one row (fold_apply.c), which the guard lets through
 * once: that relation, that column, that key, changed by that sum; and not
 * the UPDATEs that the table's own code (a CHECK constraint's function) may
 * run meanwhile.
 */
typedef struct OccGuardPass
{
	bool		armed;
	Oid			relid;
	AttrNumber	attnum;
	char		key[OCC_ESCROW_KEYLEN];
	int128		delta;
} OccGuardPass;

static OccGuardPass occ_guard_pass;

/* occ_guard_refuse: the guard's error */
pg_noreturn static void
occ_guard_refuse(Relation rel, const char *colname, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 colname ? errmsg("cannot %s \"%s\": its column \"%s\" is reservable",
							  what, RelationGetRelationName(rel), colname) :
			 errmsg("cannot %s \"%s\": it has reservable columns",
					what, RelationGetRelationName(rel)),
			 colname && strcmp(what, "update") == 0 ?
			 errhint("Change it with UPDATE %s SET %s = %s + n (or - n) WHERE <primary key> = v and nothing else, "
					 "which reserves where pg_occ is preloaded, or with occ.reserve(); an ORM that saves whole rows "
					 "must leave the column out (Django: save(update_fields=...), Hibernate: @DynamicUpdate).",
					 RelationGetRelationName(rel), colname, colname) :
			 errhint("Change the column with occ.reserve(); occ.drop_reservable() makes it an ordinary column again.")));
}

/*
 * occ_guard_allow_fold: let the fold's next UPDATE of the row of key
 * through the guard of decl's column, once, if it changes the column by
 * delta and nothing else it guards; decl NULL: let nothing through
 */
void
occ_guard_allow_fold(const OccReservable *decl, const char *key, int128 delta)
{
	memset(&occ_guard_pass, 0, sizeof(occ_guard_pass));
	if (decl == NULL)
		return;
	occ_guard_pass.armed = true;
	occ_guard_pass.relid = decl->relid;
	occ_guard_pass.attnum = decl->attnum;
	strlcpy(occ_guard_pass.key, key, OCC_ESCROW_KEYLEN);
	occ_guard_pass.delta = delta;
}

/* occ_guard_value: column attnum of tuple, as int64 */
static int64
occ_guard_value(HeapTuple tuple, TupleDesc desc, AttrNumber attnum, Oid type)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	return type == INT2OID ? DatumGetInt16(d) : type == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);
}

/* occ_guard_key_text: the primary key of tuple, as text */
static char *
occ_guard_key_text(HeapTuple tuple, TupleDesc desc, const OccReservable *decl)
{
	bool		isnull;

	return OidOutputFunctionCall(decl->pkoutput, heap_getattr(tuple, decl->pkattnum, desc, &isnull));
}

/*
 * occ_guard_update: the guard of column decl on an UPDATE of a row: the
 * fold's (let through once), one that leaves the column and key as they
 * were, or a subscription's apply (counted as a reservation that must be
 * taken: the publisher took it); refused otherwise
 */
static void
occ_guard_update(TriggerData *td, const OccReservable *decl, const char *colname)
{
	Relation	rel = td->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	int64		old_c = occ_guard_value(td->tg_trigtuple, desc, decl->attnum, decl->atttype);
	int64		new_c = occ_guard_value(td->tg_newtuple, desc, decl->attnum, decl->atttype);
	char	   *old_k = occ_guard_key_text(td->tg_trigtuple, desc, decl);

	if (strcmp(old_k, occ_guard_key_text(td->tg_newtuple, desc, decl)) != 0)
		occ_guard_refuse(rel, colname, "update");
	if (occ_guard_pass.armed && occ_guard_pass.relid == decl->relid &&
		occ_guard_pass.attnum == decl->attnum && strcmp(occ_guard_pass.key, old_k) == 0 &&
		occ_guard_pass.delta == (int128) new_c - (int128) old_c)
	{
		occ_guard_pass.armed = false;
		return;
	}
	if (old_c == new_c)
		return;
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
	{
		occ_reserve_replicated(rel, decl, old_k, new_c - old_c);
		return;
	}
	occ_guard_refuse(rel, colname, "update");
}

/*
 * occ.reservable_guard(): the trigger that declares a column reservable and
 * refuses the changes that would bypass the reservations.  Anyone who owns
 * a table may attach it to the table in any way: it checks how it was
 * fired, and refuses what occ.make_reservable() does not create.
 */
Datum
occ_reservable_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	Relation	rel;
	const char *colname;
	OccReservable decl;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("occ.reservable_guard() must be called as a trigger"),
				 errhint("occ.make_reservable() creates it.")));
	event = td->tg_event;
	rel = td->tg_relation;
	if (TRIGGER_FIRED_BY_TRUNCATE(event) && TRIGGER_FIRED_BEFORE(event))
		occ_guard_refuse(rel, NULL, "truncate");
	if (!TRIGGER_FIRED_FOR_ROW(event) || !TRIGGER_FIRED_BEFORE(event) ||
		!(TRIGGER_FIRED_BY_UPDATE(event) || TRIGGER_FIRED_BY_DELETE(event)) ||
		td->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("occ.reservable_guard() fired other than as occ.make_reservable() creates it"),
				 errdetail("Trigger \"%s\" of \"%s\".", td->tg_trigger->tgname, RelationGetRelationName(rel)),
				 errhint("A column's guard fires BEFORE UPDATE OR DELETE FOR EACH ROW with the column's name, the table's BEFORE TRUNCATE FOR EACH STATEMENT; occ.make_reservable() creates them.")));
	colname = td->tg_trigger->tgargs[0];
	if (TRIGGER_FIRED_BY_DELETE(event))
		occ_guard_refuse(rel, colname, "delete from");
	occ_reservable_get(rel, colname, &decl);
	occ_guard_update(td, &decl, colname);
	return PointerGetDatum(td->tg_newtuple);
}
