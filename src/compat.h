/*-------------------------------------------------------------------------
 *
 * compat.h
 *		PostgreSQL version compatibility of pg_occ.
 *
 * Version-specific code lives here and only here, keyed on PG_VERSION_NUM;
 * the .c files use the names below whatever the version.  Tested with 15,
 * 17, 18 and 19 (its release candidate).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_COMPAT_H
#define PG_OCC_COMPAT_H

#include "catalog/pg_class.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/relcache.h"

/* We rely on shmem_request_hook, MarkGUCPrefixReserved and pg_prng, all new in 15. */
#if PG_VERSION_NUM < 150000
#error "pg_occ requires PostgreSQL 15 or later"
#endif

/*
 * occ_guc_malloc, occ_guc_free: memory for a GUC check hook's extra.  From
 * 16 on, PostgreSQL frees it with guc_free(), which accepts only memory from
 * guc_malloc(); before, it used free().  Both return NULL when out of memory
 * (guc_malloc logs it at LOG).
 */
#if PG_VERSION_NUM >= 160000
#define occ_guc_malloc(size) guc_malloc(LOG, (size))
#define occ_guc_free(ptr) guc_free(ptr)
#else
#define occ_guc_malloc(size) malloc(size)
#define occ_guc_free(ptr) free(ptr)
#endif

/*
 * pg_noreturn: 18 replaced pg_attribute_noreturn() by pg_noreturn, a
 * function specifier (C11 _Noreturn; from 19, C23's [[noreturn]] when the
 * compiler speaks C23); write it first, before static and the return type.
 * Defined here only where c.h has none (before 18, unless a minor release
 * backports it), so that it is never defined twice.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * occ_lock_held_by_me(tag, mode): does this backend hold the lock tag in
 * exactly mode?  17 added LockHeldByMe's third argument, orstronger (false
 * keeps the old meaning).
 */
#if PG_VERSION_NUM >= 170000
#define occ_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode), false)
#else
#define occ_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode))
#endif

/*
 * occ_lock_acquire_extended(tag, mode, session, dontwait, reporterr,
 * locallockp): LockAcquireExtended.  18 added a last argument,
 * logLockFailure; false keeps the old behaviour (LockAcquire passes false
 * too: no log_lock_failures message when dontwait finds the lock taken).
 */
#if PG_VERSION_NUM >= 180000
#define occ_lock_acquire_extended(tag, mode, session, dontwait, reporterr, locallockp) \
	LockAcquireExtended((tag), (mode), (session), (dontwait), (reporterr), (locallockp), false)
#else
#define occ_lock_acquire_extended(tag, mode, session, dontwait, reporterr, locallockp) \
	LockAcquireExtended((tag), (mode), (session), (dontwait), (reporterr), (locallockp))
#endif

/*
 * occ_proc_aclcheck(proc, role, mode): pg_proc_aclcheck, which 16 folded into
 * object_aclcheck for every class of object
 */
#if PG_VERSION_NUM >= 160000
#define occ_proc_aclcheck(proc, role, mode) \
	object_aclcheck(ProcedureRelationId, (proc), (role), (mode))
#else
#define occ_proc_aclcheck(proc, role, mode) pg_proc_aclcheck((proc), (role), (mode))
#endif

/*
 * occ_shmem_init_hash(name, nelems, info, flags): ShmemInitHash of a table
 * of nelems entries, made at its full size.  19 dropped the separate initial
 * size (init_size), which we always gave equal to the maximum.
 */
#if PG_VERSION_NUM >= 190000
#define occ_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define occ_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/*
 * occ_log_min_messages(): this process's log_min_messages.  19 made it one
 * level per kind of process, an array indexed by BackendType.
 */
#if PG_VERSION_NUM >= 190000
#define occ_log_min_messages() (log_min_messages[MyBackendType])
#else
#define occ_log_min_messages() (log_min_messages)
#endif

/*
 * occ_my_procno(): this backend's index among the PGPROCs, which indexes
 * pg_occ's per-backend slots.  17 renamed it MyProcNumber.
 */
#if PG_VERSION_NUM >= 170000
#define occ_my_procno() (MyProcNumber)
#else
#define occ_my_procno() (MyProc->pgprocno)
#endif

/*
 * occ_guc_variables(&n), occ_guc_variables_free(vars): every setting.  16
 * made the table a hash, of which get_guc_variables() returns a palloc'd,
 * sorted copy; before, it returned the table itself, GetNumConfigOptions()
 * long.
 */
#if PG_VERSION_NUM >= 160000
#define occ_guc_variables(n) get_guc_variables(n)
#define occ_guc_variables_free(vars) pfree(vars)
#else
#define occ_guc_variables(n) (*(n) = GetNumConfigOptions(), get_guc_variables())
#define occ_guc_variables_free(vars) ((void) (vars))
#endif

/*
 * occ_guc_walk_hash(&hash, skip): hash (hash_combine64 of hash_bytes) the
 * name and value of every setting that SerializeGUCState would send to a
 * parallel worker (not at its default, not fixed at start-up, not role),
 * but those whose name skip() accepts, walking the table itself; returns
 * whether it did.  Before 16 the table is an array, which serialising walks
 * twice (estimating the size, then formatting every value): the walk costs
 * a fraction of it, and batch mode fingerprints the settings once per call
 * and once per body.  From 16 on it does not (returns false):
 * SerializeGUCState walks only the settings not at their default, while
 * get_guc_variables() sorts a copy of them all.
 */
#if PG_VERSION_NUM >= 160000
#define occ_guc_walk_hash(hash, skip) ((void) (hash), (void) (skip), false)
#else
static inline bool
occ_guc_walk_hash(uint64 *hash, bool (*skip) (const char *name))
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();
	uint64		h = 0;

	for (int i = 0; i < n; i++)
	{
		struct config_generic *g = vars[i];
		const void *value;
		Size		len;

		if (g->source == PGC_S_DEFAULT || g->context == PGC_POSTMASTER ||
			g->context == PGC_INTERNAL || strcmp(g->name, "role") == 0 || skip(g->name))
			continue;
		switch (g->vartype)
		{
			case PGC_BOOL:
				value = ((struct config_bool *) g)->variable;
				len = sizeof(bool);
				break;
			case PGC_INT:
				value = ((struct config_int *) g)->variable;
				len = sizeof(int);
				break;
			case PGC_REAL:
				value = ((struct config_real *) g)->variable;
				len = sizeof(double);
				break;
			case PGC_ENUM:
				value = ((struct config_enum *) g)->variable;
				len = sizeof(int);
				break;
			default:
				value = *((struct config_string *) g)->variable;
				len = value ? strlen(value) + 1 : 0;
				break;
		}
		h = hash_combine64(h, hash_bytes_extended((const unsigned char *) g->name,
												  strlen(g->name) + 1, 0));
		h = hash_combine64(h, hash_bytes_extended((const unsigned char *) (value ? value : ""),
												  len, 0));
	}
	*hash = h;
	return true;
}
#endif

/*
 * field4 of the tags of the user (advisory) lock method: PostgreSQL's
 * advisory lock functions take class 1 (a bigint key) and 2 (two
 * integers), pg_occ's gates OCC_LOCK_CLASS_GATE.  Other extensions take
 * classes of their own for their own purposes: Citus 4 to 16, among them a
 * ShareLock on the metadata of the shards that every writing transaction
 * writes, held to its end.
 */
#define OCC_LOCK_CLASS_INT64 1
#define OCC_LOCK_CLASS_INT32 2
#define OCC_LOCK_CLASS_GATE 0x4F43
#define occ_lock_class_ours(field4) \
	((field4) == OCC_LOCK_CLASS_INT64 || (field4) == OCC_LOCK_CLASS_INT32 || \
	 (field4) == OCC_LOCK_CLASS_GATE)

/*
 * occ_user_locks_held(tags, masks, max): how many locks of the user
 * (advisory) method, of the user's classes and pg_occ's (not another
 * extension's), this backend holds or awaits, from its own PROCLOCKs (the
 * user method has no fast path); the first max of them go to tags and
 * masks (the modes held).  16 made the lists dlists; before, they were
 * SHM_QUEUEs.
 */
static inline int
occ_user_locks_held(LOCKTAG *tags, LOCKMASK *masks, int max)
{
	int			n = 0;

	for (int i = 0; i < NUM_LOCK_PARTITIONS; i++)
	{
		LWLock	   *partition = LockHashPartitionLockByIndex(i);
		PROCLOCK   *pl;

		LWLockAcquire(partition, LW_SHARED);
#if PG_VERSION_NUM >= 160000
		{
			dlist_iter	iter;

			dlist_foreach(iter, &MyProc->myProcLocks[i])
			{
				pl = dlist_container(PROCLOCK, procLink, iter.cur);
#else
		{
			SHM_QUEUE  *head = &MyProc->myProcLocks[i];

			for (pl = (PROCLOCK *) SHMQueueNext(head, head, offsetof(PROCLOCK, procLink));
				 pl != NULL;
				 pl = (PROCLOCK *) SHMQueueNext(head, &pl->procLink, offsetof(PROCLOCK, procLink)))
			{
#endif
				if (pl->tag.myLock->tag.locktag_lockmethodid != USER_LOCKMETHOD ||
					!occ_lock_class_ours(pl->tag.myLock->tag.locktag_field4))
					continue;
				if (n < max)
				{
					tags[n] = pl->tag.myLock->tag;
					masks[n] = pl->holdMask;
				}
				n++;
			}
		}
		LWLockRelease(partition);
	}
	return n;
}

/*
 * occ_class_ownercheck(relid, role): does role own the relation?  16 folded
 * pg_class_ownercheck into object_ownercheck for every class of object.
 */
#if PG_VERSION_NUM >= 160000
#define occ_class_ownercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define occ_class_ownercheck(relid, role) pg_class_ownercheck((relid), (role))
#endif

/*
 * occ_primary_key_index(rel): the OID of rel's primary key index, or
 * InvalidOid.  18 added deferrable_ok; false keeps a deferrable key out (its
 * uniqueness is checked only at commit), as before.
 */
#if PG_VERSION_NUM >= 180000
#define occ_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define occ_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * occ_table_beginscan(rel, snapshot, nkeys, key): a sequential scan of rel.
 * 19 added table_beginscan's flags (ScanOptions; none here).
 */
#if PG_VERSION_NUM >= 190000
#define occ_table_beginscan(rel, snapshot, nkeys, key) \
	table_beginscan((rel), (snapshot), (nkeys), (key), SO_NONE)
#else
#define occ_table_beginscan(rel, snapshot, nkeys, key) \
	table_beginscan((rel), (snapshot), (nkeys), (key))
#endif

/*
 * The planner hook's parameters (OCC_PLANNER_PARAMS) and the arguments that
 * hand them on (OCC_PLANNER_ARGS): 19 added the EXPLAIN that plans, if any.
 */
#if PG_VERSION_NUM >= 190000
#define OCC_PLANNER_PARAMS Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams, struct ExplainState *es
#define OCC_PLANNER_ARGS parse, query_string, cursorOptions, boundParams, es
#else
#define OCC_PLANNER_PARAMS Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams
#define OCC_PLANNER_ARGS parse, query_string, cursorOptions, boundParams
#endif

/*
 * OCC_EXPLAIN_FORMAT_H, OCC_EXPLAIN_STATE_H: the headers of
 * ExplainPropertyText() and friends, and of ExplainState, which 18 moved
 * out of commands/explain.h
 */
#if PG_VERSION_NUM >= 180000
#define OCC_EXPLAIN_FORMAT_H "commands/explain_format.h"
#define OCC_EXPLAIN_STATE_H "commands/explain_state.h"
#else
#define OCC_EXPLAIN_FORMAT_H "commands/explain.h"
#define OCC_EXPLAIN_STATE_H "commands/explain.h"
#endif

/*
 * occ_planned_relations(stmt, parse, rti): a PlannedStmt made without the
 * planner takes the query's permissions (16 moved them out of the range
 * table into permInfos), lists its one relation as not prunable (18: the
 * executor opens no other), and says that it was planned (19)
 */
#if PG_VERSION_NUM >= 190000
#define occ_planned_relations(stmt, parse, rti) \
	((stmt)->permInfos = (parse)->rteperminfos, \
	 (stmt)->unprunableRelids = bms_make_singleton(rti), \
	 (stmt)->planOrigin = PLAN_STMT_STANDARD)
#elif PG_VERSION_NUM >= 180000
#define occ_planned_relations(stmt, parse, rti) \
	((stmt)->permInfos = (parse)->rteperminfos, \
	 (stmt)->unprunableRelids = bms_make_singleton(rti))
#elif PG_VERSION_NUM >= 160000
#define occ_planned_relations(stmt, parse, rti) ((stmt)->permInfos = (parse)->rteperminfos)
#else
#define occ_planned_relations(stmt, parse, rti) ((void) 0)
#endif

#endif							/* PG_OCC_COMPAT_H */
