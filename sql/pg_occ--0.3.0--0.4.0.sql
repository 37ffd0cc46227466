/* pg_occ 0.3.0 -> 0.4.0: occ.gate no longer executable by PUBLIC; its comment */

\echo Use "ALTER EXTENSION pg_occ UPDATE TO '0.4.0'" to load this file. \quit

-- A role that holds a gate makes every call of that key wait: grant EXECUTE
-- on occ.gate to the roles that write what the key names, not to PUBLIC
-- (see pg_occ--0.4.0.sql).  Grants to other roles stay.
REVOKE EXECUTE ON FUNCTION occ.gate(text) FROM PUBLIC;

COMMENT ON FUNCTION occ.gate(text) IS
'wait for the gate of key, the queue that occ.retry(..., contention => queue, key => key) uses, and hold it until the end of the current transaction (or the rollback of a savepoint set before it): for writers that do not go through occ.retry';

-- occ.retry's key takes one key or an array of keys: anycompatible, read by
-- the C code by its type (the four forms are made again with it); a
-- driver's parameter of unknown type resolves to text, as it did for 0.3.0's
-- key text ("any" left it unresolved: 42P18)
DROP PROCEDURE occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, text);
DROP PROCEDURE occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, text);
DROP PROCEDURE occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, text);
DROP PROCEDURE occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, text);

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
    key          anycompatible    DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) IS
'run sql as one transaction, and run it again whole after a serialization failure or deadlock: after a jittered backoff, or (contention => queue) in FIFO order on the gates of its keys (key: text or an array; without it, the keys are learned from the values of params that its failures concentrate on)';

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
    key          anycompatible    DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) IS
'occ.retry that also sets attempts (executions of sql, the first included) and slept (time spent sleeping)';

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
    key          anycompatible    DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) IS
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
    key          anycompatible    DEFAULT NULL)
AS 'MODULE_PATHNAME', 'occ_retry'
LANGUAGE C;

COMMENT ON PROCEDURE occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) IS
'occ.retry that sets result, attempts and slept';

-- occ.gate of several keys
CREATE FUNCTION occ.gate(keys text[])
RETURNS void
AS 'MODULE_PATHNAME', 'occ_gate_keys'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.gate(text[]) IS
'wait for the gates of keys, in the one order in which occ.retry takes them, and hold them until the end of the current transaction';

-- occ.stats gains learned_key
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
    OUT attempts_histogram     bigint[],
    OUT learned_key            text,
    OUT batched                bigint,
    OUT mean_batch_size        double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION occ.stats(boolean) IS
'retry statistics per role, database and transaction text (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.stats AS
    SELECT * FROM occ.stats(true);

COMMENT ON VIEW occ.stats IS
'retry statistics of occ.retry per role, database and transaction text; times in milliseconds; queued counts calls that took the gate of their key (queue mode); attempts_histogram counts calls that took 1, 2, 3-4, 5-8, 9-16 and 17 or more attempts; learned_key says which parameter values queue mode found hot for calls without a key ($n = value, or body), NULL when none; batched counts calls that committed in a batch with others (contention mode batch), mean_batch_size the mean number of calls in their batches';

GRANT SELECT ON occ.stats TO PUBLIC;

REVOKE EXECUTE ON FUNCTION occ.gate(text[]) FROM PUBLIC;
-- a database owner who made the extension (trusted) may call occ.gate and
-- grant it, though the bootstrap superuser owns it
GRANT EXECUTE ON FUNCTION occ.gate(text), occ.gate(text[]) TO @extowner@ WITH GRANT OPTION;

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
