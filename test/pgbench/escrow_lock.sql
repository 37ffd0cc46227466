-- escrow mode, the row lock: the sale as applications write it today, the
-- UPDATE first (its row lock held until the commit), the order line, then
-- work_ms of other work.  Variables: -D work_ms=N
BEGIN;
UPDATE stock_lock SET qty = qty - 1 WHERE id = 1;
INSERT INTO orders (product, qty, form) VALUES (1, 1, 'lock');
SELECT pg_sleep(:work_ms / 1000.0);
END;
