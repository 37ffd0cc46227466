/*-------------------------------------------------------------------------
 *
 * reserve.c
 *		occ.reserve(), occ.try_reserve(), occ.reserved_value(),
 *		occ.reservations() and the ledger's guard: the SQL of reservations,
 *		over escrow.c's entries; and the reservations of an UPDATE that
 *		reserves (reserve_update.c).
 *
 * occ.reserve(rel, col, key, delta) changes the row whose primary key is key
 * by delta, in the caller's transaction, without locking the row: escrow.c
 * takes it within the bounds, and the ledger row that it inserts commits or
 * aborts with the transaction (so WAL, crash recovery and standbys apply a
 * reservation exactly as they apply the transaction).
 *
 * At SERIALIZABLE a reservation counts as a write of its row, and
 * occ.reserved_value() as a read, for PostgreSQL's serializable checks: a
 * transaction that read a row (a plain SELECT, or occ.reserved_value) gets
 * the serialization failure an UPDATE of that row by another would give
 * it; transactions that only reserve never conflict (nothing read).  The
 * write is checked against every version of the row still in the table
 * (the fold makes new ones, which no reader locked; the ones a running
 * transaction could have read are still there).
 *
 * A row inserted into the ledger by hand (a restore, pg_restore or COPY)
 * goes through the ledger's guard: it needs what occ.reserve() needs, and
 * where its column is declared reservable it is taken as a reservation
 * (bounds, the row's entry), so that nothing read before it arrived
 * ignores it.  A row that a subscription's apply brings is skipped: it is
 * the publisher's reservation, whose folded value the subscription brings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/predicate.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pg_occ.h"
#include "escrow/escrow.h"

PG_FUNCTION_INFO_V1(occ_reserve);
PG_FUNCTION_INFO_V1(occ_reserved_value);
PG_FUNCTION_INFO_V1(occ_try_reserve);
PG_FUNCTION_INFO_V1(occ_reservations);
PG_FUNCTION_INFO_V1(occ_reservation_ledger_guard);

/* occ_reserve_open: table relid, opened in mode; 42P01 if there is none */
static Relation
occ_reserve_open(Oid relid, LOCKMODE mode)
{
	Relation	rel = try_relation_open(relid, mode);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errhint("Name a table with a reservable column.")));
	return rel;
}

/*
 * occ_reserve_tag: the entry's tag of key (of any type argtype, converted
 * to the primary key's), and the key as the key's type
 */
static Datum
occ_reserve_tag(Datum key, Oid argtype, const OccReservable *decl, OccEscrowTag *tag)
{
	char	   *text;

	if (argtype != decl->pktype)
	{
		Oid			output;
		bool		varlena;

		getTypeOutputInfo(argtype, &output, &varlena);
		key = OidInputFunctionCall(decl->pkinput, OidOutputFunctionCall(output, key),
								   decl->pkioparam, -1);
	}
	text = OidOutputFunctionCall(decl->pkoutput, key);
	if (strlen(text) >= OCC_ESCROW_KEYLEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a reservable row's key has at most %d bytes as text", OCC_ESCROW_KEYLEN - 1),
				 errhint("Use a shorter primary key.")));
	memset(tag, 0, sizeof(*tag));
	tag->dbid = MyDatabaseId;
	tag->relid = decl->relid;
	tag->attnum = decl->attnum;
	strlcpy(tag->key, text, OCC_ESCROW_KEYLEN);
	return key;
}

/*
 * occ_reserve_row: the entry of tag, for a reservation of the current
 * transaction (which has an XID from now on: its ledger row or its change
 * commits with it); errors when the table is full of rows in flight
 */
static OccEscrowRow *
occ_reserve_row(const OccEscrowTag *tag, Relation rel, const OccReservable *decl, Datum key,
				int *waits)
{
	OccEscrowRow *row;

	(void) GetCurrentTransactionId();
	row = occ_escrow_row(tag, rel, decl, key, waits);
	if (row == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many rows with reservations in flight"),
				 errdetail("pg_occ tracks at most %d rows (occ.reservable_rows).", occ_reservable_rows),
				 errhint("Raise occ.reservable_rows (needs a restart), or end the transactions that hold reservations.")));
	return row;
}

/* occ_reserve_scan: a scan of the row of key, by the primary key, as snapshot sees it */
static SysScanDesc
occ_reserve_scan(Relation rel, const OccReservable *decl, Datum key, Snapshot snapshot)
{
	ScanKeyData skey;

	ScanKeyInit(&skey, decl->pkattnum, BTEqualStrategyNumber, decl->pkeqproc, key);
	skey.sk_collation = decl->pkcollation;
	return systable_beginscan(rel, decl->pkindex, true, snapshot, 1, &skey);
}

/*
 * occ_reserve_write: for the serializable checks, a write of every version
 * of the row of key still in the table (as an UPDATE of it would be)
 */
static void
occ_reserve_write(Relation rel, const OccReservable *decl, Datum key)
{
	SysScanDesc scan;
	HeapTuple	tuple;

	if (!IsolationIsSerializable())
		return;
	scan = occ_reserve_scan(rel, decl, key, SnapshotAny);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		CheckForSerializableConflictIn(rel, &tuple->t_self,
									   ItemPointerGetBlockNumber(&tuple->t_self));
	systable_endscan(scan);
}

/*
 * occ_reserve_read: for the serializable checks, a read of the row of key
 * (as SELECT ... WHERE pk = key would be)
 */
static void
occ_reserve_read(Relation rel, const OccReservable *decl, Datum key)
{
	SysScanDesc scan;

	if (!IsolationIsSerializable())
		return;
	scan = occ_reserve_scan(rel, decl, key, GetTransactionSnapshot());
	(void) systable_getnext(scan);
	systable_endscan(scan);
}

/*
 * occ_reserve_take: reserve delta of the row of key (of type argtype) of
 * column decl of rel; append: insert its ledger row (not when the ledger's
 * guard takes a row being inserted)
 */
static bool
occ_reserve_take(Relation rel, const OccReservable *decl, Datum key, Oid argtype, int64 delta,
				 OccTake how, bool append)
{
	OccEscrowTag tag;
	OccEscrowRow *row;
	int			waits = 0;

	occ_escrow_require_preload();
	PreventCommandIfReadOnly("occ.reserve()");
	PreventCommandIfParallelMode("occ.reserve()");
	PreventCommandDuringRecovery("occ.reserve()");
	key = occ_reserve_tag(key, argtype, decl, &tag);
	row = occ_reserve_row(&tag, rel, decl, key, &waits);
	if (!occ_escrow_take(row, rel, decl, tag.key, delta, how, waits))
		return false;
	occ_reserve_write(rel, decl, key);
	if (append)
		occ_ledger_append(decl->relid, get_attname(decl->relid, decl->attnum, false), tag.key, delta);
	return true;
}

/*
 * occ_reserve_call: occ.reserve's and occ.try_reserve's arguments checked,
 * and the reservation taken as how says
 */
static bool
occ_reserve_call(FunctionCallInfo fcinfo, const char *fname, OccTake how)
{
	Relation	rel;
	OccReservable decl;
	bool		taken;

	occ_reservable_require_args(fcinfo, 4, fname);
	rel = occ_reserve_open(PG_GETARG_OID(0), RowExclusiveLock);
	occ_reservable_check_any(rel, true);
	occ_reservable_get(rel, NameStr(*PG_GETARG_NAME(1)), &decl);
	occ_reservable_check_access(rel, &decl, true);
	taken = occ_reserve_take(rel, &decl, PG_GETARG_DATUM(2), get_fn_expr_argtype(fcinfo->flinfo, 2),
							 PG_GETARG_INT64(3), how, true);
	relation_close(rel, NoLock);
	return taken;
}

/*
 * occ.reserve(rel regclass, col name, key anycompatible, delta bigint): change
 * the row of rel whose primary key is key by delta, at commit, without
 * waiting for the other transactions that change it
 */
Datum
occ_reserve(PG_FUNCTION_ARGS)
{
	(void) occ_reserve_call(fcinfo, "occ.reserve()", OCC_TAKE_CHECKED);
	PG_RETURN_VOID();
}

/*
 * occ.try_reserve(rel regclass, col name, key anycompatible, delta bigint):
 * occ.reserve(), but a reservation that the bounds refuse (sold out) is
 * false, with nothing reserved, not an error that aborts the transaction
 */
Datum
occ_try_reserve(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(occ_reserve_call(fcinfo, "occ.try_reserve()", OCC_TAKE_TRY));
}

/*
 * occ_reserve_update: the reservations of an UPDATE that reserves
 * (reserve_update.c): deltas[i] of column decls[i] of the row of key (of
 * type keytype); false, with nothing reserved, when no row has the key as
 * the latest commits (and this transaction) see it.  Its caller checked
 * the UPDATE's privileges.
 */
bool
occ_reserve_update(Relation rel, const OccReservable *decls, const int64 *deltas, int n,
				   Datum key, Oid keytype)
{
	OccEscrowTag tag;
	SysScanDesc scan;
	bool		found;
	Datum		pkey = occ_reserve_tag(key, keytype, &decls[0], &tag);

	found = occ_escrow_loaded(&tag);
	if (!found)
	{
		scan = occ_reserve_scan(rel, &decls[0], pkey, SnapshotSelf);
		found = HeapTupleIsValid(systable_getnext(scan));
		systable_endscan(scan);
	}
	for (int i = 0; found && i < n; i++)
		(void) occ_reserve_take(rel, &decls[i], pkey, decls[i].pktype, deltas[i],
								OCC_TAKE_CHECKED, true);
	return found;
}

/*
 * occ_reserve_replicated: a subscription's apply changes the row of key by
 * delta: a change committed on the publisher, counted as a reservation
 * (whatever the bounds say) so that the row's entry stays exact
 */
void
occ_reserve_replicated(Relation rel, const OccReservable *decl, const char *key, int64 delta)
{
	OccEscrowTag tag;
	OccEscrowRow *row;
	Datum		keyd;
	int			waits = 0;

	if (!occ_escrow_ready())
		return;
	keyd = OidInputFunctionCall(decl->pkinput, (char *) key, decl->pkioparam, -1);
	keyd = occ_reserve_tag(keyd, decl->pktype, decl, &tag);
	row = occ_reserve_row(&tag, rel, decl, keyd, &waits);
	(void) occ_escrow_take(row, rel, decl, tag.key, delta, OCC_TAKE_FORCED, waits);
}

/*
 * occ.reserved_value(rel regclass, col name, key anycompatible): the row's
 * committed value plus this transaction's own reservations; on a standby,
 * the value as the transaction's snapshot sees the tables
 */
Datum
occ_reserved_value(PG_FUNCTION_ARGS)
{
	Relation	rel;
	OccReservable copy;
	const OccReservable *decl = &copy;
	OccEscrowTag tag;
	OccEscrowRow *row;
	Datum		key;
	int64		value;
	int			waits = 0;

	occ_reservable_require_args(fcinfo, 3, "occ.reserved_value()");
	rel = occ_reserve_open(PG_GETARG_OID(0), AccessShareLock);
	occ_reservable_check_any(rel, false);
	occ_reservable_get(rel, NameStr(*PG_GETARG_NAME(1)), &copy);
	occ_reservable_check_access(rel, decl, false);
	key = occ_reserve_tag(PG_GETARG_DATUM(2), get_fn_expr_argtype(fcinfo->flinfo, 2), decl, &tag);
	if (RecoveryInProgress())
	{
		int			ledger_rows;
		bool		ours;

		value = occ_escrow_read_snapshot(rel, decl, key, tag.key, GetActiveSnapshot(),
										 &ledger_rows, &ours);
	}
	else
	{
		occ_escrow_require_preload();
		occ_reserve_read(rel, decl, key);
		row = occ_escrow_row(&tag, rel, decl, key, &waits);
		if (row == NULL)
		{
			/* the table is full of rows in flight, none this transaction's */
			value = occ_escrow_read_stable(rel, decl, key, tag.key, &waits);
		}
		else
		{
			value = occ_escrow_committed(row);
			occ_escrow_release();
			value += occ_escrow_own(row);
		}
	}
	relation_close(rel, AccessShareLock);
	PG_RETURN_INT64(value);
}

/*
 * occ_reserve_may_read: may the current role read column attnum of relid and
 * the primary key that names its rows (the key that occ.reservations shows)?
 * A table whose primary key has gone needs SELECT on the whole table.
 */
static bool
occ_reserve_may_read(Oid relid, AttrNumber attnum)
{
	Oid			constraint;
	Bitmapset  *pk = get_primary_key_attnos(relid, true, &constraint);

	if (bms_num_members(pk) != 1)
		return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	return occ_reservable_may_read(relid, attnum,
								   bms_singleton_member(pk) + FirstLowInvalidHeapAttributeNumber);
}

/*
 * occ.reservations(): each row's entry in this database, for the columns
 * the caller may read: committed value, what is in flight, the counts, the
 * fold's failures
 */
Datum
occ_reservations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	OccEscrowRow *copies;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	copies = palloc(sizeof(OccEscrowRow) * occ_reservable_rows);
	n = occ_escrow_copy(copies, occ_reservable_rows);
	for (int i = 0; i < n; i++)
	{
		Datum		values[12];
		bool		nulls[12] = {0};
		char	   *attname = get_attname(copies[i].tag.relid, copies[i].tag.attnum, true);

		if (attname == NULL || !occ_reserve_may_read(copies[i].tag.relid, copies[i].tag.attnum))
			continue;
		values[0] = ObjectIdGetDatum(copies[i].tag.relid);
		values[1] = DirectFunctionCall1(namein, CStringGetDatum(attname));
		values[2] = CStringGetTextDatum(copies[i].tag.key);
		values[3] = Int64GetDatum(copies[i].committed);
		values[4] = Int64GetDatum(copies[i].down);
		values[5] = Int64GetDatum(copies[i].up);
		values[6] = Int32GetDatum(copies[i].in_flight);
		values[7] = Int64GetDatum(copies[i].reservations);
		values[8] = Int64GetDatum(copies[i].refusals);
		values[9] = Int64GetDatum(copies[i].waits);
		values[10] = Int64GetDatum(copies[i].fold_failures);
		values[11] = CStringGetTextDatum(copies[i].fold_error);
		nulls[11] = copies[i].fold_error[0] == '\0';
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* occ_reserve_guard_protocol: error unless td is BEFORE INSERT FOR EACH ROW on the ledger */
static void
occ_reserve_guard_protocol(FunctionCallInfo fcinfo)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_INSERT(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		RelationGetRelid(td->tg_relation) != occ_ledger_oid())
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("occ.reservation_ledger_guard() fired other than BEFORE INSERT FOR EACH ROW on occ.reservation_ledger"),
				 errhint("It is the ledger's own trigger.")));
}

/*
 * occ.reservation_ledger_guard(): the ledger's trigger, BEFORE INSERT FOR
 * EACH ROW, for the rows inserted other than by occ.reserve() (which
 * writes through the heap): a restore's
 */
Datum
occ_reservation_ledger_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	OccLedgerRow lr;
	Relation	rel;
	AttrNumber	attnum;

	occ_reserve_guard_protocol(fcinfo);
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return PointerGetDatum(NULL);
	occ_ledger_row(td->tg_relation, td->tg_trigtuple, &lr);
	rel = occ_reserve_open(lr.relid, RowExclusiveLock);
	attnum = get_attnum(lr.relid, lr.col);
	if (attnum <= 0 || strlen(lr.key) >= OCC_ESCROW_KEYLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a ledger row must name a column of its table and a key of at most %d bytes",
						OCC_ESCROW_KEYLEN - 1),
				 errhint("Reserve with occ.reserve().")));
	occ_reservable_check_any(rel, true);
	if (occ_reservable_declared(rel, lr.col))
	{
		OccReservable decl;

		occ_reservable_get(rel, lr.col, &decl);
		occ_reservable_check_access(rel, &decl, true);
		(void) occ_reserve_take(rel, &decl, CStringGetTextDatum(lr.key), TEXTOID, lr.delta,
								OCC_TAKE_CHECKED, false);
	}
	else if (pg_attribute_aclcheck(lr.relid, attnum, GetUserId(), ACL_UPDATE) != ACLCHECK_OK &&
			 pg_class_aclcheck(lr.relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to add a reservation of \"%s\" of %s",
						lr.col, RelationGetRelationName(rel)),
				 errhint("A ledger row names a column that its role may UPDATE; reserve with occ.reserve().")));
	relation_close(rel, NoLock);
	return PointerGetDatum(td->tg_trigtuple);
}
