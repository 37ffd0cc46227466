-- The body's result (the forms of occ.retry with INOUT result) and
-- occ.attempt().  Failures are raised on purpose; concurrent conflicts are
-- in the isolation specs (test/specs/result_conflict.spec).
SET occ.contention = 'backoff';
SET occ.base_delay = '1ms';

CREATE TABLE account (id int PRIMARY KEY, balance numeric NOT NULL);
INSERT INTO account VALUES (1, 100), (2, 50);
CREATE SEQUENCE result_seq;   -- nextval survives rollbacks: counts executions
CREATE TABLE audit (attempt int, note text);

-- a body that fails with 40001 until its n-th execution
CREATE FUNCTION result_fail_until(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF currval('result_seq') < n THEN
    RAISE USING ERRCODE = '40001', MESSAGE = 'simulated conflict';
  END IF;
END $$;

-- 1. What the result is: the rows of the body's last statement that returns
-- rows (SELECT, VALUES, DML with RETURNING), as an array of objects
CALL occ.retry('UPDATE account SET balance = balance - $1 WHERE id = $2 RETURNING id, balance',
               result => NULL, params => row(10::numeric, 1));
CALL occ.retry('INSERT INTO account VALUES (3, 0), (4, 0) RETURNING id', result => NULL);
-- statements after it that return no rows do not change it
CALL occ.retry('SELECT balance FROM account WHERE id = 2; UPDATE account SET balance = 0 WHERE id = 4',
               result => NULL);
-- a later statement that returns rows replaces it
CALL occ.retry('SELECT 1 AS first; VALUES (2, 3)', result => NULL);
-- no rows: an empty array; no statement returns rows: NULL
CALL occ.retry('UPDATE account SET balance = 0 WHERE id = 99 RETURNING id', result => NULL);
CALL occ.retry('UPDATE account SET balance = 0 WHERE id = 4', result => NULL);
-- a body of one SELECT, and a DO block (which returns no rows)
CALL occ.retry('SELECT id FROM account WHERE id <= 2 ORDER BY id', result => NULL);
CALL occ.retry('SELECT 7 AS kept; DO $$BEGIN PERFORM 1; END$$', result => NULL);
-- the same body without result returns nothing, and with the other outputs too
CALL occ.retry('SELECT id FROM account WHERE id = 1');
CALL occ.retry('SELECT id FROM account WHERE id = 1', result => NULL, attempts => NULL, slept => NULL);

-- 2. Only the attempt that committed counts: each attempt returns different
-- rows (its number); the first two fail, the third commits
CALL occ.retry('SELECT nextval($$result_seq$$);
                INSERT INTO audit VALUES (occ.attempt(), $$body$$);
                SELECT result_fail_until(3);
                SELECT occ.attempt() AS attempt, currval($$result_seq$$) AS execution',
               result => NULL, attempts => NULL, slept => NULL) \gset
SELECT :'result' AS result, :attempts AS attempts;
-- only the committed attempt's write is there
SELECT * FROM audit;
-- a SELECT of a void function returns a row too (an empty string)
CALL occ.retry('SELECT 1 AS one; SELECT result_fail_until(0)', result => NULL);

-- 3. From PL/pgSQL: variables receive the outputs
SELECT setval('result_seq', 1, false);
DO $do$
DECLARE
  r jsonb;
  a int;
  s interval;
BEGIN
  CALL occ.retry('UPDATE account SET balance = balance + 1 WHERE id = $1 RETURNING balance', result => r,
                 params => row(2));
  RAISE NOTICE 'result %', r;
  CALL occ.retry('SELECT nextval($$result_seq$$); SELECT result_fail_until(2);
                  SELECT occ.attempt() AS attempt', result => r, attempts => a, slept => s);
  RAISE NOTICE 'result %, attempts %, slept something: %', r, a, s > '0';
  CALL occ.retry('UPDATE account SET balance = balance WHERE id = 2', result => r);
  RAISE NOTICE 'no rows returned: %', r IS NULL;
END $do$;

-- 4. Types: rows become objects as row_to_json() makes them.  jsonb keeps
-- numbers as numeric, exactly; NaN and infinities become strings; NULL,
-- nested rows, arrays and json stay structured; other types are their text
-- output; of two columns with one name the last is kept
SET timezone = 'UTC';
SET intervalstyle = 'iso_8601';
CALL occ.retry($$SELECT 12345678901234567890.000000000000000001::numeric AS exact,
                        1e400::numeric AS huge, 'NaN'::numeric AS nan, '-Infinity'::float8 AS minus_inf,
                        0.1::float8 AS float, 9223372036854775807::bigint AS bigint,
                        NULL::text AS nothing, true AS bool,
                        '2026-11-21 10:00:00+00'::timestamptz AS ts, '1 day 2 hours'::interval AS iv,
                        '\xdeadbeef'::bytea AS bytes, ARRAY[1, NULL, 3] AS arr, row(1, 'x') AS rec,
                        '{"a": [1, 2]}'::json AS js, 'x'::text AS dup, 'y'::text AS dup,
                        '(1,2)'::point AS point$$, result => NULL);
RESET timezone;
RESET intervalstyle;

-- 5. Size: a large result is fine; occ.max_result_size (JSON text) bounds it.
-- Beyond it the attempt fails with 54000 and is rolled back: nothing is
-- committed whose result is lost
DO $do$
DECLARE
  r jsonb;
BEGIN
  CALL occ.retry('SELECT g, repeat($$x$$, 100) AS pad FROM generate_series(1, 20000) g', result => r);
  RAISE NOTICE '% rows, last %', jsonb_array_length(r), r -> -1 -> 'g';
END $do$;
-- the jsonb is made row by row, in jsonb's binary format: it is what jsonb
-- makes of the whole text (rows of odd lengths, NULLs, numbers, nesting,
-- none; more than 32 rows, as jsonb stores every 32nd element's offset)
DO $do$
DECLARE
  q text := $$SELECT g, repeat('x', g % 7) AS s, CASE WHEN g % 3 = 0 THEN g / 7.0 END AS n,
                     ARRAY[g, g + 1] AS a FROM generate_series(1, 100) g$$;
  r jsonb;
  expected jsonb;
BEGIN
  CALL occ.retry(q, result => r);
  EXECUTE format('SELECT json_agg(x ORDER BY g)::jsonb FROM (%s) x', q) INTO expected;
  RAISE NOTICE 'as jsonb makes it: % (size %), through its text: %, row 64: %',
    r = expected, pg_column_size(r) = pg_column_size(expected), r = r::text::jsonb, r -> 63;
  CALL occ.retry('SELECT FROM generate_series(1, 40)', result => r);
  RAISE NOTICE 'rows without columns: %', r = (SELECT json_agg('{}'::json)::jsonb FROM generate_series(1, 40));
END $do$;
SET occ.max_result_size = '1kB';
SHOW occ.max_result_size;
\set VERBOSITY default
CALL occ.retry('INSERT INTO audit VALUES (0, $$too big$$);
                SELECT g, repeat($$x$$, 100) AS pad FROM generate_series(1, 100) g', result => NULL);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS too_big_committed FROM audit WHERE note = 'too big';
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
-- only the last statement that returns rows counts: an earlier one may
-- exceed the limit
CALL occ.retry('SELECT repeat($$x$$, 10000) AS big; SELECT 1 AS small', result => NULL);
-- the form without result is not bounded by it
CALL occ.retry('SELECT g, repeat($$x$$, 100) AS pad FROM generate_series(1, 100) g');
RESET occ.max_result_size;
-- nor is a result whose text would not fit in 1 GB: a JSON number prints in
-- full (1e130000: 130,001 digits), so 83 kB of JSON would print as 1.08 GB
-- (0.7.0 committed, then failed to send it: an error for committed work)
CALL occ.retry('INSERT INTO audit VALUES (0, $$too long$$);
                SELECT ($$[$$ || repeat($$1e130000,$$, 8300) || $$1]$$)::json AS j', result => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS too_long_committed FROM audit WHERE note = 'too long';
-- out of range (1 kB to 256 MB, jsonb's limit): 22023 (the message's
-- wording differs between PostgreSQL versions)
\set VERBOSITY sqlstate
SET occ.max_result_size = 0;
SET occ.max_result_size = '1GB';
\set VERBOSITY terse

-- 6. occ.attempt(): NULL outside a body, also after a call, a give-up and an
-- error; inside, in what the body calls (functions, triggers)
SELECT occ.attempt() AS outside;
CREATE FUNCTION audit_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.attempt := occ.attempt();
  RETURN NEW;
END $$;
CREATE TRIGGER audit_attempt BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION audit_attempt();
TRUNCATE audit;
SELECT setval('result_seq', 1, false);
CALL occ.retry('SELECT nextval($$result_seq$$); INSERT INTO audit VALUES (NULL, $$from a trigger$$);
                SELECT result_fail_until(4)');
SELECT * FROM audit;
SELECT occ.attempt() AS after_a_call;
CALL occ.retry('SELECT result_fail_until(1000)', max_attempts => 2);
SELECT occ.attempt() AS after_a_give_up;
CALL occ.retry('SELECT 1 / 0', result => NULL);
SELECT occ.attempt() AS after_an_error;
-- occ.retry cannot run inside a body (the body is one transaction)
\set VERBOSITY default
CALL occ.retry($$DO 'BEGIN CALL occ.retry(''SELECT 1''); END'$$);
\set VERBOSITY terse
SELECT occ.attempt() AS after_a_nested_call;
-- a body takes a different path on a late attempt
SELECT setval('result_seq', 1, false);
CALL occ.retry('SELECT nextval($$result_seq$$);
                SELECT CASE WHEN occ.attempt() < 3 THEN result_fail_until(1000) END;
                SELECT $$took the late path$$ AS path, occ.attempt() AS attempt', result => NULL);

DROP TRIGGER audit_attempt ON audit;
DROP FUNCTION audit_attempt(), result_fail_until(int);
DROP TABLE account, audit;
DROP SEQUENCE result_seq;
RESET occ.base_delay;
RESET occ.contention;
