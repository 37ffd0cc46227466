-- Client-side transaction, pessimistic (the reference of the client mode):
-- the application reads the hot row with SELECT ... FOR UPDATE, works for
-- work_ms in the client (pgbench's \sleep, the transaction open), and
-- writes the value read + 1.  Nobody retries.  With -D fifo=1 the SELECT
-- is sent after pg_advisory_xact_lock(1), in the same round trip (\;): the
-- transactions queue in PostgreSQL's lock manager, in order of arrival,
-- before their first statement runs, as SET LOCAL occ.key makes them wait
-- before their snapshot; no pg_occ: the reference of the keyed forms' tail.
-- Variables: -D work_ms=N (ms of the application's work, 0 allowed)
--            -D fifo=0 (or 1)
BEGIN;
\if :fifo
SELECT pg_advisory_xact_lock(1) \; SELECT v AS val FROM hot WHERE id = 1 FOR UPDATE \gset
\else
SELECT v AS val FROM hot WHERE id = 1 FOR UPDATE \gset
\endif
\sleep :work_ms ms
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
