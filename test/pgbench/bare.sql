-- Overhead reference: one UPDATE of the hot row, no retry, autocommit.
UPDATE hot SET v = v + 1 WHERE id = 1;
