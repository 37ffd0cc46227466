-- Client-side transaction, pessimistic (the reference of the client mode):
-- the application reads the hot row with SELECT ... FOR UPDATE, works for
-- work_ms in the client (pgbench's \sleep, the transaction open), and
-- writes the value read + 1.  Nobody retries.
-- Variables: -D work_ms=N (ms of the application's work, 0 allowed).
BEGIN;
SELECT v AS val FROM hot WHERE id = 1 FOR UPDATE \gset
\sleep :work_ms ms
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
