-- Updating pg_occ from 0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0 or 0.6.0 to 0.7.0
-- (sql/pg_occ--0.1.0--0.2.0.sql, sql/pg_occ--0.2.0--0.3.0.sql,
-- sql/pg_occ--0.3.0--0.4.0.sql, sql/pg_occ--0.4.0--0.5.0.sql,
-- sql/pg_occ--0.5.0--0.6.0.sql, sql/pg_occ--0.6.0--0.7.0.sql) must give the
-- catalog that a fresh 0.7.0 install gives: the same member
-- objects, signatures, properties, privileges, comments, view definitions,
-- table columns and configuration tables, with the schema occ owned by the
-- extension.  pg_regress has
-- created the extension at its default version; this test starts by dropping
-- it and leaves it installed again at the end.

-- A description of the extension and of every member object.  The view reads
-- only the catalogs, so it survives DROP EXTENSION.
CREATE TEMP VIEW occ_catalog AS
WITH deps AS (
    -- the dependencies of each object, other than its membership
    SELECT classid, objid, objsubid,
           string_agg(dep, ', ' ORDER BY dep COLLATE "C") AS dependencies
      FROM (SELECT classid, objid, objsubid,
                   format('%s (%s)', pg_describe_object(refclassid, refobjid, refobjsubid), deptype) AS dep
              FROM pg_depend WHERE deptype <> 'e') o
     GROUP BY classid, objid, objsubid)
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS member,
       NULL::text AS extension,
       -- routines
       p.prokind,
       pg_get_function_identity_arguments(p.oid) AS identity_arguments,
       pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result,
       p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.proleakproof,
       p.procost, p.prorows, p.proconfig::text AS proconfig,
       (SELECT lanname FROM pg_language WHERE oid = p.prolang) AS language,
       p.prosrc, p.probin,
       p.proacl::text AS proacl,
       p.proowner = e.extowner AS routine_owned_by_extowner,
       -- views and tables (0.5.0's ledger: its replica identity, its trigger)
       c.relkind,
       c.relreplident,
       (SELECT string_agg(format('%s %s', t.tgname, t.tgenabled), ', ' ORDER BY t.tgname)
          FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal) AS triggers,
       pg_get_viewdef(c.oid) AS viewdef,
       (SELECT string_agg(format('%s %s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                 CASE WHEN a.attnotnull THEN ' not null' END), ', ' ORDER BY a.attnum)
          FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       c.relacl::text AS relacl,
       c.relowner = e.extowner AS relation_owned_by_extowner,
       -- the schema
       n.nspacl::text AS nspacl,
       n.nspowner = e.extowner AS schema_owned_by_extowner,
       -- every member: its comment, initial privileges (what pg_dump
       -- restores) and other dependencies
       (SELECT description FROM pg_description
         WHERE objoid = d.objid AND classoid = d.classid AND objsubid = d.objsubid) AS comment,
       (SELECT format('%s %s', i.privtype, i.initprivs) FROM pg_init_privs i
         WHERE i.objoid = d.objid AND i.classoid = d.classid AND i.objsubid = d.objsubid) AS initprivs,
       (SELECT dependencies FROM deps
         WHERE deps.classid = d.classid AND deps.objid = d.objid AND deps.objsubid = d.objsubid) AS dependencies
  FROM pg_extension e
  JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid AND d.deptype = 'e'
  LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
  LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
  LEFT JOIN pg_namespace n ON d.classid = 'pg_namespace'::regclass AND n.oid = d.objid
 WHERE e.extname = 'pg_occ'
UNION ALL
-- the extension itself; its configuration tables (0.5.0's ledger) by name,
-- not by OID, which differs between installs
SELECT 'extension ' || e.extname,
       format('extnamespace %s, extrelocatable %s, extversion %s, extconfig %s, extcondition %s',
              e.extnamespace::regnamespace, e.extrelocatable, e.extversion, e.extconfig::regclass[], e.extcondition),
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL,
       obj_description(e.oid, 'pg_extension'),
       NULL,
       (SELECT dependencies FROM deps
         WHERE deps.classid = 'pg_extension'::regclass AND deps.objid = e.oid AND deps.objsubid = 0)
  FROM pg_extension e
 WHERE e.extname = 'pg_occ';

-- 1. A fresh install of the default version, 0.7.0
DROP EXTENSION pg_occ;
SELECT count(*) AS schema_occ_left FROM pg_namespace WHERE nspname = 'occ';
CREATE EXTENSION pg_occ;
SELECT extversion, extnamespace::regnamespace AS extnamespace FROM pg_extension WHERE extname = 'pg_occ';
CREATE TEMP TABLE fresh AS SELECT * FROM occ_catalog;
SELECT member FROM fresh ORDER BY member COLLATE "C";
-- the ledger: a plain table on which PUBLIC has no privilege (its owner,
-- the extension's and the database's owner have), dumped with the
-- extension (its configuration table)
SELECT relkind, columns,
       (SELECT count(*) FROM aclexplode(relacl::aclitem[]) WHERE grantee = 0) AS public_privileges,
       relation_owned_by_extowner, dependencies
  FROM fresh WHERE member = 'table occ.reservation_ledger';
SELECT extension FROM fresh WHERE member = 'extension pg_occ';
-- every member has a comment
SELECT member AS member_without_comment FROM fresh WHERE comment IS NULL OR comment = '';
-- how the installed catalog differs from the fresh one, in both directions
-- (a difference shows as one record per row)
CREATE TEMP VIEW differences AS
SELECT 'missing after the update' AS difference, * FROM (TABLE fresh EXCEPT TABLE occ_catalog) f
UNION ALL
SELECT 'only after the update', * FROM (TABLE occ_catalog EXCEPT TABLE fresh) u;

-- A schema occ that exists already makes a fresh install fail
DROP EXTENSION pg_occ;
CREATE SCHEMA occ;
\set VERBOSITY terse
CREATE EXTENSION pg_occ;
\set VERBOSITY default
DROP SCHEMA occ;

-- 2. Version 0.1.0, installed into its schema occ by CREATE EXTENSION
CREATE EXTENSION pg_occ VERSION '0.1.0';
SELECT extversion, extnamespace::regnamespace AS extnamespace FROM pg_extension WHERE extname = 'pg_occ';
SELECT count(*) AS schema_occ_is_member FROM pg_depend
 WHERE classid = 'pg_namespace'::regclass AND objid = 'occ'::regnamespace AND deptype = 'e';
-- it works
SELECT occ.backoff(2, '1ms', '1s', 'full', 2, NULL, 0.5) AS full_jitter_draw_half;
SELECT occ.backoff(2, '1ms', '1s', 'none') AS no_jitter;
CALL occ.retry('SELECT 1');
SELECT attempts, slept, last_sqlstate, outcome FROM occ.last_retry();
-- in queue mode, the library's default (0.1.0's SQL has no contention
-- argument): the attempts fail until the learner finds the body hot (after
-- eight or nine failures: learner.c), the call takes the gate of its body
-- instead of sleeping, and its next attempt commits
CALL occ.retry($$DO 'BEGIN
                   IF NOT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = ''advisory''
                                   AND objsubid = 20291 AND granted) THEN
                     RAISE EXCEPTION USING ERRCODE = ''40001'', MESSAGE = ''simulated conflict'';
                   END IF;
                 END'$$, max_attempts => 12, base => '1ms', cap => '1ms', jitter => 'none');
SELECT attempts BETWEEN 9 AND 12 AS after_eight_failures, last_sqlstate, outcome FROM occ.last_retry();
-- an object of someone else's in schema occ: the update warns about it
CREATE FUNCTION occ.not_ours() RETURNS int LANGUAGE sql AS 'SELECT 1';

-- 3. The update
ALTER EXTENSION pg_occ UPDATE;
DROP FUNCTION occ.not_ours();
SELECT extversion, extnamespace::regnamespace AS extnamespace FROM pg_extension WHERE extname = 'pg_occ';
SELECT extversion = '0.7.0' AS updated_to_0_7_0 FROM pg_extension WHERE extname = 'pg_occ';
SELECT count(*) AS schema_occ_is_member FROM pg_depend
 WHERE classid = 'pg_namespace'::regclass AND objid = 'occ'::regnamespace
   AND refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_occ') AND deptype = 'e';
-- the catalog is that of a fresh install
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;

-- the new features work after the update
CALL occ.retry('SELECT 1', contention => 'queue', key => 'k');
SELECT attempts, outcome FROM occ.last_retry();
SELECT waited IS NOT NULL AS has_waited FROM occ.last_retry();
SELECT queued FROM occ.stats LIMIT 0;
SELECT count(*) AS queued_columns FROM occ.stats WHERE queued >= 0 AND total_wait_time >= 0 AND max_wait_time >= 0
   AND query = 'SELECT 1';
BEGIN;
SELECT occ.gate('k');
COMMIT;
SET occ.contention = 'queue';
SHOW occ.contention;
RESET occ.contention;
CALL occ.retry('SELECT occ.attempt() AS attempt', result => NULL);
CALL occ.retry('SELECT 1 AS one', result => NULL, attempts => NULL, slept => NULL);

-- 3b. Version 0.2.0, updated: the same catalog again, and 0.2.0's forms
-- of occ.retry keep working on 0.7.0's library until the update
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.2.0';
CALL occ.retry('SELECT 1', attempts => NULL, slept => NULL);
CALL occ.retry('SELECT 1', contention => 'queue', key => 'k');
SELECT attempts, outcome FROM occ.last_retry();
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;

-- 3c. Version 0.3.0, updated: the same catalog again, and 0.3.0's forms keep
-- working on 0.7.0's library until the update
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.3.0';
CALL occ.retry('SELECT occ.attempt() AS attempt', result => NULL, attempts => NULL, slept => NULL);
CALL occ.retry('SELECT 1', contention => 'queue', key => 'k');
SELECT attempts, outcome FROM occ.last_retry();
SELECT budget_refusals >= 0 AS has_budget_columns FROM occ.stats_info;
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;

-- 3d. Version 0.4.0, updated: the same catalog again, 0.4.0's forms keep
-- working on 0.7.0's library until the update, and the reservable columns
-- work after it
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.4.0';
-- 0.4.0's key: one key or an array of keys (anycompatible); occ.gate of
-- several keys; occ.key_stats; occ.stats' batch columns
CALL occ.retry('SELECT 1', contention => 'queue', key => ARRAY['k1', 'k2']);
SELECT attempts, outcome FROM occ.last_retry();
CALL occ.retry('SELECT 1', contention => 'queue', key => 42);
SELECT attempts, outcome FROM occ.last_retry();
BEGIN;
SELECT occ.gate(ARRAY['k1', 'k2']);
COMMIT;
SELECT count(*) >= 0 AS has_key_stats FROM occ.key_stats;
SELECT batched, mean_batch_size FROM occ.stats LIMIT 0;
SELECT count(*) AS reservable_objects_before_update FROM pg_proc
 WHERE pronamespace = 'occ'::regnamespace
   AND proname IN ('reservable_guard', 'make_reservable', 'drop_reservable', 'reserve', 'reserved_value', 'reservations');
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;
-- the update made the ledger a configuration table, as CREATE EXTENSION does
SELECT extconfig::regclass[] AS extconfig, extcondition FROM pg_extension WHERE extname = 'pg_occ';
-- 0.4.0's forms still work
CALL occ.retry('SELECT 1', contention => 'queue', key => ARRAY['k1', 'k2']);
SELECT attempts, outcome FROM occ.last_retry();

-- the reservable columns work after the update: a column bounded by its
-- CHECK constraint, declared reservable, changed by reservations
CREATE TABLE upgrade_stock (item int PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
INSERT INTO upgrade_stock VALUES (1, 10), (2, 0);
SELECT occ.make_reservable('upgrade_stock', 'qty');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'upgrade_stock'::regclass ORDER BY tgname COLLATE "C";
BEGIN;
SELECT occ.reserve('upgrade_stock', 'qty', 1, -3);
-- the transaction sees its own reservation
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_in_transaction;
COMMIT;
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_after_commit;
-- a reservation that could break the bound is refused at once
\set VERBOSITY terse
SELECT occ.reserve('upgrade_stock', 'qty', 2, -1);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT occ.reserved_value('upgrade_stock', 'qty', 2) AS qty_unchanged;
-- a rolled-back reservation changes nothing
BEGIN;
SELECT occ.reserve('upgrade_stock', 'qty', 1, -7);
ROLLBACK;
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_after_rollback;
-- the guard refuses a direct change of the column
\set VERBOSITY terse
UPDATE upgrade_stock SET qty = 100 WHERE item = 1;
\set VERBOSITY default
SELECT rel, col, key, committed, reservations, refusals FROM occ.reservations
 WHERE rel = 'upgrade_stock'::regclass ORDER BY key COLLATE "C";
-- an ordinary column again: its guard is gone, an UPDATE may change it
SELECT occ.drop_reservable('upgrade_stock', 'qty');
SELECT count(*) AS column_guards_left FROM pg_trigger
 WHERE tgrelid = 'upgrade_stock'::regclass AND tgname = 'occ_reservable_qty';
UPDATE upgrade_stock SET qty = 100 WHERE item = 2;
DROP TABLE upgrade_stock;

-- 3e. Version 0.5.0, updated: the same catalog again; a column declared
-- under 0.5.0 keeps its reservations, committed and folded, and its guard
-- fires ALWAYS after the update (a subscription's apply counts its changes)
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.5.0';
CREATE TABLE upgrade_stock (item int PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
INSERT INTO upgrade_stock VALUES (1, 10);
SELECT occ.make_reservable('upgrade_stock', 'qty');
SELECT occ.reserve('upgrade_stock', 'qty', 1, -4);
-- as 0.5.0's library left its guard: fired on origin only
ALTER TABLE upgrade_stock ENABLE TRIGGER occ_reservable_qty;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'upgrade_stock'::regclass ORDER BY tgname COLLATE "C";
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'upgrade_stock'::regclass ORDER BY tgname COLLATE "C";
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_after_update;
SELECT occ.reserve('upgrade_stock', 'qty', 1, -6);
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_sold_out;
SELECT occ.drop_reservable('upgrade_stock', 'qty');
SELECT qty AS folded_by_drop_reservable FROM upgrade_stock;
DROP TABLE upgrade_stock;

-- 3f. Version 0.6.0, updated: the same catalog again; a column declared
-- under 0.6.0 is reserved by a plain UPDATE after the update, and
-- occ.try_reserve() answers a refusal with false
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.6.0';
CREATE TABLE upgrade_stock (item int PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
INSERT INTO upgrade_stock VALUES (1, 10);
SELECT occ.make_reservable('upgrade_stock', 'qty');
SELECT occ.reserve('upgrade_stock', 'qty', 1, -4);
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
\x on
SELECT * FROM differences ORDER BY member, difference;
\x off
SELECT (SELECT count(*) FROM fresh) AS fresh_members, (SELECT count(*) FROM occ_catalog) AS updated_members;
UPDATE upgrade_stock SET qty = qty - 5 WHERE item = 1;
SELECT occ.reserved_value('upgrade_stock', 'qty', 1) AS qty_after_update;
SELECT occ.try_reserve('upgrade_stock', 'qty', 1, -2) AS sold_out;
SELECT occ.try_reserve('upgrade_stock', 'qty', 1, -1) AS last_one;
SELECT occ.drop_reservable('upgrade_stock', 'qty');
SELECT qty AS folded_by_drop_reservable FROM upgrade_stock;
DROP TABLE upgrade_stock;

-- 4. DROP EXTENSION removes the schema occ, which the update gave to the
-- extension
DROP EXTENSION pg_occ;
SELECT count(*) = 0 AS schema_occ_dropped FROM pg_namespace WHERE nspname = 'occ';

-- 5. 0.1.0 adopted a schema occ that another role had made: the update
-- refuses to make such a schema part of the extension, until it is fixed
CREATE ROLE occ_upgrade_alice;
CREATE SCHEMA occ AUTHORIZATION occ_upgrade_alice;
CREATE EXTENSION pg_occ VERSION '0.1.0';
\set VERBOSITY default
ALTER EXTENSION pg_occ UPDATE;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
ALTER SCHEMA occ OWNER TO CURRENT_USER;
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
DROP EXTENSION pg_occ;
DROP ROLE occ_upgrade_alice;

-- leave pg_occ installed at its default version, as pg_regress made it
CREATE EXTENSION pg_occ;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
SELECT count(*) AS differences_from_fresh FROM differences;
DROP VIEW differences;
DROP TABLE fresh;
DROP VIEW occ_catalog;
