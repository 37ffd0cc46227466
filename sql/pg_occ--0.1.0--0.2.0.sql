/* pg_occ 0.1.0 -> 0.2.0: queue mode (contention, key, occ.gate), gate statistics, the schema owned by the extension */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.2.0'" to load this file. \quit

-- 1. The schema occ becomes a member of the extension, as a fresh install
-- makes it, so that DROP EXTENSION removes it.  0.1.0's control file had
-- "schema = occ": the extension lives in the schema, and PostgreSQL refuses
-- to add a schema to the extension it contains.  Move the extension to
-- pg_catalog (as 0.2.0's control file declares; pg_catalog is pinned, so no
-- dependency on it is recorded), then add the schema.
DO $$
DECLARE
    foreign_objects text;
BEGIN
    -- 0.1.0 adopted a schema occ that existed already: refuse to make a
    -- schema that another role owns, or that others may create objects in,
    -- part of the extension
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.pg_extension e
                WHERE n.nspname = 'occ' AND e.extname = 'pg_occ'
                  AND (n.nspowner <> e.extowner
                       OR EXISTS (SELECT FROM pg_catalog.aclexplode(n.nspacl) a
                                   WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner))) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'schema "occ" is owned by another role than the extension, or others may create objects in it',
            DETAIL = 'pg_occ 0.2.0 makes the schema occ part of the extension; 0.1.0 adopted a schema that existed already.',
            HINT = 'Check the objects in occ, ALTER SCHEMA occ OWNER TO the owner of the extension, REVOKE CREATE ON SCHEMA occ FROM the others, then run ALTER EXTENSION pg_occ UPDATE again.';
    END IF;

    SELECT pg_catalog.string_agg(pg_catalog.format('%s %s', o.kind, o.name), ', ' ORDER BY o.name)
      INTO foreign_objects
      FROM (SELECT 'function' AS kind, pg_catalog.format('occ.%I(%s)', p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)) AS name, 'pg_catalog.pg_proc'::pg_catalog.regclass AS classid, p.oid
              FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'occ'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'relation', pg_catalog.format('occ.%I', c.relname), 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid
              FROM pg_catalog.pg_class c WHERE c.relnamespace = 'occ'::pg_catalog.regnamespace
                AND c.relkind NOT IN ('t', 'i')
            UNION ALL
            SELECT 'type', pg_catalog.format('occ.%I', t.typname), 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid
              FROM pg_catalog.pg_type t WHERE t.typnamespace = 'occ'::pg_catalog.regnamespace
                AND t.typrelid = 0 AND t.typelem = 0) o
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                        WHERE d.classid = o.classid AND d.objid = o.oid AND d.deptype = 'e');
    IF foreign_objects IS NOT NULL THEN
        RAISE WARNING 'schema occ contains objects that are not part of pg_occ: %', foreign_objects
            USING HINT = 'Check who created them; DROP EXTENSION pg_occ will now drop the schema and fail until they are moved or dropped.';
    END IF;
END
$$;

DELETE FROM pg_catalog.pg_depend
 WHERE classid = 'pg_catalog.pg_extension'::pg_catalog.regclass
   AND objid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'pg_occ')
   AND refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass;

UPDATE pg_catalog.pg_extension
   SET extnamespace = 'pg_catalog'::pg_catalog.regnamespace
 WHERE extname = 'pg_occ';

ALTER EXTENSION pg_occ ADD SCHEMA occ;

COMMENT ON SCHEMA occ IS 'pg_occ: retry optimistic transactions, with jittered backoff or a FIFO queue per hot key';

-- 2. occ.retry takes contention and key; occ.gate is new.
DROP PROCEDURE occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[]);
DROP PROCEDURE occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[]);

-- occ.retry comes in two forms.  PL/pgSQL rejects an INOUT argument left to
-- its default, so the outputs live in a second form where they are required:
-- CALL occ.retry('...') works everywhere, and
-- CALL occ.retry('...', attempts => a, slept => s) also reports.
CREATE PROCEDURE occ.retry(
    sql          text,
    params       record           DEFAULT NULL,
    max_attempts integer          DEFAULT NULL,
    base         interval         DEFAULT NULL,
    cap          interval         DEFAULT NULL,
    jitter       text             DEFAULT NULL,
    factor       double precision DEFAULT NULL,
    max_duration interval         DEFAULT NULL,
    isolation    text             DEFAULT NULL,
    retry_on     text[]           DEFAULT NULL,
    contention   text             DEFAULT NULL,
    key          text             DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, text) IS
'run sql as one transaction, and run it again whole after a serialization failure or deadlock: after a jittered backoff, or (contention => queue) in FIFO order on the gate of its key';

CREATE PROCEDURE occ.retry(
    sql          text,
    INOUT attempts integer,
    INOUT slept    interval,
    params       record           DEFAULT NULL,
    max_attempts integer          DEFAULT NULL,
    base         interval         DEFAULT NULL,
    cap          interval         DEFAULT NULL,
    jitter       text             DEFAULT NULL,
    factor       double precision DEFAULT NULL,
    max_duration interval         DEFAULT NULL,
    isolation    text             DEFAULT NULL,
    retry_on     text[]           DEFAULT NULL,
    contention   text             DEFAULT NULL,
    key          text             DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, text) IS
'occ.retry that also sets attempts (executions of sql, the first included) and slept (time spent sleeping)';

CREATE FUNCTION occ.gate(key text)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_gate'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.gate(text) IS
'wait for the gate of key, the queue that occ.retry(..., contention => queue, key => key) uses, and hold it until the end of the current transaction: for writers that do not go through occ.retry';

-- 3. occ.last_retry() reports the time waited on the gate.
DROP FUNCTION occ.last_retry();

CREATE FUNCTION occ.last_retry(
    OUT attempts      integer,
    OUT slept         interval,
    OUT last_sqlstate text,
    OUT outcome       text,
    OUT total_time    interval,
    OUT waited        interval)
RETURNS record
AS 'MODULE_PATHNAME', 'occ_last_retry'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.last_retry() IS
'attempts, time slept, last failed SQLSTATE, outcome (committed, gave up, error), duration and time waited on the gate of this session''s last occ.retry call';

-- 4. occ.stats counts queued calls and the time they waited.
DROP VIEW occ.stats;
DROP FUNCTION occ.stats(boolean);

CREATE FUNCTION occ.stats(
    showtext boolean,
    OUT userid                 oid,
    OUT dbid                   oid,
    OUT queryid                bigint,
    OUT query                  text,
    OUT calls                  bigint,
    OUT commits                bigint,
    OUT gave_up                bigint,
    OUT errors                 bigint,
    OUT attempts               bigint,
    OUT serialization_failures bigint,
    OUT deadlocks              bigint,
    OUT other_failures         bigint,
    OUT total_sleep_time       double precision,
    OUT max_sleep_time         double precision,
    OUT mean_sleep_time        double precision,
    OUT queued                 bigint,
    OUT total_wait_time        double precision,
    OUT max_wait_time          double precision,
    OUT total_time             double precision,
    OUT mean_time              double precision,
    OUT mean_attempts          double precision,
    OUT max_attempts           bigint,
    OUT attempts_histogram     bigint[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION occ.stats(boolean) IS
'retry statistics per role, database and transaction text (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.stats AS
    SELECT * FROM occ.stats(true);

COMMENT ON VIEW occ.stats IS
'retry statistics of occ.retry per role, database and transaction text; times in milliseconds; queued counts calls that took the gate of their key (queue mode); attempts_histogram counts calls that took 1, 2, 3-4, 5-8, 9-16 and 17 or more attempts';

GRANT SELECT ON occ.stats TO PUBLIC;
