-- Form 2, plain OCC retried by pgbench itself: read without a lock under
-- REPEATABLE READ or SERIALIZABLE; a concurrent update makes the UPDATE (or
-- COMMIT) fail with 40001 and pgbench reruns the whole script immediately,
-- with no backoff.  Run with --max-tries=N (N > 1) to get the retries.
-- Variables: -D work_ms=N, -D iso='repeatable read' (or serializable).
BEGIN ISOLATION LEVEL :iso;
SELECT v AS val FROM hot WHERE id = 1 \gset
SELECT pg_sleep(:work_ms / 1000.0);
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
