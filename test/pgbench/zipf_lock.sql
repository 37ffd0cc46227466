-- keys mode, zipf workload, the lock: four rows of 10,000 chosen with a
-- zipfian skew, locked in id order, 1 ms of work, each incremented; one
-- round trip.
\set r1 random_zipfian(1, 10000, 1.01)
\set r2 random_zipfian(1, 10000, 1.01)
\set r3 random_zipfian(1, 10000, 1.01)
\set r4 random_zipfian(1, 10000, 1.01)
SELECT zipf_lock(ARRAY[:r1, :r2, :r3, :r4], :work_ms);
