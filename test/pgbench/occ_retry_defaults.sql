-- Form 3, "defaults": occ_retry.sql without jitter, base or cap, so they
-- come from the occ.jitter, occ.base_delay and occ.max_delay settings.
-- Variables: -D work_ms=N -D iso='repeatable read' -D max_attempts=1000
CALL occ.retry($body$
    SELECT set_config('bench.val', v::text, true) FROM hot WHERE id = $1;
    SELECT pg_sleep($2 / 1000.0);
    UPDATE hot SET v = current_setting('bench.val')::bigint + 1 WHERE id = $1
$body$, params => row(1, :work_ms), isolation => ':iso', max_attempts => :max_attempts);
