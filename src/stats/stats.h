/*-------------------------------------------------------------------------
 *
 * stats.h
 *		src/stats/ owns the retry statistics: occ.stats, occ.key_stats and
 *		occ.last_retry(), counted in shared memory (stats.c,
 *		stats_entries.c), shown (stats_views.c) and kept across clean
 *		restarts (stats_file.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_OCC_STATS_H
#define PG_OCC_STATS_H

#include "pg_occ.h"

/* stats.c */
extern Size occ_stats_shmem_size(void);
extern void occ_stats_shmem_init(void);
extern void occ_stats_failure(OccCallResult *result, int sqlerrcode);
extern void occ_stats_record(const char *sql, uint64 sql_hash,
							 const OccCallResult *result);
extern void occ_stats_record_key(const char *key, uint64 key_hash,
								 const OccCallResult *result);

#endif							/* PG_OCC_STATS_H */
