-- Rollbacks are runs of their own, and a refused rollback leaves a report row too.
ALTER TABLE repair_runs DROP CONSTRAINT repair_runs_mode_check;
ALTER TABLE repair_runs ADD CONSTRAINT repair_runs_mode_check
    CHECK (mode IN ('incremental', 'full', 'session', 'rollback'));
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'too_large', 'rolled_back', 'rollback_refused'));

-- A rolled-back session is left alone by scheduled runs while its content is still what
-- the rollback wrote; an on-demand repair or any change to the content ends the hold.
CREATE TABLE session_holds (
    session_id   text        PRIMARY KEY,
    content_hash text        NOT NULL,
    reason       text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- A run's totals by status, stage, dialect and issue, written when it finishes, so its
-- summary never aggregates the audit table.
ALTER TABLE repair_runs ADD COLUMN summary jsonb NOT NULL DEFAULT '{}';

-- Audit filters by dialect and by stage (stage_counts ? 'move_results').
CREATE INDEX repair_reports_dialect_idx ON repair_reports (dialect, id DESC);
CREATE INDEX repair_reports_stage_counts_idx ON repair_reports USING gin (stage_counts);
