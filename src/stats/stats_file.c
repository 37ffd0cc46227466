/*-------------------------------------------------------------------------
 *
 * stats_file.c
 *		The statistics kept over a clean shutdown, in pg_stat/pg_occ.stat.
 *
 * The counters survive a clean shutdown, as pg_stat_statements' do: the
 * postmaster writes them at exit to pg_stat/pg_occ.stat (a temporary file
 * renamed into place) and the next start reads them back and removes the
 * file.  A crash writes nothing (the postmaster then resets shared memory
 * with a nonzero exit code), nor does an immediate shutdown (which exits
 * cleanly, but leaves pg_control saying the server was in production: the
 * next start recovers, as after a crash), and the file was removed when it
 * was read: after a crash occ.stats starts empty.  The file has a magic
 * number, a format version, the PostgreSQL major version, a fingerprint of
 * the entries' layout and a CRC; a file that is not ours, of another version
 * or layout, or damaged is ignored with a LOG line, and occ.stats starts
 * empty.  When it holds more entries than occ.stats_max (lowered since), the
 * most called are kept, and the others counted as evicted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "stats_entries.h"

/* The statistics file, kept over a clean shutdown, and its header's constants */
#define OCC_STATS_FILE PGSTAT_STAT_PERMANENT_DIRECTORY "/pg_occ.stat"
#define OCC_STATS_FILE_MAGIC 0x4F435353 /* "OCSS" */
#define OCC_STATS_FILE_FORMAT 2 /* of the header and entries below */
#define OCC_PG_MAJOR (PG_VERSION_NUM / 100)	/* 1500 for 15: the major x 100 */

/*
 * The statistics file: this header, then for each entry an OccStatsFileEntry
 * followed by its query_len bytes of text (no NUL), then the CRC-32C of all
 * that.  The structs are written as they are in memory: the file is read
 * back only by the same build of pg_occ on the same machine, or is ignored.
 */
typedef struct OccStatsFileHeader
{
	uint32		magic;			/* OCC_STATS_FILE_MAGIC */
	uint32		format;			/* OCC_STATS_FILE_FORMAT */
	uint32		pg_major;		/* OCC_PG_MAJOR */
	uint32		layout;			/* occ_stats_layout() */
	int32		nentries;
	int64		dealloc;
	TimestampTz stats_reset;
} OccStatsFileHeader;

typedef struct OccStatsFileEntry
{
	OccStatsKey key;
	OccCounters counters;
	int32		query_len;
} OccStatsFileEntry;

/* occ_write: write len bytes of data to file and add them to the CRC */
static bool
occ_write(FILE *file, const void *data, size_t len, pg_crc32c *crc)
{
	COMP_CRC32C(*crc, data, len);
	return fwrite(data, 1, len, file) == len;
}

/* occ_read: read len bytes of file into data and add them to the CRC */
static bool
occ_read(FILE *file, void *data, size_t len, pg_crc32c *crc)
{
	if (fread(data, 1, len, file) != len)
		return false;
	COMP_CRC32C(*crc, data, len);
	return true;
}

/*
 * occ_stats_layout: a fingerprint of the sizes and offsets of what the file
 * holds, so that a build that changes them without bumping
 * OCC_STATS_FILE_FORMAT reads no garbage with a valid CRC (fields of one
 * type swapped would still pass: the format number is for those)
 */
static uint32
occ_stats_layout(void)
{
	const uint32 parts[] = {
		sizeof(OccStatsFileHeader), sizeof(OccStatsFileEntry),
		sizeof(OccStatsKey), offsetof(OccStatsKey, kind),
		sizeof(OccCounters), offsetof(OccCounters, total_sleep_time),
		offsetof(OccCounters, queued), offsetof(OccCounters, total_time),
		offsetof(OccCounters, hist), offsetof(OccCounters, batched),
		OCC_HIST_BUCKETS, OCC_QUERY_TEXT_MAX
	};

	return hash_bytes((const unsigned char *) parts, sizeof(parts));
}

/*
 * occ_stats_shut_down_cleanly: whether pg_control says the server shut down
 * cleanly.  An immediate shutdown exits the postmaster with code 0 like a
 * fast one, but leaves pg_control "in production" and the next start
 * recovers, as after a crash: its counters are not saved either.
 */
static bool
occ_stats_shut_down_cleanly(void)
{
	bool		clean = false;

	PG_TRY();
	{
		bool		crc_ok;
		ControlFileData *control = get_controlfile(DataDir, &crc_ok);

		clean = crc_ok && (control->state == DB_SHUTDOWNED ||
						   control->state == DB_SHUTDOWNED_IN_RECOVERY);
	}
	PG_CATCH();
	{
		/* at exit, an error is a LOG line: then save nothing */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	return clean;
}

/*
 * occ_stats_save: on_shmem_exit callback of the postmaster: write every
 * entry to OCC_STATS_FILE, through a temporary file renamed into place so
 * that the old file is replaced whole or not at all.  Not after a crash
 * (code != 0), when shared memory may be inconsistent, nor after an
 * immediate shutdown.  Nothing else runs by then, so no lock is taken.
 */
void
occ_stats_save(int code, Datum arg)
{
	const char *tmp = OCC_STATS_FILE ".tmp";
	FILE	   *file;
	OccStatsFileHeader header;
	HASH_SEQ_STATUS scan;
	OccStatsEntry *entry;
	pg_crc32c	crc;
	bool		ok;

	if (code != 0 || occ_stats_shared == NULL || occ_stats_hash == NULL ||
		!occ_stats_shut_down_cleanly())
		return;
	file = AllocateFile(tmp, PG_BINARY_W);
	if (file == NULL)
		goto error;

	memset(&header, 0, sizeof(header));
	header.magic = OCC_STATS_FILE_MAGIC;
	header.format = OCC_STATS_FILE_FORMAT;
	header.pg_major = OCC_PG_MAJOR;
	header.layout = occ_stats_layout();
	header.nentries = hash_get_num_entries(occ_stats_hash);
	header.dealloc = occ_stats_shared->dealloc;
	header.stats_reset = occ_stats_shared->stats_reset;
	INIT_CRC32C(crc);
	ok = occ_write(file, &header, sizeof(header), &crc);

	hash_seq_init(&scan, occ_stats_hash);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		OccStatsFileEntry e;

		memset(&e, 0, sizeof(e));
		e.key = entry->key;
		e.counters = entry->counters;
		e.query_len = strlen(entry->query);
		ok = ok && occ_write(file, &e, sizeof(e), &crc) &&
			occ_write(file, entry->query, e.query_len, &crc);
	}
	FIN_CRC32C(crc);
	ok = ok && fwrite(&crc, sizeof(crc), 1, file) == 1;
	if (FreeFile(file) != 0 || !ok)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(tmp, OCC_STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", tmp)));
	if (file != NULL)
		FreeFile(file);
	unlink(tmp);
}

/* An entry read from the file, before it goes into the table */
typedef struct OccStatsLoaded
{
	OccStatsFileEntry e;
	char	   *query;
} OccStatsLoaded;

/* occ_cmp_loaded_calls: qsort order of loaded entries, most calls first */
static int
occ_cmp_loaded_calls(const void *a, const void *b)
{
	int64		ca = ((const OccStatsLoaded *) a)->e.counters.calls;
	int64		cb = ((const OccStatsLoaded *) b)->e.counters.calls;

	return (cb > ca) - (cb < ca);
}

/*
 * occ_stats_read_entries: read the entries that follow header in file, and
 * check the CRC that ends the file.  Returns NULL when the file is whole
 * (the entries in *loaded, their number in *n), else why it is not (for a
 * LOG line); ferror() then tells an I/O error from a file that ends early.
 * The array grows as entries are read: a damaged count allocates nothing.
 */
static const char *
occ_stats_read_entries(FILE *file, const OccStatsFileHeader *header, pg_crc32c crc,
					   OccStatsLoaded **loaded, int32 *n)
{
	pg_crc32c	stored;
	int32		size = 16;

	*loaded = palloc(sizeof(OccStatsLoaded) * size);
	for (*n = 0; *n < header->nentries; (*n)++)
	{
		OccStatsLoaded *l;

		if (*n == size)
			*loaded = repalloc(*loaded, sizeof(OccStatsLoaded) * (size *= 2));
		l = &(*loaded)[*n];
		if (!occ_read(file, &l->e, sizeof(l->e), &crc))
			return "it ends early";
		if (l->e.query_len < 0 || l->e.query_len >= OCC_QUERY_TEXT_MAX)
			return "an entry's length is out of range";
		l->query = palloc(l->e.query_len);
		if (!occ_read(file, l->query, l->e.query_len, &crc))
			return "it ends early";
	}
	FIN_CRC32C(crc);
	if (fread(&stored, sizeof(stored), 1, file) != 1)
		return "it ends early";
	if (stored != crc || fgetc(file) != EOF)
		return "its checksum does not match";
	return NULL;
}

/*
 * occ_stats_load_entries: read the entries of a file whose header was read,
 * and put them in the table, the most called first: when occ.stats_max was
 * lowered since they were saved, those that do not fit count as evicted.
 * Returns NULL, or why the file is ignored.
 */
static const char *
occ_stats_load_entries(FILE *file, const OccStatsFileHeader *header, pg_crc32c crc)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "pg_occ statistics file",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	OccStatsLoaded *loaded;
	int32		n;
	const char *problem = occ_stats_read_entries(file, header, crc, &loaded, &n);

	if (problem == NULL)
		qsort(loaded, n, sizeof(OccStatsLoaded), occ_cmp_loaded_calls);
	for (int32 i = 0; problem == NULL && i < n; i++)
	{
		OccStatsEntry *entry;

		if (hash_search(occ_stats_hash, &loaded[i].e.key, HASH_FIND, NULL) != NULL)
			problem = "an entry appears twice";
		else if (i >= occ_stats_max)
			occ_stats_shared->dealloc++;
		else if ((entry = occ_stats_enter(&loaded[i].e.key, loaded[i].query,
										  loaded[i].e.query_len)) == NULL)
			problem = "there is no room for its entries";
		else
			entry->counters = loaded[i].e.counters;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return problem;
}

/*
 * occ_stats_load: at startup, in the postmaster (nothing else runs yet, so
 * no lock), read the entries that the last clean shutdown saved, then remove
 * the file: a crash later must not bring back these counters.  A file that
 * is not ours, of another format or PostgreSQL version, or damaged, is
 * ignored (with a LOG line saying why): the statistics start empty.
 */
void
occ_stats_load(void)
{
	FILE	   *file;
	OccStatsFileHeader header;
	pg_crc32c	crc;
	const char *problem = NULL;

	file = AllocateFile(OCC_STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", OCC_STATS_FILE)));
		return;
	}
	INIT_CRC32C(crc);
	if (!occ_read(file, &header, sizeof(header), &crc) || header.magic != OCC_STATS_FILE_MAGIC)
		problem = "it is not a pg_occ statistics file";
	else if (header.format != OCC_STATS_FILE_FORMAT || header.pg_major != OCC_PG_MAJOR)
		problem = psprintf("it has format %u for PostgreSQL %u, not format %u for PostgreSQL %u",
						   header.format, header.pg_major / 100,
						   OCC_STATS_FILE_FORMAT, OCC_PG_MAJOR / 100);
	else if (header.layout != occ_stats_layout())
		problem = "another build of pg_occ, with another layout of entries, wrote it";
	else if (header.nentries < 0)
		problem = "its number of entries is negative";
	else
	{
		/* before the entries: evicting some to fit occ.stats_max adds to it */
		occ_stats_shared->dealloc = header.dealloc;
		occ_stats_shared->stats_reset = header.stats_reset;
		problem = occ_stats_load_entries(file, &header, crc);
	}

	if (problem != NULL)
	{
		occ_stats_clear();
		occ_stats_shared->dealloc = 0;
		occ_stats_shared->stats_reset = GetCurrentTimestamp();
		if (ferror(file))
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", OCC_STATS_FILE)));
		else
			ereport(LOG,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("ignoring the pg_occ statistics in file \"%s\": %s",
							OCC_STATS_FILE, problem),
					 errdetail("occ.stats starts empty.")));
	}
	FreeFile(file);
	unlink(OCC_STATS_FILE);
}

