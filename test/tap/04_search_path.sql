-- pg_occ API surface, part 4: a hostile search_path.  A schema whose
-- current_setting and string_to_array shadow pg_catalog's, first in the
-- path, must not change what occ.backoff and occ.retry's defaults compute,
-- what occ.attempt() says, or what occ.stats_info shows of the retry budget.
\ir begin.psql

SELECT plan(18);

------------------------------------------------------------------------
-- The defaults of every routine are NULL constants: the C code reads the
-- occ.* settings itself, so no default calls a function that a search_path
-- could redirect
------------------------------------------------------------------------
SELECT is((SELECT sum(pronargdefaults)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace),
          50, 'occ.backoff (6) and the four forms of occ.retry (11 each) have their 50 defaults');
SELECT is(
    ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
           WHERE p.pronamespace = 'occ'::regnamespace AND p.pronargdefaults > 0
           ORDER BY p.oid::regprocedure::text COLLATE "C"),
    ARRAY['occ.backoff(integer,interval,interval,text,double precision,interval,double precision)',
          'occ.retry(text,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,jsonb,integer,interval,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,jsonb,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)',
          'occ.retry(text,record,integer,interval,interval,text,double precision,interval,text,text[],text,anycompatible)'],
    'the routines with defaults are occ.backoff and the four forms of occ.retry');
SELECT is(
    (SELECT count(*)::int
       FROM pg_proc p, regexp_matches(p.proargdefaults::text, ':funcid (\d+)', 'g') AS m
      WHERE p.pronamespace = 'occ'::regnamespace),
    0, 'no default of an occ routine calls a function');
SELECT is(
    (SELECT count(*)::int
       FROM pg_proc p, regexp_matches(p.proargdefaults::text, ':constisnull true', 'g') AS m
      WHERE p.pronamespace = 'occ'::regnamespace),
    (SELECT sum(pronargdefaults)::int FROM pg_proc WHERE pronamespace = 'occ'::regnamespace),
    'every default of an occ routine is a NULL constant');

------------------------------------------------------------------------
-- The hostile schema: current_setting lies about occ.* parameters,
-- string_to_array returns a list that would retry everything
------------------------------------------------------------------------
CREATE SCHEMA evil;
CREATE FUNCTION evil.current_setting(text) RETURNS text
    LANGUAGE sql AS $$
        SELECT CASE WHEN $1 LIKE 'occ.%' THEN '1000' ELSE pg_catalog.current_setting($1) END
    $$;
CREATE FUNCTION evil.current_setting(text, boolean) RETURNS text
    LANGUAGE sql AS $$
        SELECT CASE WHEN $1 LIKE 'occ.%' THEN '1000' ELSE pg_catalog.current_setting($1, $2) END
    $$;
CREATE FUNCTION evil.string_to_array(text, text) RETURNS text[]
    LANGUAGE sql AS $$ SELECT ARRAY['00', '01', '02', '22', '23', '42', '57014'] $$;
CREATE FUNCTION evil.string_to_array(text, text, text) RETURNS text[]
    LANGUAGE sql AS $$ SELECT ARRAY['00', '01', '02', '22', '23', '42', '57014'] $$;
GRANT USAGE ON SCHEMA evil TO PUBLIC;

SET LOCAL search_path = evil, pg_catalog, public;

-- check that the trap is armed: unqualified calls now reach evil
SELECT is(current_setting('occ.base_delay'), '1000',
          'control: under the hostile path, current_setting reaches evil.current_setting');
SELECT is(string_to_array('40001,40P01', ','), ARRAY['00', '01', '02', '22', '23', '42', '57014'],
          'control: under the hostile path, string_to_array reaches evil.string_to_array');
SELECT is(current_setting('search_path'), 'evil, pg_catalog, public',
          'search_path is evil, pg_catalog, public');

------------------------------------------------------------------------
-- occ.backoff under the hostile path
------------------------------------------------------------------------
-- with evil's '1000' for occ.base_delay, occ.max_delay and occ.factor the
-- first delay would be 1000 s (16 min 40 s); pg_catalog's gives 1ms
SELECT is(occ.backoff(0, jitter => 'none'), '1ms'::interval,
          'occ.backoff(0, jitter => none) is still 1ms under the hostile path');
SELECT is(occ.backoff(3, jitter => 'none'), '8ms'::interval,
          'occ.backoff(3, jitter => none) is still 8ms (1ms * 2^3) under the hostile path');
SELECT is(occ.backoff(30, jitter => 'none'), pg_catalog.current_setting('occ.max_delay')::interval,
          'occ.backoff(30, jitter => none) is still capped by the real occ.max_delay under the hostile path');
-- the default strategy is still the real occ.jitter (full), not evil's '1000',
-- which occ.backoff would refuse as an unknown strategy
SELECT lives_ok($$ SELECT occ.backoff(0) $$,
                'occ.backoff(0) with every default still works under the hostile path');
SELECT ok(occ.backoff(0, draw => 0.5) <= '1ms'::interval,
          'occ.backoff(0) with the default (full) jitter stays within the real base delay');

------------------------------------------------------------------------
-- occ.gate under the hostile path (the gate is released by the final ROLLBACK)
------------------------------------------------------------------------
SELECT lives_ok($$ SELECT occ.gate('occ_tap_search_path') $$,
                'occ.gate works under the hostile path');

------------------------------------------------------------------------
-- occ.attempt under the hostile path
------------------------------------------------------------------------
SELECT is(occ.attempt(), NULL::int, 'occ.attempt() is still NULL outside a body under the hostile path');

------------------------------------------------------------------------
-- The views under the hostile path
------------------------------------------------------------------------
SELECT lives_ok('SELECT * FROM occ.stats', 'occ.stats can be read under the hostile path');
SELECT is((SELECT count(*)::int FROM occ.stats_info), 1, 'occ.stats_info still has one row under the hostile path');
-- budget_tokens is NULL when the real occ.retry_budget is 0, whatever evil's
-- current_setting says of it ('1000')
SET LOCAL occ.retry_budget = 0;
SELECT is(current_setting('occ.retry_budget'), '1000',
          'control: under the hostile path, current_setting says occ.retry_budget is 1000');
SELECT is((SELECT budget_tokens FROM occ.stats_info), NULL::float8,
          'occ.stats_info.budget_tokens follows the real occ.retry_budget (0: NULL) under the hostile path');

RESET search_path;

SELECT * FROM finish();
ROLLBACK;
