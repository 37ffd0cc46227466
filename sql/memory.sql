-- Memory stays bounded: a call's memory does not grow with its attempts, the
-- plan cache evicts instead of planning per attempt, and what it keeps is
-- bounded in bytes.  Memory is read from pg_backend_memory_contexts by the
-- body itself, at two attempts of the same call (the sequences keep the
-- readings: setval survives the rollback of the failed attempt).  The
-- thresholds are generous; there is no timing here.
SET occ.contention = 'backoff';
\set VERBOSITY terse

-- the backend's memory, all contexts
CREATE FUNCTION mem() RETURNS bigint LANGUAGE sql
AS 'SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts';
CREATE SEQUENCE mem_attempt;
CREATE SEQUENCE mem_at_n;
CREATE SEQUENCE mem_at_10n;
CREATE VIEW mem_growth AS
  SELECT (SELECT last_value FROM mem_at_10n) - (SELECT last_value FROM mem_at_n) AS growth;

-- one call, 1000 failed attempts (a retryable division by zero): the memory
-- at attempt 1000 is the memory at attempt 100 (it grew by about 250 bytes
-- per attempt, the failed attempt's error data, when they were kept until
-- the call ended)
CALL occ.retry('SELECT nextval($$mem_attempt$$);
  SELECT CASE currval($$mem_attempt$$) WHEN 100 THEN setval($$mem_at_n$$, mem())
                                       WHEN 1000 THEN setval($$mem_at_10n$$, mem()) END;
  SELECT 1 / (currval($$mem_attempt$$) - currval($$mem_attempt$$))',
  retry_on => '{22012}', max_attempts => 1000, base => '1us', cap => '1us');
SELECT attempts, outcome FROM occ.last_retry();
SELECT growth < 65536 AS flat_in_attempts FROM mem_growth;
