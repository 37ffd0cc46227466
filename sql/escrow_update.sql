-- Reservations from plain UPDATEs (src/escrow/update_shape.c,
-- reserve_update.c): UPDATE t SET c = c +/- e WHERE pk = v on a reservable
-- column reserves, with UPDATE's row count; every other shape is refused by
-- the column's guard.  A second session's UPDATE that does not wait is in
-- test/specs/escrow_update.spec; drivers and ORMs in test/apps/.
--
-- :ROW_COUNT is the count the command tag carries (UPDATE 1 or UPDATE 0);
-- a row that an UPDATE changed has this transaction's xid as its xmin, one
-- that it locked as its xmax; one that a reservation left alone has neither
-- (its xmax may be the fold's, which runs meanwhile).
\set VERBOSITY terse
CREATE TABLE item (id int PRIMARY KEY,
                   qty int NOT NULL CONSTRAINT item_qty_min CHECK (qty >= 0),
                   sold bigint NOT NULL DEFAULT 0 CONSTRAINT item_sold_max CHECK (sold <= 100),
                   name text);
INSERT INTO item VALUES (1, 50, 0, 'one'), (2, 5, 0, 'two');
SELECT occ.make_reservable('item', 'qty') AS qty_reservable, occ.make_reservable('item', 'sold') AS sold_reservable;
CREATE FUNCTION item_untouched(k int) RETURNS boolean LANGUAGE sql
    AS $$ SELECT pg_current_xact_id()::xid NOT IN (xmin, xmax) FROM item WHERE id = k $$;
-- the plan's lines, without what differs between versions (the actual
-- rows' format, buffers)
CREATE FUNCTION item_plan(sql text, run boolean DEFAULT false) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE format('EXPLAIN (COSTS OFF, ANALYZE %s, TIMING OFF, SUMMARY OFF, BUFFERS OFF) %s',
                               CASE WHEN run THEN 'on' ELSE 'off' END, sql) LOOP
        RETURN NEXT regexp_replace(line, ' \(actual .*\)$', '');
    END LOOP;
END $$;

-- 1. The shapes that reserve: UPDATE 1, the row neither changed nor locked
BEGIN;
UPDATE item SET qty = qty - 3 WHERE id = 1;
\echo :ROW_COUNT
UPDATE item SET qty = qty + 2 WHERE id = 1;
UPDATE item SET qty = 1 + qty WHERE 1 = id;
UPDATE item SET qty = COALESCE(qty, 0) - 1 WHERE item.id = 1;
UPDATE item SET qty = qty - 2::bigint WHERE id = 1::bigint;
UPDATE item AS i SET qty = i.qty - (1 + 1) WHERE i.id = 1;
UPDATE ONLY item SET qty = qty - length('ab') WHERE id = 1;
UPDATE item SET qty = qty - 1, sold = sold + 1 WHERE id = 1;
\echo :ROW_COUNT
SELECT item_untouched(1) AS row_neither_changed_nor_locked,
       occ.reserved_value('item', 'qty', 1) AS qty, occ.reserved_value('item', 'sold', 1) AS sold;
COMMIT;
SELECT occ.reserved_value('item', 'qty', 1) AS qty_committed;

-- no row has the key: UPDATE 0, nothing reserved (a NULL key matches none)
UPDATE item SET qty = qty - 1 WHERE id = 99;
\echo :ROW_COUNT
UPDATE item SET qty = qty - 1 WHERE id = NULL;
\echo :ROW_COUNT
SELECT count(*) AS entries_of_missing_rows FROM occ.reservations WHERE rel = 'item'::regclass AND key IN ('99');

-- 2. Refusals of a reservation are errors of the statement, as occ.reserve's
UPDATE item SET qty = qty - 1000 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE
UPDATE item SET sold = sold + 1000 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE
UPDATE item SET qty = qty - NULL WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE
-- nothing half-applied: the first column's reservation goes with the
-- statement that failed on the second
BEGIN;
SAVEPOINT s;
UPDATE item SET qty = qty - 1, sold = sold + 1000 WHERE id = 1;
ROLLBACK TO s;
SELECT occ.reserved_value('item', 'qty', 1) AS qty_unchanged, occ.reserved_value('item', 'sold', 1) AS sold_unchanged;
COMMIT;
BEGIN READ ONLY;
UPDATE item SET qty = qty - 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- sold out as an answer: occ.try_reserve() is false and the transaction
-- goes on; the same bounds
BEGIN;
SELECT occ.try_reserve('item', 'qty', 2, -6) AS sixth_of_five;
SELECT occ.try_reserve('item', 'qty', 2, -5) AS all_five;
SELECT occ.try_reserve('item', 'qty', 2, -1) AS one_more;
SELECT occ.reserved_value('item', 'qty', 2) AS qty_two;
ROLLBACK;
SELECT occ.try_reserve('item', 'qty', 99, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.try_reserve('item', 'name', 1, -1);
\echo :LAST_ERROR_SQLSTATE

-- 3. Every other shape that changes a reservable column is refused (55000)
UPDATE item SET qty = 5 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1, name = 'uno' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1 WHERE id = 1 AND name = 'one';
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1 WHERE name = 'one';
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1 WHERE id = 1 RETURNING qty;
\echo :LAST_ERROR_SQLSTATE
WITH u AS (UPDATE item SET qty = qty - 1 WHERE id = 1 RETURNING id) SELECT count(*) FROM u;
\echo :LAST_ERROR_SQLSTATE
WITH k AS (SELECT 1 AS id) UPDATE item SET qty = qty - 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1 FROM (VALUES (1)) v(k) WHERE id = v.k;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - (SELECT 1) WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - id WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty * 2 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE item SET qty = qty - 1 WHERE id = (SELECT 1);
\echo :LAST_ERROR_SQLSTATE
-- an operator of someone else's is no reservation, whatever it does
CREATE FUNCTION item_minus(int, int) RETURNS int LANGUAGE sql AS 'SELECT $1 - $2';
CREATE OPERATOR public.- (LEFTARG = int, RIGHTARG = int, FUNCTION = item_minus);
UPDATE item SET qty = qty OPERATOR(public.-) 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DROP OPERATOR public.- (int, int);
DROP FUNCTION item_minus(int, int);
-- the refusal's hint names the shape that reserves, and the ORMs' way out
\set VERBOSITY default
UPDATE item SET qty = 5 WHERE id = 1;
\set VERBOSITY terse
-- a column that is not reservable is updated as always, and the reservable
-- ones are left alone
UPDATE item SET name = 'uno' WHERE id = 1;
\echo :ROW_COUNT

-- 4. EXPLAIN says that it reserves, and on which columns; ANALYZE that it did
SELECT item_plan('UPDATE item SET qty = qty - 1, sold = sold + 1 WHERE id = 1');
SELECT item_plan('UPDATE item SET qty = qty - 1 WHERE id = 1', run => true);
SELECT item_plan('UPDATE item SET qty = qty - 1 WHERE id = 99', run => true);
SELECT item_plan('UPDATE item SET qty = 5 WHERE id = 1') LIMIT 1;

-- 5. Prepared statements: generic plans too, and a plan made before
-- occ.make_reservable() or occ.drop_reservable() does not outlive it
PREPARE sell(int, int) AS UPDATE item SET qty = qty - $2 WHERE id = $1;
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
EXECUTE sell(1, 1);
\echo :ROW_COUNT
SELECT item_plan('EXECUTE sell(1, 1)');
SELECT generic_plans > 0 AS generic_plan_used FROM pg_prepared_statements WHERE name = 'sell';
EXECUTE sell(99, 1);
\echo :ROW_COUNT
SELECT occ.drop_reservable('item', 'sold');
SELECT occ.drop_reservable('item', 'qty');
BEGIN;
EXECUTE sell(1, 1);
\echo :ROW_COUNT
SELECT item_untouched(1) AS untouched_after_drop_reservable, qty FROM item WHERE id = 1;
COMMIT;
SELECT item_plan('EXECUTE sell(1, 1)') LIMIT 1;
SELECT occ.make_reservable('item', 'qty');
BEGIN;
EXECUTE sell(1, 1);
SELECT item_untouched(1) AS untouched_after_make_reservable;
COMMIT;
SET plan_cache_mode = force_generic_plan;
PREPARE sell_generic(int, int) AS UPDATE item SET qty = qty - $2 WHERE id = $1;
EXECUTE sell_generic(1, 1);
\echo :ROW_COUNT
RESET plan_cache_mode;
DEALLOCATE sell;
DEALLOCATE sell_generic;
SELECT occ.make_reservable('item', 'sold');

-- 6. PL/pgSQL, static (its plans kept by SPI) and EXECUTE; FOUND and
-- ROW_COUNT are the UPDATE's
CREATE FUNCTION item_sell(k int, n int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE item SET qty = qty - n WHERE id = k;
    RETURN FOUND;
END $$;
CREATE FUNCTION item_sell_dynamic(k int, n int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    rows bigint;
BEGIN
    EXECUTE 'UPDATE item SET qty = qty - $2 WHERE id = $1' USING k, n;
    GET DIAGNOSTICS rows = ROW_COUNT;
    RETURN rows;
END $$;
BEGIN;
SELECT item_sell(1, 1), item_sell(1, 1), item_sell(1, 1), item_sell(1, 1), item_sell(1, 1), item_sell(1, 1),
       item_sell(1, 1), item_sell(99, 1) AS missing;
SELECT item_sell_dynamic(1, 1) AS dynamic, item_sell_dynamic(99, 1) AS dynamic_missing;
SELECT item_untouched(1) AS untouched_by_plpgsql;
COMMIT;

-- 7. occ.retry bodies, in every mode: the body's UPDATE reserves
CALL occ.retry('UPDATE item SET qty = qty - $1 WHERE id = $2', params => row(1, 1), contention => 'backoff');
CALL occ.retry('UPDATE item SET qty = qty - $1 WHERE id = $2', params => row(1, 1), contention => 'queue',
               key => 'item:1');
CALL occ.retry('UPDATE item SET qty = qty - $1 WHERE id = $2', params => row(1, 1), contention => 'batch',
               key => 'item:1');
SELECT outcome, attempts FROM occ.last_retry();
SELECT occ.reserved_value('item', 'qty', 1) AS qty_after_all;

-- 8. Privileges are the UPDATE's: SELECT alone is not enough
CREATE ROLE occ_update_reader;
GRANT SELECT ON item TO occ_update_reader;
SET ROLE occ_update_reader;
UPDATE item SET qty = qty - 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- 9. A statement-level UPDATE trigger of the table's is not skipped: the
-- statement runs as an UPDATE, which the guard refuses
CREATE FUNCTION item_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER item_audit AFTER UPDATE ON item FOR EACH STATEMENT EXECUTE FUNCTION item_audit();
UPDATE item SET qty = qty - 1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER item_audit ON item;
DROP FUNCTION item_audit();

-- clean up: the reservations folded into the rows
SELECT occ.drop_reservable('item', 'qty'), occ.drop_reservable('item', 'sold');
SELECT id, qty, sold, name FROM item ORDER BY id;
DROP TABLE item;
DROP FUNCTION item_untouched(int), item_plan(text, boolean), item_sell(int, int), item_sell_dynamic(int, int);
DROP ROLE occ_update_reader;
