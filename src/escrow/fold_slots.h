/*-------------------------------------------------------------------------
 *
 * fold_slots.h
 *		The fold workers' slots in shared memory, one per database with a
 *		worker (or asked for one): private to fold_slots.c, fold.c and
 *		fold_launcher.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_FOLD_SLOTS_H
#define PG_OCC_FOLD_SLOTS_H

#include "postmaster/bgworker.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

/* databases with a worker at once, at most */
#define OCC_FOLD_DBS 64

typedef struct OccFoldSlot
{
	Oid			dbid;			/* InvalidOid: free */
	pid_t		pid;			/* the worker's, 0 when none runs */
	TimestampTz starting;		/* when one was asked for, 0 when not */
	bool		restart;		/* the last one ended other than idle */
	uint64		commits;		/* commits with reservations, ever */
	Oid			folding;		/* the table whose fold is under way */
	uint64		generation;		/* folds ended */
} OccFoldSlot;

typedef struct OccFoldShared
{
	slock_t		mutex;			/* every slot */
	OccFoldSlot slots[OCC_FOLD_DBS];
} OccFoldShared;

extern OccFoldShared *occ_fold;

extern OccFoldSlot *occ_fold_slot(Oid dbid, bool take);
extern void occ_fold_bgworker(BackgroundWorker *worker, const char *function, const char *type,
							  int restart);
extern bool occ_fold_start(Oid dbid, bool commit);

#endif							/* PG_OCC_FOLD_SLOTS_H */
