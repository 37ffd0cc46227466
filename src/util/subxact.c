/*-------------------------------------------------------------------------
 *
 * subxact.c
 *		Running one step in an internal subtransaction, and catching its
 *		error.
 *
 * What must outlive an error (a wait for a gate that a cancel may end, the
 * analysis of a body before it runs, a batch's bodies) runs as a step: in
 * a subtransaction of its own, which is rolled back on error, and
 * otherwise released or rolled back as the step says.  The caller gets the
 * error back, copied into its own memory context, with the error state
 * flushed, its memory context and resource owner as they were: it decides
 * whether to rethrow.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"

#include "pg_occ.h"
#include "util/util.h"

/*
 * occ_subxact_run: run step(arg) in a subtransaction; returns NULL when it
 * ran through (the subtransaction kept when the step returned true, else
 * rolled back), else its error (the subtransaction rolled back)
 */
ErrorData *
occ_subxact_run(bool (*step) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	volatile bool keep = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		keep = step(arg);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	if (edata == NULL && keep)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}
