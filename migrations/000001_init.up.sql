-- tmend's own tables. No schema qualification: search_path selects tmend's schema.

-- The built-in session source. Users with their own table configure it instead.
CREATE TABLE sessions (
    id         text        PRIMARY KEY,
    messages   jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- Incremental scans walk (updated_at, id) with keyset pagination.
CREATE INDEX sessions_updated_at_id_idx ON sessions (updated_at, id);

-- One row per run: cron, CLI or API, with its options, counts and outcome.
CREATE TABLE repair_runs (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger       text        NOT NULL CHECK (trigger IN ('cron', 'cli', 'api')),
    mode          text        NOT NULL CHECK (mode IN ('incremental', 'full', 'session')),
    dry_run       boolean     NOT NULL DEFAULT false,
    source        text        NOT NULL,
    options       jsonb       NOT NULL DEFAULT '{}',
    status        text        NOT NULL DEFAULT 'running'
                              CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    -- The window of updated_at values this run covered; the next incremental run starts at
    -- scanned_through minus the safety overlap.
    scanned_from    timestamptz,
    scanned_through timestamptz,
    num_scanned   integer     NOT NULL DEFAULT 0 CHECK (num_scanned >= 0),
    num_clean     integer     NOT NULL DEFAULT 0 CHECK (num_clean >= 0),
    num_repaired  integer     NOT NULL DEFAULT 0 CHECK (num_repaired >= 0),
    num_pending   integer     NOT NULL DEFAULT 0 CHECK (num_pending >= 0),
    num_conflict  integer     NOT NULL DEFAULT 0 CHECK (num_conflict >= 0),
    num_skipped   integer     NOT NULL DEFAULT 0 CHECK (num_skipped >= 0),
    num_failed    integer     NOT NULL DEFAULT 0 CHECK (num_failed >= 0),
    error         text,
    CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX repair_runs_started_at_idx ON repair_runs (started_at DESC, id DESC);
-- The last completed run per source and mode drives incremental scans.
CREATE INDEX repair_runs_completed_idx ON repair_runs (source, finished_at DESC)
    WHERE status = 'completed' AND NOT dry_run;

-- Every content tmend replaced or wrote, numbered per session. Content is kept as the
-- exact text read from (or written to) the source column.
CREATE TABLE session_versions (
    session_id   text        NOT NULL,
    version      integer     NOT NULL CHECK (version > 0),
    kind         text        NOT NULL CHECK (kind IN ('original', 'repaired', 'restored', 'preserved')),
    content      text        NOT NULL,
    content_hash text        NOT NULL,
    size_bytes   integer     NOT NULL CHECK (size_bytes >= 0),
    run_id       bigint      REFERENCES repair_runs (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, version)
);
CREATE INDEX session_versions_run_idx ON session_versions (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX session_versions_created_at_idx ON session_versions (created_at);

-- The audit trail: one row per session a run touched or could not handle. Clean sessions
-- are counted on the run, not given a row each.
CREATE TABLE repair_reports (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        bigint      REFERENCES repair_runs (id) ON DELETE CASCADE,
    session_id    text        NOT NULL,
    status        text        NOT NULL CHECK (status IN (
                      'repaired', 'would_repair', 'pending', 'conflict', 'failed',
                      'unparseable', 'unknown_dialect', 'too_large', 'rolled_back')),
    trigger       text        NOT NULL CHECK (trigger IN ('cron', 'cli', 'api')),
    dialect       text,
    reason        text,
    issue_codes   text[]      NOT NULL DEFAULT '{}',
    stage_counts  jsonb       NOT NULL DEFAULT '{}',
    actions       jsonb       NOT NULL DEFAULT '[]',
    before_hash   text,
    after_hash    text,
    before_bytes  integer,
    after_bytes   integer,
    from_version  integer,
    to_version    integer,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repair_reports_session_idx ON repair_reports (session_id, created_at DESC, id DESC);
CREATE INDEX repair_reports_run_idx ON repair_reports (run_id, id);
CREATE INDEX repair_reports_created_at_idx ON repair_reports (created_at DESC, id DESC);
CREATE INDEX repair_reports_status_idx ON repair_reports (status, created_at DESC);
CREATE INDEX repair_reports_issue_codes_idx ON repair_reports USING gin (issue_codes);

-- Where each configured source's incremental scan stands.
CREATE TABLE scan_state (
    source          text        PRIMARY KEY,
    last_run_id     bigint      REFERENCES repair_runs (id) ON DELETE SET NULL,
    scanned_through timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
