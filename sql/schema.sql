-- The schema occ belongs to the extension (issue 8):
--   (a) DROP EXTENSION leaves nothing behind;
--   (b) a schema occ that exists already makes CREATE EXTENSION fail, clearly;
--   (c) so a role that owned such a schema cannot capture calls any more,
--       and once pg_occ is installed no ordinary role can create objects in occ;
--   (d) an update from 0.1.0 makes occ a member, which DROP EXTENSION removes.
-- pg_regress has created the extension; this test drops it and leaves it
-- installed again at the end.

-- Every schema, and every relation, routine and type outside
-- information_schema and pg_toast, by name (OIDs change when objects are
-- made again).  In pg_catalog, only objects made after initdb: the
-- extension's own schema is pg_catalog, so an unqualified name in its
-- script would land there.  Temporary schemas are left out: they hold the
-- snapshots.
CREATE TEMP VIEW occ_names AS
SELECT 'schema' AS kind, n.nspname::text AS name
  FROM pg_namespace n
 WHERE n.nspname !~ '^pg_(toast_)?temp_'
UNION ALL
SELECT 'relation ' || c.relkind::text, c.oid::regclass::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('information_schema', 'pg_toast') AND n.nspname !~ '^pg_(toast_)?temp_'
   AND (n.nspname <> 'pg_catalog' OR c.oid >= 16384)
UNION ALL
SELECT 'routine ' || p.prokind::text, p.oid::regprocedure::text
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('information_schema', 'pg_toast') AND n.nspname !~ '^pg_(toast_)?temp_'
   AND (n.nspname <> 'pg_catalog' OR p.oid >= 16384)
UNION ALL
SELECT 'type ' || t.typtype::text, t.oid::regtype::text
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE n.nspname NOT IN ('information_schema', 'pg_toast') AND n.nspname !~ '^pg_(toast_)?temp_'
   AND (n.nspname <> 'pg_catalog' OR t.oid >= 16384);

-- (a) what DROP EXTENSION leaves behind, after a fresh install
DROP EXTENSION pg_occ;
CREATE TEMP TABLE before_install AS SELECT * FROM occ_names;
CREATE EXTENSION pg_occ;
-- what kinds of objects the install made, and that all are in occ
SELECT DISTINCT kind AS made
  FROM (TABLE occ_names EXCEPT TABLE before_install) m
 ORDER BY kind;
SELECT name AS made_outside_occ
  FROM (TABLE occ_names EXCEPT TABLE before_install) m
 WHERE name <> 'occ' AND name NOT LIKE 'occ.%' AND name NOT LIKE '"occ".%'
 ORDER BY name;
DROP EXTENSION pg_occ;
SELECT 'left behind' AS difference, * FROM (TABLE occ_names EXCEPT TABLE before_install) l
UNION ALL
SELECT 'gone', * FROM (TABLE before_install EXCEPT TABLE occ_names) g
ORDER BY 2, 3;

-- (b) a schema occ that exists already, even empty and the superuser's own
CREATE SCHEMA occ;
\set SHOW_CONTEXT never
CREATE EXTENSION pg_occ;
\echo :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT count(*) AS pg_occ_installed FROM pg_extension WHERE extname = 'pg_occ';
DROP SCHEMA occ;

-- (c) a hostile role makes the schema occ before pg_occ is installed, with a
-- function that the superuser's calls would reach (0.1.0 adopted such a
-- schema: its owner could then add objects to it, and grant others the
-- right to)
CREATE ROLE occ_schema_mallory NOLOGIN NOSUPERUSER;
CREATE TABLE occ_schema_captured (called_by name);
GRANT INSERT ON occ_schema_captured TO PUBLIC;
CREATE SCHEMA occ AUTHORIZATION occ_schema_mallory;
SET ROLE occ_schema_mallory;
CREATE FUNCTION occ.backoff(attempt integer) RETURNS interval
LANGUAGE sql AS $$ INSERT INTO public.occ_schema_captured VALUES (current_user) RETURNING interval '0' $$;
GRANT CREATE ON SCHEMA occ TO PUBLIC;
RESET ROLE;
-- the install refuses it: nothing of pg_occ is made, mallory's function is
-- not called
\set SHOW_CONTEXT never
CREATE EXTENSION pg_occ;
\echo :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT count(*) AS pg_occ_installed FROM pg_extension WHERE extname = 'pg_occ';
SELECT count(*) AS captured_calls FROM occ_schema_captured;
-- once that schema is gone, pg_occ installs its own
DROP SCHEMA occ CASCADE;
CREATE EXTENSION pg_occ;
SELECT n.nspowner = e.extowner AS occ_owned_by_extension_owner,
       (SELECT rolsuper FROM pg_roles WHERE oid = n.nspowner) AS owner_is_superuser
  FROM pg_namespace n, pg_extension e
 WHERE n.nspname = 'occ' AND e.extname = 'pg_occ';
-- PUBLIC has USAGE, not CREATE; no role but superusers may create in occ
SELECT has_schema_privilege('public', 'occ', 'USAGE') AS public_usage,
       has_schema_privilege('public', 'occ', 'CREATE') AS public_create;
SELECT rolname AS may_create_in_occ FROM pg_roles
 WHERE NOT rolsuper AND has_schema_privilege(oid, 'occ', 'CREATE')
 ORDER BY rolname;
SET ROLE occ_schema_mallory;
\set VERBOSITY terse
CREATE FUNCTION occ.backoff(attempt integer) RETURNS interval
LANGUAGE sql AS $$ SELECT interval '0' $$;
CREATE FUNCTION occ.backoff(attempt bigint) RETURNS interval
LANGUAGE sql AS $$ SELECT interval '0' $$;
CREATE VIEW occ.last_retry AS SELECT 1 AS attempts;
ALTER FUNCTION occ.backoff(integer, interval, interval, text, double precision, interval, double precision) RENAME TO backoff_old;
DROP FUNCTION occ.setseed(double precision);
\set VERBOSITY default
RESET ROLE;
SELECT occ.backoff(3, '1ms', '1s', 'none') AS backoff_is_pg_occs;
SELECT count(*) AS captured_calls FROM occ_schema_captured;
DROP TABLE occ_schema_captured;
DROP ROLE occ_schema_mallory;

-- (d) 0.1.0 made the schema occ for the extension, which lived in it; the
-- update makes it a member
DROP EXTENSION pg_occ;
CREATE EXTENSION pg_occ VERSION '0.1.0';
SELECT extversion, extnamespace::regnamespace AS extnamespace FROM pg_extension WHERE extname = 'pg_occ';
SELECT count(*) AS occ_is_member FROM pg_depend
 WHERE classid = 'pg_namespace'::regclass AND objid = 'occ'::regnamespace AND deptype = 'e';
ALTER EXTENSION pg_occ UPDATE;
SELECT extversion, extnamespace::regnamespace AS extnamespace FROM pg_extension WHERE extname = 'pg_occ';
SELECT d.deptype AS occ_member_deptype, e.extname AS member_of
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE d.classid = 'pg_namespace'::regclass AND d.objid = 'occ'::regnamespace;
SELECT has_schema_privilege('public', 'occ', 'CREATE') AS public_create;
DROP EXTENSION pg_occ;
SELECT count(*) AS schema_occ_left FROM pg_namespace WHERE nspname = 'occ';
SELECT 'left behind' AS difference, * FROM (TABLE occ_names EXCEPT TABLE before_install) l
UNION ALL
SELECT 'gone', * FROM (TABLE before_install EXCEPT TABLE occ_names) g
ORDER BY 2, 3;

-- leave pg_occ installed, as pg_regress made it
CREATE EXTENSION pg_occ;
SELECT extversion FROM pg_extension WHERE extname = 'pg_occ';
DROP TABLE before_install;
DROP VIEW occ_names;
