-- pg_occ benchmark, keys mode: the tables of the two realistic workloads
-- (run with psql after pgbench -i -s 1 has made pgbench's own tables).
-- zrows: 10,000 rows that the multi-row workload reads and writes, four at
-- a time, chosen with a zipfian skew.
-- tpcb_lock, zipf_lock: the same statements as the occ.retry bodies, in a
-- READ COMMITTED function called in one round trip (row locks: the form
-- users run today); zipf_lock locks its rows in id order first, so that
-- the row locks cannot deadlock.
DROP TABLE IF EXISTS zrows;
CREATE TABLE zrows (id integer PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 50);
INSERT INTO zrows SELECT i, 0 FROM generate_series(1, 10000) AS i;

CREATE OR REPLACE FUNCTION tpcb_lock(aid int, bid int, tid int, delta int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbench_accounts SET abalance = abalance + delta WHERE pgbench_accounts.aid = tpcb_lock.aid;
    PERFORM abalance FROM pgbench_accounts WHERE pgbench_accounts.aid = tpcb_lock.aid;
    UPDATE pgbench_tellers SET tbalance = tbalance + delta WHERE pgbench_tellers.tid = tpcb_lock.tid;
    UPDATE pgbench_branches SET bbalance = bbalance + delta WHERE pgbench_branches.bid = tpcb_lock.bid;
    INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
        VALUES (tpcb_lock.tid, tpcb_lock.bid, tpcb_lock.aid, delta, CURRENT_TIMESTAMP);
END $$;

CREATE OR REPLACE FUNCTION zipf_lock(ids int[], work_ms int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM v FROM zrows WHERE id = ANY (ids) ORDER BY id FOR UPDATE;
    PERFORM pg_sleep(work_ms / 1000.0);
    UPDATE zrows SET v = v + 1 WHERE id = ids[1];
    UPDATE zrows SET v = v + 1 WHERE id = ids[2];
    UPDATE zrows SET v = v + 1 WHERE id = ids[3];
    UPDATE zrows SET v = v + 1 WHERE id = ids[4];
END $$;
