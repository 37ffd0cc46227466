-- batch mode, the row lock: the hot counter as users write it today, one
-- autocommit UPDATE (with work_ms of work after it, holding the row lock).
-- Variables: -D work_ms=N
UPDATE hot SET v = v + 1 WHERE id = 1 AND (:work_ms = 0 OR pg_sleep(:work_ms / 1000.0) IS NOT NULL);
