ALTER TABLE repair_runs DROP COLUMN order_mark;
