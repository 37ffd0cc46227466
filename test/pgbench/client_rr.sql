-- Client-side transaction, optimistic: the application reads the hot row
-- without a lock under :iso, works for work_ms in the client (pgbench's
-- \sleep, the transaction open), and writes the value read + 1; a
-- concurrent commit makes the UPDATE (or COMMIT) fail with 40001, and
-- pgbench, run with --max-tries=N, retries the whole transaction at once,
-- as an application's retry loop would.  With -D keyed=1 the transaction
-- begins with SET LOCAL occ.key (queue mode for the application's own
-- transactions): it waits its turn on the gate of the key, before its
-- snapshot, when the key is hot or this client's previous try failed.
-- With -D keyed=2 the SET goes in the same round trip as the SELECT (\;),
-- so that the gate is not held across one round trip more than the row
-- lock of client_lock.sql, taken by its SELECT.
-- Variables: -D work_ms=N -D iso='repeatable read' -D keyed=0 (or 1, 2).
BEGIN ISOLATION LEVEL :iso;
\if :keyed = 2
SET LOCAL occ.key = 'hot:1' \; SELECT v AS val FROM hot WHERE id = 1 \gset
\else
\if :keyed
SET LOCAL occ.key = 'hot:1';
\endif
SELECT v AS val FROM hot WHERE id = 1 \gset
\endif
\sleep :work_ms ms
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
