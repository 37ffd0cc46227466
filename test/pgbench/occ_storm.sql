-- The hot-row read-modify-write of occ_retry.sql for the storm (seed 001) and
-- burst (seed 003) experiments of test/bench/run.sh: every option of the
-- backoff is a variable (factor 1 gives constant backoff), the body sets its
-- own lock_timeout (transaction-local, so that it bounds the body's lock
-- waits but not queue mode's wait for the gate, which happens between
-- transactions), and retry_on can add 55P03 (lock_not_available) to the
-- retried SQLSTATEs.
--
-- Burst: run with -t 2 and -D phase=0.  Each client's first transaction has
-- no SQL: it sleeps a uniformly random offset in [0, window_us] (clients
-- 0 .. nspike-1, the spike, do not sleep); its second one is the call, which
-- pgbench therefore times from the client's arrival.  pgbench keeps a
-- client's variables from one transaction to the next, hence the counter.
-- Storm: run with -D phase=1 (the counter never equals 1: every transaction
-- is a call) and --rate for open-loop (Poisson) arrivals.
-- Variables: -D work_ms=1 -D iso='repeatable read' -D max_attempts=1000
--            -D jitter=none -D base=1ms -D cap=1ms -D factor=1
--            -D contention=backoff -D retry_on='{40001,40P01,55P03}'
--            -D lock_timeout=0 (or 100ms) -D phase=1 -D nspike=0 -D window_us=0
--            -D deadline=EPOCH (the calls give up then: max_duration)
\set phase :phase + 1
\if :phase = 1
\if :client_id >= :nspike
\set offset random(0, :window_us)
\sleep :offset us
\endif
\else
CALL occ.retry($body$
    SELECT set_config('lock_timeout', $3, true);
    SELECT set_config('bench.val', v::text, true) FROM hot WHERE id = $1;
    SELECT pg_sleep($2 / 1000.0);
    UPDATE hot SET v = current_setting('bench.val')::bigint + 1 WHERE id = $1
$body$, params => row(1, :work_ms, ':lock_timeout'::text), isolation => ':iso',
    max_attempts => :max_attempts, jitter => ':jitter', base => ':base', cap => ':cap',
    factor => :factor, contention => ':contention', retry_on => ':retry_on',
    max_duration => greatest(:deadline - extract(epoch FROM clock_timestamp()), 0.001) * interval '1 second');
\endif
