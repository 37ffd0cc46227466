-- escrow mode, a reservation: the sale with occ.reserve instead of the
-- UPDATE (no row lock), at isolation level iso, then the order line and
-- work_ms of other work.  Variables: -D iso=... -D work_ms=N
BEGIN ISOLATION LEVEL :iso;
SELECT occ.reserve('stock', 'qty', 1, -1);
INSERT INTO orders (product, qty, form) VALUES (1, 1, 'reserve');
SELECT pg_sleep(:work_ms / 1000.0);
END;
