/*-------------------------------------------------------------------------
 *
 * sleep.c
 *		An interruptible sleep with microsecond resolution, and the check
 *		of the client before and during every wait.
 *
 * pg_sleep() waits on the latch with millisecond timeouts, so a 200 us
 * backoff would become 1 ms, five times too long.  We wait on the latch for
 * the whole milliseconds and finish with pg_usleep() for the remainder, which
 * a signal cuts short.  Interrupts are checked after every wait, so
 * pg_cancel_backend, statement_timeout and pg_terminate_backend end the sleep
 * at once.  The wait event is PgSleep, as for pg_sleep().
 *
 * A latch wait takes its timeout in milliseconds as a long, but the kernel
 * gets it as an int (WaitEventSetWaitBlock, then epoll_wait): a delay of
 * 2^31 ms (24.9 days) or more, which occ.retry accepts (caps up to 100
 * days), would wrap to a negative timeout, which means "forever".  So we
 * wait in slices of at most OCC_SLEEP_SLICE_MS, measuring the time left
 * after each.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"

#include "pg_occ.h"
#include "util/util.h"

/*
 * From libpq/libpq.h, which we cannot include: it includes libpq-be.h,
 * which needs the GSSAPI headers on servers built with GSSAPI (Debian's),
 * and the server's development package does not install them.
 */
extern bool pq_check_connection(void);

/* Longest single latch wait, in milliseconds: one hour, far below INT_MAX */
#define OCC_SLEEP_SLICE_MS 3600000L

/*
 * occ_sleep_usec: sleep for usec microseconds, or until an interrupt is
 * serviced (which throws).
 */
void
occ_sleep_usec(double usec)
{
	instr_time	start,
				now;

	INSTR_TIME_SET_CURRENT(start);
	for (;;)
	{
		double		remaining;

		CHECK_FOR_INTERRUPTS();
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		remaining = usec - INSTR_TIME_GET_DOUBLE(now) * 1000000.0;
		if (remaining <= 0)
			break;

		if (remaining >= 1000.0)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 (long) Min(remaining / 1000.0, (double) OCC_SLEEP_SLICE_MS),
							 WAIT_EVENT_PG_SLEEP);
			ResetLatch(MyLatch);
		}
		else
		{
			pgstat_report_wait_start(WAIT_EVENT_PG_SLEEP);
			pg_usleep((long) remaining);
			pgstat_report_wait_end();
		}
	}
}

/*
 * occ_check_client: before each wait, sleep and attempt, and now and then
 * during a batch's wait: if the client has gone (a killed application, a
 * pooler's query_timeout), end the session as PostgreSQL does when it
 * finds that out, with FATAL "connection to client lost", rather than
 * commit work whose outcome no one will hear of and that the client may
 * already have reported as failed.  A wait or sleep itself ends when the
 * client goes only with client_connection_check_interval.  Cancels held
 * off (a follower that waits for its outcome) do not hold this off.
 */
void
occ_check_client(void)
{
	if (whereToSendOutput == DestRemote && !pq_check_connection())
	{
		ClientConnectionLost = true;
		InterruptPending = true;
		CHECK_FOR_INTERRUPTS();
	}
}
