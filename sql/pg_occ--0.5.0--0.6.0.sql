/* pg_occ 0.5.0 -> 0.6.0: reservable columns under hostile use */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.6.0'" to load this file. \quit

-- The ledger's guard, in C: a restored row needs what occ.reserve() needs,
-- and where its column is reservable it is taken as a reservation (within
-- the bounds, counted by the row's entry); a subscription's rows are
-- skipped, not refused (a refusal stopped the whole subscription).
CREATE OR REPLACE FUNCTION occ.reservation_ledger_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'occ_reservation_ledger_guard'
LANGUAGE C;

COMMENT ON FUNCTION occ.reservation_ledger_guard() IS
'the trigger of occ.reservation_ledger: a row inserted other than by occ.reserve() (a restore) needs what occ.reserve() needs, and is taken as a reservation where its column is reservable; a subscription''s rows are skipped';

-- The database's owner dumps and restores the ledger, whoever created
-- pg_occ (a superuser's extension left it to the superuser: the owner's
-- pg_dump failed).
GRANT SELECT, INSERT ON occ.reservation_ledger TO pg_database_owner;

COMMENT ON FUNCTION occ.reservable_guard() IS
'the trigger that occ.make_reservable() creates: it marks a column reservable and refuses the UPDATE, DELETE and TRUNCATE that would change it otherwise than by occ.reserve() (the fold''s, and a subscription''s apply, which it counts, excepted)';

COMMENT ON FUNCTION occ.drop_reservable(regclass, name) IS
'make col of rel an ordinary column again (its owner only); reservations already committed are folded into it first';

-- occ.reservations shows the rows that the fold could not fold
DROP VIEW occ.reservations;
DROP FUNCTION occ.reservations();

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
    OUT waits          bigint,
    OUT fold_failures  bigint,
    OUT fold_error     text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_reservations'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.reservations() IS
'the rows of this database with reservations since the server started (or since their entry was last reused), for the columns the caller may read (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.reservations AS
    SELECT * FROM occ.reservations();

COMMENT ON VIEW occ.reservations IS
'per reservable row: committed value (latest), decrements and increments in flight, reservations taken, refused (bound) and waits (for a load of the row or a fold); the folds of the row that failed, and the last one''s error while it is not folded (NULL once it is)';

GRANT SELECT ON occ.reservations TO PUBLIC;

-- The column guards fire ALWAYS: a subscription's apply counts its changes
-- (it ran without them, and the subscriber's occ.reserved_value went stale)
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT tg.tgrelid::regclass AS rel, tg.tgname
               FROM pg_catalog.pg_trigger tg
              WHERE tg.tgfoid = 'occ.reservable_guard()'::pg_catalog.regprocedure
                AND tg.tgnargs = 1 AND tg.tgenabled = 'O'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', t.rel, t.tgname);
    END LOOP;
END
$$;
