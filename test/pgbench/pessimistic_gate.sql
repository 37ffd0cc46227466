-- A plain lock-based writer next to queue-mode occ.retry calls: the form of
-- pessimistic_1rt.sql that first waits for the gate of the row with
-- occ.gate('hot:1'), the key that the occ.retry calls of the mixed run use,
-- so that it queues with them in arrival order instead of overtaking them.
-- Variables: -D work_ms=N
BEGIN ISOLATION LEVEL READ COMMITTED \; SELECT occ.gate('hot:1') \; SELECT v FROM hot WHERE id = 1 FOR UPDATE \; SELECT pg_sleep(:work_ms / 1000.0) \; UPDATE hot SET v = v + 1 WHERE id = 1 \; COMMIT;
