/*-------------------------------------------------------------------------
 *
 * escrow_share.c
 *		Each database's and role's share of the rows' entries (escrow.c):
 *		so that no one role or database can fill the table.
 *
 * A transaction's rows with reservations in flight count against its
 * backend's slot, which names its database and its session's role; the
 * last quarter of occ.reservable_rows is kept for the roles that hold less
 * than a quarter, its last eighth for the databases that do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "pg_occ.h"
#include "escrow/escrow.h"

/* a backend's share: the rows its transaction has in flight */
typedef struct OccEscrowShare
{
	Oid			dbid;
	Oid			roleid;
	int32		rows;
} OccEscrowShare;

static LWLock *occ_escrow_share_lock = NULL;
static OccEscrowShare *occ_escrow_shares = NULL;

/* occ_escrow_shares_size: the shared memory of the backends' shares */
Size
occ_escrow_shares_size(void)
{
	return mul_size(MaxBackends, sizeof(OccEscrowShare));
}

/* occ_escrow_shares_init: create or attach to the shares, under lock */
void
occ_escrow_shares_init(LWLock *lock)
{
	bool		found;

	occ_escrow_shares = ShmemInitStruct("pg_occ escrow shares", occ_escrow_shares_size(), &found);
	if (!found)
		memset(occ_escrow_shares, 0, occ_escrow_shares_size());
	occ_escrow_share_lock = lock;
}

/*
 * occ_escrow_share: count one more row in flight against this backend's
 * database and session role; false (nothing counted) when the table's last
 * quarter is all that is left and the role holds a quarter already, or its
 * last eighth and the database does: those are for the others, so that no
 * one role or database can fill the table
 */
bool
occ_escrow_share(void)
{
	OccEscrowShare *mine = &occ_escrow_shares[occ_my_procno()];
	Oid			role = GetSessionUserId();
	int			quarter = Max(occ_reservable_rows / 4, 1);
	int			all_rows = 0;
	int			db_rows = 0;
	int			role_rows = 0;
	bool		room;

	LWLockAcquire(occ_escrow_share_lock, LW_EXCLUSIVE);
	for (int i = 0; i < MaxBackends; i++)
	{
		all_rows += occ_escrow_shares[i].rows;
		db_rows += occ_escrow_shares[i].dbid == MyDatabaseId ? occ_escrow_shares[i].rows : 0;
		role_rows += occ_escrow_shares[i].roleid == role ? occ_escrow_shares[i].rows : 0;
	}
	room = (all_rows < occ_reservable_rows - quarter || role_rows < quarter) &&
		(all_rows < occ_reservable_rows - quarter / 2 || db_rows < quarter);
	if (room)
	{
		mine->dbid = MyDatabaseId;
		mine->roleid = role;
		mine->rows++;
	}
	LWLockRelease(occ_escrow_share_lock);
	return room;
}

/* occ_escrow_unshare: rows rows of this backend's are in flight no more */
void
occ_escrow_unshare(int rows)
{
	OccEscrowShare *mine = &occ_escrow_shares[occ_my_procno()];

	LWLockAcquire(occ_escrow_share_lock, LW_EXCLUSIVE);
	mine->rows -= rows;
	LWLockRelease(occ_escrow_share_lock);
}
