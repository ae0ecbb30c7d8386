-- Compaction (scan and repair --compact): its report statuses, and what a compacted write
-- keeps beside its version so that a rollback can undo it after the platform appended
-- turns (the prefix before compaction goes back in front of the current suffix) and
-- 'report --cleared' can show what each stub replaced.
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'unsupported', 'too_large', 'rolled_back', 'rollback_refused',
    'compacted', 'would_compact', 'compact_rejected'));

CREATE TABLE session_compactions (
    source_key text        NOT NULL,
    session_id text        NOT NULL,
    -- The version that holds the compacted content, as written.
    version    integer     NOT NULL,
    run_id     bigint      REFERENCES repair_runs (id) ON DELETE SET NULL,
    -- The compacted prefix: its number of messages, and its text before compaction.
    boundary   integer     NOT NULL CHECK (boundary > 0),
    prefix     text        NOT NULL,
    -- compact.Report: rules, tools and every content replaced, with bytes before and after.
    report     jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_key, session_id, version),
    FOREIGN KEY (source_key, session_id, version) REFERENCES session_versions ON DELETE CASCADE
);
