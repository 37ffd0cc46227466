-- The server-wide retry budget (occ.retry_budget, _ratio, _floor): commits
-- deposit, retries withdraw, a refused retry waits on its key's gate, and a
-- call that holds the gate and is refused again gives up.  Failures are
-- raised on purpose; the budget is filled to its capacity, then nothing is
-- deposited (ratio and floor 0), so every withdrawal is counted exactly.
-- Concurrent sessions queueing on the gate are in test/specs/budget_queue.spec.
SET occ.contention = 'backoff';
SET occ.base_delay = '1ms';
SELECT occ.stats_reset();

CREATE SEQUENCE budget_seq;   -- nextval survives rollbacks: counts executions
CREATE FUNCTION budget_fail_until(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF currval('budget_seq') < n THEN
    RAISE USING ERRCODE = '40001', MESSAGE = 'simulated conflict';
  END IF;
END $$;

-- off (the default): no tokens shown, nothing refused
SHOW occ.retry_budget;
SELECT budget_tokens, budget_refusals, last_storm FROM occ.stats_info;

-- fill: a budget of 2 tokens; one commit with a huge ratio fills it
SET occ.retry_budget = 2;
SET occ.retry_budget_ratio = 1000;
SET occ.retry_budget_floor = 0;
CALL occ.retry('SELECT 1');
SET occ.retry_budget_ratio = 0;
SELECT budget_tokens, budget_refusals, last_storm FROM occ.stats_info;

-- reading changes nothing: a session whose budget is off (0) or smaller
-- sees NULL or its own capacity, and the bucket keeps its 2 tokens
SET occ.retry_budget = 0;
SELECT budget_tokens FROM occ.stats_info;
SET occ.retry_budget = 1;
SELECT budget_tokens FROM occ.stats_info;
SET occ.retry_budget = 2;
SELECT budget_tokens FROM occ.stats_info;

-- two retries take the two tokens; first attempts take none
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(3)');
SELECT attempts, outcome, waited IS NOT NULL AS waited_known FROM occ.last_retry();
CALL occ.retry('SELECT 1');
SELECT budget_tokens, budget_refusals, last_storm FROM occ.stats_info;

-- exhausted: the retry is refused and waits on the gate of its key (free
-- here) instead of sleeping, then runs holding it.  The first refusal of a
-- storm is logged (and then at most every 10 s)
SET client_min_messages = log;
\set VERBOSITY terse
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(2)', key => 'budget:1');
SELECT attempts, slept, outcome FROM occ.last_retry();
SELECT budget_tokens, budget_refusals, last_storm IS NOT NULL AS storm_began FROM occ.stats_info;
SELECT calls, commits, attempts, queued FROM occ.stats WHERE query LIKE '%budget_fail_until(2)';

-- refused again while it holds the gate: it gives up, with the failure's
-- SQLSTATE and a detail that names the budget (and no LOG line: the last
-- one was less than 10 s ago)
\set VERBOSITY default
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(5)');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
RESET client_min_messages;
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
SELECT budget_refusals FROM occ.stats_info;
SELECT calls, gave_up, queued FROM occ.stats WHERE query LIKE '%budget_fail_until(5)';
-- no gate is left behind
SELECT count(*) AS gates_held FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 20291;

-- queue mode: the same refusal, the same give-up
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(3)', contention => 'queue', key => 'budget:2');
SELECT attempts, last_sqlstate, outcome FROM occ.last_retry();
SELECT budget_refusals FROM occ.stats_info;

-- a call that does not retry is never throttled, however empty the budget
CALL occ.retry('SELECT 1');
SELECT attempts, outcome FROM occ.last_retry();

-- commits refill it (ratio), and so does time (floor, tokens per second;
-- not measured here)
SET occ.retry_budget_ratio = 0.5;
CALL occ.retry('SELECT 1');
CALL occ.retry('SELECT 1');
SELECT budget_tokens FROM occ.stats_info;
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(2)');
SELECT attempts, outcome FROM occ.last_retry();
SELECT budget_tokens, budget_refusals FROM occ.stats_info;

-- occ.stats_reset() forgets refusals and storms, not the tokens
SELECT occ.stats_reset();
SELECT budget_tokens, budget_refusals, last_storm FROM occ.stats_info;

-- a budget of 0 is off again: retries run, nothing is counted
SET occ.retry_budget = 0;
SELECT setval('budget_seq', 1, false);
CALL occ.retry('SELECT nextval($$budget_seq$$); SELECT budget_fail_until(3)');
SELECT attempts, outcome FROM occ.last_retry();
SELECT budget_tokens, budget_refusals FROM occ.stats_info;

-- bad values, and only superusers set the budget (it is server-wide)
SET occ.retry_budget = -1;
SET occ.retry_budget_ratio = -0.1;
SET occ.retry_budget_floor = 'lots';
CREATE ROLE occ_budget_user;
SET ROLE occ_budget_user;
SET occ.retry_budget = 1000;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE occ_budget_user;

RESET occ.retry_budget;
RESET occ.retry_budget_ratio;
RESET occ.retry_budget_floor;
RESET occ.base_delay;
RESET occ.contention;
DROP FUNCTION budget_fail_until(int);
DROP SEQUENCE budget_seq;
