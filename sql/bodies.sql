-- What a body may contain: statements are analysed when they run, so a
-- statement may use what an earlier one created; unsupported statements get
-- a clear error; parameters of unknown type are bound as text.
SET occ.contention = 'backoff';
CREATE TABLE body_log (n int, note text);

-- a statement may use a table that an earlier statement of the body creates
-- (the whole body used to be analysed before it ran: 42P01), and kept plans
-- follow the table when it is created again by the next call
CALL occ.retry('CREATE TEMP TABLE body_t ON COMMIT DROP AS SELECT 1 AS n;
                INSERT INTO body_log SELECT n, $$temp$$ FROM body_t');
CALL occ.retry('CREATE TEMP TABLE body_t ON COMMIT DROP AS SELECT 1 AS n;
                INSERT INTO body_log SELECT n, $$temp$$ FROM body_t');
CALL occ.retry('CREATE TABLE body_t2 (n int); INSERT INTO body_t2 VALUES (3);
                INSERT INTO body_log SELECT n, $$created$$ FROM body_t2');
SELECT * FROM body_log ORDER BY n;
-- a column added by an earlier statement (42703 before)
CALL occ.retry('ALTER TABLE body_t2 ADD COLUMN m int; UPDATE body_t2 SET m = n + 1;
                INSERT INTO body_log SELECT m, $$altered$$ FROM body_t2');
SELECT * FROM body_log WHERE note = 'altered';
DROP TABLE body_t2;
TRUNCATE body_log;

-- a syntax error is reported at its place in the body, before any statement runs
CALL occ.retry('INSERT INTO body_log VALUES (1, $$partial$$);
                SELEC 2');
SELECT count(*) AS partial_rows FROM body_log;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
-- empty bodies and empty statements do nothing, and commit
CALL occ.retry('');
CALL occ.retry(';; ;');
SELECT attempts, outcome FROM occ.last_retry();

-- parameters of type unknown (untyped literals: row('x'), row(NULL)) are
-- bound as text; this was an internal error (XX000, "failed to find
-- conversion function from unknown to ...")
CALL occ.retry('INSERT INTO body_log VALUES (1, $1)', params => row('x'));
CALL occ.retry('INSERT INTO body_log VALUES (2, $1)', params => row(NULL));
CALL occ.retry('INSERT INTO body_log VALUES ($1::int, $2)', params => row('3', 'cast in the body'));
CALL occ.retry('INSERT INTO body_log VALUES ($1, $2)', params => row('4'::int, 'cast in params'));
SELECT * FROM body_log ORDER BY n;
-- where text does not fit, PostgreSQL says so, with a hint
CALL occ.retry('INSERT INTO body_log VALUES ($1, $2)', params => row('5', 'x'));
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('SELECT * FROM body_log WHERE n = $1', params => row('5'));
\echo :LAST_ERROR_SQLSTATE
TRUNCATE body_log;

-- COPY from or to the client cannot run in a body (there is no client): a
-- clear error (0A000) before anything runs, not an internal one (XX000,
-- "SPI_execute_plan failed: SPI_ERROR_COPY"); COPY to a server file works
CALL occ.retry('INSERT INTO body_log VALUES (1, $$partial$$); COPY body_log FROM STDIN');
\echo :LAST_ERROR_SQLSTATE
CALL occ.retry('COPY (SELECT 1) TO STDOUT');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS partial_rows FROM body_log;
CALL occ.retry('COPY (SELECT 1) TO $$/dev/null$$');
