/*-------------------------------------------------------------------------
 *
 * pg_occ.c
 *		Module entry point of pg_occ.
 *
 * Loading the library defines the occ.* settings.  Loaded through
 * shared_preload_libraries, it also sets up the shared memory for occ.stats,
 * for the temperature of queue mode's keys and for the retry budget; loaded
 * any other way (CREATE EXTENSION, the first call), everything but the
 * statistics and the budget works, and queue mode queues a call only after
 * its first failure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "pg_occ.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* _PG_init: define the settings; hook shared memory when preloading */
void
_PG_init(void)
{
	occ_define_gucs();
	if (process_shared_preload_libraries_in_progress)
	{
		occ_stats_init();
		occ_gate_init();
		occ_budget_init();
	}
}
