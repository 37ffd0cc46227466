/* pg_occ 0.4.0 -> 0.5.0: reservable columns (escrow) */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.5.0'" to load this file. \quit

-- Reservable columns (escrow): changed by reservations, without row locks

-- The ledger: one row per reservation, committed or aborted with its
-- transaction; the fold worker moves committed rows into their tables.  No
-- role but the superuser reads or writes it: occ.reserve() inserts its rows.
-- Dumped with the extension (pg_dump takes the tables and the ledger in one
-- snapshot), rel a regclass so that a restore finds the table by its name.
CREATE TABLE occ.reservation_ledger (
    rel   regclass NOT NULL,
    col   name     NOT NULL,
    key   text     NOT NULL,
    delta bigint   NOT NULL
);

COMMENT ON TABLE occ.reservation_ledger IS
'reservations committed and not yet folded into their rows (and those of transactions in progress): written by occ.reserve(), emptied by the fold worker';

SELECT pg_catalog.pg_extension_config_dump('occ.reservation_ledger', '');

-- Not for logical replication (declare.c refuses to publish it by name or
-- schema; its guard, below, refuses its rows in a subscription's apply), but
-- a publication FOR ALL TABLES takes it: REPLICA IDENTITY FULL lets the fold
-- delete its rows there all the same.
ALTER TABLE occ.reservation_ledger REPLICA IDENTITY FULL;

-- The extension's owner (the database's owner, typically) dumps and restores
-- the ledger with the database: SELECT and INSERT.  A row inserted other
-- than by occ.reserve() (a restore) must name a column that its role may
-- UPDATE: no one folds a delta into a table that is not theirs to change.
-- A row that a subscription's apply (replica mode) brings is another
-- server's reservation, which this server's fold would apply on top of the
-- folded value that the subscription brings too: refused (the trigger
-- fires ALWAYS).
CREATE FUNCTION occ.reservation_ledger_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('session_replication_role') = 'replica' THEN
        RAISE EXCEPTION 'occ.reservation_ledger is not for logical replication'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its rows are the reservations of the server that made them; a subscriber gets the reservable columns'' folded values.',
                  HINT = 'Publish the tables that a subscriber needs rather than all tables.';
    END IF;
    IF NOT has_column_privilege(NEW.rel, NEW.col, 'UPDATE') THEN
        RAISE EXCEPTION 'permission denied to add a reservation of "%" of %', NEW.col, NEW.rel
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A ledger row names a column that its role may UPDATE; reserve with occ.reserve().';
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION occ.reservation_ledger_guard() IS
'the trigger of occ.reservation_ledger: a row inserted other than by occ.reserve() (a restore) needs UPDATE on the column it names; a subscription may not bring one';

CREATE TRIGGER reservation_ledger_guard BEFORE INSERT ON occ.reservation_ledger
    FOR EACH ROW EXECUTE FUNCTION occ.reservation_ledger_guard();
ALTER TABLE occ.reservation_ledger ENABLE ALWAYS TRIGGER reservation_ledger_guard;

GRANT SELECT, INSERT ON occ.reservation_ledger TO @extowner@;

CREATE FUNCTION occ.reservable_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'occ_reservable_guard'
LANGUAGE C;

COMMENT ON FUNCTION occ.reservable_guard() IS
'the trigger that occ.make_reservable() creates: it marks a column reservable and refuses the UPDATE, DELETE and TRUNCATE that would change it otherwise than by occ.reserve()';

CREATE FUNCTION occ.make_reservable(rel regclass, col name)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_make_reservable'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.make_reservable(regclass, name) IS
'declare col of rel reservable (its owner only): an integer NOT NULL column of a table with a one-column primary key, bounded by CHECK constraints such as col >= 0, from then on changed only by occ.reserve()';

CREATE FUNCTION occ.drop_reservable(rel regclass, col name)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_drop_reservable'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.drop_reservable(regclass, name) IS
'make col of rel an ordinary column again (its owner only); reservations already committed are still folded into it';

CREATE FUNCTION occ.reserve(rel regclass, col name, key anycompatible, delta bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_reserve'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.reserve(regclass, name, anycompatible, bigint) IS
'add delta to col of the row of rel whose primary key is key, when the current transaction commits, without locking the row or waiting for the other transactions that change it; refused at once (23514) if the column''s CHECK bounds could break should every reservation in flight toward them commit';

CREATE FUNCTION occ.reserved_value(rel regclass, col name, key anycompatible)
RETURNS bigint
AS 'MODULE_PATHNAME', 'occ_reserved_value'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.reserved_value(regclass, name, anycompatible) IS
'the latest committed value of col of the row of rel whose primary key is key, plus the current transaction''s own reservations of it (a plain SELECT shows the value as last folded)';

CREATE FUNCTION occ.reservations(
    OUT rel            regclass,
    OUT col            name,
    OUT key            text,
    OUT committed      bigint,
    OUT in_flight_down bigint,
    OUT in_flight_up   bigint,
    OUT in_flight      integer,
    OUT reservations   bigint,
    OUT refusals       bigint,
    OUT waits          bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_reservations'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.reservations() IS
'the rows of this database with reservations since the server started (or since their entry was last reused), for the columns the caller may read (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.reservations AS
    SELECT * FROM occ.reservations();

COMMENT ON VIEW occ.reservations IS
'per reservable row: committed value (latest), decrements and increments in flight, reservations taken, refused (bound) and waits (for a load of the row or a fold)';

GRANT SELECT ON occ.reservations TO PUBLIC;
