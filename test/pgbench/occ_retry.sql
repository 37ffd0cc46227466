-- Form 3, the same read-modify-write as one CALL occ.retry: the server runs
-- the body as one transaction and retries it with backoff or, in queue mode,
-- on the gate of its key.  The body carries the value it read to its UPDATE
-- in a transaction-local setting, so, as in the pgbench forms, it writes
-- "value read + 1" (not "v = v + 1").
-- The row is 1 (the hot row) for hot_pct percent of the calls, else one of
-- rows 2 to 1001 uniformly; keyprefix NULL lets queue mode derive the key
-- from the body and its parameters, 'hot:' makes it 'hot:<id>'.
-- Needs pgbench's default simple query mode (variables become literals).
-- Variables: -D work_ms=N -D iso='repeatable read' -D max_attempts=1000
--            -D jitter=full -D base=1ms -D cap=50ms -D contention=backoff
--            -D hot_pct=100 -D keyprefix=NULL (or "'hot:'")
\set id CASE WHEN random(1, 100) <= :hot_pct THEN 1 ELSE random(2, 1001) END
CALL occ.retry($body$
    SELECT set_config('bench.val', v::text, true) FROM hot WHERE id = $1;
    SELECT pg_sleep($2 / 1000.0);
    UPDATE hot SET v = current_setting('bench.val')::bigint + 1 WHERE id = $1
$body$, params => row(:id, :work_ms), isolation => ':iso', max_attempts => :max_attempts,
    jitter => ':jitter', base => ':base', cap => ':cap', contention => ':contention',
    key => :keyprefix || ':id');
