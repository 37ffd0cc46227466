-- PostgreSQL's own FIFO queue, the reference of queue mode's tail: the
-- transaction of pessimistic_1rt.sql after it has waited for an advisory
-- lock of the row, pg_advisory_xact_lock(1), in the lock manager's order of
-- arrival, before its first statement runs (as a gate is waited for before
-- an attempt's snapshot).  No pg_occ: its p99 / ideal is what a FIFO queue
-- of this machine gives, the wake-ups and the statements' work after each
-- hand-over included, against which queue mode's tail is read.
-- Variables: -D work_ms=N
BEGIN ISOLATION LEVEL READ COMMITTED \; SELECT pg_advisory_xact_lock(1) \; SELECT v FROM hot WHERE id = 1 FOR UPDATE \; SELECT pg_sleep(:work_ms / 1000.0) \; UPDATE hot SET v = v + 1 WHERE id = 1 \; COMMIT;
