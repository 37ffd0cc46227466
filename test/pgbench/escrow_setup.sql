-- escrow mode of test/bench/run.sh: an inventory row sold one item per
-- transaction.  stock is reservable (occ.reserve); stock_lock is the same
-- row for the forms that update it (the row lock, queue and batch mode);
-- every sale inserts an order line.  Stock large enough never to run out in
-- a run (the bound is exercised by test/escrow.sh and the sell-out check).
DROP TABLE IF EXISTS stock, stock_lock, orders;
CREATE TABLE stock (id int PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
CREATE TABLE stock_lock (id int PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, product int NOT NULL,
                     qty int NOT NULL, form text NOT NULL);
INSERT INTO stock VALUES (1, 1000000000000);
INSERT INTO stock_lock VALUES (1, 1000000000000);
SELECT occ.make_reservable('stock', 'qty');
