-- pg_occ's attack surface, as a list: every routine that PUBLIC may execute,
-- every trigger function and how it refuses a call it was not made for, and
-- every background worker with the role it runs as.  Adding one to any list
-- is a decision: review who can reach it, as whom it runs, with which
-- search_path and settings, and what of the caller's it can end up running
-- (docs/reservable.md, docs/reference.md).  Runs in one transaction that is rolled back.
\ir begin.psql

SELECT plan(12);

------------------------------------------------------------------------
-- Routines PUBLIC may execute: exactly these
------------------------------------------------------------------------
SELECT set_eq(
    $$ SELECT p.oid::regprocedure::text
         FROM pg_proc p
        WHERE p.pronamespace = 'occ'::regnamespace
          AND has_function_privilege('public', p.oid, 'EXECUTE') $$,
    ARRAY['occ.attempt()',
          'occ.backoff(integer,interval,interval,text,double precision,interval,double precision)',
          'occ.drop_reservable(regclass,name)',
          'occ.key_stats(boolean)',
          'occ.last_retry()',
          'occ.make_reservable(regclass,name)',
          'occ.reservable_guard()',
          'occ.reservation_ledger_guard()',
          'occ.reservations()',
          'occ.reserve(regclass,name,anycompatible,bigint)',
          'occ.reserved_value(regclass,name,anycompatible)',
          'occ.retry(text,jsonb,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,jsonb,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.setseed(double precision)',
          'occ.stats(boolean)',
          'occ.stats_info()',
          'occ.try_reserve(regclass,name,anycompatible,bigint)'],
    'PUBLIC may execute exactly these routines of pg_occ (a new one is a reviewed decision)');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND prosecdef), 0,
          'none of them runs as its owner (SECURITY DEFINER): each runs as its caller');

------------------------------------------------------------------------
-- Trigger functions: called other than as they were made for, an error,
-- never a crash
------------------------------------------------------------------------
CREATE TABLE surface_t (id int PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0));
INSERT INTO surface_t VALUES (1, 5);
SELECT throws_ok('SELECT occ.reservable_guard()', '39P01', NULL,
                 'occ.reservable_guard() called as a function: refused');
CREATE TRIGGER surface_ins BEFORE INSERT ON surface_t FOR EACH ROW EXECUTE FUNCTION occ.reservable_guard('qty');
SELECT throws_ok('INSERT INTO surface_t VALUES (2, 1)', '39P01', NULL,
                 'occ.reservable_guard() fired BEFORE INSERT FOR EACH ROW: refused (it read a NULL tuple and crashed in 0.5.0)');
DROP TRIGGER surface_ins ON surface_t;
CREATE TRIGGER surface_stmt BEFORE UPDATE ON surface_t FOR EACH STATEMENT EXECUTE FUNCTION occ.reservable_guard('qty');
SELECT throws_ok('UPDATE surface_t SET qty = 4', '39P01', NULL,
                 'occ.reservable_guard() fired FOR EACH STATEMENT with a column: refused');
DROP TRIGGER surface_stmt ON surface_t;
CREATE TRIGGER surface_after AFTER UPDATE ON surface_t FOR EACH ROW EXECUTE FUNCTION occ.reservable_guard('qty');
SELECT throws_ok('UPDATE surface_t SET qty = 4', '39P01', NULL,
                 'occ.reservable_guard() fired AFTER UPDATE: refused');
DROP TRIGGER surface_after ON surface_t;
CREATE TRIGGER surface_shape BEFORE UPDATE ON surface_t FOR EACH ROW EXECUTE FUNCTION occ.reservable_guard('qty');
SELECT throws_ok('UPDATE surface_t SET qty = 4', '55000', NULL,
                 'a guard of another shape than occ.make_reservable() makes declares nothing: refused');
DROP TRIGGER surface_shape ON surface_t;
SELECT throws_ok('SELECT occ.reservation_ledger_guard()', '39P01', NULL,
                 'occ.reservation_ledger_guard() called as a function: refused');
CREATE TRIGGER surface_ledger BEFORE INSERT ON surface_t FOR EACH ROW EXECUTE FUNCTION occ.reservation_ledger_guard();
SELECT throws_ok('INSERT INTO surface_t VALUES (3, 1)', '39P01', NULL,
                 'occ.reservation_ledger_guard() on another table than the ledger: refused');
DROP TRIGGER surface_ledger ON surface_t;

------------------------------------------------------------------------
-- Background workers: the launcher, connected to no database, and the fold
-- worker of each database with reservations, both as the bootstrap
-- superuser (the fold runs a table's UPDATE as the table's owner)
------------------------------------------------------------------------
SELECT set_eq(
    $$ SELECT bgw_type FROM (VALUES ('pg_occ fold launcher'), ('pg_occ fold')) AS w(bgw_type) $$,
    $$ SELECT DISTINCT backend_type FROM pg_stat_activity WHERE backend_type LIKE 'pg_occ%'
       UNION SELECT 'pg_occ fold' $$,
    'pg_occ starts exactly two kinds of background worker: the fold launcher and a fold worker per database');
SELECT results_eq(
    $$ SELECT datname IS NULL, usesysid = 10 FROM pg_stat_activity WHERE backend_type = 'pg_occ fold launcher' $$,
    $$ VALUES (true, true) $$,
    'the fold launcher runs, connected to no database, as the bootstrap superuser');
SELECT is((SELECT count(*)::int FROM pg_stat_activity
            WHERE backend_type = 'pg_occ fold' AND usesysid <> 10), 0,
          'a fold worker runs as the bootstrap superuser (test/fold_hostile.sh attacks it)');

SELECT * FROM finish();
ROLLBACK;
