ALTER TABLE run_partitions DROP COLUMN lower_id, DROP COLUMN upper_id;
