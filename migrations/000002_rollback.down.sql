DROP INDEX IF EXISTS repair_reports_stage_counts_idx;
DROP INDEX IF EXISTS repair_reports_dialect_idx;
DROP TABLE IF EXISTS session_holds;
ALTER TABLE repair_runs DROP COLUMN summary;
DELETE FROM repair_reports WHERE status = 'rollback_refused';
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'too_large', 'rolled_back'));
DELETE FROM repair_runs WHERE mode = 'rollback';
ALTER TABLE repair_runs DROP CONSTRAINT repair_runs_mode_check;
ALTER TABLE repair_runs ADD CONSTRAINT repair_runs_mode_check
    CHECK (mode IN ('incremental', 'full', 'session'));
