-- batch mode, the hot counter through occ.retry, queue or batch mode, keyed
-- by the row: the UPDATE, then work_ms of work (none when 0).
-- Variables: -D iso=... -D contention=queue|batch -D work_ms=N
CALL occ.retry($body$
    UPDATE hot SET v = v + 1 WHERE id = $1;
    SELECT pg_sleep($2 / 1000.0) WHERE $2 > 0
$body$, params => row(1, :work_ms), isolation => ':iso', max_attempts => 1000,
    contention => ':contention', key => 'hot:1');
