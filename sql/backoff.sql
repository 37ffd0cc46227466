-- occ.backoff: every strategy's formula (with the uniform draw supplied),
-- its bounds, saturation, reproducibility and every error.

-- capped exponential: t = min(cap, base * factor^attempt)
SELECT a, occ.backoff(a, '1ms', '100ms', 'none', 2) FROM generate_series(0, 8) a;
-- factor 1 is constant backoff (seed 003)
SELECT occ.backoff(5, '3ms', '100ms', 'none', 1);
-- a non-integer factor
SELECT occ.backoff(2, '1ms', '1s', 'none', 1.5);

-- full: u * t
SELECT u, occ.backoff(3, '1ms', '1s', 'full', 2, draw => u) FROM unnest('{0, 0.25, 0.5, 1}'::float8[]) u;
-- equal: t/2 + u * t/2
SELECT u, occ.backoff(3, '1ms', '1s', 'equal', 2, draw => u) FROM unnest('{0, 0.25, 1}'::float8[]) u;
-- decorrelated: min(cap, base + u * (3 * prev - base)); prev defaults to base
SELECT occ.backoff(0, '1ms', '1s', 'decorrelated', draw => 0.5);
SELECT occ.backoff(0, '1ms', '1s', 'decorrelated', prev => '10ms', draw => 0.5);
SELECT occ.backoff(0, '1ms', '12ms', 'decorrelated', prev => '10ms', draw => 1);
-- bounded: base + u * (t - base)
SELECT u, occ.backoff(3, '1ms', '1s', 'bounded', 2, draw => u) FROM unnest('{0, 0.5, 1}'::float8[]) u;
-- multiplicative: min(cap, (1 + u) * base * factor^attempt), R = 1 + u in [1, 2]
SELECT u, occ.backoff(3, '1ms', '1s', 'multiplicative', 2, draw => u) FROM unnest('{0, 0.5, 1}'::float8[]) u;
SELECT occ.backoff(3, '1ms', '10ms', 'multiplicative', 2, draw => 0.5);
-- normal: t + 0.1 * t * z with z the normal quantile of u; u = 0.5 gives t
SELECT u, occ.backoff(3, '1ms', '1s', 'normal', 2, draw => u)
  FROM unnest('{0.5, 0.841344746, 0.158655254}'::float8[]) u;
-- clamped after the noise, not before
SELECT occ.backoff(10, '1ms', '100ms', 'normal', 2, draw => 0.99);
SELECT occ.backoff(3, '1ms', '1s', 'normal', 2, draw => 0);

-- microsecond resolution
SELECT occ.backoff(0, '200us', '1s', 'none');
SELECT occ.backoff(1, '7us', '1s', 'full', 2, draw => 0.5);

-- saturation: no overflow, NaN or NULL for any attempt up to 2^31-1
SELECT j, occ.backoff(2147483647, '1ms', '30s', j, 2, draw => 1)
  FROM unnest('{none, full, equal, decorrelated, bounded, multiplicative, normal}'::text[]) j;
SELECT occ.backoff(2147483647, '1us', '100 days', 'none', 1000);

-- random draws stay within [0, cap] and their strategy's bounds
SELECT j, bool_and(d >= '0' AND d <= '50ms') AS within_cap, count(DISTINCT d) > 1 AS varies
  FROM unnest('{full, equal, decorrelated, bounded, multiplicative, normal}'::text[]) j,
       LATERAL (SELECT occ.backoff(a % 12, '1ms', '50ms', j) d FROM generate_series(1, 500) a) s
 GROUP BY j ORDER BY j;
SELECT bool_and(d >= '4ms' AND d <= '8ms') FROM
  (SELECT occ.backoff(3, '1ms', '1s', 'equal') d FROM generate_series(1, 500)) s;
SELECT bool_and(d >= '1ms' AND d <= '8ms') FROM
  (SELECT occ.backoff(3, '1ms', '1s', 'bounded') d FROM generate_series(1, 500)) s;
SELECT bool_and(d >= '8ms' AND d <= '16ms') FROM
  (SELECT occ.backoff(3, '1ms', '1s', 'multiplicative') d FROM generate_series(1, 500)) s;

-- occ.setseed makes the sequence of draws repeat
SELECT occ.setseed(0.42);
CREATE TEMP TABLE first_run AS SELECT a, occ.backoff(a, '1ms', '1s', 'full') d FROM generate_series(0, 9) a;
SELECT occ.setseed(0.42);
SELECT count(*) AS repeated FROM first_run f
  JOIN (SELECT a, occ.backoff(a, '1ms', '1s', 'full') d FROM generate_series(0, 9) a) s USING (a)
 WHERE f.d = s.d;

-- defaults come from the occ.* settings
SET occ.jitter = 'none';
SET occ.base_delay = '2ms';
SET occ.max_delay = '5ms';
SELECT occ.backoff(0), occ.backoff(1), occ.backoff(5);
SET occ.factor = 3;
SELECT occ.backoff(1);
RESET ALL;

-- a NULL attempt gives NULL; a NULL option means its setting, as when omitted
SET occ.base_delay = '3ms';
SELECT occ.backoff(NULL) IS NULL AS null_attempt,
       occ.backoff(1, NULL, NULL, 'none', NULL, NULL, NULL) AS all_settings;
RESET occ.base_delay;

-- errors: SQLSTATE 22023 (or another class 22 code), a lowercase message
-- and a hint; psql prints the SQLSTATE after each
SELECT occ.backoff(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '0');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '-1ms');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '10ms', '5ms');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'none', 0.5);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'none', 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'none', 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'fuzzy');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'decorrelated', prev => '10us');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1s', 'full', draw => 1.5);
\echo :LAST_ERROR_SQLSTATE
SELECT occ.backoff(0, '1ms', '1 year');
\echo :LAST_ERROR_SQLSTATE
SELECT occ.setseed(3);
\echo :LAST_ERROR_SQLSTATE
