/* pg_occ 0.2.0 -> 0.3.0: the body's result, occ.attempt(), the retry budget in occ.stats_info */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.3.0'" to load this file. \quit

-- The forms of occ.retry that return the body's result (see pg_occ--0.3.0.sql)
CREATE PROCEDURE occ.retry(
    sql          text,
    INOUT result jsonb,
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

COMMENT ON PROCEDURE occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, text) IS
'occ.retry that also sets result: the rows of the last statement of sql that returns rows, in the attempt that committed, as a jsonb array of objects (NULL if no statement returns rows)';

CREATE PROCEDURE occ.retry(
    sql          text,
    INOUT result   jsonb,
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

COMMENT ON PROCEDURE occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, text) IS
'occ.retry that sets result, attempts and slept';

CREATE FUNCTION occ.attempt()
RETURNS integer
AS 'MODULE_PATHNAME', 'occ_attempt'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.attempt() IS
'the number of the attempt running now (1 for the first) in the body of occ.retry; NULL outside occ.retry';

-- occ.stats_info gains the retry budget's columns
DROP VIEW occ.stats_info;
DROP FUNCTION occ.stats_info();

CREATE FUNCTION occ.stats_info(
    OUT dealloc         bigint,
    OUT stats_reset     timestamp with time zone,
    OUT budget_tokens   double precision,
    OUT budget_refusals bigint,
    OUT last_storm      timestamp with time zone)
RETURNS record
AS 'MODULE_PATHNAME', 'occ_stats_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION occ.stats_info() IS
'entries of occ.stats evicted to make room (see occ.stats_max), the time of the last reset, and the server-wide retry budget: tokens left (NULL when occ.retry_budget is 0), retries refused, and when the last storm of refusals began';

CREATE VIEW occ.stats_info AS
    SELECT * FROM occ.stats_info();

COMMENT ON VIEW occ.stats_info IS
'entries of occ.stats evicted to make room (see occ.stats_max), the time of the last reset, and the server-wide retry budget: tokens left (NULL when occ.retry_budget is 0), retries refused, and when the last storm of refusals began';

GRANT SELECT ON occ.stats_info TO PUBLIC;
