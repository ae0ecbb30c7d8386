UPDATE repair_runs SET status = 'failed' WHERE status = 'abandoned';
ALTER TABLE repair_runs DROP CONSTRAINT repair_runs_status_check;
ALTER TABLE repair_runs ADD CONSTRAINT repair_runs_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled'));
ALTER TABLE repair_runs DROP COLUMN owner;
