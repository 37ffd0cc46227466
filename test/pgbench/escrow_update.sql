-- escrow mode, the plain UPDATE of a reservable column (issue 36): the
-- sale as applications write it today (escrow_lock.sql's UPDATE, on the
-- reservable table), which pg_occ runs as occ.reserve('stock', 'qty', 1,
-- -1) (no row lock), at isolation level iso, then the order line and
-- work_ms of other work.  Variables: -D iso=... -D work_ms=N
BEGIN ISOLATION LEVEL :iso;
UPDATE stock SET qty = qty - 1 WHERE id = 1;
INSERT INTO orders (product, qty, form) VALUES (1, 1, 'update');
SELECT pg_sleep(:work_ms / 1000.0);
END;
