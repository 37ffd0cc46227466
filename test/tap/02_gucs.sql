-- pg_occ API surface, part 2: the occ.* configuration parameters.
-- Runs in one transaction that is rolled back, so it leaves nothing behind.
-- Needs a server with shared_preload_libraries = pg_occ (occ.stats_max and
-- occ.reservable_rows exist only then); the test runner may set them, so
-- their current values are not checked, only their built-in defaults.
\ir begin.psql

SELECT plan(98);

------------------------------------------------------------------------
-- Exactly the documented parameters exist
------------------------------------------------------------------------
SELECT set_eq(
    $$ SELECT name::text FROM pg_settings WHERE name LIKE 'occ.%' $$,
    ARRAY['occ.base_delay', 'occ.max_delay', 'occ.jitter', 'occ.factor', 'occ.max_attempts', 'occ.batch_max_calls',
          'occ.batch_max_time',
          'occ.max_duration', 'occ.isolation', 'occ.contention', 'occ.retry_sqlstates', 'occ.log_retries',
          'occ.track_stats', 'occ.stats_max', 'occ.max_result_size', 'occ.retry_budget',
          'occ.retry_budget_ratio', 'occ.retry_budget_floor', 'occ.key', 'occ.fold_interval',
          'occ.reservable_rows'],
    'exactly the 21 documented occ.* parameters exist');

------------------------------------------------------------------------
-- Context of each parameter: stats_max and reservable_rows need a restart,
-- fold_interval a reload, log_retries, track_stats and the retry budget's
-- three (server-wide) are for superusers, the rest can be set by anyone
------------------------------------------------------------------------
SELECT results_eq(
    $$ SELECT name::text COLLATE "default", context::text FROM pg_settings WHERE name LIKE 'occ.%' ORDER BY name $$,
    $$ VALUES ('occ.base_delay', 'user'), ('occ.batch_max_calls', 'user'), ('occ.batch_max_time', 'user'), ('occ.contention', 'user'), ('occ.factor', 'user'),
              ('occ.fold_interval', 'sighup'), ('occ.isolation', 'user'),
              ('occ.jitter', 'user'), ('occ.key', 'user'), ('occ.log_retries', 'superuser'), ('occ.max_attempts', 'user'),
              ('occ.max_delay', 'user'), ('occ.max_duration', 'user'), ('occ.max_result_size', 'user'),
              ('occ.reservable_rows', 'postmaster'), ('occ.retry_budget', 'superuser'), ('occ.retry_budget_floor', 'superuser'),
              ('occ.retry_budget_ratio', 'superuser'), ('occ.retry_sqlstates', 'user'),
              ('occ.stats_max', 'postmaster'), ('occ.track_stats', 'superuser') $$,
    'context of every occ.* parameter');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.stats_max'), 'postmaster',
          'occ.stats_max can only be set at server start');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.reservable_rows'), 'postmaster',
          'occ.reservable_rows can only be set at server start');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.fold_interval'), 'sighup',
          'occ.fold_interval is set in the server''s configuration and changed by a reload');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.log_retries'), 'superuser',
          'occ.log_retries is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.track_stats'), 'superuser',
          'occ.track_stats is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.max_result_size'), 'user',
          'occ.max_result_size can be set by anyone');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.retry_budget'), 'superuser',
          'occ.retry_budget is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.retry_budget_ratio'), 'superuser',
          'occ.retry_budget_ratio is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'occ.retry_budget_floor'), 'superuser',
          'occ.retry_budget_floor is superuser-only');

------------------------------------------------------------------------
-- Type and unit of each parameter
------------------------------------------------------------------------
SELECT results_eq(
    $$ SELECT name::text COLLATE "default", vartype, unit FROM pg_settings WHERE name LIKE 'occ.%' ORDER BY name $$,
    $$ VALUES ('occ.base_delay', 'real', 'ms'), ('occ.batch_max_calls', 'integer', NULL), ('occ.batch_max_time', 'integer', 'ms'), ('occ.contention', 'enum', NULL), ('occ.factor', 'real', NULL),
              ('occ.fold_interval', 'integer', 'ms'), ('occ.isolation', 'enum', NULL), ('occ.jitter', 'enum', NULL), ('occ.key', 'string', NULL),
              ('occ.log_retries', 'bool', NULL), ('occ.max_attempts', 'integer', NULL),
              ('occ.max_delay', 'real', 'ms'), ('occ.max_duration', 'integer', 'ms'),
              ('occ.max_result_size', 'integer', 'kB'), ('occ.reservable_rows', 'integer', NULL),
              ('occ.retry_budget', 'real', NULL),
              ('occ.retry_budget_floor', 'real', NULL), ('occ.retry_budget_ratio', 'real', NULL),
              ('occ.retry_sqlstates', 'string', NULL), ('occ.stats_max', 'integer', NULL),
              ('occ.track_stats', 'bool', NULL) $$,
    'type and unit of every occ.* parameter');

------------------------------------------------------------------------
-- Built-in defaults (boot_val) and bounds of each parameter
------------------------------------------------------------------------
SELECT results_eq(
    $$ SELECT name::text COLLATE "default", boot_val, min_val, max_val FROM pg_settings WHERE name LIKE 'occ.%' ORDER BY name $$,
    $$ VALUES ('occ.base_delay', '1', '0.001', '3.6e+06'), ('occ.batch_max_calls', '64', '1', '1000'),
              ('occ.batch_max_time', '10', '1', '60000'),
              ('occ.contention', 'queue', NULL, NULL),
              ('occ.factor', '2', '1', '1000'), ('occ.fold_interval', '100', '10', '60000'),
              ('occ.isolation', 'serializable', NULL, NULL), ('occ.jitter', 'full', NULL, NULL),
              ('occ.key', '', NULL, NULL), ('occ.log_retries', 'off', NULL, NULL), ('occ.max_attempts', '30', '1', '2147483647'),
              ('occ.max_delay', '200', '0.001', '3.6e+06'), ('occ.max_duration', '0', '0', '2147483647'),
              ('occ.max_result_size', '65536', '1', '262143'), ('occ.reservable_rows', '10000', '100', '1073741823'),
              ('occ.retry_budget', '0', '0', '1e+09'),
              ('occ.retry_budget_floor', '10', '0', '1e+09'), ('occ.retry_budget_ratio', '0.2', '0', '1000'),
              ('occ.retry_sqlstates', '40001,40P01', NULL, NULL), ('occ.stats_max', '1000', '100', '1073741823'),
              ('occ.track_stats', 'on', NULL, NULL) $$,
    'built-in default and bounds of every occ.* parameter');

------------------------------------------------------------------------
-- Current values are the defaults, as current_setting() spells them
-- (src/guc.c; the README's table of parameters must agree)
------------------------------------------------------------------------
SELECT is(current_setting('occ.base_delay'), '1ms', 'occ.base_delay defaults to 1ms');
SELECT is(current_setting('occ.max_delay'), '200ms', 'occ.max_delay defaults to 200ms');
SELECT is(current_setting('occ.jitter'), 'full', 'occ.jitter defaults to full');
SELECT is(current_setting('occ.factor'), '2', 'occ.factor defaults to 2');
SELECT is(current_setting('occ.max_attempts'), '30', 'occ.max_attempts defaults to 30');
SELECT is(current_setting('occ.max_duration'), '0', 'occ.max_duration defaults to 0 (no limit)');
SELECT is(current_setting('occ.isolation'), 'serializable', 'occ.isolation defaults to serializable');
SELECT is(current_setting('occ.contention'), 'queue', 'occ.contention defaults to queue');
SELECT is(current_setting('occ.retry_sqlstates'), '40001,40P01', 'occ.retry_sqlstates defaults to 40001,40P01');
SELECT is(current_setting('occ.log_retries'), 'off', 'occ.log_retries defaults to off');
SELECT is(current_setting('occ.track_stats'), 'on', 'occ.track_stats defaults to on');
SELECT ok(current_setting('occ.stats_max')::int >= 100, 'occ.stats_max is set, at least its minimum 100');
SELECT is(current_setting('occ.max_result_size'), '64MB', 'occ.max_result_size defaults to 64MB');
SELECT is(current_setting('occ.retry_budget'), '0', 'occ.retry_budget defaults to 0 (no budget)');
SELECT is(current_setting('occ.retry_budget_ratio'), '0.2', 'occ.retry_budget_ratio defaults to 0.2');
SELECT is(current_setting('occ.retry_budget_floor'), '10', 'occ.retry_budget_floor defaults to 10');
SELECT is(current_setting('occ.key'), '', 'occ.key defaults to empty (no key)');
SELECT is(current_setting('occ.batch_max_calls'), '64', 'occ.batch_max_calls defaults to 64');
SELECT is(current_setting('occ.batch_max_time'), '10ms', 'occ.batch_max_time defaults to 10ms');
SELECT is(current_setting('occ.fold_interval'), '100ms', 'occ.fold_interval defaults to 100ms');
SELECT ok(current_setting('occ.reservable_rows')::int >= 100, 'occ.reservable_rows is set, at least its minimum 100');

------------------------------------------------------------------------
-- The enum parameters list their values, in the documented order
------------------------------------------------------------------------
SELECT is((SELECT enumvals FROM pg_settings WHERE name = 'occ.jitter'),
          ARRAY['none', 'full', 'equal', 'decorrelated', 'bounded', 'multiplicative', 'normal'],
          'occ.jitter accepts the 7 strategies none, full, equal, decorrelated, bounded, multiplicative, normal');
SELECT is((SELECT enumvals FROM pg_settings WHERE name = 'occ.isolation'),
          ARRAY['serializable', 'repeatable read', 'read committed'],
          'occ.isolation accepts serializable, repeatable read, read committed');
SELECT is((SELECT enumvals FROM pg_settings WHERE name = 'occ.contention'),
          ARRAY['backoff', 'queue', 'batch'],
          'occ.contention accepts backoff, queue and batch');
-- occ.backoff takes the same spellings as occ.jitter, and returns a delay
-- between 0 and cap for each of them
SELECT is(
    (SELECT count(*)::int
       FROM pg_settings, unnest(enumvals) AS s(strategy)
      WHERE name = 'occ.jitter'
        AND occ.backoff(2, '1ms', '50ms', s.strategy, 2, NULL, 0.5) BETWEEN '0' AND '50ms'),
    7, 'occ.backoff accepts every occ.jitter strategy and stays within [0, cap]');
SELECT throws_ok($$ SELECT occ.backoff(0, jitter => 'bogus') $$, '22023',
                 'unknown backoff strategy "bogus"',
                 'occ.backoff refuses an unknown strategy');

------------------------------------------------------------------------
-- The occ prefix is reserved: an unknown occ.* parameter is refused
------------------------------------------------------------------------
SELECT throws_ok('SET occ.nonsense = 1', '42602',
                 'invalid configuration parameter name "occ.nonsense"',
                 'SET occ.nonsense is refused (occ is a reserved prefix)');
SELECT throws_ok($$ SELECT set_config('occ.nonsense', '1', true) $$, '42602',
                 'invalid configuration parameter name "occ.nonsense"',
                 'set_config(''occ.nonsense'', ...) is refused');
SELECT throws_ok($$ SELECT current_setting('occ.nonsense') $$, '42704',
                 'unrecognized configuration parameter "occ.nonsense"',
                 'current_setting(''occ.nonsense'') is an unknown parameter');
SELECT is(current_setting('occ.nonsense', true), NULL,
          'current_setting(''occ.nonsense'', missing_ok) is NULL: no placeholder was left behind');
-- control: another prefix still takes placeholders, so the refusal is occ's doing
SELECT lives_ok('SET LOCAL occ_tap_other.anything = 1', 'a placeholder outside the occ prefix can still be set');

------------------------------------------------------------------------
-- Invalid values are refused
------------------------------------------------------------------------
SELECT throws_ok($$ SET LOCAL occ.jitter = 'bogus' $$, '22023',
                 'invalid value for parameter "occ.jitter": "bogus"',
                 'occ.jitter refuses an unknown strategy');
SELECT throws_ok($$ SET LOCAL occ.isolation = 'snapshot' $$, '22023',
                 'invalid value for parameter "occ.isolation": "snapshot"',
                 'occ.isolation refuses an unknown level');
SELECT throws_ok($$ SET LOCAL occ.contention = 'fifo' $$, '22023',
                 'invalid value for parameter "occ.contention": "fifo"',
                 'occ.contention refuses an unknown mode');
SELECT throws_ok($$ SET LOCAL occ.contention = '' $$, '22023',
                 'invalid value for parameter "occ.contention": ""',
                 'occ.contention refuses an empty value');
SELECT throws_ok($$ SET LOCAL occ.retry_sqlstates = '57014' $$, '22023',
                 'invalid value for parameter "occ.retry_sqlstates": "57014"',
                 'occ.retry_sqlstates refuses query_canceled');
SELECT throws_ok($$ SET LOCAL occ.retry_sqlstates = '4000' $$, '22023',
                 'invalid value for parameter "occ.retry_sqlstates": "4000"',
                 'occ.retry_sqlstates refuses a malformed SQLSTATE');
SELECT throws_ok($$ SET LOCAL occ.factor = 0.5 $$, '22023', NULL,
                 'occ.factor refuses a value below 1');
SELECT throws_ok($$ SET LOCAL occ.base_delay = 0 $$, '22023', NULL,
                 'occ.base_delay refuses 0');
SELECT throws_ok($$ SET LOCAL occ.max_attempts = 0 $$, '22023', NULL,
                 'occ.max_attempts refuses 0');
SELECT throws_ok($$ SET LOCAL occ.max_result_size = 0 $$, '22023', NULL,
                 'occ.max_result_size refuses 0');
-- PostgreSQL 16 and later show the unit with the bounds too
SELECT throws_matching($$ SET LOCAL occ.max_result_size = 0 $$,
                       '^0 kB is outside the valid range for parameter "occ\.max_result_size" \(1( kB)? \.\. 262143( kB)?\)$',
                       'occ.max_result_size says its range, 1 to 262143 kB');
SELECT throws_ok($$ SET LOCAL occ.max_result_size = '256MB' $$, '22023', NULL,
                 'occ.max_result_size refuses 256MB, one kB above its maximum');
SELECT throws_ok($$ SET LOCAL occ.max_result_size = '1 lightyear' $$, '22023', NULL,
                 'occ.max_result_size refuses an unknown unit');
SELECT throws_ok($$ SET LOCAL occ.retry_budget = -1 $$, '22023',
                 '-1 is outside the valid range for parameter "occ.retry_budget" (0 .. 1e+09)',
                 'occ.retry_budget refuses a negative capacity');
SELECT throws_ok($$ SET LOCAL occ.retry_budget = 1e10 $$, '22023',
                 '1e+10 is outside the valid range for parameter "occ.retry_budget" (0 .. 1e+09)',
                 'occ.retry_budget refuses a capacity above 1e9');
SELECT throws_ok($$ SET LOCAL occ.retry_budget = 'NaN' $$, '22023',
                 'invalid value for parameter "occ.retry_budget": "NaN"',
                 'occ.retry_budget refuses NaN');
SELECT throws_ok($$ SET LOCAL occ.retry_budget_ratio = -0.1 $$, '22023',
                 '-0.1 is outside the valid range for parameter "occ.retry_budget_ratio" (0 .. 1000)',
                 'occ.retry_budget_ratio refuses a negative ratio');
SELECT throws_ok($$ SET LOCAL occ.retry_budget_ratio = 1001 $$, '22023',
                 '1001 is outside the valid range for parameter "occ.retry_budget_ratio" (0 .. 1000)',
                 'occ.retry_budget_ratio refuses a ratio above 1000');
SELECT throws_ok($$ SET LOCAL occ.retry_budget_floor = -1 $$, '22023',
                 '-1 is outside the valid range for parameter "occ.retry_budget_floor" (0 .. 1e+09)',
                 'occ.retry_budget_floor refuses a negative rate');
SELECT throws_ok($$ SET LOCAL occ.retry_budget_floor = 'lots' $$, '22023',
                 'invalid value for parameter "occ.retry_budget_floor": "lots"',
                 'occ.retry_budget_floor refuses a non-number');
-- occ.key is set by the client's SET LOCAL as the first statement of a
-- transaction only (sql/client.sql has every case); pgTAP runs statements
-- from PL/pgSQL
SELECT throws_ok($$ SET LOCAL occ.key = 'account:1' $$, '55P02',
                 'SET LOCAL occ.key can only be sent by the client, not run by a function or a procedure',
                 'SET LOCAL occ.key from a function is refused');
SELECT throws_ok($$ SELECT set_config('occ.key', 'account:1', true) $$, '55P02',
                 'invalid value for parameter "occ.key": "account:1"',
                 'set_config(''occ.key'', ...) is refused');
SELECT throws_ok($$ SET LOCAL occ.stats_max = 200 $$, '55P02',
                 'parameter "occ.stats_max" cannot be changed without restarting the server',
                 'occ.stats_max cannot be changed in a session');
SELECT throws_ok($$ SET LOCAL occ.reservable_rows = 200 $$, '55P02',
                 'parameter "occ.reservable_rows" cannot be changed without restarting the server',
                 'occ.reservable_rows cannot be changed in a session');
SELECT throws_ok($$ SET LOCAL occ.fold_interval = '1s' $$, '55P02',
                 'parameter "occ.fold_interval" cannot be changed now',
                 'occ.fold_interval cannot be changed in a session');

------------------------------------------------------------------------
-- Valid values are accepted, with units
------------------------------------------------------------------------
SELECT lives_ok($$ SET LOCAL occ.retry_sqlstates = '40001, 40P01, 55' $$,
                'occ.retry_sqlstates takes a list of codes and classes');
SELECT lives_ok($$ SET LOCAL occ.isolation = 'repeatable read' $$, 'occ.isolation takes repeatable read');
SELECT lives_ok($$ SET LOCAL occ.contention = 'queue' $$, 'occ.contention takes queue');
SELECT is(current_setting('occ.contention'), 'queue', 'occ.contention shows queue');
SELECT lives_ok($$ SET LOCAL occ.contention = 'BackOff' $$, 'occ.contention takes backoff in any case');
SELECT is(current_setting('occ.contention'), 'backoff', 'occ.contention shows backoff');
SELECT lives_ok($$ SET LOCAL occ.base_delay = '250us' $$, 'occ.base_delay takes microseconds');
SELECT is(current_setting('occ.base_delay'), '250us', 'occ.base_delay shows 250us');
SELECT lives_ok($$ SET LOCAL occ.max_duration = '1min' $$, 'occ.max_duration takes a unit');
SELECT is(current_setting('occ.max_duration'), '1min', 'occ.max_duration shows 1min');
SELECT lives_ok($$ SET LOCAL occ.max_result_size = 1 $$, 'occ.max_result_size takes its minimum, 1 (kB)');
SELECT is(current_setting('occ.max_result_size'), '1kB', 'occ.max_result_size shows 1kB');
SELECT lives_ok($$ SET LOCAL occ.max_result_size = '1MB' $$, 'occ.max_result_size takes a unit');
SELECT is(current_setting('occ.max_result_size'), '1MB', 'occ.max_result_size shows 1MB');
SELECT lives_ok($$ SET LOCAL occ.max_result_size = '262143kB' $$, 'occ.max_result_size takes its maximum');
SELECT is((SELECT setting FROM pg_settings WHERE name = 'occ.max_result_size'), '262143',
          'occ.max_result_size is kept in kB');
-- the budget's values are superuser-settable per session (this file runs as one)
SELECT lives_ok($$ SET LOCAL occ.retry_budget = 0.5 $$, 'occ.retry_budget takes a fraction of a token');
SELECT is(current_setting('occ.retry_budget'), '0.5', 'occ.retry_budget shows 0.5');
SELECT lives_ok($$ SET LOCAL occ.retry_budget = 1e9 $$, 'occ.retry_budget takes its maximum, 1e9');
SELECT is(current_setting('occ.retry_budget'), '1e+09', 'occ.retry_budget shows 1e+09');
SELECT lives_ok($$ SET LOCAL occ.retry_budget_ratio = 0 $$, 'occ.retry_budget_ratio takes 0 (commits deposit nothing)');
SELECT lives_ok($$ SET LOCAL occ.retry_budget_ratio = 1000 $$, 'occ.retry_budget_ratio takes its maximum, 1000');
SELECT lives_ok($$ SET LOCAL occ.retry_budget_floor = 0 $$, 'occ.retry_budget_floor takes 0 (time deposits nothing)');
SELECT lives_ok($$ SET LOCAL occ.retry_budget_floor = 1e9 $$, 'occ.retry_budget_floor takes its maximum, 1e9');
SELECT is(current_setting('occ.retry_budget_floor'), '1e+09', 'occ.retry_budget_floor shows 1e+09');
-- back to no budget, before anything reads the shared bucket
SET LOCAL occ.retry_budget = 0;

------------------------------------------------------------------------
-- occ.backoff's defaults follow the parameters
------------------------------------------------------------------------
SET LOCAL occ.jitter = 'none';
SET LOCAL occ.base_delay = '2ms';
SET LOCAL occ.factor = 3;
SET LOCAL occ.max_delay = '50ms';
SELECT is(occ.backoff(0), '2ms'::interval, 'occ.backoff(0) uses occ.base_delay and occ.jitter');
SELECT is(occ.backoff(2), '18ms'::interval, 'occ.backoff(2) uses occ.factor: 2ms * 3^2');
SELECT is(occ.backoff(20), '50ms'::interval, 'occ.backoff(20) is capped by occ.max_delay');
SET LOCAL occ.max_delay = '1s';
SELECT is(occ.backoff(20), '1s'::interval, 'occ.backoff reads occ.max_delay at each call');

SELECT * FROM finish();
ROLLBACK;
