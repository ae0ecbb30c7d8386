-- A scan is worked as partitions, one River job each, so that several processes share it.
-- Partition i of n covers the sessions whose id hashes to i modulo n. After each page a
-- partition records its keyset position and its counts so far (checkpoint), so a job
-- that is retried or rescued resumes there; the run's counts are the partitions' sums.
ALTER TABLE repair_runs ADD COLUMN partitions integer NOT NULL DEFAULT 1 CHECK (partitions >= 1);

CREATE TABLE run_partitions (
    run_id       bigint      NOT NULL REFERENCES repair_runs (id) ON DELETE CASCADE,
    partition    integer     NOT NULL CHECK (partition >= 0),
    status       text        NOT NULL DEFAULT 'pending'
                             CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    -- The River job working it; River deletes finished jobs after a while, so no foreign key.
    job_id       bigint,
    -- Bumped by every job attempt that claims the partition; a checkpoint from an older
    -- attempt (a worker presumed dead and rescued) is refused.
    attempt      integer     NOT NULL DEFAULT 0,
    -- The keyset position after the last checkpointed page: NULL before the first.
    after_id       text,
    after_position timestamptz,
    num_scanned  integer     NOT NULL DEFAULT 0,
    num_clean    integer     NOT NULL DEFAULT 0,
    num_repaired integer     NOT NULL DEFAULT 0,
    num_pending  integer     NOT NULL DEFAULT 0,
    num_conflict integer     NOT NULL DEFAULT 0,
    num_skipped  integer     NOT NULL DEFAULT 0,
    num_failed   integer     NOT NULL DEFAULT 0,
    summary      jsonb       NOT NULL DEFAULT '{}',
    error        text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, partition)
);

-- A resumed partition looks up which of a page's sessions the run already reported.
CREATE INDEX repair_reports_run_session_idx ON repair_reports (run_id, session_id);
