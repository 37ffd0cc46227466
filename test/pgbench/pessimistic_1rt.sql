-- Form 1', pessimistic in one round trip: the same transaction as
-- pessimistic.sql, sent as one multi-statement query (\; joins statements),
-- so the row lock is not held across client round trips.  This is the fair
-- reference for occ.retry, which also runs its body in one round trip.
-- Under the FOR UPDATE lock, v + 1 is the value read + 1.
-- Variables: -D work_ms=N
BEGIN ISOLATION LEVEL READ COMMITTED \; SELECT v FROM hot WHERE id = 1 FOR UPDATE \; SELECT pg_sleep(:work_ms / 1000.0) \; UPDATE hot SET v = v + 1 WHERE id = 1 \; COMMIT;
