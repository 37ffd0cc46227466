-- A body that writes to a foreign table is not run again after a failure at
-- COMMIT: postgres_fdw commits the remote transaction at pre-commit, before
-- the local serializable check, so the remote half may have committed.
-- occ.retry raises 40003 (statement_completion_unknown), which clients do
-- not retry, with the failure in the detail, and counts a give-up.  What the
-- attempt wrote is seen as it runs: its statements, the functions and
-- triggers they call, COPY FROM and TRUNCATE, whatever the session's kept
-- plans were prepared for.
-- postgres_fdw through a loopback server (this database, over the Unix
-- socket, as the superuser running the tests).
SET occ.contention = 'backoff';
\set SHOW_CONTEXT never
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
  EXECUTE format('CREATE SERVER occ_loopback FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L)',
                 split_part(current_setting('unix_socket_directories'), ',', 1),
                 current_setting('port'), current_database());
END $$;
CREATE USER MAPPING FOR CURRENT_USER SERVER occ_loopback;
CREATE TABLE fdw_a (v int);
CREATE TABLE fdw_b (v int);
CREATE FOREIGN TABLE fdw_ft_a (v int) SERVER occ_loopback OPTIONS (table_name 'fdw_a');
CREATE FOREIGN TABLE fdw_ft_b (v int) SERVER occ_loopback OPTIONS (table_name 'fdw_b');

-- a write skew between the local transaction L (serializable) and its remote
-- one R (serializable too, as postgres_fdw makes it): L reads fdw_a and
-- writes fdw_b; R reads fdw_b and writes fdw_a (with the statement given).
-- At COMMIT, R commits first and L fails with 40001.  Retried, every attempt
-- would write to fdw_a again (3 rows after 3 attempts): 40003 is raised at
-- once, the failure and why in its detail.
CREATE PROCEDURE fdw_skew(remote_write text) LANGUAGE plpgsql AS $$
BEGIN
  CALL occ.retry('SELECT count(*) FROM fdw_a;
                  INSERT INTO fdw_b VALUES (1);
                  SELECT count(*) FROM fdw_ft_b; ' || remote_write,
                 max_attempts => 3, base => '1ms');
END $$;
-- what the call did: its outcome, and the rows it left remotely and locally
CREATE FUNCTION fdw_outcome(OUT attempts int, OUT last_sqlstate text, OUT outcome text,
                            OUT remote_rows bigint, OUT local_rows bigint)
LANGUAGE sql AS $$
  SELECT attempts, last_sqlstate, outcome,
         (SELECT count(*) FROM fdw_a), (SELECT count(*) FROM fdw_b)
    FROM occ.last_retry()
$$;

CALL fdw_skew('INSERT INTO fdw_ft_a VALUES (1)');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM fdw_outcome();
SELECT calls, gave_up, errors FROM occ.stats WHERE query LIKE '%fdw_ft_b; INSERT INTO fdw_ft_a VALUES (1)';
TRUNCATE fdw_a, fdw_b;

\set VERBOSITY sqlstate
-- a table dropped and created again as a foreign table, by the same
-- session: the body's kept plans were prepared for the local one (which
-- the first call writes, and commits)
CREATE TABLE fdw_t (v int);
CALL fdw_skew('INSERT INTO fdw_t VALUES (1)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_b;
DROP TABLE fdw_t;
CREATE FOREIGN TABLE fdw_t (v int) SERVER occ_loopback OPTIONS (table_name 'fdw_a');
CALL fdw_skew('INSERT INTO fdw_t VALUES (1)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;

-- a foreign partition attached after the plans were prepared (for a
-- partitioned table whose rows went to its local default partition)
CREATE TABLE fdw_p (v int) PARTITION BY RANGE (v);
CREATE TABLE fdw_p_local PARTITION OF fdw_p DEFAULT;
CALL fdw_skew('INSERT INTO fdw_p VALUES (150)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_p, fdw_b;
CREATE FOREIGN TABLE fdw_p_remote (v int) SERVER occ_loopback OPTIONS (table_name 'fdw_a');
ALTER TABLE fdw_p ATTACH PARTITION fdw_p_remote FOR VALUES FROM (100) TO (200);
CALL fdw_skew('INSERT INTO fdw_p VALUES (150)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;

-- a write made by a function, and one made by a trigger
CREATE FUNCTION fdw_write(v int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fdw_ft_a VALUES (v);
END $$;
CALL fdw_skew('SELECT fdw_write(1)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;
CREATE TABLE fdw_c (v int);
CREATE FUNCTION fdw_c_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fdw_ft_a VALUES (NEW.v);
  RETURN NULL;
END $$;
CREATE TRIGGER fdw_c_remote AFTER INSERT ON fdw_c FOR EACH ROW EXECUTE FUNCTION fdw_c_trigger();
CALL fdw_skew('INSERT INTO fdw_c VALUES (1)');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;

-- COPY FROM into a foreign table
CALL fdw_skew('COPY fdw_ft_a FROM PROGRAM $$echo 1$$');
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;

-- TRUNCATE of a foreign table: named as the first foreign table written
CREATE TABLE fdw_d (v int);
CREATE FOREIGN TABLE fdw_ft_d (v int) SERVER occ_loopback OPTIONS (table_name 'fdw_d');
\set VERBOSITY default
CALL fdw_skew('TRUNCATE fdw_ft_d; INSERT INTO fdw_ft_a VALUES (1)');
\set VERBOSITY sqlstate
SELECT * FROM fdw_outcome();
TRUNCATE fdw_a, fdw_b;
\set VERBOSITY default

-- a failure in a statement (not at COMMIT) rolls the remote transaction back
-- too: it is retried
CREATE SEQUENCE fdw_seq;
CREATE FUNCTION fdw_fail_once() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('fdw_seq') = 1 THEN
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'simulated conflict';
  END IF;
END $$;
CALL occ.retry('INSERT INTO fdw_ft_a VALUES (2); SELECT fdw_fail_once()', base => '1ms');
SELECT attempts, outcome FROM occ.last_retry();
SELECT v FROM fdw_a;

DROP FUNCTION fdw_fail_once();
DROP SEQUENCE fdw_seq;
DROP PROCEDURE fdw_skew(text);
DROP FUNCTION fdw_outcome();
DROP FUNCTION fdw_write(int);
DROP TABLE fdw_c;
DROP FUNCTION fdw_c_trigger();
DROP TABLE fdw_p;
DROP FOREIGN TABLE fdw_ft_a, fdw_ft_b, fdw_ft_d, fdw_t;
DROP TABLE fdw_a, fdw_b, fdw_d;
DROP USER MAPPING FOR CURRENT_USER SERVER occ_loopback;
DROP SERVER occ_loopback;
DROP EXTENSION postgres_fdw;
