-- pg_occ API surface, part 1: the extension, its schema, functions,
-- procedures, views and table, with exact signatures, and their comments.
-- Checks version 0.7.0, as a fresh install makes it (sql/upgrade.sql checks
-- that an update from 0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0 or 0.6.0 makes the same
-- catalog).
-- Runs in one transaction that is rolled back, so it leaves nothing behind.
\ir begin.psql

SELECT plan(340);

------------------------------------------------------------------------
-- The extension: version 0.7.0, not relocatable, trusted (0.1.0 not); the extension
-- itself lives in pg_catalog, and the schema occ is one of its members
------------------------------------------------------------------------
SELECT has_extension('pg_catalog', 'pg_occ', 'extension pg_occ is installed, in schema pg_catalog');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'), '0.7.0',
          'pg_occ is at version 0.7.0');
SELECT is((SELECT default_version FROM pg_available_extensions WHERE name = 'pg_occ'), '0.7.0',
          'the default version of pg_occ is 0.7.0');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'pg_occ'), false,
          'pg_occ is not relocatable');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_occ'), 'pg_catalog',
          'pg_occ lives in schema pg_catalog (its objects are in occ, which it owns)');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.7.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    'control file: not relocatable, schema pg_catalog, superuser or trusted (the owner of a database may install it), no requirements');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.6.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    '0.6.0 is still available, with the same control settings, so it can be installed and updated');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.5.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    '0.5.0 is still available, with the same control settings, so it can be installed and updated');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.4.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    '0.4.0 is still available, with the same control settings, so it can be installed and updated');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.3.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    '0.3.0 is still available, with the same control settings, so it can be installed and updated');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'pg_catalog' AS schema_is_pg_catalog, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.2.0' $$,
    $$ VALUES (false, true, true, true, true) $$,
    '0.2.0 is still available, with the same control settings, so it can be installed and updated');
SELECT results_eq(
    $$ SELECT relocatable, schema = 'occ' AS schema_is_occ, superuser, trusted, requires IS NULL
         FROM pg_available_extension_versions
        WHERE name = 'pg_occ' AND version = '0.1.0' $$,
    $$ VALUES (false, true, true, false, true) $$,
    'secondary control file: 0.1.0 still installs into schema occ (superusers only), so it can be installed and updated');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.1.0' AND target = '0.2.0'),
          '0.1.0--0.2.0', 'pg_occ updates from 0.1.0 to 0.2.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.2.0' AND target = '0.3.0'),
          '0.2.0--0.3.0', 'pg_occ updates from 0.2.0 to 0.3.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.3.0' AND target = '0.4.0'),
          '0.3.0--0.4.0', 'pg_occ updates from 0.3.0 to 0.4.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.4.0' AND target = '0.5.0'),
          '0.4.0--0.5.0', 'pg_occ updates from 0.4.0 to 0.5.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.1.0' AND target = '0.4.0'),
          '0.1.0--0.2.0--0.3.0--0.4.0', 'pg_occ updates from 0.1.0 to 0.4.0 through 0.2.0 and 0.3.0');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.5.0' AND target = '0.6.0'),
          '0.5.0--0.6.0', 'pg_occ updates from 0.5.0 to 0.6.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.6.0' AND target = '0.7.0'),
          '0.6.0--0.7.0', 'pg_occ updates from 0.6.0 to 0.7.0 in one step');
SELECT is((SELECT path FROM pg_extension_update_paths('pg_occ') WHERE source = '0.1.0' AND target = '0.7.0'),
          '0.1.0--0.2.0--0.3.0--0.4.0--0.5.0--0.6.0--0.7.0', 'pg_occ updates from 0.1.0 to 0.7.0 through 0.2.0, 0.3.0, 0.4.0, 0.5.0 and 0.6.0');
SELECT set_eq(
    $$ SELECT source || '--' || target FROM pg_extension_update_paths('pg_occ') WHERE path IS NOT NULL $$,
    ARRAY['0.1.0--0.2.0', '0.1.0--0.3.0', '0.1.0--0.4.0', '0.1.0--0.5.0', '0.1.0--0.6.0', '0.1.0--0.7.0',
          '0.2.0--0.3.0', '0.2.0--0.4.0', '0.2.0--0.5.0', '0.2.0--0.6.0', '0.2.0--0.7.0',
          '0.3.0--0.4.0', '0.3.0--0.5.0', '0.3.0--0.6.0', '0.3.0--0.7.0', '0.4.0--0.5.0', '0.4.0--0.6.0',
          '0.4.0--0.7.0', '0.5.0--0.6.0', '0.5.0--0.7.0', '0.6.0--0.7.0'],
    'pg_occ updates only forward: from each version to each later one through those between');
SELECT throws_ok('ALTER EXTENSION pg_occ SET SCHEMA public', '0A000',
                 'extension "pg_occ" does not support SET SCHEMA',
                 'ALTER EXTENSION pg_occ SET SCHEMA is refused');

------------------------------------------------------------------------
-- The schema and the exact set of objects in it
------------------------------------------------------------------------
SELECT has_schema('occ', 'schema occ exists');
SELECT is(
    (SELECT count(*)::int FROM pg_depend
      WHERE classid = 'pg_namespace'::regclass AND objid = 'occ'::regnamespace AND objsubid = 0
        AND refclassid = 'pg_extension'::regclass
        AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_occ')
        AND deptype = 'e'),
    1, 'schema occ is a member of extension pg_occ (DROP EXTENSION removes it)');
SELECT is((SELECT nspowner FROM pg_namespace WHERE nspname = 'occ'),
          (SELECT extowner FROM pg_extension WHERE extname = 'pg_occ'),
          'schema occ belongs to the owner of the extension');
SELECT functions_are('occ',
    ARRAY['backoff', 'setseed', 'retry', 'attempt', 'gate', 'last_retry', 'stats', 'stats_info', 'stats_reset',
          'key_stats', 'reservable_guard', 'make_reservable', 'drop_reservable', 'reserve', 'try_reserve',
          'reserved_value', 'reservations', 'reservation_ledger_guard'],
    'schema occ has exactly the documented functions and procedures');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace), 22,
          'schema occ has 22 routines (occ.retry has four forms, occ.gate two)');
SELECT views_are('occ', ARRAY['stats', 'stats_info', 'key_stats', 'reservations'],
                 'schema occ has exactly the views stats, stats_info, key_stats and reservations');
SELECT tables_are('occ', ARRAY['reservation_ledger'], 'schema occ has exactly one table, reservation_ledger');
SELECT is((SELECT count(*)::int FROM pg_class
            WHERE relnamespace = 'occ'::regnamespace AND relkind NOT IN ('v', 'r')), 0,
          'schema occ has no relations other than views and its table (no sequence, no index)');
SELECT is(
    (SELECT count(*)::int
       FROM (SELECT 'pg_proc'::regclass AS classid, oid FROM pg_proc WHERE pronamespace = 'occ'::regnamespace
             UNION ALL
             SELECT 'pg_class'::regclass, oid FROM pg_class WHERE relnamespace = 'occ'::regnamespace
               AND relkind IN ('v', 'r')) o
      WHERE NOT EXISTS (SELECT 1 FROM pg_depend d
                         WHERE d.classid = o.classid AND d.objid = o.oid AND d.deptype = 'e'
                           AND d.refclassid = 'pg_extension'::regclass
                           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_occ'))),
    0, 'every routine, view and table in occ belongs to extension pg_occ');
SELECT results_eq(
    $$ SELECT pg_describe_object(classid, objid, objsubid) COLLATE "default"
         FROM pg_depend
        WHERE refclassid = 'pg_extension'::regclass
          AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_occ') AND deptype = 'e'
          -- not the relations' row types and their array types, members from PostgreSQL 17 on
          AND NOT (classid = 'pg_type'::regclass AND objid IN (SELECT oid FROM pg_type WHERE typrelid <> 0
                                                               UNION ALL SELECT typarray FROM pg_type WHERE typrelid <> 0))
        ORDER BY pg_describe_object(classid, objid, objsubid) COLLATE "C" $$,
    $$ VALUES ('function occ.attempt()'),
              ('function occ.backoff(integer,interval,interval,text,double precision,interval,double precision)'),
              ('function occ.drop_reservable(regclass,name)'),
              ('function occ.gate(text)'), ('function occ.gate(text[])'), ('function occ.key_stats(boolean)'), ('function occ.last_retry()'),
              ('function occ.make_reservable(regclass,name)'), ('function occ.reservable_guard()'),
              ('function occ.reservation_ledger_guard()'), ('function occ.reservations()'), ('function occ.reserve(regclass,name,anycompatible,bigint)'),
              ('function occ.reserved_value(regclass,name,anycompatible)'),
              -- PostgreSQL 15 describes procedures as functions too
              ('function occ.retry(text,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)'),
              ('function occ.retry(text,jsonb,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)'),
              ('function occ.retry(text,jsonb,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)'),
              ('function occ.retry(text,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)'),
              ('function occ.setseed(double precision)'), ('function occ.stats(boolean)'),
              ('function occ.stats_info()'), ('function occ.stats_reset()'),
              ('function occ.try_reserve(regclass,name,anycompatible,bigint)'), ('schema occ'), ('table occ.reservation_ledger'),
              ('view occ.key_stats'), ('view occ.reservations'), ('view occ.stats'), ('view occ.stats_info') $$,
    'the members of pg_occ are exactly the schema occ, its 22 routines, its 4 views and its table');

------------------------------------------------------------------------
-- occ.backoff(attempt, base, cap, jitter, factor, prev, draw) -> interval
------------------------------------------------------------------------
SELECT has_function('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'occ.backoff(integer, interval, interval, text, double precision, interval, double precision) exists');
SELECT is_normal_function('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'occ.backoff is a function');
SELECT function_returns('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'interval', 'occ.backoff returns interval');
SELECT volatility_is('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'volatile', 'occ.backoff is volatile');
SELECT isnt_strict('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'occ.backoff is called on null input (prev and draw default to NULL)');
SELECT function_lang_is('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'c', 'occ.backoff is written in C');
SELECT is((SELECT proparallel FROM pg_proc
            WHERE oid = 'occ.backoff(integer, interval, interval, text, double precision, interval, double precision)'::regprocedure),
          'r', 'occ.backoff is parallel restricted');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'occ.backoff(integer, interval, interval, text, double precision, interval, double precision)'::regprocedure),
          ARRAY['attempt', 'base', 'cap', 'jitter', 'factor', 'prev', 'draw'],
          'occ.backoff argument names are attempt, base, cap, jitter, factor, prev, draw');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'occ.backoff(integer, interval, interval, text, double precision, interval, double precision)'::regprocedure),
          6, 'occ.backoff: every argument but attempt has a default');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'backoff'), 1,
          'occ.backoff has no overloads');

------------------------------------------------------------------------
-- occ.setseed(seed double precision) -> void
------------------------------------------------------------------------
SELECT has_function('occ', 'setseed', ARRAY['double precision'], 'occ.setseed(double precision) exists');
SELECT is_normal_function('occ', 'setseed', ARRAY['double precision'], 'occ.setseed is a function');
SELECT function_returns('occ', 'setseed', ARRAY['double precision'], 'void', 'occ.setseed returns void');
SELECT volatility_is('occ', 'setseed', ARRAY['double precision'], 'volatile', 'occ.setseed is volatile');
SELECT is_strict('occ', 'setseed', ARRAY['double precision'], 'occ.setseed is strict');
SELECT function_lang_is('occ', 'setseed', ARRAY['double precision'], 'c', 'occ.setseed is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.setseed(double precision)'::regprocedure),
          'u', 'occ.setseed is parallel unsafe');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.setseed(double precision)'::regprocedure),
          ARRAY['seed'], 'occ.setseed argument is named seed');

------------------------------------------------------------------------
-- occ.retry, form 1: CALL occ.retry(sql [, params, max_attempts, ...])
------------------------------------------------------------------------
SELECT has_function('occ', 'retry',
    ARRAY['text', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) exists');
SELECT is_procedure('occ', 'retry',
    ARRAY['text', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 1) is a procedure');
SELECT isnt_strict('occ', 'retry',
    ARRAY['text', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 1) is not strict (params defaults to NULL)');
SELECT function_lang_is('occ', 'retry',
    ARRAY['text', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'c', 'occ.retry (form 1) is written in C');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          ARRAY['sql', 'params', 'max_attempts', 'base', 'cap', 'jitter', 'factor', 'max_duration', 'isolation', 'retry_on',
                'contention', 'key'],
          'occ.retry (form 1) argument names');
SELECT is((SELECT proargmodes FROM pg_proc
            WHERE oid = 'occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          NULL, 'occ.retry (form 1) has only IN arguments');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          11, 'occ.retry (form 1): every argument but sql has a default');

------------------------------------------------------------------------
-- occ.retry, form 2: CALL occ.retry(sql, attempts => a, slept => s, ...)
------------------------------------------------------------------------
SELECT has_function('occ', 'retry',
    ARRAY['text', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) exists');
SELECT is_procedure('occ', 'retry',
    ARRAY['text', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 2) is a procedure');
SELECT isnt_strict('occ', 'retry',
    ARRAY['text', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 2) is not strict');
SELECT function_lang_is('occ', 'retry',
    ARRAY['text', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'c', 'occ.retry (form 2) is written in C');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          ARRAY['sql', 'attempts', 'slept', 'params', 'max_attempts', 'base', 'cap', 'jitter', 'factor', 'max_duration', 'isolation', 'retry_on',
                'contention', 'key'],
          'occ.retry (form 2) argument names');
SELECT is((SELECT proargmodes::text FROM pg_proc
            WHERE oid = 'occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          '{i,b,b,i,i,i,i,i,i,i,i,i,i,i}', 'occ.retry (form 2): attempts and slept are INOUT, the rest IN');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          11, 'occ.retry (form 2): sql, attempts and slept are required, the rest have defaults');

------------------------------------------------------------------------
-- occ.retry, form 3: CALL occ.retry(sql, result => r, ...)
------------------------------------------------------------------------
SELECT has_function('occ', 'retry',
    ARRAY['text', 'jsonb', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) exists');
SELECT is_procedure('occ', 'retry',
    ARRAY['text', 'jsonb', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 3) is a procedure');
SELECT isnt_strict('occ', 'retry',
    ARRAY['text', 'jsonb', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 3) is not strict (result is passed as NULL)');
SELECT function_lang_is('occ', 'retry',
    ARRAY['text', 'jsonb', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'c', 'occ.retry (form 3) is written in C');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          ARRAY['sql', 'result', 'params', 'max_attempts', 'base', 'cap', 'jitter', 'factor', 'max_duration', 'isolation',
                'retry_on', 'contention', 'key'],
          'occ.retry (form 3) argument names');
SELECT is((SELECT proargmodes::text FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          '{i,b,i,i,i,i,i,i,i,i,i,i,i}', 'occ.retry (form 3): result is INOUT, the rest IN');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          11, 'occ.retry (form 3): sql and result are required, the rest have defaults');

------------------------------------------------------------------------
-- occ.retry, form 4: CALL occ.retry(sql, result => r, attempts => a, slept => s, ...)
------------------------------------------------------------------------
SELECT has_function('occ', 'retry',
    ARRAY['text', 'jsonb', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible) exists');
SELECT is_procedure('occ', 'retry',
    ARRAY['text', 'jsonb', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 4) is a procedure');
SELECT isnt_strict('occ', 'retry',
    ARRAY['text', 'jsonb', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'occ.retry (form 4) is not strict');
SELECT function_lang_is('occ', 'retry',
    ARRAY['text', 'jsonb', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'c', 'occ.retry (form 4) is written in C');
SELECT is((SELECT proargnames FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          ARRAY['sql', 'result', 'attempts', 'slept', 'params', 'max_attempts', 'base', 'cap', 'jitter', 'factor', 'max_duration',
                'isolation', 'retry_on', 'contention', 'key'],
          'occ.retry (form 4) argument names');
SELECT is((SELECT proargmodes::text FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          '{i,b,b,b,i,i,i,i,i,i,i,i,i,i,i}', 'occ.retry (form 4): result, attempts and slept are INOUT, the rest IN');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
            WHERE oid = 'occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure),
          11, 'occ.retry (form 4): sql, result, attempts and slept are required, the rest have defaults');

------------------------------------------------------------------------
-- The four forms together: one entry point, the same options
------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'retry' AND prokind = 'p'), 4,
          'occ.retry has exactly four forms, all procedures');
SELECT is((SELECT count(DISTINCT prosrc)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'retry'), 1,
          'the four forms of occ.retry share one C entry point');
SELECT is((SELECT count(DISTINCT proargnames[pronargs - 10:pronargs])::int
             FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'retry'), 1,
          'the four forms of occ.retry end with the same 11 options, in the same order');

------------------------------------------------------------------------
-- occ.attempt() -> integer
------------------------------------------------------------------------
SELECT has_function('occ', 'attempt', ARRAY[]::name[], 'occ.attempt() exists');
SELECT is_normal_function('occ', 'attempt', ARRAY[]::name[], 'occ.attempt is a function');
SELECT function_returns('occ', 'attempt', ARRAY[]::name[], 'integer', 'occ.attempt returns integer');
SELECT volatility_is('occ', 'attempt', ARRAY[]::name[], 'stable', 'occ.attempt is stable');
SELECT isnt_strict('occ', 'attempt', ARRAY[]::name[], 'occ.attempt is not declared strict');
SELECT function_lang_is('occ', 'attempt', ARRAY[]::name[], 'c', 'occ.attempt is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.attempt()'::regprocedure),
          'r', 'occ.attempt is parallel restricted');
SELECT is((SELECT proretset FROM pg_proc WHERE oid = 'occ.attempt()'::regprocedure),
          false, 'occ.attempt does not return a set');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'attempt'), 1,
          'occ.attempt has no overloads');
SELECT is(occ.attempt(), NULL::int, 'occ.attempt() is NULL outside the body of occ.retry');
SELECT is((SELECT occ.attempt() FROM generate_series(1, 3) LIMIT 1), NULL::int,
          'occ.attempt() is NULL in a query outside the body of occ.retry');

------------------------------------------------------------------------
-- occ.gate(key text) -> void
------------------------------------------------------------------------
SELECT has_function('occ', 'gate', ARRAY['text'], 'occ.gate(text) exists');
SELECT is_normal_function('occ', 'gate', ARRAY['text'], 'occ.gate is a function');
SELECT function_returns('occ', 'gate', ARRAY['text'], 'void', 'occ.gate returns void');
SELECT volatility_is('occ', 'gate', ARRAY['text'], 'volatile', 'occ.gate is volatile');
SELECT isnt_strict('occ', 'gate', ARRAY['text'], 'occ.gate is called on null input');
SELECT function_lang_is('occ', 'gate', ARRAY['text'], 'c', 'occ.gate is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.gate(text)'::regprocedure),
          'u', 'occ.gate is parallel unsafe');
SELECT is((SELECT proretset FROM pg_proc WHERE oid = 'occ.gate(text)'::regprocedure),
          false, 'occ.gate does not return a set');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.gate(text)'::regprocedure),
          ARRAY['key'], 'occ.gate argument is named key');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'occ.gate(text)'::regprocedure),
          0, 'occ.gate: key has no default');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'gate'), 2,
          'occ.gate has two forms: one key, several keys');

------------------------------------------------------------------------
-- occ.gate(keys text[]) -> void, and occ.retry's key: anycompatible
------------------------------------------------------------------------
SELECT has_function('occ', 'gate', ARRAY['text[]'], 'occ.gate(text[]) exists');
SELECT function_returns('occ', 'gate', ARRAY['text[]'], 'void', 'occ.gate(text[]) returns void');
SELECT volatility_is('occ', 'gate', ARRAY['text[]'], 'volatile', 'occ.gate(text[]) is volatile');
SELECT is_strict('occ', 'gate', ARRAY['text[]'], 'occ.gate(text[]) is strict');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.gate(text[])'::regprocedure),
          'u', 'occ.gate(text[]) is parallel unsafe');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.gate(text[])'::regprocedure),
          ARRAY['keys'], 'occ.gate(text[]) argument is named keys');
SELECT is((SELECT count(*)::int FROM pg_proc p, unnest(p.proargnames, p.proargtypes::oid[]) AS a(name, type)
            WHERE p.pronamespace = 'occ'::regnamespace AND p.proname = 'retry' AND a.name = 'key' AND a.type = 'anycompatible'::regtype),
          4, 'the key argument of the four forms of occ.retry is anycompatible (one key or an array; unknown resolves to text)');
SELECT lives_ok($$ SELECT occ.gate(ARRAY['tap:a', 'tap:b', 'tap:a']) $$,
                'occ.gate takes several keys, a repeated one once');
SELECT throws_ok($$ SELECT occ.gate('{}'::text[]) $$, '22023', 'keys must not be empty',
                 'occ.gate of no keys: 22023');
SELECT throws_ok($$ SELECT occ.gate(ARRAY['a', NULL]) $$, '22004', 'keys must not contain NULL',
                 'occ.gate of a NULL key: 22004');
SELECT has_column('occ', 'stats', 'learned_key', 'occ.stats has column learned_key');

------------------------------------------------------------------------
-- occ.last_retry() -> (attempts, slept, last_sqlstate, outcome, total_time, waited)
------------------------------------------------------------------------
SELECT has_function('occ', 'last_retry', ARRAY[]::name[], 'occ.last_retry() exists');
SELECT is_normal_function('occ', 'last_retry', ARRAY[]::name[], 'occ.last_retry is a function');
SELECT function_returns('occ', 'last_retry', ARRAY[]::name[], 'record', 'occ.last_retry returns record');
SELECT volatility_is('occ', 'last_retry', ARRAY[]::name[], 'volatile', 'occ.last_retry is volatile');
SELECT is_strict('occ', 'last_retry', ARRAY[]::name[], 'occ.last_retry is strict');
SELECT function_lang_is('occ', 'last_retry', ARRAY[]::name[], 'c', 'occ.last_retry is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.last_retry()'::regprocedure),
          'r', 'occ.last_retry is parallel restricted');
SELECT is((SELECT proretset FROM pg_proc WHERE oid = 'occ.last_retry()'::regprocedure),
          false, 'occ.last_retry returns one row, not a set');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.last_retry()'::regprocedure),
          ARRAY['attempts', 'slept', 'last_sqlstate', 'outcome', 'total_time', 'waited'],
          'occ.last_retry output names');
SELECT is((SELECT proallargtypes::regtype[]::text[] FROM pg_proc WHERE oid = 'occ.last_retry()'::regprocedure),
          ARRAY['integer', 'interval', 'text', 'text', 'interval', 'interval'],
          'occ.last_retry output types');
SELECT is((SELECT proargmodes::text FROM pg_proc WHERE oid = 'occ.last_retry()'::regprocedure),
          '{o,o,o,o,o,o}', 'occ.last_retry has only OUT arguments');

------------------------------------------------------------------------
-- occ.stats(showtext boolean) -> setof record
------------------------------------------------------------------------
SELECT has_function('occ', 'stats', ARRAY['boolean'], 'occ.stats(boolean) exists');
SELECT is_normal_function('occ', 'stats', ARRAY['boolean'], 'occ.stats is a function');
SELECT function_returns('occ', 'stats', ARRAY['boolean'], 'setof record', 'occ.stats returns setof record');
SELECT volatility_is('occ', 'stats', ARRAY['boolean'], 'volatile', 'occ.stats is volatile');
SELECT is_strict('occ', 'stats', ARRAY['boolean'], 'occ.stats is strict');
SELECT function_lang_is('occ', 'stats', ARRAY['boolean'], 'c', 'occ.stats is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.stats(boolean)'::regprocedure),
          's', 'occ.stats is parallel safe');
SELECT is((SELECT proargnames[1] FROM pg_proc WHERE oid = 'occ.stats(boolean)'::regprocedure),
          'showtext', 'occ.stats input is named showtext');
SELECT is((SELECT proargmodes::text FROM pg_proc WHERE oid = 'occ.stats(boolean)'::regprocedure),
          '{i,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o,o}', 'occ.stats has one IN argument and 26 OUT columns');
SELECT is((SELECT proargnames[17:19] FROM pg_proc WHERE oid = 'occ.stats(boolean)'::regprocedure),
          ARRAY['queued', 'total_wait_time', 'max_wait_time'],
          'occ.stats outputs queued, total_wait_time and max_wait_time right after mean_sleep_time');

------------------------------------------------------------------------
-- occ.stats_info() -> (dealloc, stats_reset, budget_tokens, budget_refusals, last_storm)
------------------------------------------------------------------------
SELECT has_function('occ', 'stats_info', ARRAY[]::name[], 'occ.stats_info() exists');
SELECT is_normal_function('occ', 'stats_info', ARRAY[]::name[], 'occ.stats_info is a function');
SELECT function_returns('occ', 'stats_info', ARRAY[]::name[], 'record', 'occ.stats_info returns record');
SELECT volatility_is('occ', 'stats_info', ARRAY[]::name[], 'volatile', 'occ.stats_info is volatile');
SELECT is_strict('occ', 'stats_info', ARRAY[]::name[], 'occ.stats_info is strict');
SELECT function_lang_is('occ', 'stats_info', ARRAY[]::name[], 'c', 'occ.stats_info is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.stats_info()'::regprocedure),
          's', 'occ.stats_info is parallel safe');
SELECT is((SELECT proretset FROM pg_proc WHERE oid = 'occ.stats_info()'::regprocedure),
          false, 'occ.stats_info returns one row, not a set');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.stats_info()'::regprocedure),
          ARRAY['dealloc', 'stats_reset', 'budget_tokens', 'budget_refusals', 'last_storm'],
          'occ.stats_info output names');
SELECT is((SELECT proallargtypes::regtype[]::text[] FROM pg_proc WHERE oid = 'occ.stats_info()'::regprocedure),
          ARRAY['bigint', 'timestamp with time zone', 'double precision', 'bigint', 'timestamp with time zone'],
          'occ.stats_info output types');
SELECT is((SELECT proargmodes::text FROM pg_proc WHERE oid = 'occ.stats_info()'::regprocedure),
          '{o,o,o,o,o}', 'occ.stats_info has only OUT arguments');

------------------------------------------------------------------------
-- occ.stats_reset() -> void
------------------------------------------------------------------------
SELECT has_function('occ', 'stats_reset', ARRAY[]::name[], 'occ.stats_reset() exists');
SELECT is_normal_function('occ', 'stats_reset', ARRAY[]::name[], 'occ.stats_reset is a function');
SELECT function_returns('occ', 'stats_reset', ARRAY[]::name[], 'void', 'occ.stats_reset returns void');
SELECT volatility_is('occ', 'stats_reset', ARRAY[]::name[], 'volatile', 'occ.stats_reset is volatile');
SELECT is_strict('occ', 'stats_reset', ARRAY[]::name[], 'occ.stats_reset is strict');
SELECT function_lang_is('occ', 'stats_reset', ARRAY[]::name[], 'c', 'occ.stats_reset is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.stats_reset()'::regprocedure),
          's', 'occ.stats_reset is parallel safe');

------------------------------------------------------------------------
-- occ.key_stats(showtext boolean) -> setof record, and its view: the
-- transactions that set occ.key, per role, database and key
------------------------------------------------------------------------
SELECT has_function('occ', 'key_stats', ARRAY['boolean'], 'occ.key_stats(boolean) exists');
SELECT is_normal_function('occ', 'key_stats', ARRAY['boolean'], 'occ.key_stats is a function');
SELECT function_returns('occ', 'key_stats', ARRAY['boolean'], 'setof record', 'occ.key_stats returns setof record');
SELECT volatility_is('occ', 'key_stats', ARRAY['boolean'], 'volatile', 'occ.key_stats is volatile');
SELECT is_strict('occ', 'key_stats', ARRAY['boolean'], 'occ.key_stats is strict');
SELECT function_lang_is('occ', 'key_stats', ARRAY['boolean'], 'c', 'occ.key_stats is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.key_stats(boolean)'::regprocedure),
          's', 'occ.key_stats is parallel safe');
SELECT is((SELECT proargnames[1] FROM pg_proc WHERE oid = 'occ.key_stats(boolean)'::regprocedure),
          'showtext', 'occ.key_stats input is named showtext');
SELECT has_view('occ', 'key_stats', 'view occ.key_stats exists');
SELECT results_eq(
    $$ SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
         FROM pg_attribute
        WHERE attrelid = 'occ.key_stats'::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum $$,
    $$ VALUES ('userid', 'oid'), ('dbid', 'oid'), ('keyid', 'bigint'), ('key', 'text'),
              ('transactions', 'bigint'), ('commits', 'bigint'), ('serialization_failures', 'bigint'),
              ('deadlocks', 'bigint'), ('other_failures', 'bigint'), ('queued', 'bigint'),
              ('total_wait_time', 'double precision'), ('max_wait_time', 'double precision') $$,
    'occ.key_stats has exactly these 12 columns, in this order');
SELECT lives_ok('SELECT * FROM occ.key_stats', 'occ.key_stats can be read (pg_occ is preloaded)');
SELECT ok(length(obj_description('occ.key_stats(boolean)'::regprocedure, 'pg_proc')) > 0,
          'occ.key_stats(boolean) has a comment');
SELECT ok(length(obj_description('occ.key_stats'::regclass, 'pg_class')) > 0, 'view occ.key_stats has a comment');

------------------------------------------------------------------------
-- occ.reservable_guard() -> trigger: the guard that occ.make_reservable()
-- creates on a table
------------------------------------------------------------------------
SELECT has_function('occ', 'reservable_guard', ARRAY[]::name[], 'occ.reservable_guard() exists');
SELECT is_normal_function('occ', 'reservable_guard', ARRAY[]::name[], 'occ.reservable_guard is a function');
SELECT function_returns('occ', 'reservable_guard', ARRAY[]::name[], 'trigger', 'occ.reservable_guard returns trigger');
SELECT volatility_is('occ', 'reservable_guard', ARRAY[]::name[], 'volatile', 'occ.reservable_guard is volatile');
SELECT isnt_strict('occ', 'reservable_guard', ARRAY[]::name[], 'occ.reservable_guard is not strict');
SELECT function_lang_is('occ', 'reservable_guard', ARRAY[]::name[], 'c', 'occ.reservable_guard is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.reservable_guard()'::regprocedure),
          'u', 'occ.reservable_guard is parallel unsafe');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'reservable_guard'), 1,
          'occ.reservable_guard has no overloads');
SELECT throws_ok('SELECT occ.reservable_guard()', '39P01', 'occ.reservable_guard() must be called as a trigger',
                 'occ.reservable_guard() cannot be called but as a trigger');

------------------------------------------------------------------------
-- occ.make_reservable(rel regclass, col name) -> void and
-- occ.drop_reservable(rel regclass, col name) -> void
------------------------------------------------------------------------
SELECT has_function('occ', 'make_reservable', ARRAY['regclass', 'name'], 'occ.make_reservable(regclass, name) exists');
SELECT is_normal_function('occ', 'make_reservable', ARRAY['regclass', 'name'], 'occ.make_reservable is a function');
SELECT function_returns('occ', 'make_reservable', ARRAY['regclass', 'name'], 'void', 'occ.make_reservable returns void');
SELECT volatility_is('occ', 'make_reservable', ARRAY['regclass', 'name'], 'volatile', 'occ.make_reservable is volatile');
SELECT isnt_strict('occ', 'make_reservable', ARRAY['regclass', 'name'],
                   'occ.make_reservable is not strict (a NULL argument is an error, not a no-op)');
SELECT function_lang_is('occ', 'make_reservable', ARRAY['regclass', 'name'], 'c', 'occ.make_reservable is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.make_reservable(regclass, name)'::regprocedure),
          'u', 'occ.make_reservable is parallel unsafe');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.make_reservable(regclass, name)'::regprocedure),
          ARRAY['rel', 'col'], 'occ.make_reservable argument names are rel, col');
SELECT throws_ok($$ SELECT occ.make_reservable(NULL, 'qty') $$, '22004',
                 'the arguments of occ.make_reservable() must not be null',
                 'occ.make_reservable of a NULL table: 22004');
SELECT has_function('occ', 'drop_reservable', ARRAY['regclass', 'name'], 'occ.drop_reservable(regclass, name) exists');
SELECT is_normal_function('occ', 'drop_reservable', ARRAY['regclass', 'name'], 'occ.drop_reservable is a function');
SELECT function_returns('occ', 'drop_reservable', ARRAY['regclass', 'name'], 'void', 'occ.drop_reservable returns void');
SELECT volatility_is('occ', 'drop_reservable', ARRAY['regclass', 'name'], 'volatile', 'occ.drop_reservable is volatile');
SELECT isnt_strict('occ', 'drop_reservable', ARRAY['regclass', 'name'],
                   'occ.drop_reservable is not strict (a NULL argument is an error, not a no-op)');
SELECT function_lang_is('occ', 'drop_reservable', ARRAY['regclass', 'name'], 'c', 'occ.drop_reservable is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.drop_reservable(regclass, name)'::regprocedure),
          'u', 'occ.drop_reservable is parallel unsafe');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.drop_reservable(regclass, name)'::regprocedure),
          ARRAY['rel', 'col'], 'occ.drop_reservable argument names are rel, col');
SELECT throws_ok($$ SELECT occ.drop_reservable('pg_class', NULL) $$, '22004',
                 'the arguments of occ.drop_reservable() must not be null',
                 'occ.drop_reservable of a NULL column: 22004');

------------------------------------------------------------------------
-- occ.reserve(rel regclass, col name, key anycompatible, delta bigint) -> void
------------------------------------------------------------------------
SELECT has_function('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'],
    'occ.reserve(regclass, name, anycompatible, bigint) exists');
SELECT is_normal_function('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'occ.reserve is a function');
SELECT function_returns('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'void',
                        'occ.reserve returns void');
SELECT volatility_is('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'volatile',
                     'occ.reserve is volatile');
SELECT isnt_strict('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'],
                   'occ.reserve is not strict (a NULL argument is an error: a reservation that did nothing would be a falsehood)');
SELECT function_lang_is('occ', 'reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'c',
                        'occ.reserve is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.reserve(regclass, name, anycompatible, bigint)'::regprocedure),
          'u', 'occ.reserve is parallel unsafe (it writes the ledger)');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.reserve(regclass, name, anycompatible, bigint)'::regprocedure),
          ARRAY['rel', 'col', 'key', 'delta'], 'occ.reserve argument names are rel, col, key, delta');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'occ.reserve(regclass, name, anycompatible, bigint)'::regprocedure),
          0, 'occ.reserve: no argument has a default');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND proname = 'reserve'), 1,
          'occ.reserve has no overloads');
SELECT throws_ok($$ SELECT occ.reserve('pg_class', 'relpages', 1, NULL) $$, '22004',
                 'the arguments of occ.reserve() must not be null',
                 'occ.reserve of a NULL delta: 22004');
SELECT throws_ok($$ SELECT occ.reserve('pg_class', 'relpages', NULL::int, 1) $$, '22004',
                 'the arguments of occ.reserve() must not be null',
                 'occ.reserve of a NULL key: 22004');

------------------------------------------------------------------------
-- occ.try_reserve(rel regclass, col name, key anycompatible, delta bigint) -> boolean
------------------------------------------------------------------------
SELECT has_function('occ', 'try_reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'],
    'occ.try_reserve(regclass, name, anycompatible, bigint) exists');
SELECT function_returns('occ', 'try_reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'boolean',
                        'occ.try_reserve returns boolean (taken, or refused by the bounds)');
SELECT volatility_is('occ', 'try_reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'volatile',
                     'occ.try_reserve is volatile');
SELECT isnt_strict('occ', 'try_reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'],
                   'occ.try_reserve is not strict (a NULL argument is an error, as for occ.reserve)');
SELECT function_lang_is('occ', 'try_reserve', ARRAY['regclass', 'name', 'anycompatible', 'bigint'], 'c',
                        'occ.try_reserve is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.try_reserve(regclass, name, anycompatible, bigint)'::regprocedure),
          'u', 'occ.try_reserve is parallel unsafe (it writes the ledger)');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.try_reserve(regclass, name, anycompatible, bigint)'::regprocedure),
          ARRAY['rel', 'col', 'key', 'delta'], 'occ.try_reserve argument names are rel, col, key, delta');
SELECT throws_ok($$ SELECT occ.try_reserve('pg_class', 'relpages', 1, NULL) $$, '22004',
                 'the arguments of occ.try_reserve() must not be null',
                 'occ.try_reserve of a NULL delta: 22004');

------------------------------------------------------------------------
-- occ.reserved_value(rel regclass, col name, key anycompatible) -> bigint
------------------------------------------------------------------------
SELECT has_function('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'],
    'occ.reserved_value(regclass, name, anycompatible) exists');
SELECT is_normal_function('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'],
                          'occ.reserved_value is a function');
SELECT function_returns('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'], 'bigint',
                        'occ.reserved_value returns bigint');
SELECT volatility_is('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'], 'volatile',
                     'occ.reserved_value is volatile (the latest committed value, not a snapshot''s)');
SELECT isnt_strict('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'],
                   'occ.reserved_value is not strict (a NULL argument is an error)');
SELECT function_lang_is('occ', 'reserved_value', ARRAY['regclass', 'name', 'anycompatible'], 'c',
                        'occ.reserved_value is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.reserved_value(regclass, name, anycompatible)'::regprocedure),
          'r', 'occ.reserved_value is parallel restricted');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.reserved_value(regclass, name, anycompatible)'::regprocedure),
          ARRAY['rel', 'col', 'key'], 'occ.reserved_value argument names are rel, col, key');
SELECT throws_ok($$ SELECT occ.reserved_value('pg_class', 'relpages', NULL::int) $$, '22004',
                 'the arguments of occ.reserved_value() must not be null',
                 'occ.reserved_value of a NULL key: 22004');

------------------------------------------------------------------------
-- occ.reservations() -> setof record, and its view: per reservable row
------------------------------------------------------------------------
SELECT has_function('occ', 'reservations', ARRAY[]::name[], 'occ.reservations() exists');
SELECT is_normal_function('occ', 'reservations', ARRAY[]::name[], 'occ.reservations is a function');
SELECT function_returns('occ', 'reservations', ARRAY[]::name[], 'setof record', 'occ.reservations returns setof record');
SELECT volatility_is('occ', 'reservations', ARRAY[]::name[], 'volatile', 'occ.reservations is volatile');
SELECT function_lang_is('occ', 'reservations', ARRAY[]::name[], 'c', 'occ.reservations is written in C');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'occ.reservations()'::regprocedure),
          'r', 'occ.reservations is parallel restricted');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'occ.reservations()'::regprocedure),
          ARRAY['rel', 'col', 'key', 'committed', 'in_flight_down', 'in_flight_up', 'in_flight', 'reservations',
                'refusals', 'waits', 'fold_failures', 'fold_error'],
          'occ.reservations output names');
SELECT is((SELECT proallargtypes::regtype[]::text[] FROM pg_proc WHERE oid = 'occ.reservations()'::regprocedure),
          ARRAY['regclass', 'name', 'text', 'bigint', 'bigint', 'bigint', 'integer', 'bigint', 'bigint', 'bigint',
                'bigint', 'text'],
          'occ.reservations output types');
SELECT is((SELECT proargmodes::text FROM pg_proc WHERE oid = 'occ.reservations()'::regprocedure),
          '{o,o,o,o,o,o,o,o,o,o,o,o}', 'occ.reservations has only OUT arguments');
SELECT has_view('occ', 'reservations', 'view occ.reservations exists');
SELECT results_eq(
    $$ SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
         FROM pg_attribute
        WHERE attrelid = 'occ.reservations'::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum $$,
    $$ VALUES ('rel', 'regclass'), ('col', 'name'), ('key', 'text'), ('committed', 'bigint'),
              ('in_flight_down', 'bigint'), ('in_flight_up', 'bigint'), ('in_flight', 'integer'),
              ('reservations', 'bigint'), ('refusals', 'bigint'), ('waits', 'bigint'),
              ('fold_failures', 'bigint'), ('fold_error', 'text') $$,
    'occ.reservations has exactly these 12 columns, in this order');
SELECT lives_ok('SELECT * FROM occ.reservations', 'occ.reservations can be read (pg_occ is preloaded)');
SELECT table_privs_are('occ', 'reservations', 'public', ARRAY['SELECT'], 'PUBLIC may only SELECT from occ.reservations');

------------------------------------------------------------------------
-- The table occ.reservation_ledger: the reservations not yet folded, read
-- and restored only by its owner, the extension's and the database's owner
-- (pg_database_owner), dumped with the extension
------------------------------------------------------------------------
SELECT has_table('occ', 'reservation_ledger', 'table occ.reservation_ledger exists');
SELECT results_eq(
    $$ SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod), attnotnull
         FROM pg_attribute
        WHERE attrelid = 'occ.reservation_ledger'::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum $$,
    $$ VALUES ('rel', 'regclass', true), ('col', 'name', true), ('key', 'text', true), ('delta', 'bigint', true) $$,
    'occ.reservation_ledger has exactly these 4 columns, in this order, all NOT NULL');
SELECT is((SELECT relpersistence FROM pg_class WHERE oid = 'occ.reservation_ledger'::regclass), 'p',
          'occ.reservation_ledger is a permanent (logged) table: committed reservations survive a crash');
SELECT table_privs_are('occ', 'reservation_ledger', 'public', ARRAY[]::name[],
                       'PUBLIC has no privilege on occ.reservation_ledger');
SELECT is(
    ARRAY(SELECT a.grantee::regrole::text
            FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
           WHERE c.oid = 'occ.reservation_ledger'::regclass AND a.grantee <> c.relowner
             AND a.grantee <> (SELECT extowner FROM pg_extension WHERE extname = 'pg_occ')
           ORDER BY 1),
    ARRAY['pg_database_owner', 'pg_database_owner']::text[],
    'on occ.reservation_ledger, only SELECT and INSERT are granted, to the extension''s owner and the database''s (pg_database_owner)');
SELECT is(
    ARRAY(SELECT a.privilege_type::text
            FROM pg_class c, aclexplode(c.relacl) a
           WHERE c.oid = 'occ.reservation_ledger'::regclass AND a.grantee = 'pg_database_owner'::regrole
           ORDER BY 1),
    ARRAY['INSERT', 'SELECT'], 'the database''s owner may SELECT and INSERT into occ.reservation_ledger (pg_dump, pg_restore)');
SELECT results_eq(
    $$ SELECT c.cfg::regclass::text COLLATE "default", e.extcondition[c.n] COLLATE "default"
         FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY AS c(cfg, n)
        WHERE e.extname = 'pg_occ' $$,
    $$ VALUES ('occ.reservation_ledger', '') $$,
    'occ.reservation_ledger is the configuration table of pg_occ (pg_dump dumps its rows), all of them');

------------------------------------------------------------------------
-- None of the routines is SECURITY DEFINER
------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace AND prosecdef), 0,
          'no routine in occ is SECURITY DEFINER');

------------------------------------------------------------------------
-- The view occ.stats: every column, in order, with its type
------------------------------------------------------------------------
SELECT has_view('occ', 'stats', 'view occ.stats exists');
SELECT results_eq(
    $$ SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
         FROM pg_attribute
        WHERE attrelid = 'occ.stats'::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum $$,
    $$ VALUES ('userid', 'oid'), ('dbid', 'oid'), ('queryid', 'bigint'), ('query', 'text'),
              ('calls', 'bigint'), ('commits', 'bigint'), ('gave_up', 'bigint'), ('errors', 'bigint'),
              ('attempts', 'bigint'), ('serialization_failures', 'bigint'), ('deadlocks', 'bigint'),
              ('other_failures', 'bigint'), ('total_sleep_time', 'double precision'),
              ('max_sleep_time', 'double precision'), ('mean_sleep_time', 'double precision'),
              ('queued', 'bigint'), ('total_wait_time', 'double precision'), ('max_wait_time', 'double precision'),
              ('total_time', 'double precision'), ('mean_time', 'double precision'),
              ('mean_attempts', 'double precision'), ('max_attempts', 'bigint'),
              ('attempts_histogram', 'bigint[]'), ('learned_key', 'text'), ('batched', 'bigint'),
              ('mean_batch_size', 'double precision') $$,
    'occ.stats has exactly these 26 columns, in this order');
SELECT has_column('occ', 'stats', 'userid',                 'occ.stats has column userid');
SELECT col_type_is('occ', 'stats', 'userid',                 'oid',              'occ.stats.userid is oid');
SELECT has_column('occ', 'stats', 'dbid',                   'occ.stats has column dbid');
SELECT col_type_is('occ', 'stats', 'dbid',                   'oid',              'occ.stats.dbid is oid');
SELECT has_column('occ', 'stats', 'queryid',                'occ.stats has column queryid');
SELECT col_type_is('occ', 'stats', 'queryid',                'bigint',           'occ.stats.queryid is bigint');
SELECT has_column('occ', 'stats', 'query',                  'occ.stats has column query');
SELECT col_type_is('occ', 'stats', 'query',                  'text',             'occ.stats.query is text');
SELECT has_column('occ', 'stats', 'calls',                  'occ.stats has column calls');
SELECT col_type_is('occ', 'stats', 'calls',                  'bigint',           'occ.stats.calls is bigint');
SELECT has_column('occ', 'stats', 'commits',                'occ.stats has column commits');
SELECT col_type_is('occ', 'stats', 'commits',                'bigint',           'occ.stats.commits is bigint');
SELECT has_column('occ', 'stats', 'gave_up',                'occ.stats has column gave_up');
SELECT col_type_is('occ', 'stats', 'gave_up',                'bigint',           'occ.stats.gave_up is bigint');
SELECT has_column('occ', 'stats', 'errors',                 'occ.stats has column errors');
SELECT col_type_is('occ', 'stats', 'errors',                 'bigint',           'occ.stats.errors is bigint');
SELECT has_column('occ', 'stats', 'attempts',               'occ.stats has column attempts');
SELECT col_type_is('occ', 'stats', 'attempts',               'bigint',           'occ.stats.attempts is bigint');
SELECT has_column('occ', 'stats', 'serialization_failures', 'occ.stats has column serialization_failures');
SELECT col_type_is('occ', 'stats', 'serialization_failures', 'bigint',           'occ.stats.serialization_failures is bigint');
SELECT has_column('occ', 'stats', 'deadlocks',              'occ.stats has column deadlocks');
SELECT col_type_is('occ', 'stats', 'deadlocks',              'bigint',           'occ.stats.deadlocks is bigint');
SELECT has_column('occ', 'stats', 'other_failures',         'occ.stats has column other_failures');
SELECT col_type_is('occ', 'stats', 'other_failures',         'bigint',           'occ.stats.other_failures is bigint');
SELECT has_column('occ', 'stats', 'total_sleep_time',       'occ.stats has column total_sleep_time');
SELECT col_type_is('occ', 'stats', 'total_sleep_time',       'double precision', 'occ.stats.total_sleep_time is double precision');
SELECT has_column('occ', 'stats', 'max_sleep_time',         'occ.stats has column max_sleep_time');
SELECT col_type_is('occ', 'stats', 'max_sleep_time',         'double precision', 'occ.stats.max_sleep_time is double precision');
SELECT has_column('occ', 'stats', 'mean_sleep_time',        'occ.stats has column mean_sleep_time');
SELECT col_type_is('occ', 'stats', 'mean_sleep_time',        'double precision', 'occ.stats.mean_sleep_time is double precision');
SELECT has_column('occ', 'stats', 'queued',                 'occ.stats has column queued');
SELECT col_type_is('occ', 'stats', 'queued',                 'bigint',           'occ.stats.queued is bigint');
SELECT has_column('occ', 'stats', 'total_wait_time',        'occ.stats has column total_wait_time');
SELECT col_type_is('occ', 'stats', 'total_wait_time',        'double precision', 'occ.stats.total_wait_time is double precision');
SELECT has_column('occ', 'stats', 'max_wait_time',          'occ.stats has column max_wait_time');
SELECT col_type_is('occ', 'stats', 'max_wait_time',          'double precision', 'occ.stats.max_wait_time is double precision');
SELECT has_column('occ', 'stats', 'total_time',             'occ.stats has column total_time');
SELECT col_type_is('occ', 'stats', 'total_time',             'double precision', 'occ.stats.total_time is double precision');
SELECT has_column('occ', 'stats', 'mean_time',              'occ.stats has column mean_time');
SELECT col_type_is('occ', 'stats', 'mean_time',              'double precision', 'occ.stats.mean_time is double precision');
SELECT has_column('occ', 'stats', 'mean_attempts',          'occ.stats has column mean_attempts');
SELECT col_type_is('occ', 'stats', 'mean_attempts',          'double precision', 'occ.stats.mean_attempts is double precision');
SELECT has_column('occ', 'stats', 'max_attempts',           'occ.stats has column max_attempts');
SELECT col_type_is('occ', 'stats', 'max_attempts',           'bigint',           'occ.stats.max_attempts is bigint');
SELECT has_column('occ', 'stats', 'attempts_histogram',     'occ.stats has column attempts_histogram');
SELECT col_type_is('occ', 'stats', 'attempts_histogram',     'bigint[]',         'occ.stats.attempts_histogram is bigint[]');
SELECT lives_ok('SELECT * FROM occ.stats', 'occ.stats can be read (pg_occ is preloaded)');

------------------------------------------------------------------------
-- The view occ.stats_info: dealloc, stats_reset, and the retry budget's
-- budget_tokens, budget_refusals, last_storm
------------------------------------------------------------------------
SELECT has_view('occ', 'stats_info', 'view occ.stats_info exists');
SELECT columns_are('occ', 'stats_info', ARRAY['dealloc', 'stats_reset', 'budget_tokens', 'budget_refusals', 'last_storm'],
                   'occ.stats_info has exactly the columns dealloc, stats_reset, budget_tokens, budget_refusals, last_storm');
SELECT results_eq(
    $$ SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
         FROM pg_attribute
        WHERE attrelid = 'occ.stats_info'::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum $$,
    $$ VALUES ('dealloc', 'bigint'), ('stats_reset', 'timestamp with time zone'),
              ('budget_tokens', 'double precision'), ('budget_refusals', 'bigint'),
              ('last_storm', 'timestamp with time zone') $$,
    'occ.stats_info has exactly these 5 columns, in this order');
SELECT has_column('occ', 'stats_info', 'dealloc', 'occ.stats_info has column dealloc');
SELECT col_type_is('occ', 'stats_info', 'dealloc', 'bigint', 'occ.stats_info.dealloc is bigint');
SELECT has_column('occ', 'stats_info', 'stats_reset', 'occ.stats_info has column stats_reset');
SELECT col_type_is('occ', 'stats_info', 'stats_reset', 'timestamp with time zone',
                   'occ.stats_info.stats_reset is timestamp with time zone');
SELECT has_column('occ', 'stats_info', 'budget_tokens', 'occ.stats_info has column budget_tokens');
SELECT col_type_is('occ', 'stats_info', 'budget_tokens', 'double precision',
                   'occ.stats_info.budget_tokens is double precision');
SELECT has_column('occ', 'stats_info', 'budget_refusals', 'occ.stats_info has column budget_refusals');
SELECT col_type_is('occ', 'stats_info', 'budget_refusals', 'bigint', 'occ.stats_info.budget_refusals is bigint');
SELECT has_column('occ', 'stats_info', 'last_storm', 'occ.stats_info has column last_storm');
SELECT col_type_is('occ', 'stats_info', 'last_storm', 'timestamp with time zone',
                   'occ.stats_info.last_storm is timestamp with time zone');
SELECT is((SELECT count(*)::int FROM occ.stats_info), 1, 'occ.stats_info has exactly one row');
-- the budget's columns: tokens NULL while the budget is off (0, the default),
-- a number when it is on; refusals counted; a storm not in the future.  The
-- capacity 1e9 caps nothing and the floor 0 deposits nothing, so reading
-- the shared bucket here leaves its tokens as they are
SET LOCAL occ.retry_budget = 0;
SELECT is((SELECT budget_tokens FROM occ.stats_info), NULL::float8,
          'occ.stats_info.budget_tokens is NULL while occ.retry_budget is 0 (off)');
SET LOCAL occ.retry_budget = 1e9;
SET LOCAL occ.retry_budget_floor = 0;
SELECT ok((SELECT budget_tokens >= 0 FROM occ.stats_info),
          'occ.stats_info.budget_tokens is a number, at least 0, while occ.retry_budget is on');
RESET occ.retry_budget;
RESET occ.retry_budget_floor;
SELECT ok((SELECT budget_refusals >= 0 FROM occ.stats_info), 'occ.stats_info.budget_refusals is a count, not NULL');
SELECT ok((SELECT last_storm IS NULL OR last_storm <= clock_timestamp() FROM occ.stats_info),
          'occ.stats_info.last_storm is NULL or in the past');

------------------------------------------------------------------------
-- Every object has a comment
------------------------------------------------------------------------
SELECT ok(length(obj_description('occ'::regnamespace, 'pg_namespace')) > 0, 'schema occ has a comment');
SELECT ok(length(obj_description((SELECT oid FROM pg_extension WHERE extname = 'pg_occ'), 'pg_extension')) > 0,
          'extension pg_occ has a comment');
SELECT ok(length(obj_description('occ.backoff(integer, interval, interval, text, double precision, interval, double precision)'::regprocedure, 'pg_proc')) > 0,
          'occ.backoff has a comment');
SELECT ok(length(obj_description('occ.setseed(double precision)'::regprocedure, 'pg_proc')) > 0,
          'occ.setseed has a comment');
SELECT ok(length(obj_description('occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure, 'pg_proc')) > 0,
          'occ.retry (form 1) has a comment');
SELECT ok(length(obj_description('occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure, 'pg_proc')) > 0,
          'occ.retry (form 2) has a comment');
SELECT ok(length(obj_description('occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure, 'pg_proc')) > 0,
          'occ.retry (form 3) has a comment');
SELECT ok(length(obj_description('occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)'::regprocedure, 'pg_proc')) > 0,
          'occ.retry (form 4) has a comment');
SELECT is((SELECT count(DISTINCT obj_description(oid, 'pg_proc'))::int FROM pg_proc
            WHERE pronamespace = 'occ'::regnamespace AND proname = 'retry'), 4,
          'each form of occ.retry has a comment of its own');
SELECT ok(length(obj_description('occ.attempt()'::regprocedure, 'pg_proc')) > 0,
          'occ.attempt has a comment');
SELECT ok(length(obj_description('occ.gate(text)'::regprocedure, 'pg_proc')) > 0,
          'occ.gate has a comment');
SELECT ok(length(obj_description('occ.last_retry()'::regprocedure, 'pg_proc')) > 0,
          'occ.last_retry has a comment');
SELECT ok(length(obj_description('occ.stats(boolean)'::regprocedure, 'pg_proc')) > 0,
          'occ.stats(boolean) has a comment');
SELECT ok(length(obj_description('occ.stats_info()'::regprocedure, 'pg_proc')) > 0,
          'occ.stats_info() has a comment');
SELECT ok(length(obj_description('occ.stats_reset()'::regprocedure, 'pg_proc')) > 0,
          'occ.stats_reset has a comment');
SELECT ok(length(obj_description('occ.stats'::regclass, 'pg_class')) > 0, 'view occ.stats has a comment');
SELECT ok(length(obj_description('occ.stats_info'::regclass, 'pg_class')) > 0, 'view occ.stats_info has a comment');
SELECT ok(length(obj_description('occ.reservable_guard()'::regprocedure, 'pg_proc')) > 0,
          'occ.reservable_guard has a comment');
SELECT ok(length(obj_description('occ.make_reservable(regclass, name)'::regprocedure, 'pg_proc')) > 0,
          'occ.make_reservable has a comment');
SELECT ok(length(obj_description('occ.drop_reservable(regclass, name)'::regprocedure, 'pg_proc')) > 0,
          'occ.drop_reservable has a comment');
SELECT ok(length(obj_description('occ.reserve(regclass, name, anycompatible, bigint)'::regprocedure, 'pg_proc')) > 0,
          'occ.reserve has a comment');
SELECT ok(length(obj_description('occ.reserved_value(regclass, name, anycompatible)'::regprocedure, 'pg_proc')) > 0,
          'occ.reserved_value has a comment');
SELECT ok(length(obj_description('occ.reservations()'::regprocedure, 'pg_proc')) > 0,
          'occ.reservations() has a comment');
SELECT ok(length(obj_description('occ.reservations'::regclass, 'pg_class')) > 0, 'view occ.reservations has a comment');
SELECT ok(length(obj_description('occ.reservation_ledger'::regclass, 'pg_class')) > 0,
          'table occ.reservation_ledger has a comment');
SELECT ok(length(obj_description('occ.reservation_ledger_guard()'::regprocedure, 'pg_proc')) > 0,
          'occ.reservation_ledger_guard has a comment');
SELECT is((SELECT tgfoid::regprocedure FROM pg_trigger WHERE tgrelid = 'occ.reservation_ledger'::regclass
            AND NOT tgisinternal AND tgtype = 7),
          'occ.reservation_ledger_guard()'::regprocedure,
          'occ.reservation_ledger has its BEFORE INSERT row guard (a restored row needs UPDATE on its column)');
SELECT is(
    ARRAY(SELECT oid::regprocedure::text FROM pg_proc
           WHERE pronamespace = 'occ'::regnamespace AND obj_description(oid, 'pg_proc') IS NULL),
    ARRAY[]::text[], 'no routine in occ lacks a comment');
SELECT is(
    ARRAY(SELECT oid::regclass::text FROM pg_class
           WHERE relnamespace = 'occ'::regnamespace AND obj_description(oid, 'pg_class') IS NULL),
    ARRAY[]::text[], 'no relation in occ lacks a comment');
SELECT is(
    ARRAY(SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
            FROM pg_depend d
           WHERE d.refclassid = 'pg_extension'::regclass
             AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_occ') AND d.deptype = 'e'
             -- not the relations' row types and their array types, members from PostgreSQL 17 on
             AND NOT (d.classid = 'pg_type'::regclass AND d.objid IN (SELECT oid FROM pg_type WHERE typrelid <> 0
                                                                      UNION ALL SELECT typarray FROM pg_type WHERE typrelid <> 0))
             AND NOT EXISTS (SELECT 1 FROM pg_description c
                              WHERE c.classoid = d.classid AND c.objoid = d.objid AND c.objsubid = 0
                                AND length(c.description) > 0)
           ORDER BY 1),
    ARRAY[]::text[], 'no member of extension pg_occ lacks a comment');

SELECT * FROM finish();
ROLLBACK;
