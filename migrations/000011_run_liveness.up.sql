-- A scan whose processes all died ends 'abandoned' when the next scan of its source finds
-- that no live process works it (store.CreateRun): nothing of what it committed is lost,
-- and the next scan covers its sessions. owner is the River client id of the process
-- that started the run and waits for it (tmend scan): the run lives while that process
-- does, as its session-level advisory lock says. NULL for runs of the daemon, which any
-- replica or worker carries on.
ALTER TABLE repair_runs DROP CONSTRAINT repair_runs_status_check;
ALTER TABLE repair_runs ADD CONSTRAINT repair_runs_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'abandoned'));
ALTER TABLE repair_runs ADD COLUMN owner text;
