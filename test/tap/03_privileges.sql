-- pg_occ API surface, part 3: privileges.  PUBLIC may use the schema, read
-- the views and run everything except occ.stats_reset and occ.gate (which
-- the owner grants to the roles that write what a key names); an ordinary
-- role created here (and rolled back with the rest) checks that in practice.
\ir begin.psql

SELECT plan(65);

CREATE ROLE occ_tap_user NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;

------------------------------------------------------------------------
-- Schema occ: USAGE for PUBLIC, CREATE for nobody but its owner
------------------------------------------------------------------------
SELECT schema_privs_are('occ', 'public', ARRAY['USAGE'], 'PUBLIC has USAGE, not CREATE, on schema occ');
SELECT schema_privs_are('occ', 'occ_tap_user', ARRAY['USAGE'], 'an ordinary role has USAGE, not CREATE, on schema occ');

------------------------------------------------------------------------
-- Views: SELECT only, for PUBLIC
------------------------------------------------------------------------
SELECT table_privs_are('occ', 'stats', 'public', ARRAY['SELECT'], 'PUBLIC may only SELECT from occ.stats');
SELECT table_privs_are('occ', 'stats_info', 'public', ARRAY['SELECT'], 'PUBLIC may only SELECT from occ.stats_info');
SELECT table_privs_are('occ', 'stats', 'occ_tap_user', ARRAY['SELECT'], 'an ordinary role may only SELECT from occ.stats');
SELECT table_privs_are('occ', 'stats_info', 'occ_tap_user', ARRAY['SELECT'], 'an ordinary role may only SELECT from occ.stats_info');
SELECT table_privs_are('occ', 'key_stats', 'public', ARRAY['SELECT'], 'PUBLIC may only SELECT from occ.key_stats');
SELECT table_privs_are('occ', 'key_stats', 'occ_tap_user', ARRAY['SELECT'], 'an ordinary role may only SELECT from occ.key_stats');

------------------------------------------------------------------------
-- Routines: EXECUTE for PUBLIC on all but occ.stats_reset and occ.gate
------------------------------------------------------------------------
SELECT function_privs_are('occ', 'backoff',
    ARRAY['integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'double precision'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.backoff');
SELECT function_privs_are('occ', 'setseed', ARRAY['double precision'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.setseed');
SELECT function_privs_are('occ', 'retry',
    ARRAY['text', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.retry (form 1)');
SELECT function_privs_are('occ', 'retry',
    ARRAY['text', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.retry (form 2)');
SELECT function_privs_are('occ', 'retry',
    ARRAY['text', 'jsonb', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.retry (form 3)');
SELECT function_privs_are('occ', 'retry',
    ARRAY['text', 'jsonb', 'integer', 'interval', 'record', 'integer', 'interval', 'interval', 'text', 'double precision', 'interval', 'text', 'text[]', 'text', 'anycompatible'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.retry (form 4)');
SELECT function_privs_are('occ', 'attempt', ARRAY[]::name[],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.attempt');
SELECT function_privs_are('occ', 'gate', ARRAY['text'],
    'public', ARRAY[]::name[], 'PUBLIC may not execute occ.gate');
SELECT function_privs_are('occ', 'last_retry', ARRAY[]::name[],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.last_retry');
SELECT function_privs_are('occ', 'stats', ARRAY['boolean'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.stats(boolean)');
SELECT function_privs_are('occ', 'stats_info', ARRAY[]::name[],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.stats_info()');
SELECT function_privs_are('occ', 'key_stats', ARRAY['boolean'],
    'public', ARRAY['EXECUTE'], 'PUBLIC may execute occ.key_stats(boolean)');
SELECT function_privs_are('occ', 'stats_reset', ARRAY[]::name[],
    'public', ARRAY[]::name[], 'PUBLIC may not execute occ.stats_reset');
SELECT function_privs_are('occ', 'stats_reset', ARRAY[]::name[],
    'occ_tap_user', ARRAY[]::name[], 'an ordinary role may not execute occ.stats_reset');
SELECT ok(has_function_privilege('occ_tap_user',
              'occ.backoff(integer, interval, interval, text, double precision, interval, double precision)', 'EXECUTE'),
          'an ordinary role may execute occ.backoff');
SELECT ok(has_function_privilege('occ_tap_user',
              'occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)', 'EXECUTE'),
          'an ordinary role may execute occ.retry (form 1)');
SELECT ok(has_function_privilege('occ_tap_user',
              'occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)', 'EXECUTE'),
          'an ordinary role may execute occ.retry (form 2)');
SELECT ok(has_function_privilege('occ_tap_user',
              'occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)', 'EXECUTE'),
          'an ordinary role may execute occ.retry (form 3)');
SELECT ok(has_function_privilege('occ_tap_user',
              'occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)', 'EXECUTE'),
          'an ordinary role may execute occ.retry (form 4)');
SELECT ok(has_function_privilege('occ_tap_user', 'occ.attempt()', 'EXECUTE'),
          'an ordinary role may execute occ.attempt');
SELECT ok(NOT has_function_privilege('occ_tap_user', 'occ.gate(text)', 'EXECUTE'),
          'an ordinary role may not execute occ.gate');
-- the ACL of occ.stats_reset names no grantee but its owner
SELECT is(
    ARRAY(SELECT a.grantee::regrole::text
            FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
           WHERE p.oid = 'occ.stats_reset()'::regprocedure AND a.privilege_type = 'EXECUTE'
             AND a.grantee <> p.proowner),
    ARRAY[]::text[], 'EXECUTE on occ.stats_reset is granted to nobody but its owner');
-- nor does that of occ.gate
SELECT is(
    ARRAY(SELECT a.grantee::regrole::text
            FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
           WHERE p.oid = 'occ.gate(text)'::regprocedure AND a.privilege_type = 'EXECUTE'
             AND a.grantee <> p.proowner),
    ARRAY[]::text[], 'EXECUTE on occ.gate is granted to nobody but its owner');
-- and every other routine keeps PUBLIC's EXECUTE
SELECT is(
    ARRAY(SELECT p.oid::regprocedure::text
            FROM pg_proc p
           WHERE p.pronamespace = 'occ'::regnamespace
             AND NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                              WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
           ORDER BY 1),
    ARRAY['occ.gate(text)', 'occ.gate(text[])', 'occ.stats_reset()'],
    'occ.gate and occ.stats_reset are the only routines in occ that PUBLIC may not execute');

------------------------------------------------------------------------
-- As an ordinary role
------------------------------------------------------------------------
SET LOCAL ROLE occ_tap_user;
SELECT is(current_user::text, 'occ_tap_user', 'now running as the ordinary role');
SELECT is(occ.backoff(0, jitter => 'none'), '1ms'::interval, 'an ordinary role can call occ.backoff');
SELECT lives_ok('SELECT occ.setseed(0.5)', 'an ordinary role can call occ.setseed');
-- CALL checks EXECUTE before it runs the procedure, so 2D000 (occ.retry
-- refuses the atomic context of pgTAP's EXECUTE) instead of 42501 means the
-- role passed the privilege check; see the control case at the end
SELECT throws_ok($$ CALL occ.retry('SELECT 1') $$, '2D000',
                 'occ.retry cannot run in an atomic context',
                 'an ordinary role can call occ.retry (form 1): it gets past the privilege check');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', attempts => NULL, slept => NULL) $$, '2D000',
                 'occ.retry cannot run in an atomic context',
                 'an ordinary role can call occ.retry (form 2): it gets past the privilege check');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', result => NULL) $$, '2D000',
                 'occ.retry cannot run in an atomic context',
                 'an ordinary role can call occ.retry (form 3): it gets past the privilege check');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', result => NULL, attempts => NULL, slept => NULL) $$, '2D000',
                 'occ.retry cannot run in an atomic context',
                 'an ordinary role can call occ.retry (form 4): it gets past the privilege check');
SELECT is(occ.attempt(), NULL::int, 'an ordinary role can call occ.attempt (NULL outside a body)');
SELECT throws_ok($$ SELECT occ.gate('occ_tap_user') $$, '42501',
                 'permission denied for function gate',
                 'an ordinary role cannot call occ.gate');
SELECT lives_ok('SELECT * FROM occ.last_retry()', 'an ordinary role can call occ.last_retry');
SELECT lives_ok('SELECT * FROM occ.stats', 'an ordinary role can read occ.stats');
SELECT lives_ok('SELECT * FROM occ.stats_info', 'an ordinary role can read occ.stats_info');
SELECT lives_ok('SELECT * FROM occ.key_stats', 'an ordinary role can read occ.key_stats');
SELECT throws_ok('SELECT occ.stats_reset()', '42501',
                 'permission denied for function stats_reset',
                 'an ordinary role cannot call occ.stats_reset');
SELECT throws_ok('CREATE FUNCTION occ.tap_intruder() RETURNS int LANGUAGE sql AS $f$ SELECT 1 $f$', '42501',
                 'permission denied for schema occ',
                 'an ordinary role cannot create objects in schema occ');
-- the user-context parameters are the ordinary role's to set, the superuser ones are not
SELECT lives_ok($$ SET LOCAL occ.jitter = 'equal' $$, 'an ordinary role can set occ.jitter');
SELECT lives_ok($$ SET LOCAL occ.max_attempts = 3 $$, 'an ordinary role can set occ.max_attempts');
SELECT lives_ok($$ SET LOCAL occ.contention = 'queue' $$, 'an ordinary role can set occ.contention');
SELECT throws_ok('SET LOCAL occ.log_retries = on', '42501',
                 'permission denied to set parameter "occ.log_retries"',
                 'an ordinary role cannot set occ.log_retries');
SELECT throws_ok('SET LOCAL occ.track_stats = off', '42501',
                 'permission denied to set parameter "occ.track_stats"',
                 'an ordinary role cannot set occ.track_stats');
SELECT lives_ok($$ SET LOCAL occ.max_result_size = '1MB' $$, 'an ordinary role can set occ.max_result_size');
-- the retry budget is server-wide: only superusers set it
SELECT throws_ok('SET LOCAL occ.retry_budget = 1000', '42501',
                 'permission denied to set parameter "occ.retry_budget"',
                 'an ordinary role cannot set occ.retry_budget');
SELECT throws_ok('SET LOCAL occ.retry_budget = 0', '42501',
                 'permission denied to set parameter "occ.retry_budget"',
                 'an ordinary role cannot set occ.retry_budget, not even to 0 (off)');
SELECT throws_ok('SET LOCAL occ.retry_budget_ratio = 1000', '42501',
                 'permission denied to set parameter "occ.retry_budget_ratio"',
                 'an ordinary role cannot set occ.retry_budget_ratio');
SELECT throws_ok('SET LOCAL occ.retry_budget_floor = 1e9', '42501',
                 'permission denied to set parameter "occ.retry_budget_floor"',
                 'an ordinary role cannot set occ.retry_budget_floor');
SELECT throws_ok($$ SELECT set_config('occ.retry_budget', '1000', true) $$, '42501',
                 'permission denied to set parameter "occ.retry_budget"',
                 'an ordinary role cannot set occ.retry_budget through set_config either');
RESET ROLE;
SELECT isnt(current_user::text, 'occ_tap_user', 'back to the original role');

------------------------------------------------------------------------
-- occ.gate, granted: the role can take a gate (a transaction-level lock,
-- released by the final ROLLBACK, as is the GRANT)
------------------------------------------------------------------------
GRANT EXECUTE ON FUNCTION occ.gate(text) TO occ_tap_user;
SET LOCAL ROLE occ_tap_user;
SELECT lives_ok($$ SELECT occ.gate('occ_tap_user') $$, 'a role granted EXECUTE on occ.gate can call it');
RESET ROLE;

------------------------------------------------------------------------
-- Control: without EXECUTE, the same CALLs fail with 42501 (the REVOKE is
-- rolled back with the rest)
------------------------------------------------------------------------
REVOKE EXECUTE ON PROCEDURE
    occ.retry(text, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible),
    occ.retry(text, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible),
    occ.retry(text, jsonb, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible),
    occ.retry(text, jsonb, integer, interval, record, integer, interval, interval, text, double precision, interval, text, text[], text, anycompatible)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION occ.attempt() FROM PUBLIC;
SET LOCAL ROLE occ_tap_user;
SELECT throws_ok($$ CALL occ.retry('SELECT 1') $$, '42501',
                 'permission denied for procedure retry',
                 'control: without EXECUTE, CALL occ.retry (form 1) fails with 42501');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', attempts => NULL, slept => NULL) $$, '42501',
                 'permission denied for procedure retry',
                 'control: without EXECUTE, CALL occ.retry (form 2) fails with 42501');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', result => NULL) $$, '42501',
                 'permission denied for procedure retry',
                 'control: without EXECUTE, CALL occ.retry (form 3) fails with 42501');
SELECT throws_ok($$ CALL occ.retry('SELECT 1', result => NULL, attempts => NULL, slept => NULL) $$, '42501',
                 'permission denied for procedure retry',
                 'control: without EXECUTE, CALL occ.retry (form 4) fails with 42501');
SELECT throws_ok('SELECT occ.attempt()', '42501',
                 'permission denied for function attempt',
                 'control: without EXECUTE, occ.attempt() fails with 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
