-- A body that writes to a foreign table is not run again after a failure at
-- COMMIT: postgres_fdw commits the remote transaction at pre-commit, before
-- the local serializable check, so the remote half may have committed.
-- postgres_fdw through a loopback server (this database, over the Unix
-- socket, as the superuser running the tests).
SET occ.contention = 'backoff';
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
-- writes fdw_b; R reads fdw_b and writes fdw_a.  At COMMIT, R commits first
-- and L fails with 40001.  Retried, every attempt would insert into fdw_a
-- again (3 rows after 3 attempts): the failure is raised at once, with a
-- detail saying why.
CALL occ.retry('SELECT count(*) FROM fdw_a;
                INSERT INTO fdw_b VALUES (1);
                SELECT count(*) FROM fdw_ft_b;
                INSERT INTO fdw_ft_a VALUES (1)',
               max_attempts => 3, base => '1ms');
\echo :LAST_ERROR_SQLSTATE
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
SELECT (SELECT count(*) FROM fdw_a) AS remote_rows, (SELECT count(*) FROM fdw_b) AS local_rows;

TRUNCATE fdw_a, fdw_b;

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
DROP FOREIGN TABLE fdw_ft_a, fdw_ft_b;
DROP TABLE fdw_a, fdw_b;
DROP USER MAPPING FOR CURRENT_USER SERVER occ_loopback;
DROP SERVER occ_loopback;
DROP EXTENSION postgres_fdw;
