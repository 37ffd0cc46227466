-- Overhead of occ.retry: the same single UPDATE as bare.sql, through
-- CALL occ.retry with its defaults (SERIALIZABLE, full jitter).
CALL occ.retry('UPDATE hot SET v = v + 1 WHERE id = 1');
