/* pg_occ 0.7.0: retry optimistic transactions, with jittered backoff or a FIFO queue per hot key; reservable columns */

\echo Use "CREATE EXTENSION pg_occ" to load this file. \quit

-- Every object is schema-qualified, so a hostile search_path cannot redirect
-- anything here.  Options default to NULL, which means "the value of the
-- occ.* setting": the C code reads the settings, which costs far less per
-- call than default expressions would.

-- The schema belongs to the extension: DROP EXTENSION removes it, and a
-- schema occ that exists already (whoever owns it could have planted objects
-- in it that a superuser would then call) makes CREATE EXTENSION fail.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'occ') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'duplicate_schema',
            MESSAGE = 'schema "occ" already exists',
            DETAIL = 'pg_occ creates the schema occ and owns it.',
            HINT = 'Drop or rename the existing schema occ (check what it contains first), then run CREATE EXTENSION pg_occ again.';
    END IF;
END
$$;

CREATE SCHEMA occ;

COMMENT ON SCHEMA occ IS 'pg_occ: retry optimistic transactions, with jittered backoff or a FIFO queue per hot key';

CREATE FUNCTION occ.backoff(
    attempt integer,
    base    interval         DEFAULT NULL,
    cap     interval         DEFAULT NULL,
    jitter  text             DEFAULT NULL,
    factor  double precision DEFAULT NULL,
    prev    interval         DEFAULT NULL,
    draw    double precision DEFAULT NULL)
RETURNS interval
AS 'MODULE_PATHNAME', 'occ_backoff'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.backoff(integer, interval, interval, text, double precision, interval, double precision) IS
'backoff delay before retry number attempt (0 = first retry): none, full, equal, decorrelated, bounded, multiplicative or normal jitter over min(cap, base * factor^attempt); draw fixes the uniform draw in [0,1]';

CREATE FUNCTION occ.setseed(seed double precision)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_setseed'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.setseed(double precision) IS
'seed the session''s backoff generator (between -1 and 1, like setseed) so that the following draws repeat';

-- occ.retry comes in four forms, one entry point.  PL/pgSQL rejects an
-- INOUT argument left to its default, so the outputs are required
-- arguments, right after sql, and each set of outputs is a form of its own:
-- CALL occ.retry('...') works everywhere, and the INOUT arguments one names
-- are what the CALL returns: attempts and slept; result; or all three.
-- key is anycompatible: one key (text, or any value as its text) or several
-- (an array), whose gates are taken in one global order.  A literal or a
-- driver's parameter of unknown type resolves to text ("any" left a
-- parameter unresolved: 42P18, where 0.3.0's key text took it).
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

CREATE FUNCTION occ.attempt()
RETURNS integer
AS 'MODULE_PATHNAME', 'occ_attempt'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.attempt() IS
'the number of the attempt running now (1 for the first) in the body of occ.retry; NULL outside occ.retry';

CREATE FUNCTION occ.gate(key text)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_gate'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.gate(text) IS
'wait for the gate of key, the queue that occ.retry(..., contention => queue, key => key) uses, and hold it until the end of the current transaction (or the rollback of a savepoint set before it): for writers that do not go through occ.retry';

CREATE FUNCTION occ.gate(keys text[])
RETURNS void
AS 'MODULE_PATHNAME', 'occ_gate_keys'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.gate(text[]) IS
'wait for the gates of keys, in the one order in which occ.retry takes them, and hold them until the end of the current transaction';

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

CREATE FUNCTION occ.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'occ_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION occ.stats_reset() IS
'discard all retry statistics';

REVOKE ALL ON FUNCTION occ.stats_reset() FROM PUBLIC;

-- A role that holds a gate makes every call of that key wait: grant EXECUTE
-- on occ.gate to the roles that write what the key names, not to PUBLIC.
REVOKE EXECUTE ON FUNCTION occ.gate(text), occ.gate(text[]) FROM PUBLIC;
-- pg_occ is trusted: a database owner who creates it does not own its
-- objects (the bootstrap superuser does), and must still be able to call
-- occ.gate and grant it to the roles that write what its keys name
GRANT EXECUTE ON FUNCTION occ.gate(text), occ.gate(text[]) TO @extowner@ WITH GRANT OPTION;

GRANT USAGE ON SCHEMA occ TO PUBLIC;
GRANT SELECT ON occ.stats, occ.stats_info, occ.key_stats TO PUBLIC;

-- Reservable columns (escrow): changed by reservations, without row locks

-- The ledger: one row per reservation, committed or aborted with its
-- transaction; the fold worker moves committed rows into their tables.  No
-- role but the superuser reads or writes it: occ.reserve() inserts its rows.
-- Dumped with the extension (pg_dump takes the tables and the ledger in one
-- snapshot), rel a regclass so that a restore finds the table by its name.
CREATE TABLE occ.reservation_ledger (
    rel   regclass NOT NULL,
    col   name     NOT NULL,
    key   text     NOT NULL,
    delta bigint   NOT NULL
);

COMMENT ON TABLE occ.reservation_ledger IS
'reservations committed and not yet folded into their rows (and those of transactions in progress): written by occ.reserve(), emptied by the fold worker';

SELECT pg_catalog.pg_extension_config_dump('occ.reservation_ledger', '');

-- Not for logical replication (declare.c refuses to publish it by name or
-- schema; its guard, below, refuses its rows in a subscription's apply), but
-- a publication FOR ALL TABLES takes it: REPLICA IDENTITY FULL lets the fold
-- delete its rows there all the same.
ALTER TABLE occ.reservation_ledger REPLICA IDENTITY FULL;

-- The database's owner (pg_database_owner, whoever created pg_occ) and the
-- extension's dump and restore the ledger with the database: SELECT and
-- INSERT.  A row inserted other than by occ.reserve() (a restore) goes
-- through the ledger's guard: it must name a column that its role may
-- UPDATE, and where that column is reservable it is taken as a reservation
-- (within the bounds, counted by the row's entry).  A row that a
-- subscription's apply (replica mode) brings is another server's
-- reservation, whose folded value the subscription brings too: skipped
-- (the trigger fires ALWAYS).
CREATE FUNCTION occ.reservation_ledger_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'occ_reservation_ledger_guard'
LANGUAGE C;

COMMENT ON FUNCTION occ.reservation_ledger_guard() IS
'the trigger of occ.reservation_ledger: a row inserted other than by occ.reserve() (a restore) needs what occ.reserve() needs, and is taken as a reservation where its column is reservable; a subscription''s rows are skipped';

CREATE TRIGGER reservation_ledger_guard BEFORE INSERT ON occ.reservation_ledger
    FOR EACH ROW EXECUTE FUNCTION occ.reservation_ledger_guard();
ALTER TABLE occ.reservation_ledger ENABLE ALWAYS TRIGGER reservation_ledger_guard;

GRANT SELECT, INSERT ON occ.reservation_ledger TO @extowner@, pg_database_owner;

CREATE FUNCTION occ.reservable_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'occ_reservable_guard'
LANGUAGE C;

COMMENT ON FUNCTION occ.reservable_guard() IS
'the trigger that occ.make_reservable() creates: it marks a column reservable and refuses the UPDATE, DELETE and TRUNCATE that would change it otherwise than by occ.reserve() (the fold''s, and a subscription''s apply, which it counts, excepted)';

CREATE FUNCTION occ.make_reservable(rel regclass, col name)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_make_reservable'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.make_reservable(regclass, name) IS
'declare col of rel reservable (its owner only): an integer NOT NULL column of a table with a one-column primary key, bounded by CHECK constraints such as col >= 0, from then on changed only by occ.reserve()';

CREATE FUNCTION occ.drop_reservable(rel regclass, col name)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_drop_reservable'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.drop_reservable(regclass, name) IS
'make col of rel an ordinary column again (its owner only); reservations already committed are folded into it first';

CREATE FUNCTION occ.reserve(rel regclass, col name, key anycompatible, delta bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'occ_reserve'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.reserve(regclass, name, anycompatible, bigint) IS
'add delta to col of the row of rel whose primary key is key, when the current transaction commits, without locking the row or waiting for the other transactions that change it; refused at once (23514) if the column''s CHECK bounds could break should every reservation in flight toward them commit';

CREATE FUNCTION occ.try_reserve(rel regclass, col name, key anycompatible, delta bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'occ_try_reserve'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION occ.try_reserve(regclass, name, anycompatible, bigint) IS
'occ.reserve(), but true when the reservation is taken and false, with nothing reserved and no error, when the column''s CHECK bounds refuse it (sold out)';

CREATE FUNCTION occ.reserved_value(rel regclass, col name, key anycompatible)
RETURNS bigint
AS 'MODULE_PATHNAME', 'occ_reserved_value'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.reserved_value(regclass, name, anycompatible) IS
'the latest committed value of col of the row of rel whose primary key is key, plus the current transaction''s own reservations of it (a plain SELECT shows the value as last folded)';

CREATE FUNCTION occ.reservations(
    OUT rel            regclass,
    OUT col            name,
    OUT key            text,
    OUT committed      bigint,
    OUT in_flight_down bigint,
    OUT in_flight_up   bigint,
    OUT in_flight      integer,
    OUT reservations   bigint,
    OUT refusals       bigint,
    OUT waits          bigint,
    OUT fold_failures  bigint,
    OUT fold_error     text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'occ_reservations'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION occ.reservations() IS
'the rows of this database with reservations since the server started (or since their entry was last reused), for the columns the caller may read (needs shared_preload_libraries = pg_occ)';

CREATE VIEW occ.reservations AS
    SELECT * FROM occ.reservations();

COMMENT ON VIEW occ.reservations IS
'per reservable row: committed value (latest), decrements and increments in flight, reservations taken, refused (bound) and waits (for a load of the row or a fold); the folds of the row that failed, and the last one''s error while it is not folded (NULL once it is)';

GRANT SELECT ON occ.reservations TO PUBLIC;
