-- Form 1, pessimistic (the reference): READ COMMITTED, the row is locked
-- by SELECT ... FOR UPDATE for the whole read-modify-write, so nobody retries.
-- Variables: -D work_ms=N (ms of work inside the transaction, 0 allowed).
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT v AS val FROM hot WHERE id = 1 FOR UPDATE \gset
SELECT pg_sleep(:work_ms / 1000.0);
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
