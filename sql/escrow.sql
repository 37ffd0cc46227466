-- Reservable columns (escrow): occ.make_reservable, occ.reserve,
-- occ.reserved_value, occ.reservations, the guard trigger and the fold
-- (src/escrow/reservable.c, escrow.c, fold.c).  What takes two sessions (no wait
-- between reservations in flight, the worst case over other sessions'
-- reservations) is in test/specs/escrow_*.spec.
--
-- Every error shows its SQLSTATE (\echo :LAST_ERROR_SQLSTATE).  The waits
-- column of occ.reservations counts waits for the fold worker, which runs on
-- its own clock: it is left out.  A plain SELECT of a reservable column shows
-- the value as last folded, about occ.fold_interval (100ms) late: the test
-- polls for it (occ_escrow_folded) rather than sleeping a fixed time.
\set VERBOSITY terse
CREATE FUNCTION occ_escrow_folded(t regclass, expected_sum bigint, sql text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    s bigint;
    l bigint;
BEGIN
    -- sql: the sum of the column over the table, as a plain SELECT sees it
    FOR i IN 1..200 LOOP
        EXECUTE sql INTO s;
        SELECT count(*) INTO l FROM occ.reservation_ledger WHERE rel = t;
        IF s = expected_sum AND l = 0 THEN
            RETURN 'folded';
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN format('not folded after 10 s: %s, %s ledger rows', s, l);
END
$$;
CREATE VIEW escrow_rsv AS
    SELECT rel, col, key, committed, in_flight_down, in_flight_up, in_flight,
           reservations, refusals
      FROM occ.reservations;
GRANT SELECT ON escrow_rsv TO PUBLIC;

-- 1. Declaration: what occ.make_reservable() accepts and refuses

CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL CONSTRAINT stock_qty_min CHECK (qty >= 0),
                    name text);
INSERT INTO stock VALUES (1, 10, 'a'), (2, 5, 'b'), (3, 0, 'c');
-- before the declaration, occ.reserve refuses the column
SELECT occ.reserve('stock', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', 'qty');
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'stock'::regclass ORDER BY tgname;
SELECT occ.make_reservable('stock', 'qty');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', 'name');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', repeat('c', 50));
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('stock', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable(NULL, 'qty');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.drop_reservable('stock', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.drop_reservable('stock', 'name');
\echo :LAST_ERROR_SQLSTATE

-- the column: integer, NOT NULL, not generated
CREATE TABLE d_numeric (id int PRIMARY KEY, qty numeric NOT NULL);
SELECT occ.make_reservable('d_numeric', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_nullable (id int PRIMARY KEY, qty int);
SELECT occ.make_reservable('d_nullable', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_generated (id int PRIMARY KEY, qty int NOT NULL GENERATED ALWAYS AS (id * 2) STORED);
SELECT occ.make_reservable('d_generated', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- the primary key: one column
CREATE TABLE d_nopk (id int UNIQUE NOT NULL, qty int NOT NULL);
SELECT occ.make_reservable('d_nopk', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_twopk (a int, b int, qty int NOT NULL, PRIMARY KEY (a, b));
SELECT occ.make_reservable('d_twopk', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- ... of a type whose equal values print the same (the key's text names the
-- row's entry: numeric 1 and 1.0 would be two entries, each checking the
-- bound alone)
CREATE TABLE d_numkey (id numeric PRIMARY KEY, qty int NOT NULL);
SELECT occ.make_reservable('d_numkey', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_charkey (id char(3) PRIMARY KEY, qty int NOT NULL);
SELECT occ.make_reservable('d_charkey', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_tskey (id timestamptz PRIMARY KEY, qty int NOT NULL);
SELECT occ.make_reservable('d_tskey', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- (a uuid is: its text is canonical, whatever the case it was written in)
CREATE TABLE d_uuidkey (id uuid PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO d_uuidkey VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 1);
SELECT occ.make_reservable('d_uuidkey', 'qty');
BEGIN;
SELECT occ.reserve('d_uuidkey', 'qty', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::text, -1);
SELECT occ.reserve('d_uuidkey', 'qty', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT key, in_flight, reservations, refusals FROM escrow_rsv WHERE rel = 'd_uuidkey'::regclass;
-- the table: plain, logged, permanent, without row-level security
CREATE TABLE d_part (id int PRIMARY KEY, qty int NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE d_part_1 PARTITION OF d_part FOR VALUES FROM (0) TO (100);
SELECT occ.make_reservable('d_part', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- (a partition is a plain table)
SELECT occ.make_reservable('d_part_1', 'qty');
CREATE UNLOGGED TABLE d_unlogged (id int PRIMARY KEY, qty int NOT NULL);
SELECT occ.make_reservable('d_unlogged', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TEMP TABLE d_temp (id int PRIMARY KEY, qty int NOT NULL);
SELECT occ.make_reservable('d_temp', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_rls (id int PRIMARY KEY, qty int NOT NULL);
ALTER TABLE d_rls ENABLE ROW LEVEL SECURITY;
SELECT occ.make_reservable('d_rls', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW d_view AS SELECT * FROM stock;
SELECT occ.make_reservable('d_view', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN DATA WRAPPER occ_escrow_fdw;
CREATE SERVER occ_escrow_server FOREIGN DATA WRAPPER occ_escrow_fdw;
CREATE FOREIGN TABLE d_foreign (id int, qty int NOT NULL) SERVER occ_escrow_server;
SELECT occ.make_reservable('d_foreign', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- another row trigger on UPDATE (the fold fires none); other triggers are fine
CREATE FUNCTION d_trig() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TABLE d_trigger (id int PRIMARY KEY, qty int NOT NULL);
CREATE TRIGGER d_trigger_upd BEFORE UPDATE ON d_trigger FOR EACH ROW EXECUTE FUNCTION d_trig();
SELECT occ.make_reservable('d_trigger', 'qty');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER d_trigger_upd ON d_trigger;
CREATE TRIGGER d_trigger_ins BEFORE INSERT ON d_trigger FOR EACH ROW EXECUTE FUNCTION d_trig();
CREATE TRIGGER d_trigger_stmt AFTER UPDATE ON d_trigger FOR EACH STATEMENT EXECUTE FUNCTION d_trig();
SELECT occ.make_reservable('d_trigger', 'qty');
-- a row trigger on UPDATE created afterwards: reservations are refused
INSERT INTO d_trigger VALUES (1, 5);
SELECT occ.reserve('d_trigger', 'qty', 1, 1);
-- (refused when created: the fold would fire it; a constraint trigger too)
CREATE TRIGGER d_trigger_upd AFTER UPDATE ON d_trigger FOR EACH ROW EXECUTE FUNCTION d_trig();
\echo :LAST_ERROR_SQLSTATE
CREATE CONSTRAINT TRIGGER d_trigger_deferred AFTER UPDATE ON d_trigger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION d_trig();
\echo :LAST_ERROR_SQLSTATE
-- one disabled does not count; enabled, it is refused
CREATE TABLE d_trigger2 (id int PRIMARY KEY, qty int NOT NULL);
CREATE TRIGGER d_trigger2_upd AFTER UPDATE ON d_trigger2 FOR EACH ROW EXECUTE FUNCTION d_trig();
ALTER TABLE d_trigger2 DISABLE TRIGGER d_trigger2_upd;
SELECT occ.make_reservable('d_trigger2', 'qty');
ALTER TABLE d_trigger2 ENABLE TRIGGER d_trigger2_upd;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE d_trigger2;
SELECT occ.reserve('d_trigger', 'qty', 1, 1);
SELECT occ.reserved_value('d_trigger', 'qty', 1);

-- CHECK constraints on the column: integer bounds only
CREATE TABLE d_check (id int PRIMARY KEY, qty int NOT NULL CONSTRAINT d_check_even CHECK (qty % 2 = 0));
SELECT occ.make_reservable('d_check', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_check2 (id int PRIMARY KEY, qty int NOT NULL CONSTRAINT d_check_or CHECK (qty >= 0 OR qty <= -10));
SELECT occ.make_reservable('d_check2', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_check3 (id int PRIMARY KEY, qty int NOT NULL, CONSTRAINT d_check_id CHECK (qty >= id));
SELECT occ.make_reservable('d_check3', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_check4 (id int PRIMARY KEY, qty int NOT NULL CONSTRAINT d_check_ne CHECK (qty <> 3));
SELECT occ.make_reservable('d_check4', 'qty');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d_check5 (id int PRIMARY KEY, qty int NOT NULL CONSTRAINT d_check_num CHECK (qty >= 0.5));
SELECT occ.make_reservable('d_check5', 'qty');
\echo :LAST_ERROR_SQLSTATE
-- CHECK constraints on other columns do not matter
CREATE TABLE d_check6 (id int PRIMARY KEY CHECK (id % 2 = 1), qty int NOT NULL, note text CHECK (note <> ''));
SELECT occ.make_reservable('d_check6', 'qty');
-- a CHECK constraint added afterwards, not a bound: reservations are refused
INSERT INTO d_check6 VALUES (1, 5, 'x');
-- (refused by the ALTER TABLE itself)
ALTER TABLE d_check6 ADD CONSTRAINT d_check6_odd CHECK (qty % 2 = 1);
\echo :LAST_ERROR_SQLSTATE
-- a bound added NOT VALID: refused (a row may break it already, and the
-- fold could change that row no more)
ALTER TABLE d_check6 ADD CONSTRAINT d_check6_max CHECK (qty <= 3) NOT VALID;
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('d_check6', 'qty', 1, 2);

-- 2. The bounds: a reservation is taken only if the bound holds when every
-- decrement in flight (the caller's included) commits

-- qty = 10, CHECK (qty >= 0): -10 taken, -1 more refused, naming the constraint
BEGIN;
SELECT occ.reserve('stock', 'qty', 1, -4);
SELECT occ.reserve('stock', 'qty', 1, -6);
SELECT occ.reserved_value('stock', 'qty', 1) AS reserved, qty AS plain FROM stock WHERE id = 1;
SELECT * FROM escrow_rsv WHERE rel = 'stock'::regclass;
SAVEPOINT a;
\set VERBOSITY default
SELECT occ.reserve('stock', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
ROLLBACK TO a;
-- the refusal took nothing; the transaction's -10 is still in flight
SELECT * FROM escrow_rsv WHERE rel = 'stock'::regclass;
SELECT occ.reserved_value('stock', 'qty', 1);
-- the ledger holds the transaction's rows
SELECT rel, col, key, delta FROM occ.reservation_ledger WHERE rel = 'stock'::regclass ORDER BY delta;
-- another row is another matter
SELECT occ.reserve('stock', 'qty', 2, -5);
SELECT occ.reserve('stock', 'qty', 2, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- rolled back: nothing in flight, nothing committed
SELECT * FROM escrow_rsv WHERE rel = 'stock'::regclass ORDER BY key;
SELECT count(*) AS ledger FROM occ.reservation_ledger WHERE rel = 'stock'::regclass;
SELECT occ.reserved_value('stock', 'qty', 1);

-- a savepoint's rollback drops its reservations (in flight again 0), a
-- released savepoint's stay
BEGIN;
SAVEPOINT a;
SELECT occ.reserve('stock', 'qty', 1, -10);
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '1';
SELECT occ.reserve('stock', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK TO a;
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '1';
SELECT occ.reserved_value('stock', 'qty', 1);
SELECT count(*) AS ledger FROM occ.reservation_ledger WHERE rel = 'stock'::regclass;
-- so -10 is taken again, and then -1 refused
SAVEPOINT b;
SAVEPOINT c;
SELECT occ.reserve('stock', 'qty', 1, -7);
RELEASE c;
SELECT occ.reserve('stock', 'qty', 1, -3);
RELEASE b;
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '1';
SELECT occ.reserve('stock', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '1';

-- committed: the reservation is the row's value at once for occ.reserved_value,
-- in a plain SELECT after the fold
BEGIN;
SELECT occ.reserve('stock', 'qty', 1, -3);
SELECT occ.reserve('stock', 'qty', 1, -2);
-- own reservations: in occ.reserved_value, not in a plain SELECT
SELECT occ.reserved_value('stock', 'qty', 1) AS reserved, qty AS plain FROM stock WHERE id = 1;
COMMIT;
SELECT occ.reserved_value('stock', 'qty', 1);
SELECT occ_escrow_folded('stock', 5 + 5 + 0, 'SELECT sum(qty) FROM stock');
SELECT id, qty FROM stock ORDER BY id;
SELECT * FROM escrow_rsv WHERE rel = 'stock'::regclass ORDER BY key;
-- now 5: -5 is taken, -6 is not
BEGIN;
SELECT occ.reserve('stock', 'qty', 1, -6);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT occ.reserve('stock', 'qty', 1, -5);
SELECT occ.reserved_value('stock', 'qty', 1);

-- increments: no upper bound here, and an increment in flight does not make
-- room for a decrement (it could still roll back)
BEGIN;
SELECT occ.reserve('stock', 'qty', 3, 4);
SELECT occ.reserve('stock', 'qty', 3, 1000000);
SELECT occ.reserved_value('stock', 'qty', 3);
SELECT occ.reserve('stock', 'qty', 3, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT occ.reserve('stock', 'qty', 3, 4);
SELECT in_flight_down, in_flight_up, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '3';
-- a zero delta is taken (and counted) as an increment
SELECT occ.reserve('stock', 'qty', 3, 0);
COMMIT;
SELECT occ.reserved_value('stock', 'qty', 3);
-- once committed, it does
SELECT occ.reserve('stock', 'qty', 3, -4);
SELECT occ.reserved_value('stock', 'qty', 3);

-- BETWEEN: both bounds, from one constraint
CREATE TABLE seats (flight text PRIMARY KEY,
                    taken smallint NOT NULL CONSTRAINT seats_cap CHECK (taken BETWEEN 0 AND 100));
INSERT INTO seats VALUES ('LH1', 95);
SELECT occ.make_reservable('seats', 'taken');
BEGIN;
SELECT occ.reserve('seats', 'taken', 'LH1', 3);
SELECT occ.reserve('seats', 'taken', 'LH1', 2);
\set VERBOSITY default
SELECT occ.reserve('seats', 'taken', 'LH1', 1);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
ROLLBACK;
BEGIN;
SELECT occ.reserve('seats', 'taken', 'LH1', -95);
SELECT occ.reserve('seats', 'taken', 'LH1', -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT occ.reserve('seats', 'taken', 'LH1', 5);
SELECT occ.reserve('seats', 'taken', 'LH1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('seats', 'taken', 'LH1');

-- strict bounds, the constant on either side, the tightest of several
-- constraints (each refusal names the one that binds)
CREATE TABLE strict (id bigint PRIMARY KEY,
                     v bigint NOT NULL CONSTRAINT strict_pos CHECK (v > 0)
                                       CONSTRAINT strict_lt CHECK (10 > v)
                                       CONSTRAINT strict_ge CHECK (-5 <= v)
                                       CONSTRAINT strict_le CHECK (v <= 20));
INSERT INTO strict VALUES (1, 3);
SELECT occ.make_reservable('strict', 'v');
BEGIN;
SELECT occ.reserve('strict', 'v', 1, -2);
SELECT occ.reserve('strict', 'v', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT occ.reserve('strict', 'v', 1, 6);
SELECT occ.reserve('strict', 'v', 1, 1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- row-level security enabled afterwards: reservations are refused
ALTER TABLE strict ENABLE ROW LEVEL SECURITY;
\echo :LAST_ERROR_SQLSTATE
SELECT relrowsecurity FROM pg_class WHERE oid = 'strict'::regclass;
SELECT occ.reserve('strict', 'v', 1, 1);

-- types: a smallint column without bounds is bounded by its type (22003)
CREATE TABLE small (id int PRIMARY KEY, n smallint NOT NULL);
INSERT INTO small VALUES (1, 32000), (2, -32000);
SELECT occ.make_reservable('small', 'n');
SELECT occ.reserve('small', 'n', 1, 767);
SELECT occ.reserve('small', 'n', 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('small', 'n', 2, -768);
SELECT occ.reserve('small', 'n', 2, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('small', 'n', 2, 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
SELECT occ_escrow_folded('small', 32767 - 32768, 'SELECT sum(n) FROM small');
SELECT * FROM small ORDER BY id;
-- a guard that does not fire would let changes past the reservations: while
-- it is disabled (or fires only in replica mode), reservations are refused
ALTER TABLE small DISABLE TRIGGER occ_reservable_n;
SELECT occ.reserve('small', 'n', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE small ENABLE REPLICA TRIGGER occ_reservable_n;
SELECT occ.reserve('small', 'n', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE small ENABLE TRIGGER occ_reservable_n;
ALTER TABLE small DISABLE TRIGGER occ_reservable_truncate;
SELECT occ.reserve('small', 'n', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE small ENABLE TRIGGER occ_reservable_truncate;
SELECT occ.reserve('small', 'n', 1, -1);
SELECT occ_escrow_folded('small', 32767 - 32768 - 1, 'SELECT sum(n) FROM small');
-- an integer column, the same
CREATE TABLE medium (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO medium VALUES (1, 2147483000);
SELECT occ.make_reservable('medium', 'n');
SELECT occ.reserve('medium', 'n', 1, 648);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('medium', 'n', 1, 647);
-- bigint: the sum may not overflow either
CREATE TABLE big (id int PRIMARY KEY, n bigint NOT NULL);
INSERT INTO big VALUES (1, 9223372036854775000);
SELECT occ.make_reservable('big', 'n');
SELECT occ.reserve('big', 'n', 1, 808);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('big', 'n', 1, 807);
SELECT occ.reserved_value('big', 'n', 1);

-- 3. Arguments

-- NULL arguments are errors (22004), not silent no-ops
SELECT occ.reserve('stock', 'qty', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('stock', 'qty', NULL::int, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('stock', NULL, 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve(NULL, 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
-- occ.reserved_value too
SELECT occ.reserved_value('stock', 'qty', NULL::int);
\echo :LAST_ERROR_SQLSTATE
-- the key in another type is converted through text
SELECT occ.reserve('stock', 'qty', '2', -1);
SELECT occ.reserve('stock', 'qty', 2::bigint, -1);
SELECT occ.reserve('stock', 'qty', '2'::text, -1);
SELECT occ.reserved_value('stock', 'qty', '2'), occ.reserved_value('stock', 'qty', 2::smallint);
SELECT occ.reserve('stock', 'qty', 'abc', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('stock', 'qty', 'abc');
\echo :LAST_ERROR_SQLSTATE
-- no such row, no such column, a column not reservable
SELECT occ.reserve('stock', 'qty', 99, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('stock', 'qty', 99);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('stock', 'nope', 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('stock', 'name', 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('stock', 'name', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('no_such_table', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
-- a text key: at most 255 bytes
CREATE TABLE labels (code text PRIMARY KEY, n int NOT NULL CHECK (n >= 0));
INSERT INTO labels VALUES (repeat('k', 255), 1), (repeat('k', 256), 1), ('é', 1);
SELECT occ.make_reservable('labels', 'n');
SELECT occ.reserve('labels', 'n', repeat('k', 255), -1);
SELECT occ.reserve('labels', 'n', repeat('k', 256), -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('labels', 'n', repeat('é', 128), -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('labels', 'n', 'é', -1);
SELECT occ.reserve('labels', 'n', 'é', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT length(key) AS key_length, committed, refusals FROM escrow_rsv WHERE rel = 'labels'::regclass ORDER BY 1;

-- 4. Transactions (stock: 0, 2, 0)

-- a read-only transaction cannot reserve (25006)
BEGIN READ ONLY;
SELECT occ.reserve('stock', 'qty', 2, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- reserved_value is a read
BEGIN READ ONLY;
SELECT occ.reserved_value('stock', 'qty', 2);
ROLLBACK;
-- nor be prepared (0A000), checked before max_prepared_transactions (0 here:
-- a transaction without reservations fails with 55000)
SHOW max_prepared_transactions;
BEGIN;
SELECT occ.reserve('stock', 'qty', 2, -1);
PREPARE TRANSACTION 'occ_escrow';
\echo :LAST_ERROR_SQLSTATE
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '2';
SELECT occ.reserved_value('stock', 'qty', 2);
BEGIN;
SELECT 1;
PREPARE TRANSACTION 'occ_escrow';
\echo :LAST_ERROR_SQLSTATE
-- (a reservation rolled back to its savepoint does not count)
BEGIN;
SAVEPOINT a;
SELECT occ.reserve('stock', 'qty', 2, -1);
ROLLBACK TO a;
PREPARE TRANSACTION 'occ_escrow';
\echo :LAST_ERROR_SQLSTATE
-- a COMMIT that fails (a deferred foreign key) drops the reservations
CREATE TABLE orders (id int PRIMARY KEY, item int NOT NULL,
                     CONSTRAINT orders_item FOREIGN KEY (item) REFERENCES stock DEFERRABLE INITIALLY DEFERRED);
BEGIN;
SELECT occ.reserve('stock', 'qty', 2, -1);
INSERT INTO orders VALUES (1, 42);
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '2';
SELECT occ.reserved_value('stock', 'qty', 2);
-- an error after the reservation, in the same statement, drops it too
SELECT occ.reserve('stock', 'qty', 2, -1), 1 / 0;
\echo :LAST_ERROR_SQLSTATE
SELECT in_flight_down, in_flight FROM escrow_rsv WHERE rel = 'stock'::regclass AND key = '2';
-- SERIALIZABLE, with an order line
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT occ.reserve('stock', 'qty', 2, -1);
INSERT INTO orders VALUES (1, 2);
SELECT occ.reserved_value('stock', 'qty', 2);
COMMIT;
SELECT occ.reserved_value('stock', 'qty', 2);
-- a reservation and an UPDATE of another column of the same row, in one
-- transaction (the fold of a row locked by another transaction is in
-- test/specs/escrow_fold.spec)
BEGIN;
SELECT occ.reserve('stock', 'qty', 2, -1);
UPDATE stock SET name = 'B' WHERE id = 2;
COMMIT;
SELECT occ.reserved_value('stock', 'qty', 2);
-- a reservation and the drop of the declaration in one transaction: refused
-- (the value in shared memory would miss the changes made meanwhile)
BEGIN;
SELECT occ.reserve('stock', 'qty', 3, 1);
SELECT occ.drop_reservable('stock', 'qty');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT occ_escrow_folded('stock', 0 + 0 + 0, 'SELECT sum(qty) FROM stock');
SELECT id, qty, name FROM stock ORDER BY id;

-- 5. The guard: the column and the key change only by reservations

UPDATE stock SET qty = 3 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE stock SET qty = qty + 1 WHERE id BETWEEN 1 AND 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE stock SET id = 10 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM stock WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE stock, orders;
\echo :LAST_ERROR_SQLSTATE
-- allowed: other columns, an UPDATE that sets the column and the key to what
-- they are (an ORM saving the whole row), INSERT
UPDATE stock SET name = 'A' WHERE id = 1;
UPDATE stock SET id = 1, qty = 0, name = 'AA' WHERE id = 1;
UPDATE stock SET qty = qty, id = id;
INSERT INTO stock VALUES (4, 7, 'd');
SELECT occ.reserve('stock', 'qty', 4, -7);
SELECT occ.reserve('stock', 'qty', 4, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ_escrow_folded('stock', 0, 'SELECT sum(qty) FROM stock');
SELECT id, qty, name FROM stock ORDER BY id;
-- a reservable column keeps its name: the ledger rows of its committed
-- reservations name it (renamed, the fold would have dropped them as those
-- of a column gone); its table and its other columns may be renamed, and
-- the reservation committed before the refused rename is folded
CREATE TABLE renamed_stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0), note text);
INSERT INTO renamed_stock VALUES (1, 5);
SELECT occ.make_reservable('renamed_stock', 'qty');
BEGIN;
SELECT occ.reserve('renamed_stock', 'qty', 1, -2);
COMMIT;
ALTER TABLE renamed_stock RENAME COLUMN qty TO quantity;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE renamed_stock RENAME note TO remark;
ALTER TABLE renamed_stock RENAME TO renamed_stock2;
SELECT occ_escrow_folded('renamed_stock2', 3, 'SELECT sum(qty) FROM renamed_stock2');
SELECT occ.reserved_value('renamed_stock2', 'qty', 1);
-- the rename of a parent's column reaches its children's: refused where a
-- child's is reservable
CREATE TABLE parent_stock (qty int NOT NULL);
CREATE TABLE child_stock (id int PRIMARY KEY, CHECK (qty >= 0)) INHERITS (parent_stock);
INSERT INTO child_stock VALUES (4, 1);
SELECT occ.make_reservable('child_stock', 'qty');
ALTER TABLE parent_stock RENAME COLUMN qty TO quantity;
\echo :LAST_ERROR_SQLSTATE
-- an ordinary column again, it may be renamed
SELECT occ.drop_reservable('renamed_stock2', 'qty');
ALTER TABLE renamed_stock2 RENAME COLUMN qty TO quantity;
SELECT occ.drop_reservable('child_stock', 'qty');
ALTER TABLE parent_stock RENAME COLUMN qty TO quantity;
SELECT * FROM child_stock;
DROP TABLE renamed_stock2, parent_stock, child_stock;

-- 6. Privileges

CREATE ROLE occ_escrow_owner;
CREATE ROLE occ_escrow_none;
CREATE ROLE occ_escrow_update;
CREATE ROLE occ_escrow_clerk;
GRANT USAGE ON SCHEMA public TO occ_escrow_owner, occ_escrow_none, occ_escrow_update, occ_escrow_clerk;
GRANT CREATE ON SCHEMA public TO occ_escrow_owner;
SET ROLE occ_escrow_owner;
CREATE TABLE wallet (id int PRIMARY KEY, cents bigint NOT NULL CHECK (cents >= 0), owner_note text);
INSERT INTO wallet VALUES (1, 1000), (2, 0);
GRANT UPDATE (cents) ON wallet TO occ_escrow_update;
GRANT SELECT (id, cents), UPDATE (cents) ON wallet TO occ_escrow_clerk;
RESET ROLE;
-- only the owner declares (not even one with every privilege on the table)
GRANT ALL ON wallet TO occ_escrow_none;
SET ROLE occ_escrow_none;
SELECT occ.make_reservable('wallet', 'cents');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE ALL ON wallet FROM occ_escrow_none;
SET ROLE occ_escrow_owner;
SELECT occ.make_reservable('wallet', 'cents');
RESET ROLE;
SET ROLE occ_escrow_clerk;
SELECT occ.drop_reservable('wallet', 'cents');
\echo :LAST_ERROR_SQLSTATE
-- no privilege: refused, and the rows are not shown
SET ROLE occ_escrow_none;
SELECT occ.reserve('wallet', 'cents', 1, -100);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('wallet', 'cents', 1);
\echo :LAST_ERROR_SQLSTATE
-- nor does such a role learn whether a column is reservable: an ordinary
-- column, or one that does not exist, is refused the same way (42501)
SELECT occ.reserve('wallet', 'owner_note', 1, -100);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('wallet', 'no_such_column', 1);
\echo :LAST_ERROR_SQLSTATE
-- UPDATE on the column but no SELECT: refused, as UPDATE ... SET c = c + d would be
SET ROLE occ_escrow_update;
SELECT occ.reserve('wallet', 'cents', 1, -100);
\echo :LAST_ERROR_SQLSTATE
-- UPDATE and SELECT on the column, SELECT on the key: taken
SET ROLE occ_escrow_clerk;
SELECT occ.reserve('wallet', 'cents', 1, -100);
SELECT occ.reserve('wallet', 'cents', 2, 250);
SELECT occ.reserved_value('wallet', 'cents', 1);
SELECT key, committed, reservations FROM escrow_rsv WHERE rel = 'wallet'::regclass ORDER BY key;
-- the ledger is not the clerk's to read or write
SELECT * FROM occ.reservation_ledger;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO occ.reservation_ledger VALUES ('wallet', 'cents', '1', 1000000);
\echo :LAST_ERROR_SQLSTATE
-- nor can the clerk get round the guard
UPDATE wallet SET cents = 0 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- occ.reservations shows a row only to those who may read its column and
-- its key
SET ROLE occ_escrow_none;
SELECT count(*) FROM occ.reservations WHERE rel = 'wallet'::regclass;
SET ROLE occ_escrow_update;
SELECT count(*) FROM occ.reservations WHERE rel = 'wallet'::regclass;
SET ROLE occ_escrow_owner;
GRANT SELECT (cents) ON wallet TO occ_escrow_update;
SET ROLE occ_escrow_update;
SELECT count(*) FROM occ.reservations WHERE rel = 'wallet'::regclass;
SET ROLE occ_escrow_owner;
GRANT SELECT (id) ON wallet TO occ_escrow_update;
SET ROLE occ_escrow_update;
SELECT count(*) FROM occ.reservations WHERE rel = 'wallet'::regclass;
RESET ROLE;
-- the fold updates the rows as the table's owner
SELECT occ_escrow_folded('wallet', 900 + 250, 'SELECT sum(cents) FROM wallet');
SELECT id, cents FROM wallet ORDER BY id;
-- revoked: refused again
SET ROLE occ_escrow_owner;
REVOKE UPDATE (cents) ON wallet FROM occ_escrow_clerk;
SET ROLE occ_escrow_clerk;
SELECT occ.reserve('wallet', 'cents', 1, -100);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('wallet', 'cents', 1);
RESET ROLE;

-- 7. occ.reservations

SELECT rel, col, CASE WHEN length(r.key) > 10 THEN left(r.key, 3) || '... (' || length(r.key) || ')' ELSE r.key END AS key,
       committed, in_flight_down, in_flight_up, in_flight, reservations, refusals, waits >= 0 AS waits
  FROM occ.reservations r ORDER BY rel::text COLLATE "C", col, length(r.key), r.key COLLATE "C";

-- 8. Several reservable columns; occ.drop_reservable

CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0),
                      points int NOT NULL CHECK (points <= 10));
INSERT INTO account VALUES (1, 100, 0);
SELECT occ.make_reservable('account', 'balance');
SELECT occ.make_reservable('account', 'points');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'account'::regclass ORDER BY tgname;
BEGIN;
SELECT occ.reserve('account', 'balance', 1, -30);
SELECT occ.reserve('account', 'points', 1, 10);
SELECT occ.reserve('account', 'points', 1, 1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT occ.reserve('account', 'balance', 1, -30);
SELECT occ.reserve('account', 'points', 1, 7);
SELECT occ_escrow_folded('account', 70 + 7, 'SELECT sum(balance + points) FROM account');
SELECT * FROM account;
-- dropping one keeps the other, and the TRUNCATE guard
SELECT occ.drop_reservable('account', 'points');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'account'::regclass ORDER BY tgname;
UPDATE account SET points = 9;
UPDATE account SET balance = 1;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE account;
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('account', 'points', 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.drop_reservable('account', 'points');
\echo :LAST_ERROR_SQLSTATE
-- the last one: the table is an ordinary table again
SELECT occ.drop_reservable('account', 'balance');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'account'::regclass ORDER BY tgname;
UPDATE account SET balance = balance + 1;
SELECT * FROM account;
SELECT occ.reserve('account', 'balance', 1, -1);
\echo :LAST_ERROR_SQLSTATE
-- declared again, it starts from the row as it now is
SELECT occ.make_reservable('account', 'balance');
SELECT occ.reserved_value('account', 'balance', 1);
SELECT occ.reserve('account', 'balance', 1, -71);
SELECT occ.reserve('account', 'balance', 1, -72);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('account', 'balance', 1);
TRUNCATE account;
\echo :LAST_ERROR_SQLSTATE
-- a bound added while declared binds the next reservation (once the table
-- shows the committed value: ALTER TABLE checks the rows as they are)
SELECT occ_escrow_folded('account', 0 + 9, 'SELECT sum(balance + points) FROM account');
ALTER TABLE account ADD CONSTRAINT account_cap CHECK (balance <= 5);
SELECT occ.reserve('account', 'balance', 1, 5);
SELECT occ.reserve('account', 'balance', 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- reservations committed before the drop are still folded
BEGIN;
SELECT occ.reserve('account', 'balance', 1, -2);
COMMIT;
SELECT occ.drop_reservable('account', 'balance');
SELECT occ_escrow_folded('account', 3 + 9, 'SELECT sum(balance + points) FROM account');
SELECT * FROM account;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'account'::regclass ORDER BY tgname;
TRUNCATE account;

-- DROP TABLE takes the guard with it
DROP TABLE stock CASCADE;
SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'occ_reservable%' AND tgrelid NOT IN
  ('seats'::regclass, 'strict'::regclass, 'small'::regclass, 'medium'::regclass, 'big'::regclass,
   'labels'::regclass, 'wallet'::regclass, 'd_part_1'::regclass, 'd_trigger'::regclass,
   'd_check6'::regclass, 'd_uuidkey'::regclass);

-- 9. Logical replication: a subscriber gets the folded values, never the
-- ledger (its rows are this server's reservations; a subscriber's fold would
-- apply them a second time).  Publishing it by name or schema is refused
-- (0A000); FOR ALL TABLES takes it with a warning, and the fold may still
-- delete its rows there (REPLICA IDENTITY FULL); its guard fires ALWAYS and
-- refuses a row in replica mode (a subscription's apply, and the warning,
-- which wal_level's own warning comes with here: test/logical.sh)
SET client_min_messages = error;
CREATE PUBLICATION occ_escrow_named FOR TABLE occ.reservation_ledger;
\echo :LAST_ERROR_SQLSTATE
CREATE PUBLICATION occ_escrow_schema FOR TABLES IN SCHEMA occ;
\echo :LAST_ERROR_SQLSTATE
CREATE PUBLICATION occ_escrow_tables FOR TABLE labels;
ALTER PUBLICATION occ_escrow_tables ADD TABLE occ.reservation_ledger;
\echo :LAST_ERROR_SQLSTATE
ALTER PUBLICATION occ_escrow_tables ADD TABLES IN SCHEMA occ;
\echo :LAST_ERROR_SQLSTATE
SELECT pubname, tablename FROM pg_publication_tables WHERE pubname LIKE 'occ_escrow%' ORDER BY 1, 2;
CREATE PUBLICATION occ_escrow_all FOR ALL TABLES;
RESET client_min_messages;
SELECT relreplident FROM pg_class WHERE oid = 'occ.reservation_ledger'::regclass;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'occ.reservation_ledger'::regclass;
BEGIN;
SELECT occ.reserve('labels', 'n', 'é', 1);
COMMIT;
SELECT occ_escrow_folded('labels', 2, 'SELECT sum(n) FROM labels') AS folded_in_a_publication;
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO occ.reservation_ledger VALUES ('labels', 'n', 'é', 1);
SELECT count(*) AS subscribed_rows_skipped FROM occ.reservation_ledger WHERE rel = 'labels'::regclass;
ROLLBACK;
DROP PUBLICATION occ_escrow_tables, occ_escrow_all;

-- clean up: every ledger row folded
SELECT occ_escrow_folded('labels', 2, 'SELECT sum(n) FROM labels') AS labels_folded;
SELECT occ_escrow_folded('strict', 4, 'SELECT sum(v) FROM strict') AS strict_folded;
SELECT count(*) AS ledger FROM occ.reservation_ledger;
DROP TABLE seats, strict, small, medium, big, labels, orders, account, d_numeric, d_nullable,
    d_generated, d_nopk, d_twopk, d_numkey, d_charkey, d_tskey, d_uuidkey, d_part, d_unlogged, d_rls, d_trigger, d_check, d_check2,
    d_check3, d_check4, d_check5, d_check6 CASCADE;
DROP FOREIGN TABLE d_foreign;
DROP SERVER occ_escrow_server;
DROP FOREIGN DATA WRAPPER occ_escrow_fdw;
DROP FUNCTION d_trig();
DROP TABLE wallet;
REVOKE ALL ON SCHEMA public FROM occ_escrow_owner, occ_escrow_none, occ_escrow_update, occ_escrow_clerk;
DROP ROLE occ_escrow_owner, occ_escrow_none, occ_escrow_update, occ_escrow_clerk;
DROP VIEW escrow_rsv;
DROP FUNCTION occ_escrow_folded(regclass, bigint, text);
