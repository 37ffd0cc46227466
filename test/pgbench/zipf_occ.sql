-- keys mode, zipf workload through occ.retry: the same read-modify-write of
-- four zipfian rows.  keyprefix NULL lets queue mode learn the keys; 'z:'
-- gives the best key by hand, the lowest (hottest) of the four rows.
-- Variables: -D iso=... -D work_ms=N -D contention=queue|backoff -D keyprefix=NULL|"'z:'"
\set r1 random_zipfian(1, 10000, 1.01)
\set r2 random_zipfian(1, 10000, 1.01)
\set r3 random_zipfian(1, 10000, 1.01)
\set r4 random_zipfian(1, 10000, 1.01)
\set lowest least(:r1, :r2, :r3, :r4)
CALL occ.retry($body$
    SELECT sum(v) FROM zrows WHERE id IN ($1, $2, $3, $4);
    SELECT pg_sleep($5 / 1000.0);
    UPDATE zrows SET v = v + 1 WHERE id = $1;
    UPDATE zrows SET v = v + 1 WHERE id = $2;
    UPDATE zrows SET v = v + 1 WHERE id = $3;
    UPDATE zrows SET v = v + 1 WHERE id = $4
$body$, params => row(:r1, :r2, :r3, :r4, :work_ms), isolation => ':iso', max_attempts => 1000,
    contention => ':contention', key => :keyprefix || ':lowest');
