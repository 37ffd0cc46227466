-- Form 3, the same read-modify-write as one CALL occ.retry: the server runs
-- the body as one transaction and retries it with backoff.  The body carries
-- the value it read to its UPDATE in a transaction-local setting, so, as in
-- the pgbench forms, it writes "value read + 1" (not "v = v + 1").
-- Needs pgbench's default simple query mode (variables become literals).
-- Variables: -D work_ms=N -D iso='repeatable read' -D max_attempts=1000
--            -D jitter=full -D base=1ms -D cap=50ms
CALL occ.retry($body$
    SELECT set_config('bench.val', v::text, true) FROM hot WHERE id = $1;
    SELECT pg_sleep($2 / 1000.0);
    UPDATE hot SET v = current_setting('bench.val')::bigint + 1 WHERE id = $1
$body$, params => row(1, :work_ms), isolation => ':iso', max_attempts => :max_attempts,
    jitter => ':jitter', base => ':base', cap => ':cap');
