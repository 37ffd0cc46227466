-- Batch mode (contention => 'batch') in one session: with no one else in
-- the key's queue, a call runs as it would in queue mode, alone; what it
-- counts in occ.stats.  Batches themselves, with several sessions, are
-- checked by test/batch.sh and test/batch_storm.sh.
SELECT occ.stats_reset();
CREATE TABLE bcounter (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO bcounter VALUES (1, 0);

-- alone, it runs and returns its result
CALL occ.retry('UPDATE bcounter SET n = n + 1 WHERE id = $1 RETURNING n', NULL::jsonb,
               params => row(1), contention => 'batch', key => 'b:1');
-- the setting takes it too
SET occ.contention = 'batch';
CALL occ.retry('UPDATE bcounter SET n = n + 1 WHERE id = $1 RETURNING n', NULL::jsonb, params => row(1));
RESET occ.contention;

-- a failure is retried as in queue mode: the call queues on its key's gate
CREATE FUNCTION bfail_first() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF occ.attempt() = 1 THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
CALL occ.retry('SELECT bfail_first(); UPDATE bcounter SET n = n + 1 WHERE id = 1 RETURNING n, occ.attempt() AS attempt',
               NULL::jsonb, NULL::int, NULL::interval, contention => 'batch', key => 'b:1');
SELECT attempts, outcome FROM occ.last_retry();
SELECT count(*) AS gates_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291;

-- a body's own error is raised as it is
CALL occ.retry('SELECT 1 / 0', contention => 'batch', key => 'b:1');

-- calls that ran alone are not counted as batched
SELECT calls, commits, errors, batched, mean_batch_size FROM occ.stats
 WHERE query LIKE '%bcounter%' OR query = 'SELECT 1 / 0' ORDER BY query;

-- occ.batch_max_calls: 1 to 1000 (1 batches nothing)
SET occ.batch_max_calls = 0;
SET occ.batch_max_calls = 1001;
SET occ.batch_max_calls = 1;
CALL occ.retry('UPDATE bcounter SET n = n + 1 WHERE id = 1', contention => 'batch', key => 'b:1');
RESET occ.batch_max_calls;
SELECT n FROM bcounter;

-- occ.batch_max_time, in ms (its bounds: test/tap/02_gucs.sql)
SET occ.batch_max_time = '1s';
SHOW occ.batch_max_time;
RESET occ.batch_max_time;

-- a bad mode names the valid ones
CALL occ.retry('SELECT 1', contention => 'batches');
