-- occ.make_reservable() refuses the tables of Citus (issue 38), which it
-- finds in Citus's catalog pg_catalog.pg_dist_partition (src/escrow/
-- declare.c) without Citus: here a stand-in of the catalog, with Citus
-- 13.2's columns, and a row for a table of each kind (test/citus.sh checks
-- a real Citus cluster).  Each refusal shows its message, detail and hint,
-- and its SQLSTATE (\echo :LAST_ERROR_SQLSTATE).
\set VERBOSITY default
CREATE TABLE c_plain (id int PRIMARY KEY, v bigint NOT NULL);
CREATE TABLE c_hash (LIKE c_plain INCLUDING ALL);
CREATE TABLE c_single (LIKE c_plain INCLUDING ALL);
CREATE TABLE c_ref (LIKE c_plain INCLUDING ALL);
CREATE TABLE c_local (LIKE c_plain INCLUDING ALL);
-- no catalog (no Citus): a table is a table
SELECT occ.make_reservable('c_hash', 'v');
SELECT occ.drop_reservable('c_hash', 'v');
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (
    logicalrelid regclass NOT NULL,
    partmethod "char" NOT NULL,
    partkey text,
    colocationid integer DEFAULT 0 NOT NULL,
    repmodel "char" DEFAULT 'c' NOT NULL,
    autoconverted boolean DEFAULT false);
RESET allow_system_table_mods;
-- hash distributed, single-shard distributed (method none, in a colocation
-- group), reference (none, replicated by 2PC), Citus local (none, no group)
INSERT INTO pg_catalog.pg_dist_partition VALUES
    ('c_hash', 'h', '{VAR :varattno 1}', 1, 's'),
    ('c_single', 'n', NULL, 2, 's'),
    ('c_ref', 'n', NULL, 3, 't'),
    ('c_local', 'n', NULL, 0, 's');
SELECT occ.make_reservable('c_hash', 'v');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('c_single', 'v');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('c_ref', 'v');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.make_reservable('c_local', 'v');
\echo :LAST_ERROR_SQLSTATE
-- before the column is looked up
SELECT occ.make_reservable('c_hash', 'nope');
\echo :LAST_ERROR_SQLSTATE
-- distributed earlier in the same transaction
BEGIN;
CREATE TABLE c_new (LIKE c_plain INCLUDING ALL);
INSERT INTO pg_catalog.pg_dist_partition VALUES ('c_new', 'h', NULL, 1, 's');
SELECT occ.make_reservable('c_new', 'v');
ROLLBACK;
-- a table that is not Citus's, beside them: reservable
SELECT occ.make_reservable('c_plain', 'v');
SELECT count(*) AS guards FROM pg_trigger WHERE tgname LIKE 'occ_reservable%';
SELECT occ.drop_reservable('c_plain', 'v');
DROP TABLE pg_catalog.pg_dist_partition;
DROP TABLE c_plain, c_hash, c_single, c_ref, c_local;
