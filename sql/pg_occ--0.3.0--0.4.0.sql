/* pg_occ 0.3.0 -> 0.4.0: hardening (see CHANGELOG.md) */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.4.0'" to load this file. \quit

-- SET LOCAL occ.key: the statistics of the application's own transactions
CREATE FUNCTION occ.key_stats(
    showtext boolean,
    OUT userid                 oid,
    OUT dbid                   oid,
    OUT keyid                  bigint,
    OUT key                    text,
    OUT transactions           bigint,
    OUT commits                bigint,
    OUT serialization_failures bigint,
    OUT deadlocks              bigint,
    OUT other_failures         bigint,
    OUT queued                 bigint,
    OUT total_wait_time        double precision,
    OUT max_wait_time          double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_key_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION occ.key_stats(boolean) IS
'statistics of the application''s transactions that set occ.key, per role, database and key (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.key_stats AS
    SELECT * FROM occ.key_stats(true);

COMMENT ON VIEW occ.key_stats IS
'statistics of the application''s transactions that set occ.key (SET LOCAL occ.key), per role, database and key; a transaction with several keys counts under each; times in milliseconds; queued counts the transactions that took the gates of their keys';

GRANT SELECT ON occ.key_stats TO PUBLIC;
