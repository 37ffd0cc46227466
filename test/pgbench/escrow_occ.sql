-- escrow mode, occ.retry in queue or batch mode keyed by the row: the same
-- sale as escrow_lock.sql as one call.
-- Variables: -D iso=... -D contention=queue|batch -D work_ms=N
CALL occ.retry($body$
    UPDATE stock_lock SET qty = qty - 1 WHERE id = 1;
    INSERT INTO orders (product, qty, form) VALUES (1, 1, 'occ');
    SELECT pg_sleep($1 / 1000.0)
$body$, params => row(:work_ms), isolation => ':iso', max_attempts => 1000,
    contention => ':contention', key => 'stock:1');
