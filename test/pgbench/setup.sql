-- pg_occ hot-row benchmark: setup (run with psql before the pgbench scripts).
-- Row 1 is the hot row that every transaction of the hot-row forms
-- increments; rows 2 to 1001 are for the guard workloads of queue mode
-- (calls spread uniformly over 1,000 rows, or half of them on row 1).
-- fillfactor leaves room on the page so the updates can stay HOT.
DROP TABLE IF EXISTS hot;
CREATE TABLE hot (id integer PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 20);
INSERT INTO hot SELECT i, 0 FROM generate_series(1, 1001) AS i;
