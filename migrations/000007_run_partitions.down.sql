DROP INDEX repair_reports_run_session_idx;
DROP TABLE run_partitions;
ALTER TABLE repair_runs DROP COLUMN partitions;
