-- keys mode, tpcb workload, the lock: pgbench's tpcb-like transaction at
-- scale 1 in a READ COMMITTED function, one round trip.
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
SELECT tpcb_lock(:aid, :bid, :tid, :delta);
