-- Client-side transaction, optimistic: the application reads the hot row
-- without a lock under :iso, works for work_ms in the client (pgbench's
-- \sleep, the transaction open), and writes the value read + 1; a
-- concurrent commit makes the UPDATE (or COMMIT) fail with 40001, and
-- pgbench, run with --max-tries=N, retries the whole transaction at once,
-- as an application's retry loop would.  With -D keyed=1 the transaction
-- begins with SET LOCAL occ.key (queue mode for the application's own
-- transactions): it waits its turn on the gate of the key, before its
-- snapshot, when the key is hot or this client's previous try failed.
-- Variables: -D work_ms=N -D iso='repeatable read' -D keyed=0 (or 1).
BEGIN ISOLATION LEVEL :iso;
\if :keyed
SET LOCAL occ.key = 'hot:1';
\endif
SELECT v AS val FROM hot WHERE id = 1 \gset
\sleep :work_ms ms
UPDATE hot SET v = :val + 1 WHERE id = 1;
COMMIT;
