/* pg_occ 0.6.0 -> 0.7.0: reservations from plain UPDATEs, and a reservation that may be refused */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.7.0'" to load this file. \quit

-- UPDATE t SET c = c - 3 WHERE pk = 42 on a reservable column reserves (the
-- library's planner hook: nothing to declare).  A reservation that the
-- bounds refuse (sold out) can be an answer rather than an error:
CREATE FUNCTION occ.try_reserve(rel regclass, col name, key anycompatible, delta bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'occ_try_reserve'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.try_reserve(regclass, name, anycompatible, bigint) IS
'occ.reserve(), but true when the reservation is taken and false, with nothing reserved and no error, when the column''s CHECK bounds refuse it (sold out)';
