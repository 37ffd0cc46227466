/* pg_occ 0.3.0 -> 0.4.0: occ.gate no longer executable by PUBLIC; its comment */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.4.0'" to load this file. \quit

-- A role that holds a gate makes every call of that key wait: grant EXECUTE
-- on occ.gate to the roles that write what the key names, not to PUBLIC
-- (see pg_occ--0.4.0.sql).  Grants to other roles stay.
REVOKE EXECUTE ON FUNCTION occ.gate(text) FROM PUBLIC;

COMMENT ON FUNCTION occ.gate(text) IS
'wait for the gate of key, the queue that occ.retry(..., contention => queue, key => key) uses, and hold it until the end of the current transaction (or the rollback of a savepoint set before it): for writers that do not go through occ.retry';
