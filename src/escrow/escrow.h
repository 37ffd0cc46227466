/*-------------------------------------------------------------------------
 *
 * escrow.h
 *		src/escrow/ owns reservable columns: which columns are declared so
 *		(reservable.c, declare.c, guard.c, ddl.c), the ledger of
 *		reservations (ledger.c), the rows' entries in shared memory
 *		(escrow.c, escrow_load.c, escrow_share.c), the SQL of reservations
 *		(reserve.c), the UPDATE that reserves (update_shape.c,
 *		reserve_update.c), and the fold that applies committed reservations
 *		to their rows (fold_apply.c, fold.c, fold_slots.c, fold_launcher.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_ESCROW_H
#define PG_OCC_ESCROW_H

#include "nodes/parsenodes.h"

#include "pg_occ.h"

/* the fold adds up reservations in 128 bits (fold_apply.c) */
#ifndef HAVE_INT128
#error "pg_occ needs a 128-bit integer type"
#endif

/* reservable.c: which columns are reservable, and their bounds */
typedef struct OccReservable
{
	Oid			relid;
	AttrNumber	attnum;			/* the reservable column */
	Oid			atttype;		/* smallint, integer or bigint */
	AttrNumber	pkattnum;		/* the one-column primary key */
	Oid			pkindex;
	Oid			pktype;
	Oid			pkcollation;
	RegProcedure pkeqproc;
	Oid			pkinput;
	Oid			pkioparam;
	Oid			pkoutput;
	bool		has_lower;		/* c >= lower, by constraint lower_name */
	bool		has_upper;		/* c <= upper, by constraint upper_name */
	int64		lower;
	int64		upper;
	char		lower_name[NAMEDATALEN];
	char		upper_name[NAMEDATALEN];
} OccReservable;

extern void occ_reservable_get(Relation rel, const char *colname, OccReservable *decl);
extern bool occ_reservable_is_guard(const Trigger *trigger, const char *colname);
extern bool occ_reservable_declared(Relation rel, const char *colname);
extern bool occ_reservable_in_force(Relation rel, const char *colname);
extern void occ_reservable_describe(Relation rel, AttrNumber attnum, OccReservable *decl);
extern void occ_reservable_require_args(FunctionCallInfo fcinfo, int nargs, const char *fname);
extern bool occ_reservable_may_read(Oid relid, AttrNumber attnum, AttrNumber pkattnum);
extern void occ_reservable_check_any(Relation rel, bool write);
extern void occ_reservable_check_access(Relation rel, const OccReservable *decl, bool write);

/* ledger.c: occ.reservation_ledger, below SQL */
typedef struct OccLedgerRow
{
	Oid			relid;
	char	   *col;
	char	   *key;
	int64		delta;
	ItemPointerData tid;
	bool		ours;			/* inserted by the current transaction */
} OccLedgerRow;

extern Oid	occ_ledger_oid(void);
extern Relation occ_ledger_open(LOCKMODE mode);
extern void occ_ledger_append(Oid relid, const char *col, const char *key, int64 delta);
extern struct TableScanDescData *occ_ledger_scan(Relation ledger, Snapshot snapshot, Oid relid,
												 const char *col, const char *key);
extern void occ_ledger_row(Relation ledger, HeapTuple tuple, OccLedgerRow *row);
extern void occ_ledger_delete_rows(Relation ledger, Oid relid, const char *col);
extern bool occ_ledger_holds(Oid relid, const char *col);

/* escrow.c: the rows' entries, and the transaction's reservations;
 * escrow_load.c: a row's committed value, read from the tables */
#define OCC_ESCROW_KEYLEN 256	/* a primary key's text, at most, with its NUL */

typedef struct OccEscrowTag
{
	Oid			dbid;
	Oid			relid;
	AttrNumber	attnum;
	char		key[OCC_ESCROW_KEYLEN]; /* the key's text, zero-padded */
} OccEscrowTag;

/* How occ_escrow_take takes a reservation */
typedef enum OccTake
{
	OCC_TAKE_CHECKED,			/* within the bounds, or an error */
	OCC_TAKE_TRY,				/* within the bounds, or false */
	OCC_TAKE_FORCED				/* whatever the bounds say (committed elsewhere) */
} OccTake;

typedef struct OccEscrowRow
{
	OccEscrowTag tag;
	slock_t		mutex;			/* the fields below */
	bool		loaded;			/* committed is known */
	pid_t		loader;			/* the backend loading it, until loaded */
	int64		committed;		/* column + committed ledger rows */
	int64		down;			/* in-flight decrements, <= 0 */
	int64		up;				/* in-flight increments, >= 0 */
	int32		in_flight;		/* reservations in flight */
	int64		reservations;	/* taken, since it entered */
	int64		refusals;
	int64		waits;			/* for another's load or a fold */
	int64		fold_failures;	/* folds of the row that failed */
	char		fold_error[96]; /* the last one's error, "" once folded */
} OccEscrowRow;

extern Size occ_escrow_shmem_size(void);
extern void occ_escrow_shmem_request(void);
extern void occ_escrow_shmem_init(void);
extern bool occ_escrow_ready(void);
extern void occ_escrow_require_preload(void);
extern void occ_escrow_forget(Oid relid, AttrNumber attnum);
extern void occ_escrow_pause(void);
extern int64 occ_escrow_read_snapshot(Relation rel, const OccReservable *decl, Datum key,
									  const char *keytext, Snapshot snapshot, int *ledger_rows,
									  bool *ours);
extern int64 occ_escrow_read_stable(Relation rel, const OccReservable *decl, Datum key,
									const char *keytext, int *waits);
extern OccEscrowRow *occ_escrow_row(const OccEscrowTag *tag, Relation rel,
									const OccReservable *decl, Datum key, int *waits);
extern bool occ_escrow_loaded(const OccEscrowTag *tag);
extern void occ_escrow_release(void);
extern int64 occ_escrow_committed(OccEscrowRow *row);
extern int64 occ_escrow_own(OccEscrowRow *row);
extern bool occ_escrow_take(OccEscrowRow *row, Relation rel, const OccReservable *decl,
							const char *keytext, int64 delta, OccTake how, int waits);
extern void occ_escrow_report_fold(Oid relid, AttrNumber attnum, const char *key,
								   const char *error);
extern int	occ_escrow_copy(OccEscrowRow *copies, int max);

/* escrow_share.c: each database's and role's share of the entries */
extern Size occ_escrow_shares_size(void);
extern void occ_escrow_shares_init(LWLock *lock);
extern bool occ_escrow_share(void);
extern void occ_escrow_unshare(int rows);

/* reserve.c: the SQL of reservations; a replicated change taken as one */
extern void occ_reserve_replicated(Relation rel, const OccReservable *decl, const char *key,
								   int64 delta);
extern bool occ_reserve_update(Relation rel, const OccReservable *decls,
							   const int64 *deltas, int n, Datum key, Oid keytype);

/* update_shape.c: an UPDATE of reservable columns that is a reservation */
typedef struct OccUpdateShape
{
	Oid			relid;
	Index		rti;			/* the table's index in the range table */
	List	   *attnums;		/* the reservable columns it sets (ints) */
	List	   *signs;			/* +1 where it adds, -1 where it subtracts */
	List	   *deltas;			/* what it adds or subtracts (Expr) */
	Expr	   *key;			/* the primary key's value (Expr) */
} OccUpdateShape;

extern bool occ_update_shape(Query *parse, OccUpdateShape *shape);

/* reserve_update.c: such an UPDATE planned as a reservation */
extern void occ_reserve_update_init(void);

/* guard.c: the guard trigger */
extern void occ_guard_allow_fold(const OccReservable *decl, const char *key, int128 delta);

/* ddl.c: reservable columns under DDL */
extern void occ_ddl_init(void);

/* fold_apply.c: a column's committed reservations applied to its table */
typedef void (*OccFoldReport) (Oid relid, AttrNumber attnum, const char *key, ErrorData *edata);
extern int	occ_fold_apply(Relation rel, const char *col, bool each_row, OccFoldReport report);

/* fold_slots.c: the fold workers' slots, and what they say to backends */
extern Size occ_fold_shmem_size(void);
extern void occ_fold_shmem_init(void);
extern bool occ_fold_stable_begin(Oid relid, uint64 *generation);
extern bool occ_fold_stable_end(Oid relid, uint64 generation);
extern void occ_fold_committed(void);

/* fold_launcher.c: the workers started after a restart, or a worker's exit */
extern void occ_fold_register_launcher(void);

#endif							/* PG_OCC_ESCROW_H */
