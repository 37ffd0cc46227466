-- What one role can do to the calls of another (README: "Who can delay
-- whom").  A role without privileges on a table must not delay the calls
-- that write it: occ.gate is not PUBLIC's, a failure that the call does not
-- retry (42501, 23505) does not make its key hot, and a key is hot in its
-- own database only.  Queueing behind another session's gate, and a role's
-- derived keys, are in test/specs/gate_roles.spec.
--
-- Whether a key is hot shows in occ.stats: a call of a hot key takes the
-- gate before its first attempt (queued), except one call in 64, decided by
-- a draw that occ.setseed makes repeatable.
SELECT occ.stats_reset();
CREATE ROLE occ_roles_owner;
CREATE ROLE occ_roles_other;
CREATE TABLE roles_t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO roles_t VALUES (1, 0);
ALTER TABLE roles_t OWNER TO occ_roles_owner;
GRANT USAGE ON SCHEMA public TO occ_roles_owner, occ_roles_other;
-- another database, where the keys of this one are not hot
\set regress_db :DBNAME
CREATE DATABASE occ_roles_db;

-- occ.gate needs EXECUTE, which PUBLIC has not; the owner of pg_occ grants it
SET ROLE occ_roles_other;
\set VERBOSITY default
SELECT occ.gate('roles_t:1');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
RESET ROLE;
GRANT EXECUTE ON FUNCTION occ.gate(text) TO occ_roles_owner;
SET ROLE occ_roles_owner;
BEGIN;
SELECT occ.gate('roles_t:1');
COMMIT;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION occ.gate(text) FROM occ_roles_owner;

-- A role without privileges on roles_t fails with 42501, again and again,
-- with the owner's key: the key does not get hot, so the owner's call runs
-- its first attempt without the gate
SET ROLE occ_roles_other;
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1', key => 'roles_t:1');
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1', key => 'roles_t:1');
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1', key => 'roles_t:1');
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1', key => 'roles_t:1');
SET ROLE occ_roles_owner;
SELECT occ.setseed(0.5);
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1', key => 'roles_t:1');
RESET ROLE;
SELECT userid::regrole AS role, calls, commits, errors, other_failures, queued
  FROM occ.stats WHERE query = 'UPDATE roles_t SET v = v + 1 WHERE id = 1' ORDER BY userid::regrole::text;

-- nor does a unique violation (23505), however often
SET ROLE occ_roles_owner;
CALL occ.retry('INSERT INTO roles_t VALUES (1, 0)', key => 'roles_t:insert');
CALL occ.retry('INSERT INTO roles_t VALUES (1, 0)', key => 'roles_t:insert');
CALL occ.retry('INSERT INTO roles_t VALUES (1, 0)', key => 'roles_t:insert');
CALL occ.retry('INSERT INTO roles_t VALUES (1, 0)', key => 'roles_t:insert');
SELECT occ.setseed(0.5);
CALL occ.retry('UPDATE roles_t SET v = v + 1 WHERE id = 1 /* insert */', key => 'roles_t:insert');
RESET ROLE;
SELECT calls, commits, queued FROM occ.stats WHERE query LIKE '%/* insert */';

-- Control: serialization failures (40001, retried) do make a key hot: 200
-- of them in one call (given up, with max_attempts), and the next call of
-- that key queues before its first attempt (the failures decay with a time
-- constant of 1 s: 200 keep the key hot for 5 s)
CALL occ.retry($$DO 'BEGIN RAISE EXCEPTION USING ERRCODE = ''40001'', MESSAGE = ''simulated conflict''; END'$$,
               key => 'roles_t:hot', max_attempts => 200, base => '1us', cap => '1us');
SELECT occ.setseed(0.5);
CALL occ.retry('SELECT 1 AS hot_here', key => 'roles_t:hot');
SELECT calls, commits, queued FROM occ.stats WHERE query = 'SELECT 1 AS hot_here';

-- and the same key in another database is not hot there
\c occ_roles_db
CREATE EXTENSION pg_occ;
SELECT occ.setseed(0.5);
CALL occ.retry('SELECT 1 AS cold_there', key => 'roles_t:hot');
SELECT calls, commits, queued FROM occ.stats WHERE query = 'SELECT 1 AS cold_there';
\c :regress_db
DROP DATABASE occ_roles_db WITH (FORCE);

SELECT v FROM roles_t;
DROP TABLE roles_t;
REVOKE USAGE ON SCHEMA public FROM occ_roles_owner, occ_roles_other;
DROP ROLE occ_roles_owner;
DROP ROLE occ_roles_other;
