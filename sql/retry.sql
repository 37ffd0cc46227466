-- CALL occ.retry: single-session behaviour.  Concurrent conflicts are in the
-- isolation specs (test/specs); here failures are raised on purpose.
-- These tests are about backoff (they measure sleeps): queue mode, the
-- default, is in queue.sql.
SET occ.contention = 'backoff';

CREATE TABLE counter (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO counter VALUES (1, 0);
CREATE TABLE log (attempt bigint, note text, isolation text);
CREATE SEQUENCE attempt_seq;   -- nextval survives rollbacks: counts executions

-- a body that fails with a retryable SQLSTATE until its n-th execution
CREATE FUNCTION fail_until(n int, code text DEFAULT '40001') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO log VALUES (currval('attempt_seq'), 'partial', NULL);
  IF currval('attempt_seq') < n THEN
    RAISE USING ERRCODE = code, MESSAGE = 'simulated conflict', DETAIL = 'Attempt ' || currval('attempt_seq') || '.';
  END IF;
END $$;
CREATE FUNCTION fail_with(code text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE USING ERRCODE = code, MESSAGE = 'simulated ' || code, DETAIL = 'Raised on purpose.', HINT = 'Original hint.';
END $$;

-- the simplest call, and one with typed parameters bound as $1, $2, $3
CALL occ.retry('UPDATE counter SET v = v + 1 WHERE id = 1');
CALL occ.retry('INSERT INTO log VALUES ($1, $2, array_to_string($3, $$,$$))',
               params => row(7::bigint, 'it''s typed'::text, ARRAY['a', 'b']));
SELECT * FROM log;
TRUNCATE log;
-- parameters are values, never SQL: an injection attempt is just text
CALL occ.retry('INSERT INTO log VALUES (0, $1, NULL)', params => row('x''); DROP TABLE counter; --'::text));
SELECT note FROM log;
TRUNCATE log;

-- fails twice, then commits: three executions, one committed row, no partial
-- (the reporting form returns attempts and slept, the measured sleep time)
CALL occ.retry('SELECT nextval($$attempt_seq$$); SELECT fail_until(3); UPDATE counter SET v = v + 1',
               base => '1ms', jitter => 'none', attempts => NULL, slept => NULL) \gset
SELECT :attempts AS attempts, :'slept'::interval >= '3ms' AS slept_1ms_then_2ms;
SELECT * FROM log;
SELECT v FROM counter;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();

-- the reporting form from PL/pgSQL: variables receive attempts and slept
SELECT setval('attempt_seq', 1, false);
DO $do$
DECLARE
  a int;
  s interval;
BEGIN
  CALL occ.retry('SELECT nextval($$attempt_seq$$); SELECT fail_until(2)', attempts => a, slept => s,
                 base => '5ms', jitter => 'none');
  RAISE NOTICE 'attempts %, slept at least 5ms: %', a, s >= '5ms';
END $do$;
TRUNCATE log;

-- giving up re-raises the last failure: same SQLSTATE, message, detail, plus
-- how many attempts were made; nothing of any attempt is committed
SELECT setval('attempt_seq', 1, false);
CALL occ.retry('SELECT nextval($$attempt_seq$$); SELECT fail_until(100)', max_attempts => 3, base => '1ms');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS partial_rows FROM log;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();

-- deadlock_detected is retried too; other codes only when listed
CALL occ.retry('SELECT fail_with($$40P01$$)', max_attempts => 2, base => '1ms');
\echo :LAST_ERROR_SQLSTATE
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
CALL occ.retry('SELECT fail_with($$23505$$)', max_attempts => 2, base => '1ms', retry_on => '{23505}');
SELECT attempts, outcome FROM occ.last_retry();
CALL occ.retry('SELECT fail_with($$40002$$)', max_attempts => 2, base => '1ms', retry_on => '{40}');
SELECT attempts, outcome FROM occ.last_retry();
CALL occ.retry('SELECT fail_with($$40001$$)', max_attempts => 5, retry_on => '{}');
SELECT attempts, outcome FROM occ.last_retry();

-- errors that are not retryable pass through unchanged, with nothing committed
CALL occ.retry('INSERT INTO log VALUES (1, $$partial$$, NULL); SELECT fail_with($$P0001$$)');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('INSERT INTO log VALUES (1, $$partial$$, NULL); SELECT 1/0');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('INSERT INTO nonexistent VALUES (1)');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS partial_rows FROM log;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();

-- query_canceled is never retried, even when its class is listed (a retry
-- would sleep 2 s and commit)
SET statement_timeout = '100ms';
CALL occ.retry('SELECT pg_sleep(2)', retry_on => '{40001,57}');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();

-- the isolation level: serializable by default, as asked, or from occ.isolation
CALL occ.retry('INSERT INTO log VALUES (0, $$default$$, current_setting($$transaction_isolation$$))');
CALL occ.retry('INSERT INTO log VALUES (0, $$asked$$, current_setting($$transaction_isolation$$))',
               isolation => 'repeatable read');
SET occ.isolation = 'read committed';
CALL occ.retry('INSERT INTO log VALUES (0, $$setting$$, current_setting($$transaction_isolation$$))');
RESET occ.isolation;
SELECT note, isolation FROM log;
TRUNCATE log;

-- the body is one transaction: COMMIT, ROLLBACK or a committing procedure in
-- it is an error, and nothing before it is committed
CREATE PROCEDURE committing() LANGUAGE plpgsql AS $$ BEGIN COMMIT; END $$;
CALL occ.retry('INSERT INTO log VALUES (1, $$partial$$, NULL); COMMIT');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('INSERT INTO log VALUES (1, $$partial$$, NULL); ROLLBACK');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('INSERT INTO log VALUES (1, $$partial$$, NULL); CALL committing()');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS partial_rows FROM log;

-- atomic contexts are refused with a hint; CALLed procedures and DO work
BEGIN;
CALL occ.retry('UPDATE counter SET v = v + 1');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CREATE FUNCTION from_function() RETURNS void LANGUAGE plpgsql AS $$
BEGIN CALL occ.retry('UPDATE counter SET v = v + 1'); END $$;
SELECT from_function();
\echo :LAST_ERROR_SQLSTATE
DO $$
BEGIN
  CALL occ.retry('UPDATE counter SET v = v + 1');
EXCEPTION WHEN division_by_zero THEN NULL;
END $$;
\echo :LAST_ERROR_SQLSTATE
-- the detail says why: a SQL-language procedure is atomic even when CALLed
CREATE PROCEDURE from_sql_procedure() LANGUAGE sql AS $$ CALL occ.retry('UPDATE counter SET v = v + 1') $$;
\set SHOW_CONTEXT never
CALL from_sql_procedure();
\set SHOW_CONTEXT errors
\echo :LAST_ERROR_SQLSTATE
-- so does a PL/pgSQL procedure with a SET clause
CREATE PROCEDURE from_set_procedure() LANGUAGE plpgsql SET work_mem = '4MB' AS $$
BEGIN CALL occ.retry('UPDATE counter SET v = v + 1'); END $$;
\set SHOW_CONTEXT never
CALL from_set_procedure();
\set SHOW_CONTEXT errors
-- several statements in one query string run in an implicit transaction
-- block; a BEGIN in the same string makes a real one
SELECT 1 AS one \; CALL occ.retry('UPDATE counter SET v = v + 1');
\echo :LAST_ERROR_SQLSTATE
BEGIN \; CALL occ.retry('UPDATE counter SET v = v + 1');
ROLLBACK;
BEGIN;
SELECT 1 AS one \; CALL occ.retry('UPDATE counter SET v = v + 1');
ROLLBACK;
CREATE PROCEDURE from_procedure() LANGUAGE plpgsql AS $$
BEGIN CALL occ.retry('UPDATE counter SET v = v + 1'); END $$;
CALL from_procedure();
DO $$ BEGIN CALL occ.retry('UPDATE counter SET v = v + 1'); END $$;
SELECT v FROM counter;
-- work done before the call in the same transaction would be committed by
-- it, separately from the body: refused instead
DO $$ BEGIN INSERT INTO log VALUES (1, 'before', NULL); CALL occ.retry('SELECT 1'); END $$;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM log;

-- a 200 microsecond delay sleeps about 200 microseconds, not pg_sleep's whole
-- millisecond: 49 sleeps take well under the 49 ms they would take rounded up
CALL occ.retry('SELECT fail_with($$40001$$)', max_attempts => 50, base => '200us', jitter => 'none', factor => 1);
SELECT attempts, slept >= '9.8ms' AS at_least_requested, slept < '40ms' AS not_rounded_up FROM occ.last_retry();

-- max_duration: a sleep that would overrun the budget is not started
-- (100 ms, then 200 ms would end after 250 ms)
CALL occ.retry('SELECT fail_with($$40001$$)', base => '100ms', cap => '1s', jitter => 'none',
               max_duration => '250ms');
SELECT attempts, outcome FROM occ.last_retry();

-- bad arguments: a clear error before anything runs
CALL occ.retry(NULL);
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', max_attempts => 0);
\echo :LAST_ERROR_SQLSTATE
-- (NULL options mean their settings: occ.max_attempts = 1 makes it give up at once)
SET occ.max_attempts = 1;
CALL occ.retry('SELECT fail_with($$40001$$)', max_attempts => NULL, base => NULL, retry_on => NULL);
RESET occ.max_attempts;
SELECT attempts, outcome FROM occ.last_retry();
CALL occ.retry('SELECT 1', base => '0');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', cap => '10us');
\echo :LAST_ERROR_SQLSTATE
-- settings that disagree (a role's occ.base_delay above occ.max_delay) say so
SET occ.base_delay = '300ms';
CALL occ.retry('SELECT 1');
\echo :LAST_ERROR_SQLSTATE
RESET occ.base_delay;
CALL occ.retry('SELECT 1', jitter => 'fuzzy');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', factor => 0.9);
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', max_duration => '-1s');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', isolation => 'snapshot');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', retry_on => '{4000}');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', retry_on => '{57014}');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', retry_on => ARRAY[NULL]);
\echo :LAST_ERROR_SQLSTATE
