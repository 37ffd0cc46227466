-- The occ.* settings: defaults, units, validation and the reserved prefix.

-- (occ.stats_max is the server's, whatever postgresql.conf says: not shown)
SELECT name, CASE WHEN name <> 'occ.stats_max' THEN setting END AS setting,
       unit, vartype, context, boot_val
  FROM pg_settings WHERE name LIKE 'occ.%' ORDER BY name;
SHOW occ.base_delay;
SHOW occ.max_delay;

-- microsecond settings round-trip through interval
SET occ.base_delay = '250us';
SHOW occ.base_delay;
SELECT current_setting('occ.base_delay')::interval;
RESET occ.base_delay;

-- per role and per database, like any setting
CREATE ROLE occ_guc_role;
ALTER ROLE occ_guc_role SET occ.jitter = 'equal';
SELECT unnest(setconfig) FROM pg_db_role_setting WHERE setrole = 'occ_guc_role'::regrole;
DROP ROLE occ_guc_role;

-- bad values are refused; psql prints the SQLSTATE after each
SET occ.jitter = 'fuzzy';
\echo :LAST_ERROR_SQLSTATE
SET occ.base_delay = '-1ms';
\echo :LAST_ERROR_SQLSTATE
SET occ.factor = 0.5;
\echo :LAST_ERROR_SQLSTATE
SET occ.max_attempts = 0;
\echo :LAST_ERROR_SQLSTATE
SET occ.isolation = 'chaos';
\echo :LAST_ERROR_SQLSTATE
SET occ.retry_sqlstates = '40001,4000';
\echo :LAST_ERROR_SQLSTATE
SET occ.retry_sqlstates = '57014';
\echo :LAST_ERROR_SQLSTATE
SET occ.stats_max = 50;
\echo :LAST_ERROR_SQLSTATE
-- the prefix is reserved: a misspelling is an error, not a placeholder
SET occ.base_dealy = '1ms';
\echo :LAST_ERROR_SQLSTATE

-- SQLSTATEs and classes in either case
SET occ.retry_sqlstates = '40001, 40p01, 40';
SHOW occ.retry_sqlstates;
RESET occ.retry_sqlstates;
