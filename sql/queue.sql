-- Queue mode (contention => 'queue'): single-session behaviour.  Queueing
-- behind other sessions is in the isolation specs (test/specs/queue_*.spec),
-- waits being interrupted in test/interrupt.sh.

CREATE TABLE qcounter (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO qcounter VALUES (1, 0);

-- A gate is an advisory lock whose objsubid (field4 of the tag) is 20291
CREATE VIEW gates AS
  SELECT pid = pg_backend_pid() AS mine, mode, granted
    FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291;

-- fails with a serialization failure unless this backend holds a gate: the
-- first (ungated) attempt fails, a gated one commits
CREATE FUNCTION conflict_until_gated() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM gates WHERE mine AND granted) THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;

SELECT occ.stats_reset();

-- After a retryable failure a queue-mode call waits for the gate of its key
-- instead of sleeping (backoff of 10 minutes: a sleep would show), keeps it
-- for its next attempt, and releases it when it commits.
CALL occ.retry('SELECT conflict_until_gated(); UPDATE qcounter SET v = v + 1',
               contention => 'queue', key => 'qcounter:1',
               base => '10min', cap => '10min', jitter => 'none',
               attempts => NULL, slept => NULL);
SELECT attempts, slept, outcome, waited < '10min' AS waited_briefly FROM occ.last_retry();
SELECT * FROM gates;
-- A call that waits for its gate before its first attempt (its key is hot:
-- three failures in a row) first analyses the statements of a body new to
-- the session, and forgets them (the catalogs they read stay cached), in a
-- transaction rolled back before the wait: each statement still runs as
-- analysed after the ones before it have run (the temporary table that the
-- first creates is the one the second fills, not the table of the same
-- name in public); an error found early is the attempt's to meet
CREATE FUNCTION fail_thrice() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF occ.attempt() <= 3 THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
CREATE TABLE shadowed (v int);
SELECT occ.setseed(0.5);   -- no probe among the calls below
CALL occ.retry('SELECT fail_thrice()', contention => 'queue', key => 'warm:1',
               base => '1ms', cap => '1ms');
CALL occ.retry('CREATE TEMP TABLE shadowed (v int); INSERT INTO shadowed VALUES (1)',
               contention => 'queue', key => 'warm:1');
SELECT (SELECT count(*) FROM public.shadowed) AS in_public,
       (SELECT count(*) FROM pg_temp.shadowed) AS in_temp;
CALL occ.retry('SELECT * FROM not_yet_there', contention => 'queue', key => 'warm:1');
SELECT attempts, outcome, last_sqlstate FROM occ.last_retry();
CALL occ.retry('SELECT 1', contention => 'queue', key => 'warm:1', isolation => 'repeatable read',
               attempts => NULL, slept => NULL);
-- each of them queued before its first attempt
SELECT query, calls, attempts, queued FROM occ.stats
 WHERE query LIKE '%shadowed%' OR query LIKE '%not_yet_there%' OR query = 'SELECT 1'
 ORDER BY query COLLATE "C";
-- The rehearsal before the wait plans the statements too, and forgets the
-- plans: the planner's reads of the catalogs (indexes, statistics, the
-- details of functions and operators) are not made under the gate either.
-- The planner folds an immutable function of constants, here one that
-- counts its calls in a sequence (which no rollback undoes): planned twice
-- by a call that waits for its gate before its first attempt (the
-- rehearsal, the attempt), not again for a body the session has planned
-- already, and once by a call that runs at once (its key is cold)
CREATE SEQUENCE planned;
CREATE FUNCTION count_planning(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  PERFORM nextval('planned');
  RETURN $1;
END $$;
-- (the key's three failures heat it for about a second: heated again just
-- before each call, so that a slow machine's pauses do not cool it)
CALL occ.retry('SELECT fail_thrice()', contention => 'queue', key => 'warm:1',
               base => '1ms', cap => '1ms');
CALL occ.retry('SELECT count_planning(1)', contention => 'queue', key => 'warm:1');
SELECT last_value AS plannings_gated FROM planned;
CALL occ.retry('SELECT fail_thrice()', contention => 'queue', key => 'warm:1',
               base => '1ms', cap => '1ms');
CALL occ.retry('SELECT count_planning(1)', contention => 'queue', key => 'warm:1');
SELECT last_value AS plannings_gated_again FROM planned;
ALTER SEQUENCE planned RESTART;
CALL occ.retry('SELECT count_planning(2)', contention => 'queue', key => 'cold:1');
SELECT last_value AS plannings_cold, is_called FROM planned;
SELECT query, queued FROM occ.stats WHERE query LIKE '%count_planning%' ORDER BY query COLLATE "C";
DROP FUNCTION count_planning(int);
DROP SEQUENCE planned;
DROP FUNCTION fail_thrice();
DROP TABLE pg_temp.shadowed, public.shadowed;
-- the same through the setting, with keys learned (no key given): a few
-- failures are not enough to queue (the call backs off 1 ms); after eight
-- (decaying: eight or nine) the learner finds the body hot (its attempts
-- fail, carrying no value that the others do not: $1 is 1 in all of them)
-- and the call waits on the body's gate (learner.c)
SET occ.contention = 'queue';
CALL occ.retry('SELECT conflict_until_gated(); UPDATE qcounter SET v = v + 1 WHERE id = $1',
               params => row(1), base => '1ms', cap => '1ms', jitter => 'none');
SELECT attempts BETWEEN 9 AND 12 AS after_eight_failures, outcome FROM occ.last_retry();
SELECT learned_key FROM occ.stats WHERE query LIKE '%WHERE id = $1';
RESET occ.contention;
-- backoff mode sleeps instead: every attempt fails, nobody gives a gate
CALL occ.retry('SELECT conflict_until_gated()', max_attempts => 3,
               base => '1ms', jitter => 'none', contention => 'backoff');
SELECT attempts, slept >= '3ms' AS slept_1ms_then_2ms, outcome FROM occ.last_retry();
SELECT v FROM qcounter;

-- A call that gives up or fails releases its gate too
CALL occ.retry('SELECT conflict_until_gated(); SELECT 1/0', contention => 'queue', key => 'q');
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
CALL occ.retry($$SELECT conflict_until_gated();
                 DO 'BEGIN RAISE EXCEPTION USING ERRCODE = $x$40001$x$, MESSAGE = $x$always$x$; END'$$,
               contention => 'queue', key => 'q', max_attempts => 3, base => '1us', cap => '1us');
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
SELECT * FROM gates;

-- A body that calls pg_advisory_unlock_all() releases the gate behind
-- occ.retry's back: no warning, nothing left held, the update done once
SELECT pg_advisory_lock(7);
CALL occ.retry('SELECT conflict_until_gated(); SELECT pg_advisory_unlock_all(); UPDATE qcounter SET v = v + 1',
               contention => 'queue', key => 'qcounter:1');
SELECT attempts, outcome FROM occ.last_retry();
SELECT * FROM gates;
SELECT count(*) AS advisory_locks_left FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT v FROM qcounter;

-- occ.stats: calls that took the gate, and the time they waited
SELECT query, calls, commits, gave_up, errors, attempts > 2 AS retried, queued, total_wait_time >= 0 AS wait_time,
       total_sleep_time = 0 AS no_sleep, attempts_histogram
  FROM occ.stats WHERE query LIKE '%conflict_until_gated%' ORDER BY query COLLATE "C";

-- occ.gate(key): the same gate, held until the end of the transaction
BEGIN;
SELECT occ.gate('qcounter:1');
SELECT * FROM gates;
SELECT occ.gate('qcounter:1');   -- held already: returns at once
COMMIT;
SELECT * FROM gates;
-- like any lock, a gate taken after a savepoint goes at ROLLBACK TO that
-- savepoint (or when a PL/pgSQL block with an EXCEPTION clause catches an
-- error, a savepoint too), before the transaction ends; RELEASE keeps it
BEGIN;
SAVEPOINT s;
SELECT occ.gate('qcounter:1');
ROLLBACK TO s;
SELECT * FROM gates;
DO $$
BEGIN
  PERFORM occ.gate('qcounter:1');
  RAISE division_by_zero;
EXCEPTION WHEN division_by_zero THEN
  NULL;
END $$;
SELECT * FROM gates;
SAVEPOINT s;
SELECT occ.gate('qcounter:1');
RELEASE s;
SELECT * FROM gates;
COMMIT;
SELECT * FROM gates;
-- a user's advisory locks never collide with gates (objsubid 1 and 2)
BEGIN;
SELECT occ.gate('k'), pg_advisory_xact_lock(1), pg_advisory_xact_lock(1, 2);
SELECT objsubid, mode, granted FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY objsubid;
COMMIT;

-- Bad input: 22023 or 22004, with a hint (the SQLSTATE echoed after each)
\set VERBOSITY default
CALL occ.retry('SELECT 1', contention => 'fifo');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', contention => '');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT 1', contention => 'queue', key => '');
\echo :LAST_ERROR_SQLSTATE
-- (a key with backoff is no error: a retry that the retry budget refuses
-- waits on the key's gate, see budget.sql)
CALL occ.retry('SELECT 1', contention => 'backoff', key => 'k');
SELECT occ.gate(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.gate('');
\echo :LAST_ERROR_SQLSTATE
SET occ.contention = 'fifo';
\echo :LAST_ERROR_SQLSTATE
-- a key without contention is fine when the setting says backoff: unused
SET occ.contention = 'backoff';
CALL occ.retry('SELECT 1', key => 'k');
RESET occ.contention;
-- spelled in any case, like the other options
CALL occ.retry('SELECT 1', contention => 'QUEUE');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
