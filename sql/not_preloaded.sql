-- Without shared_preload_libraries, occ.retry, occ.backoff and
-- occ.last_retry work; the statistics say that preloading is required.
-- Run by test/run.sh against a server that does not preload pg_occ.

SELECT current_setting('shared_preload_libraries') LIKE '%pg_occ%' AS preloaded;
-- defaults read the occ.* settings, which exist as soon as the library is
-- loaded, and a call loads it before its arguments are evaluated
\c
SELECT occ.backoff(3, jitter => 'none');
\c
CREATE TABLE np (v int);
INSERT INTO np VALUES (0);
CALL occ.retry('UPDATE np SET v = v + 1');
SELECT v FROM np;
SELECT occ.backoff(2, '1ms', '1s', 'none');
SELECT attempts, outcome FROM occ.last_retry();
SELECT * FROM occ.stats;
\echo :LAST_ERROR_SQLSTATE
SELECT occ.stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM occ.stats_info;
\echo :LAST_ERROR_SQLSTATE

-- Queue mode works without preloading: there is no temperature, so a call
-- runs its first attempt ungated and queues on the gate after it fails
CREATE FUNCTION np_conflict_until_gated() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
                 AND objsubid = 20291 AND granted) THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
CALL occ.retry('SELECT np_conflict_until_gated(); UPDATE np SET v = v + 1',
               contention => 'queue', key => 'np', base => '10min', cap => '10min', jitter => 'none');
SELECT attempts, slept, outcome FROM occ.last_retry();
SELECT v FROM np;
SELECT count(*) AS gates_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291;
-- and batch mode behaves as queue mode: there is no batch queue to join
CALL occ.retry('SELECT np_conflict_until_gated(); UPDATE np SET v = v + 1',
               contention => 'batch', key => 'np', base => '10min', cap => '10min', jitter => 'none');
SELECT attempts, slept, outcome FROM occ.last_retry();
SELECT v FROM np;
SELECT count(*) AS gates_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291;

-- Without preloading there is no retry budget: occ.retry_budget can be set,
-- but every retry runs (this one would be refused with 0.5 tokens at most),
-- and occ.stats_info, which shows the budget, needs preloading.  A WARNING
-- says so, once per session, when a call first commits or retries.
SET occ.retry_budget = 0.5;
SET occ.contention = 'backoff';
CREATE SEQUENCE np_seq;
CALL occ.retry('SELECT 1');
CALL occ.retry($$SELECT nextval('np_seq');
                 DO 'BEGIN IF currval(''np_seq'') < 3 THEN RAISE EXCEPTION USING ERRCODE = ''40001''; END IF; END'$$,
               base => '1ms');
SELECT attempts, outcome FROM occ.last_retry();
SELECT * FROM occ.stats_info;
RESET occ.contention;
RESET occ.retry_budget;

-- Without preloading, the occ. prefix is reserved only once the library is
-- loaded in the session (CREATE EXTENSION, or the first call of one of its
-- functions): before, a misspelled setting is accepted as a placeholder;
-- loading the library removes it with a WARNING; after, it is an error.
\c
SET occ.max_atempts = 3;
SHOW occ.max_atempts;
SELECT occ.backoff(0, jitter => 'none');
SHOW occ.max_atempts;
SET occ.max_atempts = 3;

-- SET LOCAL occ.key without preloading: in a session that has not loaded
-- the library, occ.key is a placeholder that queues nothing; once loaded,
-- a transaction queues after this session's own retryable failure (there
-- is no temperature), and occ.key_stats needs preloading
\c
BEGIN;
SET LOCAL occ.key = 'np:placeholder';
COMMIT;
SELECT occ.backoff(0, jitter => 'none');
BEGIN;
SET LOCAL occ.key = 'np';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'np';
SELECT count(*) AS gates FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291 AND granted;
COMMIT;
SELECT * FROM occ.key_stats;
\echo :LAST_ERROR_SQLSTATE

-- A reservable column without preloading: a plain UPDATE of it cannot
-- reserve (there are no entries), so its guard refuses it, as any UPDATE
-- of the column, with the hint that names the shape that reserves
CREATE TABLE np_stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO np_stock VALUES (1, 10);
SELECT occ.make_reservable('np_stock', 'qty');
\set VERBOSITY default
UPDATE np_stock SET qty = qty - 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT qty FROM np_stock;
SELECT occ.drop_reservable('np_stock', 'qty');
DROP TABLE np_stock;
