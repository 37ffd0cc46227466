-- SET LOCAL occ.key: the application's own transactions queue on the gate
-- of their key (src/retry/client.c).  Single-session behaviour: queueing behind
-- other sessions is in test/specs/key_order.spec, interrupted waits in
-- test/interrupt_key.sh.

-- the gates this session holds (a gate is an advisory lock whose objsubid
-- is 20291)
CREATE VIEW my_gates AS
  SELECT count(*) AS gates FROM pg_locks
   WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291 AND granted;

-- Refused, with a SQLSTATE and a hint, never ignored:
-- outside a transaction block (25P01)
SET LOCAL occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
-- for the session (55P02): it would outlive the transaction
SET occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
-- after the transaction has taken its snapshot (25001), at any isolation level
BEGIN;
SELECT 1;
SET LOCAL occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT 1;
SET LOCAL occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- in a subtransaction (25001)
BEGIN;
SAVEPOINT s;
SET LOCAL occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- an empty key (22023), also among several
BEGIN;
SET LOCAL occ.key = '';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'a', '';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- other keys in the same transaction (0A000); the same ones again, in any
-- order, are fine
BEGIN;
SET LOCAL occ.key = 'a', 'b';
SET LOCAL occ.key = 'b', 'a', 'a';
SET LOCAL occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- from a function or a procedure (55P02), or by any other way than SET
-- LOCAL (55P02): set_config(), a function's SET clause, ALTER ROLE ... SET
DO $$ BEGIN SET LOCAL occ.key = 'a'; END $$;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT set_config('occ.key', 'a', true);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CREATE FUNCTION keyed() RETURNS void LANGUAGE sql SET occ.key = 'a' AS 'SELECT';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE CURRENT_USER SET occ.key = 'a';
\echo :LAST_ERROR_SQLSTATE
-- resetting it is allowed, and sets no key
BEGIN;
SELECT set_config('occ.key', '', true);
SET LOCAL occ.key TO DEFAULT;
RESET occ.key;
SHOW occ.key;
COMMIT;

-- Accepted as the first statement of a transaction (SET TRANSACTION may come
-- before it), or of a multi-statement query (an implicit transaction block);
-- SHOW shows it until the transaction ends.  A key that is not hot takes no
-- gate: the transaction runs optimistically.
BEGIN;
SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;
SET LOCAL occ.key = 'account:1';
SHOW occ.key;
SELECT * FROM my_gates;
COMMIT;
SHOW occ.key;
SET LOCAL occ.key = 'account:1' \; SELECT current_setting('occ.key') AS key;

-- A transaction that fails with a retryable SQLSTATE (occ.retry_sqlstates:
-- 40001, 40P01) makes this session's next transaction with that key take
-- the gate of the key as it sets it, before its snapshot, and hold it until
-- it ends; a commit clears that
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL occ.key = 'heat:40001';
SELECT * FROM my_gates;
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL occ.key = 'heat:40001';
SELECT * FROM my_gates;
COMMIT;
SELECT * FROM my_gates;
-- a deadlock too, and the rollback of the transaction releases the gate
BEGIN;
SET LOCAL occ.key = 'heat:40P01';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'deadlock_detected', MESSAGE = 'simulated deadlock'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:40P01';
SELECT * FROM my_gates;
ROLLBACK;
SELECT * FROM my_gates;
-- the error that aborted the transaction counts, even when it was raised in
-- a subtransaction that the client then rolled back with the transaction
BEGIN;
SET LOCAL occ.key = 'heat:savepoint';
SAVEPOINT s;
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK TO SAVEPOINT s;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:savepoint';
SELECT * FROM my_gates;
COMMIT;
-- a unique violation does not (23505 is not retryable), nor a rollback
-- without error, nor an error caught in PL/pgSQL
BEGIN;
SET LOCAL occ.key = 'heat:23505';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'unique_violation', MESSAGE = 'simulated duplicate'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:23505';
SELECT * FROM my_gates;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:none';
DO $$ BEGIN
  RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'caught';
EXCEPTION WHEN serialization_failure THEN NULL;
END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:none';
SELECT * FROM my_gates;
ROLLBACK;
-- unless occ.retry_sqlstates says it is
SET occ.retry_sqlstates = '40001,40P01,23505';
BEGIN;
SET LOCAL occ.key = 'heat:23505';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'unique_violation', MESSAGE = 'simulated duplicate'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'heat:23505';
SELECT * FROM my_gates;
ROLLBACK;
RESET occ.retry_sqlstates;

-- Several keys: the transaction takes the gate of each, once, when one of
-- them failed last time
BEGIN;
SET LOCAL occ.key = 'transfer:1';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'transfer:2', 'transfer:1', 'transfer:2';
SHOW occ.key;
SELECT * FROM my_gates;
COMMIT;

-- The gate is occ.retry's and occ.gate()'s for the same key: the same lock
BEGIN;
SET LOCAL occ.key = 'shared';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'shared';
SELECT classid, objid FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291 \gset key_
COMMIT;
BEGIN;
SELECT occ.gate('shared');
SELECT classid = :key_classid AND objid = :key_objid AS same_lock FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = 20291;
COMMIT;

-- occ.key_stats: per role, database and key, the transactions, commits,
-- failures by SQLSTATE, those that took the gate and their wait.  A
-- transaction with several keys counts under each; occ.stats does not show
-- them, occ.stats_reset() clears them.
SELECT occ.stats_reset();
-- (retryable failures last: after them the key is hot for a while, and a
-- hot key's transactions queue but for a random probe)
BEGIN;
SET LOCAL occ.key = 'stats:1';
COMMIT;
BEGIN;
SET LOCAL occ.key = 'stats:1';
SELECT 1/0;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'stats:1';
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'stats:1';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'stats:1', 'stats:2';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'deadlock_detected', MESSAGE = 'simulated deadlock'; END $$;
ROLLBACK;
SELECT userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS mine,
       dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AS this_db,
       keyid IS NOT NULL AS has_keyid, key, transactions, commits, serialization_failures, deadlocks,
       other_failures, queued, total_wait_time >= 0 AS waited, max_wait_time <= total_wait_time AS max_le_total
  FROM occ.key_stats ORDER BY key;
SELECT count(*) AS key_rows_in_occ_stats FROM occ.stats WHERE query LIKE 'stats:%';
SELECT count(*) AS without_text FROM occ.key_stats(false) WHERE key IS NULL;
-- other roles see the counts, not the keys (unless pg_read_all_stats)
CREATE ROLE occ_key_stats_role;
SET ROLE occ_key_stats_role;
BEGIN;
SET LOCAL occ.key = 'stats:role';
COMMIT;
SELECT key, keyid IS NULL AS keyid_hidden, transactions FROM occ.key_stats ORDER BY key, transactions DESC;
RESET ROLE;
SELECT occ.stats_reset();
SELECT count(*) AS after_reset FROM occ.key_stats;
DROP ROLE occ_key_stats_role;

-- pg_occ reads a failure's SQLSTATE from the server's log hook, which sees
-- only logged errors: with log_min_messages above error, a WARNING (once
-- per session) says that failures go unseen, and they make nothing queue
SET log_min_messages = fatal;
BEGIN;
SET LOCAL occ.key = 'unlogged';
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict'; END $$;
ROLLBACK;
BEGIN;
SET LOCAL occ.key = 'unlogged';
SELECT * FROM my_gates;
COMMIT;
RESET log_min_messages;

-- a transaction that set occ.key cannot be prepared (its gates would
-- stay held until COMMIT PREPARED), and gives at most 1000 keys
BEGIN;
SET LOCAL occ.key = 'prepared';
PREPARE TRANSACTION 'occ_key_prepared';
SELECT count(*) AS prepared FROM pg_prepared_xacts;
SELECT gates AS gates_left FROM my_gates;
SELECT 'SET LOCAL occ.key = ' || string_agg(quote_literal('many:' || g), ', ') AS many_keys
  FROM generate_series(1, 1001) g \gset
BEGIN;
:many_keys;
ROLLBACK;

-- a parallel query in a transaction that set occ.key: its workers restore
-- the leader's settings, the key's too, which the check hook lets through
CREATE TABLE client_parallel AS SELECT g AS v FROM generate_series(1, 1000) g;
BEGIN;
SET LOCAL occ.key = 'parallel';
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', true) AS forced;
SELECT count(*), sum(v) FROM client_parallel;
COMMIT;
DROP TABLE client_parallel;

DROP VIEW my_gates;
