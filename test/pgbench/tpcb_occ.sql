-- keys mode, tpcb workload through occ.retry: pgbench's tpcb-like
-- transaction at scale 1 with its parameters.  keyprefix NULL lets queue
-- mode learn the keys; 'branch:' gives the best key by hand (every
-- transaction updates its branch's row).
-- Variables: -D iso=... -D contention=queue|backoff|batch -D keyprefix=NULL|"'branch:'"
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
CALL occ.retry($body$
    UPDATE pgbench_accounts SET abalance = abalance + $4 WHERE aid = $1;
    SELECT abalance FROM pgbench_accounts WHERE aid = $1;
    UPDATE pgbench_tellers SET tbalance = tbalance + $4 WHERE tid = $3;
    UPDATE pgbench_branches SET bbalance = bbalance + $4 WHERE bid = $2;
    INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($3, $2, $1, $4, CURRENT_TIMESTAMP)
$body$, params => row(:aid, :bid, :tid, :delta), isolation => ':iso', max_attempts => 1000,
    contention => ':contention', key => :keyprefix || ':bid');
