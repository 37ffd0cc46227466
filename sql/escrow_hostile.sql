-- Reservable columns under hostile use (issue 34): a role that plays the
-- attacker, and each time what must hold: nothing runs with more privilege
-- than its owner, no committed value is forged or left stale, nothing
-- crashes.  (Attacks on the fold worker by a database's owner, and the
-- shares of shared memory: test/escrow_hostile.sh.)
\set VERBOSITY terse
CREATE FUNCTION hostile_folded(t regclass, c name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..400 LOOP
        IF NOT EXISTS (SELECT FROM occ.reservation_ledger WHERE rel = t AND col = c) THEN
            RETURN 'folded';
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN 'not folded after 20 s';
END
$$;
CREATE ROLE occ_hostile_alice;
CREATE ROLE occ_hostile_mallory;
GRANT CREATE ON SCHEMA public TO occ_hostile_alice, occ_hostile_mallory;

-- 1. A role with INSERT and SELECT on a table sets no committed value by
-- reserving on a row it inserted and did not commit (0.5.0 loaded the
-- row's entry from the uncommitted row, and kept it after the rollback)
SET ROLE occ_hostile_alice;
CREATE TABLE h_stock (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0), note text);
INSERT INTO h_stock VALUES (1, 5, '');
SELECT occ.make_reservable('h_stock', 'qty');
GRANT SELECT, INSERT ON h_stock TO occ_hostile_mallory;
GRANT UPDATE (qty) ON h_stock TO occ_hostile_mallory;
RESET ROLE;
SET ROLE occ_hostile_mallory;
BEGIN;
INSERT INTO h_stock VALUES (2, 1000000, 'forged');
SELECT occ.reserve('h_stock', 'qty', 2, -999999);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
RESET ROLE;
SET ROLE occ_hostile_alice;
INSERT INTO h_stock VALUES (2, 3, 'real');
-- the bound holds against the row as it committed
SELECT occ.reserve('h_stock', 'qty', 2, -4);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value('h_stock', 'qty', 2) AS committed_value;
-- a row this transaction updated (another column) is read as committed
BEGIN;
UPDATE h_stock SET note = 'seen' WHERE id = 1;
SELECT occ.reserve('h_stock', 'qty', 1, -5);
SELECT occ.reserve('h_acct', 'bal', 1, -1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
RESET ROLE;

-- 2. The fold's pass through the guard is one row of one table, once: a
-- table owner's CHECK function, which the fold's UPDATE of her table runs,
-- cannot change another owner's reservable column past its guard (0.5.0:
-- 100 became 1100).  (The fold runs the table's code with search_path
-- pg_catalog, pg_temp, as PostgreSQL's maintenance commands do: names are
-- schema-qualified.)
SET ROLE occ_hostile_mallory;
CREATE FUNCTION h_sneak() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        UPDATE public.h_stock SET qty = 1000 WHERE id = 1;
    EXCEPTION WHEN object_not_in_prerequisite_state THEN
        NULL;
    END;
    RETURN true;
END
$$;
CREATE TABLE h_mine (id int PRIMARY KEY, n int NOT NULL, tag text NOT NULL CHECK (h_sneak()));
INSERT INTO h_mine VALUES (1, 0, 'x');
SELECT occ.make_reservable('h_mine', 'n');
SELECT occ.reserve('h_mine', 'n', 1, 7);
RESET ROLE;
SELECT hostile_folded('h_mine', 'n');
SELECT n AS mallory_folded FROM h_mine;
SELECT qty AS alice_untouched FROM h_stock WHERE id = 1;

-- 3. The primary key that the declaration was made with: changing it is
-- refused (committed reservations of id 1 would go to whichever row has
-- the new key 1)
SET ROLE occ_hostile_alice;
CREATE TABLE h_pk (id int PRIMARY KEY, code int NOT NULL UNIQUE, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO h_pk VALUES (1, 2, 10), (2, 1, 10);
SELECT occ.make_reservable('h_pk', 'qty');
BEGIN;
ALTER TABLE h_pk DROP CONSTRAINT h_pk_pkey, ADD PRIMARY KEY (code);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
ALTER TABLE h_pk DROP CONSTRAINT h_pk_pkey;
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserve('h_pk', 'qty', 1, -1);
RESET ROLE;

-- 4. A guard disabled, the column changed meanwhile, the guard enabled
-- again: the row's entry is not stale (0.5.0 kept the old value, and took
-- a reservation past the bound)
SET ROLE occ_hostile_alice;
CREATE TABLE h_stale (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO h_stale VALUES (1, 10);
SELECT occ.make_reservable('h_stale', 'qty');
SELECT occ.reserved_value('h_stale', 'qty', 1) AS before;
ALTER TABLE h_stale DISABLE TRIGGER occ_reservable_qty;
SELECT occ.reserve('h_stale', 'qty', 1, -1);
\echo :LAST_ERROR_SQLSTATE
UPDATE h_stale SET qty = 2;
ALTER TABLE h_stale ENABLE ALWAYS TRIGGER occ_reservable_qty;
SELECT occ.reserved_value('h_stale', 'qty', 1) AS after;
SELECT occ.reserve('h_stale', 'qty', 1, -3);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- 5. Sums past bigint: a column at -9e18 takes +9e18 twice; the fold adds
-- 1.8e19 in two halves (0.5.0: sum(delta)::bigint overflowed, and the
-- table's fold stopped for ever)
CREATE TABLE h_big (id int PRIMARY KEY, n bigint NOT NULL);
INSERT INTO h_big VALUES (1, -9000000000000000000);
SELECT occ.make_reservable('h_big', 'n');
BEGIN;
SELECT occ.reserve('h_big', 'n', 1, 9000000000000000000);
COMMIT;
BEGIN;
SELECT occ.reserve('h_big', 'n', 1, 9000000000000000000);
COMMIT;
SELECT hostile_folded('h_big', 'n');
SELECT n AS folded_past_bigint_sums FROM h_big;

-- 6. Bad input: an OID that names no table is 42P01 (0.5.0: XX000)
SELECT occ.reserve(4000000000::oid::regclass, 'qty', 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.reserved_value(4000000000::oid::regclass, 'qty', 1);
\echo :LAST_ERROR_SQLSTATE

-- 7. A ledger row inserted by hand (the extension's owner, a restore) is a
-- reservation: within the bounds, counted by the row's entry, and never
-- applied to a column that is not reservable
SELECT occ.reserved_value('h_stock', 'qty', 1) AS stock_1;
INSERT INTO occ.reservation_ledger VALUES ('h_stock', 'qty', '1', -6);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO occ.reservation_ledger VALUES ('h_stock', 'qty', '1', -2);
SELECT occ.reserved_value('h_stock', 'qty', 1) AS stock_1_after_ledger_row;
SELECT occ.reserve('h_stock', 'qty', 1, -4);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO occ.reservation_ledger VALUES ('h_stock', 'note', '1', 1000);
INSERT INTO occ.reservation_ledger VALUES ('h_pk', 'code', '1', 1000);
SELECT hostile_folded('h_stock', 'qty');
SELECT qty AS stock_1_folded FROM h_stock WHERE id = 1;
SELECT code AS not_reservable_unchanged FROM h_pk WHERE id = 1;
DELETE FROM occ.reservation_ledger WHERE rel IN ('h_pk'::regclass, 'h_stock'::regclass);

-- 8. A declaration that user code invalidates while a reservation uses it:
-- the delta's function GRANTs on its own table (a relcache invalidation,
-- which drops the table's cached declaration) and plans an UPDATE of
-- another owner's table (which caches that one's, where the dropped one
-- was).  The reservation stays its own table's: 0.7.0 kept a pointer into
-- the cache, and reserved -600 of alice's row, which mallory may not
-- update, with only her own table checked.  A new session: its cache
-- holds neither declaration.
SET ROLE occ_hostile_alice;
CREATE TABLE h_acct (id int PRIMARY KEY, bal bigint NOT NULL CHECK (bal >= 0));
INSERT INTO h_acct VALUES (1, 1000);
SELECT occ.make_reservable('h_acct', 'bal');
SELECT occ.reserved_value('h_acct', 'bal', 1) AS acct_loaded;
RESET ROLE;
\c -
\set VERBOSITY terse
SET ROLE occ_hostile_mallory;
CREATE TABLE h_swap (id int PRIMARY KEY, q bigint NOT NULL CHECK (q >= 0));
INSERT INTO h_swap VALUES (1, 0);
SELECT occ.make_reservable('h_swap', 'q');
CREATE FUNCTION h_swap_delta() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    GRANT SELECT ON h_swap TO PUBLIC;
    BEGIN
        EXECUTE 'UPDATE h_acct SET bal = bal + 0 WHERE id = 1';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
    RETURN 600;
END
$$;
UPDATE h_swap SET q = q - h_swap_delta() WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE h_swap SET q = q + h_swap_delta() WHERE id = 1;
RESET ROLE;
SELECT count(*) AS acct_ledger_rows FROM occ.reservation_ledger WHERE rel = 'h_acct'::regclass;
SELECT hostile_folded('h_swap', 'q');
SELECT bal AS acct_unchanged FROM h_acct;
SELECT q AS swap_folded FROM h_swap;

-- 9. What a table's own code sets in the fold worker's session ends with
-- that table's fold, as in PostgreSQL's maintenance commands: a CHECK
-- function that turns default_transaction_read_only on there (only there:
-- its lock_timeout is 50ms)
-- leaves the next fold, another table's, writable (0.7.0 kept the
-- setting: every later fold of the database failed with 25006)
SET ROLE occ_hostile_alice;
CREATE FUNCTION h_sticky(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('lock_timeout') = '50ms' THEN  -- the fold worker's
        PERFORM set_config('default_transaction_read_only', 'on', false);
    END IF;
    RETURN true;
END
$$;
CREATE TABLE h_sticky_stock (id int PRIMARY KEY, name text CHECK (h_sticky(name)), qty int NOT NULL CHECK (qty >= 0));
INSERT INTO h_sticky_stock VALUES (1, 'w', 10);
SELECT occ.make_reservable('h_sticky_stock', 'qty');
SELECT occ.reserve('h_sticky_stock', 'qty', 1, -1);
RESET ROLE;
SELECT hostile_folded('h_sticky_stock', 'qty');
SET ROLE occ_hostile_mallory;
SELECT occ.reserve('h_swap', 'q', 1, -1);
RESET ROLE;
SELECT hostile_folded('h_swap', 'q') AS next_fold;
SELECT occ.reserve('h_sticky_stock', 'qty', 1, -1);
SELECT hostile_folded('h_sticky_stock', 'qty') AS next_fold_of_the_table;
SELECT qty AS sticky_folded FROM h_sticky_stock;
SELECT q AS swap_folded_again FROM h_swap;

-- 10. A typed table's reservable column is not renamed through its type
-- (ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE), as ALTER TABLE ... RENAME
-- COLUMN is refused: 0.7.0 renamed it, and the fold, finding no column of
-- the ledger rows' name, deleted the committed reservation
SET ROLE occ_hostile_alice;
CREATE TYPE h_item AS (id int, n int);
CREATE TABLE h_typed OF h_item (id WITH OPTIONS PRIMARY KEY, n WITH OPTIONS NOT NULL CHECK (n >= 0));
INSERT INTO h_typed VALUES (1, 10);
SELECT occ.make_reservable('h_typed', 'n');
BEGIN;
SELECT occ.reserve('h_typed', 'n', 1, -4);
ALTER TYPE h_item RENAME ATTRIBUTE n TO m CASCADE;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT occ.reserve('h_typed', 'n', 1, -4);
ALTER TYPE h_item RENAME ATTRIBUTE n TO m CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE h_item RENAME ATTRIBUTE id TO key CASCADE;
RESET ROLE;
SELECT hostile_folded('h_typed', 'n');
SELECT string_agg(attname, ', ' ORDER BY attnum) AS typed_columns
FROM pg_attribute WHERE attrelid = 'h_typed'::regclass AND attnum > 0;
SELECT key, n AS typed_folded FROM h_typed;

-- 11. A guard does not go while its column has reservations that are not
-- folded: not with the primary key's column (DROP COLUMN ... CASCADE drops
-- the guard, which is UPDATE OF it), not by DROP TRIGGER while it is
-- disabled.  0.7.0 left the ledger rows, naming rows by a key that was no
-- longer the table's: a new primary key and a new declaration then folded
-- them into the rows whose new key read the same.  (A CHECK that fails in
-- the fold worker, whose lock_timeout is 50ms, until h_gate opens: the
-- reservation stays in the ledger meanwhile.)
SET ROLE occ_hostile_alice;
CREATE TABLE h_gate (open boolean NOT NULL);
INSERT INTO h_gate VALUES (false);
CREATE FUNCTION h_worker_may(t text) RETURNS boolean LANGUAGE sql
    AS $$SELECT pg_catalog.current_setting('lock_timeout') <> '50ms' OR (SELECT open FROM public.h_gate)$$;
CREATE TABLE h_rekey (id int PRIMARY KEY, k int UNIQUE NOT NULL, note text CHECK (h_worker_may(note)),
    n int NOT NULL CHECK (n >= 0));
INSERT INTO h_rekey VALUES (1, 2, '', 10), (2, 1, '', 10);
SELECT occ.make_reservable('h_rekey', 'n');
SELECT occ.reserve('h_rekey', 'n', 1, -5);
ALTER TABLE h_rekey DROP COLUMN id CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE h_rekey DISABLE TRIGGER occ_reservable_n;
DROP TRIGGER occ_reservable_n ON h_rekey;
\echo :LAST_ERROR_SQLSTATE
UPDATE h_gate SET open = true;
ALTER TABLE h_rekey ENABLE TRIGGER occ_reservable_n;
RESET ROLE;
SELECT hostile_folded('h_rekey', 'n');
-- with nothing to fold, the guard goes with the key
SET ROLE occ_hostile_alice;
ALTER TABLE h_rekey DROP COLUMN id CASCADE;
RESET ROLE;
SELECT count(*) AS rekey_guards FROM pg_trigger WHERE tgrelid = 'h_rekey'::regclass AND tgname = 'occ_reservable_n';
SELECT k, n FROM h_rekey ORDER BY k;

-- 12. One table's code does not hold up the other tables' folds: a CHECK
-- of mallory's that sleeps in the fold worker (30 s at a time, while her
-- h_nap_gate is shut) has the worker's turn at her table cut after a
-- second, and alice's reservation, made while the worker sleeps there, is
-- folded (0.7.0: not before mallory's sleep ended)
SET ROLE occ_hostile_mallory;
CREATE TABLE h_nap_gate (open boolean NOT NULL);
INSERT INTO h_nap_gate VALUES (false);
CREATE FUNCTION h_nap(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.current_setting('lock_timeout') = '50ms' AND NOT (SELECT open FROM public.h_nap_gate) THEN
        PERFORM pg_catalog.pg_sleep(30);
    END IF;
    RETURN true;
END
$$;
CREATE TABLE h_nap_stock (id int PRIMARY KEY, name text CHECK (h_nap(name)), qty int NOT NULL CHECK (qty >= 0));
INSERT INTO h_nap_stock VALUES (1, 'w', 10);
SELECT occ.make_reservable('h_nap_stock', 'qty');
SELECT occ.reserve('h_nap_stock', 'qty', 1, -1);
RESET ROLE;
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'pg_occ fold' AND wait_event = 'PgSleep');
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;
SET ROLE occ_hostile_alice;
SELECT occ.reserve('h_acct', 'bal', 1, -1);
RESET ROLE;
SELECT hostile_folded('h_acct', 'bal') AS folded_beside_a_sleeper;
SELECT fold_error FROM occ.reservations WHERE rel = 'h_nap_stock'::regclass;
SET ROLE occ_hostile_mallory;
UPDATE h_nap_gate SET open = true;
RESET ROLE;
SELECT hostile_folded('h_nap_stock', 'qty');
SELECT qty AS nap_folded FROM h_nap_stock;

-- 13. pg_occ's check of a new publication (is the ledger in it?) runs no
-- operator of mallory's, whatever search_path the superuser who creates it
-- has (0.7.0 resolved its = there)
SET ROLE occ_hostile_mallory;
CREATE TABLE h_eq_calls (n int);
GRANT INSERT ON h_eq_calls TO PUBLIC;
CREATE FUNCTION h_eq(a name, b name) RETURNS boolean LANGUAGE sql
    AS $$INSERT INTO public.h_eq_calls VALUES (1); SELECT a::text OPERATOR(pg_catalog.=) b::text$$;
CREATE OPERATOR public.= (FUNCTION = h_eq, LEFTARG = name, RIGHTARG = name);
RESET ROLE;
SET search_path = public, pg_catalog;
SET client_min_messages = error;  -- wal_level's own warning
CREATE PUBLICATION h_pub FOR TABLE h_acct;
RESET client_min_messages;
RESET search_path;
DROP PUBLICATION h_pub;
SELECT count(*) AS mallorys_operator_calls FROM h_eq_calls;
DROP OPERATOR public.= (name, name);

DROP TABLE h_stock, h_mine, h_pk, h_stale, h_big, h_acct, h_swap, h_sticky_stock, h_typed, h_rekey, h_nap_stock, h_nap_gate,
    h_eq_calls;
DROP TYPE h_item;
DROP TABLE h_gate;
DROP FUNCTION h_sneak(), h_swap_delta(), h_sticky(text), h_worker_may(text), h_nap(text), h_eq(name, name);
REVOKE CREATE ON SCHEMA public FROM occ_hostile_alice, occ_hostile_mallory;
DROP ROLE occ_hostile_alice, occ_hostile_mallory;
DROP FUNCTION hostile_folded(regclass, name);
