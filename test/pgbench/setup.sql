-- pg_occ hot-row benchmark: setup (run with psql before the pgbench scripts).
-- One table, one hot row that every transaction of every form increments.
-- fillfactor leaves room on the page so the updates can stay HOT.
DROP TABLE IF EXISTS hot;
CREATE TABLE hot (id integer PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 20);
INSERT INTO hot VALUES (1, 0);
