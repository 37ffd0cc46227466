-- Keys (queue mode without a key): what the learner finds, and where a call
-- waits.  Single-session: failures are made by the bodies themselves (a
-- serialization failure raised in the first attempt of chosen calls);
-- queueing behind other sessions is in test/specs/keys_*.spec.

CREATE TABLE kcounter (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
INSERT INTO kcounter SELECT i, 0 FROM generate_series(1, 100) AS i;

-- fails (40001) in the first attempt when told to
CREATE FUNCTION fail_first(really boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF really AND occ.attempt() = 1 THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;

-- the gates this backend holds, as the body sees them
CREATE FUNCTION my_gates() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pg_locks
   WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291 AND granted $$;

-- a call of the body that updates row $1, failing once when $1 is 42
CREATE PROCEDURE kcall(id int) LANGUAGE plpgsql AS $$
DECLARE r jsonb;
BEGIN
  CALL occ.retry('SELECT fail_first($1 = 42); UPDATE kcounter SET n = n + 1 WHERE id = $1; SELECT my_gates() AS gates',
                 result => r, params => row(id), contention => 'queue', base => '1ms', cap => '1ms');
  RAISE NOTICE 'id %: % gate(s)', id, r->0->>'gates';
END $$;

SELECT occ.stats_reset();
SELECT occ.setseed(0.5);   -- no probe among the calls below

-- 1. The learner's decision after a sequence of failures on one value.
-- The body is unknown until it fails: the first failure on 42 makes the
-- learner track the body and the values of the failed attempt; calls on
-- other rows then count attempts that do not carry 42; the second failure
-- on 42 makes ($1, 42) hot: the failures concentrate on it.
SET client_min_messages = warning;
CALL kcall(42);
CALL kcall(1); CALL kcall(2); CALL kcall(3); CALL kcall(4);
CALL kcall(5); CALL kcall(6); CALL kcall(7); CALL kcall(8);
CALL kcall(42);
SELECT learned_key FROM occ.stats WHERE query LIKE '%kcounter%';
-- learned_key carries parameter values: a role with pg_read_all_stats
-- sees another role's positions, not its values (as pg_stat_statements
-- normalises constants); the role that called sees them
CREATE ROLE occ_keys_reader;
GRANT pg_read_all_stats TO occ_keys_reader;
SET ROLE occ_keys_reader;
SELECT learned_key FROM occ.stats WHERE query LIKE '%kcounter%';
RESET ROLE;
DROP ROLE occ_keys_reader;
-- from now on a call that carries 42 takes the gate of (body, 42) before its
-- first attempt (and commits at once); a call that does not runs ungated
SET client_min_messages = notice;
CALL kcall(42);
CALL kcall(9);
SELECT sum(n) AS updates FROM kcounter;

-- 2. A value maps to one gate whatever the session's settings: the same
-- instant under two TimeZones (and DateStyles) takes the same gate.  The
-- body returns the gate it holds.
CREATE TABLE kevent (at timestamptz PRIMARY KEY, n int NOT NULL DEFAULT 0);
INSERT INTO kevent VALUES ('2026-01-01 12:00:00+00'), ('2026-01-02 12:00:00+00');
CREATE PROCEDURE kevent_call(at timestamptz, INOUT gate text) LANGUAGE plpgsql AS $$
DECLARE r jsonb;
BEGIN
  CALL occ.retry($b$SELECT fail_first($1 = '2026-01-01 12:00:00+00'); UPDATE kevent SET n = n + 1 WHERE at = $1;
                   SELECT string_agg(classid || '/' || objid, ',') AS gate FROM pg_locks
                    WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291 AND granted$b$,
                 result => r, params => row(at), contention => 'queue', base => '1ms', cap => '1ms');
  gate := r->0->>'gate';
END $$;
SET TimeZone = 'UTC';
CALL kevent_call('2026-01-01 12:00:00+00', NULL) \gset learning_
CALL kevent_call('2026-01-02 12:00:00+00', NULL) \gset learning_
CALL kevent_call('2026-01-02 12:00:00+00', NULL) \gset learning_
CALL kevent_call('2026-01-01 12:00:00+00', NULL) \gset learning_
-- learned: the instant, shown in the learning session's TimeZone
SELECT learned_key FROM occ.stats WHERE query LIKE '%kevent%';
CALL kevent_call('2026-01-01 12:00:00+00', NULL) \gset utc_
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
CALL kevent_call('2026-01-01 07:00:00-05', NULL) \gset ny_
SELECT :'utc_gate' IS NOT NULL AS gated_in_utc, :'utc_gate' = :'ny_gate' AS same_gate_in_new_york;
RESET TimeZone;
RESET DateStyle;

-- 3. Only failures the call would retry heat a key: a body that fails with
-- unique_violation (23505) at every call is not learned at all
CREATE TABLE kunique (id int PRIMARY KEY);
INSERT INTO kunique VALUES (1);
CALL occ.retry('INSERT INTO kunique VALUES ($1)', params => row(1), contention => 'queue');
CALL occ.retry('INSERT INTO kunique VALUES ($1)', params => row(1), contention => 'queue');
CALL occ.retry('INSERT INTO kunique VALUES ($1)', params => row(1), contention => 'queue');
SELECT calls, errors, queued, learned_key FROM occ.stats WHERE query LIKE '%kunique%';
-- ... unless the call retries it: then it is contention like any other
CALL occ.retry('INSERT INTO kunique VALUES ($1)', params => row(1), contention => 'queue',
               retry_on => '{23505}', max_attempts => 12, base => '1ms', cap => '1ms');
SELECT learned_key FROM occ.stats WHERE query LIKE '%kunique%';

-- 4. A key given by the user always wins: no learning, its own gate
CALL occ.retry('SELECT fail_first(true); SELECT my_gates() AS gates', result => NULL,
               contention => 'queue', key => 'mine', base => '1ms', cap => '1ms');
SELECT attempts, outcome FROM occ.last_retry();
SELECT learned_key IS NULL AS nothing_learned FROM occ.stats WHERE query LIKE '%fail_first(true)%';

-- 5. key takes one key, of any type (as its text), or an array of keys;
-- bad input: 22023, 22004 or 54000, with a hint (the SQLSTATE echoed after each)
CALL occ.retry('SELECT my_gates() AS gates', result => NULL, contention => 'queue',
               key => ARRAY['keys:a', 'keys:b', 'keys:a']);
CALL occ.retry('SELECT 1', contention => 'queue', key => 42);
\set VERBOSITY default
CALL occ.retry('SELECT 1', contention => 'queue', key => '{}'::text[]);
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', contention => 'queue', key => ARRAY['a', NULL]);
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', contention => 'queue', key => ARRAY['a', '']);
\echo :LAST_ERROR_SQLSTATE
-- at most 1000 keys (54000)
CALL occ.retry('SELECT 1', contention => 'queue', key => string_to_array(repeat('k,', 1000) || 'k', ','));
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse

-- 6. While the body is hot (every call fails, on no value in particular),
-- failures on one value do not make that value hot: under a hot body only
-- the probes run ungated, too few to say where failures concentrate, and a
-- value made hot would let every other call run ungated.  The body says
-- what was learned at each attempt, after the failures before it.
CREATE FUNCTION fail_upto(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF occ.attempt() > 1 THEN
    RAISE NOTICE 'attempt %: learned %', occ.attempt(),
      (SELECT learned_key FROM occ.stats WHERE query LIKE '%fail_upto(CASE%');
  END IF;
  IF occ.attempt() <= n THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
CREATE PROCEDURE kbody(id int) LANGUAGE plpgsql AS $$
BEGIN
  CALL occ.retry('SELECT fail_upto(CASE WHEN $1 = 42 THEN 3 ELSE 1 END)', params => row(id),
                 contention => 'queue', base => '1ms', cap => '1ms');
END $$;
SET client_min_messages = warning;
DO $$ BEGIN FOR i IN 1..20 LOOP CALL kbody(i); END LOOP; END $$;
SELECT learned_key FROM occ.stats WHERE query LIKE '%fail_upto(CASE%';
DO $$ BEGIN FOR i IN 1..3 LOOP CALL kbody(42); END LOOP; END $$;
SET client_min_messages = notice;
CALL kbody(42);
SELECT learned_key FROM occ.stats WHERE query LIKE '%fail_upto(CASE%';

-- the learned value's text is cut at a character's end: '€' takes 3 bytes
-- in UTF-8 (0.7.0 cut one in its middle: occ.stats gave invalid UTF-8)
CREATE FUNCTION fail_euro(v text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF v LIKE '€%' AND occ.attempt() < 3 THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
  RETURN 1;
END $$;
SELECT format('CALL occ.retry(%L, params => row(%L::text), contention => %L)', 'SELECT fail_euro($1)', v, 'backoff')
  FROM unnest(array_cat(array_append(array(SELECT 'v' || g FROM generate_series(1, 12) g), repeat('€', 20)),
                        array_append(array(SELECT 'w' || g FROM generate_series(1, 12) g), repeat('€', 20)))) v \gexec
SELECT learned_key, octet_length(learned_key) AS bytes, convert_to(learned_key, 'UTF8') IS NOT NULL AS valid
  FROM occ.stats WHERE query LIKE '%fail_euro%';

DROP PROCEDURE kcall(int);
DROP PROCEDURE kevent_call(timestamptz, text);
DROP TABLE kcounter, kevent, kunique;
DROP PROCEDURE kbody(int);
DROP FUNCTION fail_first(boolean), fail_upto(int), fail_euro(text), my_gates();
