-- Memory stays bounded: a call's memory does not grow with its attempts, the
-- plan cache evicts instead of planning per attempt, and what it keeps is
-- bounded in bytes.  Memory is read from pg_backend_memory_contexts by the
-- body itself, at two attempts of the same call (the sequences keep the
-- readings: setval survives the rollback of the failed attempt).  The
-- thresholds are generous; there is no timing here.
SET occ.contention = 'backoff';
\set VERBOSITY terse

-- the backend's memory, all contexts
CREATE FUNCTION mem() RETURNS bigint LANGUAGE sql
AS 'SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts';
CREATE SEQUENCE mem_attempt;
CREATE SEQUENCE mem_at_n;
CREATE SEQUENCE mem_at_10n;
CREATE VIEW mem_growth AS
  SELECT (SELECT last_value FROM mem_at_10n) - (SELECT last_value FROM mem_at_n) AS growth;

-- one call, 1000 failed attempts (a retryable division by zero): the memory
-- at attempt 1000 is the memory at attempt 100 (it grew by about 250 bytes
-- per attempt, the failed attempt's error data, when they were kept until
-- the call ended)
CALL occ.retry('SELECT nextval($$mem_attempt$$);
  SELECT CASE currval($$mem_attempt$$) WHEN 100 THEN setval($$mem_at_n$$, mem())
                                       WHEN 1000 THEN setval($$mem_at_10n$$, mem()) END;
  SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$))',
  retry_on => '{22012}', max_attempts => 1000, base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 65536 AS flat_in_attempts FROM mem_growth;

-- the same in queue mode, with a key and with the keys it learns: the
-- memory at attempt 5000 is the memory at attempt 1000 (it grew by 24 bytes
-- per attempt, the array of the call's keys made at each failure, 96 kB
-- between the two)
SELECT setval('mem_attempt', 1, false);
CALL occ.retry('SELECT nextval($$mem_attempt$$);
  SELECT CASE currval($$mem_attempt$$) WHEN 1000 THEN setval($$mem_at_n$$, mem())
                                       WHEN 5000 THEN setval($$mem_at_10n$$, mem()) END;
  SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$))',
  retry_on => '{22012}', max_attempts => 5000, contention => 'queue', key => 'mem:1',
  base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 32768 AS flat_in_queue_mode_with_a_key FROM mem_growth;
SELECT setval('mem_attempt', 1, false);
CALL occ.retry('SELECT nextval($$mem_attempt$$);
  SELECT CASE currval($$mem_attempt$$) WHEN 1000 THEN setval($$mem_at_n$$, mem())
                                       WHEN 5000 THEN setval($$mem_at_10n$$, mem()) END;
  SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$)) /* learned */',
  retry_on => '{22012}', max_attempts => 5000, contention => 'queue', base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 32768 AS flat_in_queue_mode_learned FROM mem_growth;

-- with 256 bodies kept already (the plan cache's count), a new body evicts
-- the least recently used one: it is prepared once, not at every attempt
-- (which cost 7 to 22 KB per attempt until the call ended)
DO $$
BEGIN
  FOR i IN 1..300 LOOP
    CALL occ.retry(format('SELECT %s', i));
  END LOOP;
END $$;
SELECT setval('mem_attempt', 1, false);
CALL occ.retry('SELECT nextval($$mem_attempt$$);
  SELECT CASE currval($$mem_attempt$$) WHEN 10 THEN setval($$mem_at_n$$, mem())
                                       WHEN 100 THEN setval($$mem_at_10n$$, mem()) END;
  SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$)) /* a new body */',
  retry_on => '{22012}', max_attempts => 100, base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 65536 AS flat_with_a_full_cache FROM mem_growth;

-- a body of 500 statements (100 kB of text): its first call costs memory
-- linear in its size (its plans, about 4 MB, no longer 500 copies of the
-- whole text, 50 MB), and its plans, too big to keep (over 1 MB), are freed
-- when the call ends; failed attempts prepare nothing again
SELECT string_agg(format('SELECT %s /* %s */', i, repeat('x', 200)), '; ')
       || '; SELECT CASE currval($$mem_attempt$$) WHEN 2 THEN setval($$mem_at_n$$, mem())'
       || ' WHEN 10 THEN setval($$mem_at_10n$$, mem()) END'
       || '; SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$))' AS big_body
  FROM generate_series(1, 500) i \gset
SELECT octet_length(:'big_body') > 100000 AS body_over_100kb;
-- (a new session: an empty plan cache)
\c
SET occ.contention = 'backoff';
CREATE TEMP TABLE mem_before AS SELECT mem() AS bytes;
SELECT setval('mem_attempt', 1, false);
CALL occ.retry('SELECT nextval($$mem_attempt$$); ' || :'big_body',
  retry_on => '{22012}', max_attempts => 10, base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT (SELECT last_value FROM mem_at_n) - bytes < 16 * 1024 * 1024 AS linear_first_call,
       growth < 65536 AS flat_in_attempts,
       mem() - bytes < 1024 * 1024 AS freed_after_call
  FROM mem_before, mem_growth;

-- the cache keeps at most 4 MB of plans: 40 bodies of 40 statements
-- (about 16 MB of plans when only their count was bounded)
\c
SET occ.contention = 'backoff';
CREATE TEMP TABLE mem_before AS SELECT mem() AS bytes;
DO $$
DECLARE
  body text;
BEGIN
  FOR b IN 1..40 LOOP
    body := (SELECT string_agg(format('SELECT %s, %s', b, i), '; ') FROM generate_series(1, 40) i);
    CALL occ.retry(body);
  END LOOP;
END $$;
SELECT mem() - bytes < 6 * 1024 * 1024 AS cache_bounded_in_bytes FROM mem_before;

-- rows that a body's queries return are discarded, not collected: a body
-- that reads 200,000 rows (about 30 MB) does not hold them in memory
\c
SET occ.contention = 'backoff';
CREATE TEMP TABLE mem_before AS SELECT mem() AS bytes;
CALL occ.retry('SELECT g, repeat($$x$$, 100) FROM generate_series(1, 200000) g;
                SELECT setval($$mem_at_n$$, mem())');
SELECT (SELECT last_value FROM mem_at_n) - bytes < 8 * 1024 * 1024 AS results_not_kept FROM mem_before;

-- the form with result keeps the rows of one attempt only: 300 attempts that
-- each collect 2,000 rows (about 250 KB of JSON) before they fail, and the
-- memory at attempt 300 is the memory at attempt 30; after the call, only
-- the committed attempt's result remains (the CALL's own row)
\c
SET occ.contention = 'backoff';
CREATE TEMP TABLE mem_before AS SELECT mem() AS bytes;
SELECT setval('mem_attempt', 1, false);
DO $do$
DECLARE
  r jsonb;
BEGIN
  CALL occ.retry('SELECT nextval($$mem_attempt$$);
    SELECT g, repeat($$x$$, 100) FROM generate_series(1, 2000) g;
    SELECT CASE currval($$mem_attempt$$) WHEN 30 THEN setval($$mem_at_n$$, mem())
                                         WHEN 300 THEN setval($$mem_at_10n$$, mem()) END;
    SELECT 1 / (currval($$mem_attempt$$) / 301)::int AS last',
    result => r, retry_on => '{22012}', max_attempts => 301, base => '1us', cap => '1us');
  RAISE NOTICE 'result %', r;
END $do$;
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 65536 AS result_flat_in_attempts,
       mem() - bytes < 1024 * 1024 AS result_freed_after_call
  FROM mem_before, mem_growth;

-- the memory that making the result takes is a small multiple of its JSON
-- text, not hundreds of bytes per row: 1,000,000 empty rows are 3 MB of
-- JSON, and made into jsonb all at once they took 636 MB more at the peak
-- (now about 25 MB, the CALL's row sent to the client included).  The peak
-- is the backend's high-water mark of resident memory (VmHWM, Linux), read
-- after a first call has warmed the session's caches.
\c
SET occ.contention = 'backoff';
CREATE FUNCTION pg_temp.peak() RETURNS bigint LANGUAGE sql
AS $$SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s*(\d+) kB'))[1]::bigint * 1024$$;
CALL occ.retry('SELECT FROM generate_series(1, 1000)', result => NULL) \g /dev/null
CREATE TEMP TABLE mem_before AS SELECT pg_temp.peak() AS bytes;
CALL occ.retry('SELECT FROM generate_series(1, 1000000)', result => NULL) \g /dev/null
SELECT pg_temp.peak() - bytes < 100 * 1024 * 1024 AS result_memory_bounded FROM mem_before;
