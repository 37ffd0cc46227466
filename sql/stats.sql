-- occ.stats: exact counts after known sequences of failures, reset,
-- privileges and text masking.  Needs shared_preload_libraries = pg_occ.
-- In backoff mode, whose sleeps are counted too (queue mode: queue.sql).
SET occ.contention = 'backoff';

SELECT occ.stats_reset();
SELECT dealloc, stats_reset > now() - interval '1 hour' AS recent FROM occ.stats_info;

CREATE TABLE stats_counter (v int);
INSERT INTO stats_counter VALUES (0);
CREATE SEQUENCE stats_seq;
CREATE FUNCTION stats_fail_until(n int, code text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('stats_seq') < n THEN
    RAISE USING ERRCODE = code, MESSAGE = 'simulated ' || code;
  END IF;
END $$;

-- 3 calls that commit at once
CALL occ.retry('UPDATE stats_counter SET v = v + 1');
CALL occ.retry('UPDATE stats_counter SET v = v + 1');
CALL occ.retry('UPDATE stats_counter SET v = v + 1');
-- 1 call: two serialization failures, then a commit (3 attempts)
SELECT setval('stats_seq', 1, false);
CALL occ.retry('SELECT stats_fail_until(3, $$40001$$)', base => '1ms', jitter => 'none');
-- 1 call: two deadlocks, then a commit
SELECT setval('stats_seq', 1, false);
CALL occ.retry('SELECT stats_fail_until(3, $$40P01$$)', base => '1ms', jitter => 'none');
-- 1 call that gives up after 4 attempts
SELECT setval('stats_seq', 1, false);
CALL occ.retry('SELECT stats_fail_until(100, $$40001$$)', max_attempts => 4, base => '1ms', jitter => 'none');
-- 1 call ended by an error that is not retried
CALL occ.retry('SELECT stats_fail_until(100, $$22012$$)');
-- 1 call: a retryable failure from another class listed in retry_on, then a commit
SELECT setval('stats_seq', 1, false);
CALL occ.retry('SELECT stats_fail_until(2, $$40002$$)', base => '1ms', retry_on => '{40}');

SELECT query, calls, commits, gave_up, errors, attempts, serialization_failures AS sf,
       deadlocks AS dl, other_failures AS other, max_attempts, attempts_histogram,
       total_sleep_time >= 0 AND total_sleep_time <= total_time AS sleep_within_time,
       max_sleep_time <= total_sleep_time AS max_le_total, mean_attempts
  FROM occ.stats WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
 ORDER BY query;

-- sleep time is recorded: 1 ms then 2 ms for the call that retried twice
SELECT total_sleep_time >= 3 AS slept_3ms, max_sleep_time >= 2 AS longest_2ms
  FROM occ.stats WHERE query = 'SELECT stats_fail_until(3, $$40001$$)';

-- occ.track_stats = off stops counting, without stopping occ.retry
SET occ.track_stats = off;
CALL occ.retry('UPDATE stats_counter SET v = v + 1');
RESET occ.track_stats;
SELECT calls FROM occ.stats WHERE query = 'UPDATE stats_counter SET v = v + 1';

-- occ.log_retries logs each retry (attempt, SQLSTATE, delay) and each give-up
SET client_min_messages = log;
SET occ.log_retries = on;
SELECT setval('stats_seq', 1, false);
CALL occ.retry('SELECT stats_fail_until(100, $$40P01$$)', max_attempts => 3, base => '2ms', jitter => 'none');
RESET occ.log_retries;
CALL occ.retry('SELECT stats_fail_until(100, $$40P01$$)', max_attempts => 2, base => '2ms', jitter => 'none');
RESET client_min_messages;

-- other roles' text and queryid are hidden without pg_read_all_stats
CREATE ROLE occ_stats_alice;
CREATE ROLE occ_stats_bob;
GRANT ALL ON stats_counter TO occ_stats_alice;
SET ROLE occ_stats_alice;
CALL occ.retry('UPDATE stats_counter SET v = v + 100');
SELECT query, queryid IS NOT NULL AS has_queryid, calls FROM occ.stats WHERE userid = 'occ_stats_alice'::regrole;
SET ROLE occ_stats_bob;
SELECT query, queryid IS NOT NULL AS has_queryid, calls FROM occ.stats WHERE userid = 'occ_stats_alice'::regrole;
-- and occ.stats_reset is not for PUBLIC
SELECT occ.stats_reset();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT pg_read_all_stats TO occ_stats_bob;
SET ROLE occ_stats_bob;
SELECT query, queryid IS NOT NULL AS has_queryid FROM occ.stats WHERE userid = 'occ_stats_alice'::regrole;
RESET ROLE;
REVOKE ALL ON stats_counter FROM occ_stats_alice;
DROP ROLE occ_stats_alice;
DROP ROLE occ_stats_bob;

-- a full table evicts the entries with the fewest calls, and counts them;
-- 5% at once (at least 10), so that an insertion costs O(1) amortised:
-- 'SELECT 0' and 'SELECT 1' to 'SELECT max + 4' are max + 5 bodies for a
-- table of max = occ.stats_max entries (the server's: 1000 by default), so
-- the first body beyond max evicts greatest(10, max / 20) of them
SELECT current_setting('occ.stats_max')::int AS max \gset
SELECT greatest(10, :max * 5 / 100) AS evicted \gset
SELECT occ.stats_reset();
CALL occ.retry('SELECT 0');
CALL occ.retry('SELECT 0');
DO $$
BEGIN
  FOR i IN 1..current_setting('occ.stats_max')::int + 4 LOOP
    CALL occ.retry(format('SELECT %s', i));
  END LOOP;
END $$;
SELECT count(*) = :max + 5 - :evicted AS entries_left FROM occ.stats;
SELECT dealloc = :evicted AS evicted_counted FROM occ.stats_info;
SELECT calls FROM occ.stats WHERE query = 'SELECT 0';

-- reset empties the view
SELECT occ.stats_reset();
SELECT count(*) FROM occ.stats;

-- the text is cut at 1023 bytes on a character boundary: 'é' takes 2 bytes
-- in UTF-8, and the 1023rd byte would be the first half of one
SELECT 'SELECT ''' || repeat('é', 600) || '''' AS mb_body \gset
CALL occ.retry(:'mb_body');
SELECT octet_length(query) AS bytes, query = left(:'mb_body', char_length(query)) AS whole_characters
  FROM occ.stats WHERE query LIKE 'SELECT ''é%';

-- a call is counted under the role that called, even when its body sets
-- another role for the session
CREATE ROLE occ_stats_carol;
CALL occ.retry('SET ROLE occ_stats_carol');
SELECT current_user;
RESET ROLE;
SELECT userid::regrole, calls FROM occ.stats WHERE query = 'SET ROLE occ_stats_carol';
DROP ROLE occ_stats_carol;

-- every call is recorded, also one refused before its first attempt: in
-- occ.last_retry() with its SQLSTATE, and in occ.stats (0 attempts, an
-- error, outside the histogram) when its text is known
SELECT occ.stats_reset();
\set VERBOSITY terse
CALL occ.retry('SELECT 1');
CALL occ.retry('SELECT 1', max_attempts => 0);
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
CALL occ.retry('SELECT 1');
BEGIN;
CALL occ.retry('SELECT 1');
ROLLBACK;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
CREATE FUNCTION stats_from_function() RETURNS void LANGUAGE plpgsql AS $$
BEGIN CALL occ.retry('SELECT 1'); END $$;
SELECT stats_from_function();
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
CALL occ.retry(NULL);
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
\set VERBOSITY default
SELECT query, calls, commits, errors, attempts, attempts_histogram, mean_attempts
  FROM occ.stats ORDER BY query;
