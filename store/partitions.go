package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// EstimateSessions returns the number of rows in the source's table by the planner's
// statistics (0 when the table was never analyzed): cheap, and good enough to size runs.
func (s *Store) EstimateSessions(ctx context.Context) (int64, error) {
	if m, ok := s.layout.(*messageLayout); ok {
		n, err := m.estimateSessions(ctx, s.pool)
		return int64(n), classify(err)
	}
	if g, ok := s.layout.(*langGraphLayout); ok {
		n, err := g.estimateThreads(ctx, s.pool)
		return int64(n), classify(err)
	}
	n, err := s.estimate(ctx, s.pool)
	return int64(n), classify(err)
}

// EstimateChanged returns the number of sessions updated since the given time by the
// planner's statistics: the sessions an incremental run from there reads. Without an
// updated-at column it is EstimateSessions.
func (s *Store) EstimateChanged(ctx context.Context, since time.Time) (int64, error) {
	if !s.layout.hasUpdatedAt() {
		return s.EstimateSessions(ctx)
	}
	n, err := s.layout.estimateChanged(ctx, since)
	if err != nil {
		return 0, classify(fmt.Errorf("estimate the sessions of %s changed since %s: %w", s.key, since.Format(time.RFC3339), err))
	}
	return int64(n), nil
}

// EstimateRun returns how many sessions a scan reads, by the table's statistics: the
// table for a full scan, the sessions changed since its window's start for an
// incremental one, at most its limit; 0 (unknown) for other runs and for a table never
// analyzed, whose size the planner guesses from its pages alone (a first scan after an
// import showed 99% for most of its time).
func (s *Store) EstimateRun(ctx context.Context, r model.RunRow) (int64, error) {
	var never bool
	// PostgreSQL 14 and later say "never analyzed" with reltuples -1; 13 says 0, which
	// EstimateSessions gives as 0 anyway.
	if err := s.pool.QueryRow(ctx, `SELECT reltuples < 0 FROM pg_class WHERE oid = $1::regclass`,
		s.src.identifier().Sanitize()).Scan(&never); err != nil || never {
		return 0, classify(err)
	}
	var n int64
	var err error
	switch {
	case r.Mode == model.ModeFull:
		n, err = s.EstimateSessions(ctx)
	case r.Mode == model.ModeIncremental && r.ScannedFrom != nil:
		n, err = s.EstimateChanged(ctx, *r.ScannedFrom)
	}
	if limit, ok := r.Options["limit"].(float64); ok && limit > 0 {
		n = min(n, int64(limit))
	}
	return n, err
}

func (s *Store) estimate(ctx context.Context, q querier) (float64, error) {
	var n float64
	err := q.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = $1::regclass`,
		s.src.identifier().Sanitize()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("estimate the size of %s: %w", s.key, err)
	}
	return n, nil
}

// Enqueue inserts a job for each of a run's partitions given, in the transaction that
// records the run or takes it over, and returns their ids in the same order.
type Enqueue func(ctx context.Context, tx pgx.Tx, runID int64, partitions []int) ([]int64, error)

// CancelJobs cancels River jobs in the transaction that ends their run.
type CancelJobs func(ctx context.Context, tx pgx.Tx, jobIDs []int64) error

// RunJobs is how CreateRun reaches the job queue: it enqueues the partitions of the run
// it records or takes over, and cancels the jobs of the runs it abandons or takes over
// (nil: none to cancel).
type RunJobs struct {
	Enqueue Enqueue
	Cancel  CancelJobs
}

// CreatedRun is the run CreateRun recorded or took over, and the dead runs it abandoned.
type CreatedRun struct {
	ID        int64
	StartedAt time.Time
	Abandoned []int64
	// TakenOver says that ID is a run whose processes died, which goes on from its
	// partitions' checkpoints, in Partitions new jobs.
	TakenOver  bool
	Partitions int
}

// CreateRun records a scan split into n.Partitions partitions and enqueues their jobs,
// all in one transaction: a run exists with all its jobs or not at all. One scan of a
// source runs at a time (model.ErrBusy). A scan recorded as running that no live process
// works or will work (abandonedRunsSQL: its owner and workers died) does not block: the
// new scan takes it over when it asks for the same scan (mode, dry run, options: see
// takeOver), and it goes on from its partitions' checkpoints in new jobs, owned by
// n.Owner; else it ends abandoned, with the counts of what it committed, and its
// sessions are the new scan's.
func (s *Store) CreateRun(ctx context.Context, n model.NewRun, jobs RunJobs) (CreatedRun, error) {
	var out CreatedRun
	opts, err := json.Marshal(n.Options)
	if err != nil {
		return out, fmt.Errorf("encode run options: %w", err)
	}
	// Dead runs end in a transaction of their own, so that they stay ended when the
	// source turns out busy with a live one; when there are none (the usual case), the
	// run is recorded in the transaction that looked.
	var abandoned []int64
	recorded := false
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		abandoned, out.ID, out.TakenOver, recorded = nil, 0, false, false
		found, err := lockRuns(ctx, tx, n.Source, true)
		if err != nil {
			return err
		}
		if len(found.owned) == 0 && len(found.dead) == 0 {
			if found.busy {
				return model.ErrBusy
			}
			recorded = true
			return s.recordRun(ctx, tx, n, opts, jobs, &out)
		}
		if _, err := endOwnedRuns(ctx, tx, found.owned); err != nil {
			return err
		}
		for _, id := range found.dead {
			if !out.TakenOver {
				if out.Partitions, out.TakenOver, err = s.takeOver(ctx, tx, id, n, opts, jobs); err != nil {
					return err
				}
				if out.TakenOver {
					out.ID = id
					continue
				}
			}
			if err := abandonRun(ctx, tx, id, jobs.Cancel); err != nil {
				return err
			}
			abandoned = append(abandoned, id)
		}
		return nil
	})
	out.Abandoned = abandoned
	if err != nil || out.TakenOver || recorded {
		return out, err
	}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		found, err := lockRuns(ctx, tx, n.Source, false)
		if err != nil {
			return err
		}
		if found.busy {
			return model.ErrBusy
		}
		return s.recordRun(ctx, tx, n, opts, jobs, &out)
	})
	return out, err
}

// runsFound is what lockRuns found: the dead runs of one process (deadOwnedRunsSQL),
// the source's dead scans (abandonedRunsSQL), and whether a scan of the source is
// recorded as running.
type runsFound struct {
	owned []deadRun
	dead  []int64
	busy  bool
}

// lockRuns takes the lock of the source's runs for tx and looks for running scans, and
// for dead runs too when withDead is set, in one round trip: each look is a statement
// after the lock, so that it sees what committed before the lock was granted.
func lockRuns(ctx context.Context, tx pgx.Tx, source string, withDead bool) (runsFound, error) {
	var found runsFound
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock($1)", lockKey("runs:"+source))
	if withDead {
		b.Queue(deadOwnedRunsSQL, model.RunRunning, model.ModeSession, model.ModeRollback)
		b.Queue(abandonedRunsSQL, model.RunRunning, source, model.ModeIncremental, model.ModeFull, queuedJobStates)
	}
	b.Queue(`SELECT EXISTS (SELECT 1 FROM repair_runs WHERE status = $1 AND source = $2 AND mode IN ($3, $4))`,
		model.RunRunning, source, model.ModeIncremental, model.ModeFull)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return found, fmt.Errorf("lock runs of %q: %w", source, err)
	}
	if withDead {
		rows, err := br.Query()
		if err == nil {
			found.owned, err = pgx.CollectRows(rows, scanDeadRun)
		}
		if err == nil {
			rows, err = br.Query()
		}
		if err == nil {
			found.dead, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil {
			return found, fmt.Errorf("look for abandoned runs of %q: %w", source, err)
		}
	}
	if err := br.QueryRow().Scan(&found.busy); err != nil {
		return found, fmt.Errorf("look for running scans: %w", err)
	}
	return found, br.Close()
}

// recordRun records the scan n asks for, with its partitions and their jobs, in tx,
// once lockRuns found the source free, and sets out's ID, StartedAt and Partitions.
func (s *Store) recordRun(ctx context.Context, tx pgx.Tx, n model.NewRun, opts []byte, jobs RunJobs, out *CreatedRun) error {
	bounds, err := s.splitPoints(ctx, tx, n.Partitions)
	if err != nil {
		return err
	}
	n.Partitions = len(bounds) + 1
	// The window ends when the run is recorded: scanned_through is its start time.
	err = tx.QueryRow(ctx, `INSERT INTO repair_runs (trigger, mode, dry_run, source, options, source_key, partitions,
  scanned_from, scanned_through, actor, tmend_version, host, owner, order_mark)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), nullif($9, ''), nullif($10, ''), nullif($11, ''), nullif($12, ''), `+s.orderMarkSQL()+`)
RETURNING id, started_at`,
		n.Trigger, n.Mode, n.DryRun, n.Source, opts, s.key, n.Partitions, nullTime(n.ScannedFrom),
		n.Actor, s.origin.Version, s.origin.Host, n.Owner).Scan(&out.ID, &out.StartedAt)
	if err != nil {
		return fmt.Errorf("start run: %w", err)
	}
	id := out.ID
	out.Partitions = n.Partitions
	// Jobs first, so that each partition row goes in once, with its job: none can be
	// worked before this transaction commits.
	ids, err := jobs.Enqueue(ctx, tx, id, seq(n.Partitions))
	if err != nil {
		return fmt.Errorf("enqueue partitions of run %d: %w", id, err)
	}
	// Partition i is the range (bounds[i-1], bounds[i]]; the first and last are open.
	if _, err := tx.Exec(ctx, `INSERT INTO run_partitions (run_id, partition, lower_id, upper_id, job_id)
SELECT $1, j.i - 1, ($2::text[])[j.i - 1], ($2::text[])[j.i], j.id FROM unnest($3::bigint[]) WITH ORDINALITY AS j (id, i)`,
		id, bounds, ids); err != nil {
		return fmt.Errorf("record partitions of run %d: %w", id, err)
	}
	return nil
}

// splitSample is about how many ids a run's partition bounds are taken from.
const splitSample = 100_000

// splitPoints returns the bounds that split the source's ids into about n ranges of
// similar size, from a sample of the table's pages, in the id column's order: n-1 ids
// at most, fewer when the table has few distinct ones.
func (s *Store) splitPoints(ctx context.Context, q querier, n int) ([]string, error) {
	if n <= 1 {
		return nil, nil
	}
	rows, err := s.estimate(ctx, q)
	if err != nil {
		return nil, err
	}
	fractions := make([]float64, n-1)
	for i := range fractions {
		fractions[i] = float64(i+1) / float64(n)
	}
	percent := 100.0
	if rows > splitSample {
		percent = max(100*splitSample/rows, 0.001)
	}
	for {
		bounds, err := s.layout.split(ctx, q, fractions, percent)
		if err != nil {
			return nil, fmt.Errorf("split the ids of %s: %w", s.key, err)
		}
		// A sample that found nothing (stale statistics, an unlucky draw) is taken again
		// from the whole table; an empty table is one range.
		if len(bounds) > 0 || percent == 100 {
			return bounds, nil
		}
		percent = 100
	}
}

// abandonRun ends a dead run as abandoned and cancels its River jobs (a job still
// marked running, whose client died, is left to River's rescuer, which finds it
// cancelled).
func abandonRun(ctx context.Context, tx pgx.Tx, id int64, cancelJobs CancelJobs) error {
	if err := lockRun(ctx, tx, id); err != nil {
		return err
	}
	if err := endRunNow(ctx, tx, id, model.PartitionFailed, "abandoned", cancelJobs); err != nil {
		return err
	}
	_, err := endRunIfDone(ctx, tx, id, endAbandoned)
	return err
}

// takeOver makes dead run id the new scan's, when it is the scan n asks for (same
// source, mode, dry run and options, opts encoded): its unfinished partitions' jobs are
// cancelled (as in abandonRun) and new ones enqueued, whose attempts resume from the
// partitions' checkpoints (ClaimPartition) and count the sessions the run already
// reported instead of handling them again; its owner becomes n.Owner. It returns how
// many partitions it enqueued.
func (s *Store) takeOver(ctx context.Context, tx pgx.Tx, id int64, n model.NewRun, opts []byte, jobs RunJobs) (int, bool, error) {
	var same bool
	err := tx.QueryRow(ctx, `SELECT source_key = $2 AND mode = $3 AND dry_run = $4 AND options = $5::jsonb FROM repair_runs
WHERE id = $1 FOR NO KEY UPDATE`, id, s.key, n.Mode, n.DryRun, string(opts)).Scan(&same)
	if err != nil || !same {
		return 0, false, err
	}
	rows, err := tx.Query(ctx, `UPDATE run_partitions SET updated_at = now() WHERE run_id = $1 AND status IN ('pending', 'running')
RETURNING partition, job_id`, id)
	if err != nil {
		return 0, false, fmt.Errorf("take over run %d: %w", id, err)
	}
	var parts []int
	var old []int64
	var part int
	var job *int64
	if _, err := pgx.ForEachRow(rows, []any{&part, &job}, func() error {
		parts = append(parts, part)
		if job != nil {
			old = append(old, *job)
		}
		return nil
	}); err != nil {
		return 0, false, fmt.Errorf("take over run %d: %w", id, err)
	}
	if len(parts) == 0 { // its last partition ended, and the run with it, or now
		_, err := endRunIfDone(ctx, tx, id, "")
		return 0, true, err
	}
	if jobs.Cancel != nil && len(old) > 0 {
		if err := jobs.Cancel(ctx, tx, old); err != nil {
			return 0, false, fmt.Errorf("cancel jobs of run %d: %w", id, err)
		}
	}
	ids, err := jobs.Enqueue(ctx, tx, id, parts)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue partitions of run %d: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE run_partitions p SET job_id = j.id
FROM unnest($2::int[], $3::bigint[]) AS j (partition, id) WHERE p.run_id = $1 AND p.partition = j.partition`, id, parts, ids); err != nil {
		return 0, false, fmt.Errorf("record jobs of run %d: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE repair_runs SET owner = nullif($2, '') WHERE id = $1`, id, n.Owner); err != nil {
		return 0, false, fmt.Errorf("take over run %d: %w", id, err)
	}
	return len(parts), true, nil
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// endAbandoned is the error an abandoned run ends with.
const endAbandoned = "abandoned: every process working it ended before it did, and no live process works its partitions; " +
	"what it committed stays, and the next scan covers the rest"

// endRunNow ends a run's unfinished partitions with status and errMsg, and cancels
// their River jobs in the same transaction (cancelJobs may be nil). The caller holds the
// run's lock. Ending a partition waits for the session transactions that hold its lease
// (partitionLockKey), and refuses the later ones: no report of the run commits after it.
func endRunNow(ctx context.Context, tx pgx.Tx, runID int64, status model.PartitionStatus, errMsg string, cancelJobs CancelJobs) error {
	if err := lockPartitions(ctx, tx, runID, nil); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `UPDATE run_partitions SET status = $2, error = nullif($3, ''), updated_at = now()
WHERE run_id = $1 AND status IN ('pending', 'running') RETURNING job_id`, runID, status, errMsg)
	if err != nil {
		return fmt.Errorf("end partitions of run %d: %w", runID, err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
	if err != nil {
		return fmt.Errorf("end partitions of run %d: %w", runID, err)
	}
	var ids []int64
	for _, j := range jobs {
		if j != nil {
			ids = append(ids, *j)
		}
	}
	if cancelJobs == nil || len(ids) == 0 {
		return nil
	}
	if err := cancelJobs(ctx, tx, ids); err != nil {
		return fmt.Errorf("cancel jobs of run %d: %w", runID, err)
	}
	return nil
}

const partitionSelect = `SELECT status, attempt, lower_id, upper_id, after_id, after_position, num_scanned, num_clean,
  num_repaired, num_pending, num_conflict, num_skipped, num_failed, summary, coalesce(error, '')
FROM run_partitions`

type partitionRow struct {
	status  model.PartitionStatus
	attempt int
	slice   model.Slice
	after   model.Cursor
	soFar   model.RunResult
	err     string
}

func scanPartition(row pgx.CollectableRow) (partitionRow, error) {
	var p partitionRow
	var afterID *string
	var afterPos *time.Time
	var c model.RunCounts
	var sum model.Summary
	err := row.Scan(&p.status, &p.attempt, &p.slice.Lower, &p.slice.Upper, &afterID, &afterPos, &c.Scanned, &c.Clean, &c.Repaired, &c.Pending,
		&c.Conflict, &c.Skipped, &c.Failed, &sum, &p.err)
	if afterID != nil {
		p.after = model.Cursor{ID: *afterID, Started: true}
		if afterPos != nil {
			p.after.Position = *afterPos
		}
	}
	p.soFar = model.ResultOf(c, sum)
	return p, err
}

// ClaimPartition hands a partition to a new job attempt, with its last checkpoint. The
// claim is Done when the partition or its run already ended.
func (s *Store) ClaimPartition(ctx context.Context, runID int64, partition int) (model.Claim, error) {
	c := model.Claim{Partition: partition}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// One round trip: the lease, which waits for the writes of the attempt before, then
		// the partition and its run.
		b := &pgx.Batch{}
		b.Queue(lockPartitionsSQL, runID, []int{partition})
		b.Queue(partitionSelect+" WHERE run_id = $1 AND partition = $2 FOR UPDATE", runID, partition)
		b.Queue(runSelect+" WHERE id = $1", runID)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock the partitions of run %d: %w", runID, err)
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("claim partition %d of run %d: %w", partition, runID, err)
		}
		p, err := pgx.CollectExactlyOneRow(rows, scanPartition)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("partition %d of run %d: %w", partition, runID, model.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("claim partition %d of run %d: %w", partition, runID, err)
		}
		if c.Run, err = readRunSpec(br.Query, runID); err != nil {
			return err
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("claim partition %d of run %d: %w", partition, runID, err)
		}
		if c.Run.Status != model.RunRunning || p.status != model.PartitionPending && p.status != model.PartitionRunning {
			c.Done = true
			return nil
		}
		c.Slice, c.After, c.SoFar, c.Resumed = p.slice, p.after, p.soFar, p.attempt > 0
		return tx.QueryRow(ctx, `UPDATE run_partitions SET status = 'running', attempt = attempt + 1, updated_at = now()
WHERE run_id = $1 AND partition = $2 RETURNING attempt`, runID, partition).Scan(&c.Attempt)
	})
	return c, err
}

func runSpec(ctx context.Context, q querier, runID int64) (model.RunSpec, error) {
	return readRunSpec(func() (pgx.Rows, error) { return q.Query(ctx, runSelect+" WHERE id = $1", runID) }, runID)
}

// readRunSpec reads run runID's spec from the rows of runSelect query gives.
func readRunSpec(query func() (pgx.Rows, error), runID int64) (model.RunSpec, error) {
	var spec model.RunSpec
	rows, err := query()
	if err != nil {
		return spec, fmt.Errorf("read run %d: %w", runID, err)
	}
	spec.RunRow, err = pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return spec, fmt.Errorf("run %d: %w", runID, model.ErrNotFound)
	}
	if err != nil {
		return spec, fmt.Errorf("read run %d: %w", runID, err)
	}
	opts, err := json.Marshal(spec.RunRow.Options)
	if err == nil {
		err = json.Unmarshal(opts, &spec.Options)
	}
	if err != nil {
		return spec, fmt.Errorf("run %d's options: %w", runID, err)
	}
	return spec, nil
}

// Checkpoint records a partition's progress and brings its run's counts up to date, so
// they show progress while the run goes on. model.ErrLeaseLost when another attempt
// claimed the partition since, or the run was cancelled.
func (s *Store) Checkpoint(ctx context.Context, cp model.Checkpoint) error {
	return s.withTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(lockRunSQL, cp.RunID)
		if err := queueCheckpoint(b, cp, model.PartitionRunning, ""); err != nil {
			return err
		}
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if err := lockedRun(br, cp.RunID); err != nil {
			return err
		}
		if err := checkpointed(br, cp, model.PartitionRunning); err != nil {
			return err
		}
		return br.Close()
	})
}

// lockRun serializes the partitions' updates of their run's row, so that each sums what
// the others committed. FOR NO KEY UPDATE, not FOR UPDATE: a session's transaction
// inserts a report, whose foreign key share-locks the run's key while the transaction
// holds its partition's lease (partitionLockKey), which the holder of this lock may be
// waiting for: FOR UPDATE would deadlock with it.
func lockRun(ctx context.Context, tx pgx.Tx, runID int64) error {
	if _, err := tx.Exec(ctx, lockRunSQL, runID); err != nil {
		return fmt.Errorf("lock run %d: %w", runID, err)
	}
	return nil
}

const lockRunSQL = "SELECT 1 FROM repair_runs WHERE id = $1 FOR NO KEY UPDATE"

// lockedRun reads the result of lockRunSQL in a batch.
func lockedRun(br pgx.BatchResults, runID int64) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock run %d: %w", runID, err)
	}
	return nil
}

// queueCheckpoint queues in b the statements that record a partition's progress (and its
// end, for a status other than running) and bring its run's counts up to date;
// checkpointed reads their results. Queued after lockRunSQL.
func queueCheckpoint(b *pgx.Batch, cp model.Checkpoint, status model.PartitionStatus, errMsg string) error {
	c := cp.SoFar.Counts
	summary, err := json.Marshal(cp.SoFar.Summary())
	if err != nil {
		return fmt.Errorf("encode partition summary: %w", err)
	}
	// A checkpoint leaves the lease as it is; ending the partition ends it, once the
	// writes that hold it are done.
	if status != model.PartitionRunning {
		b.Queue(lockPartitionsSQL, cp.RunID, []int{cp.Partition})
	}
	var afterID *string
	var afterPos *time.Time
	if cp.After.Started {
		afterID, afterPos = &cp.After.ID, nullTime(cp.After.Position)
	}
	b.Queue(`UPDATE run_partitions SET status = $4, after_id = $5, after_position = $6,
  num_scanned = $7, num_clean = $8, num_repaired = $9, num_pending = $10, num_conflict = $11, num_skipped = $12,
  num_failed = $13, summary = $14, error = nullif($15, ''), updated_at = now()
WHERE run_id = $1 AND partition = $2 AND status = 'running' AND (attempt = $3 OR $3 = 0)`,
		cp.RunID, cp.Partition, cp.Attempt, status, afterID, afterPos,
		c.Scanned, c.Clean, c.Repaired, c.Pending, c.Conflict, c.Skipped, c.Failed, summary, errMsg)
	b.Queue(`UPDATE repair_runs r SET (num_scanned, num_clean, num_repaired, num_pending, num_conflict,
  num_skipped, num_failed) = (SELECT sum(num_scanned), sum(num_clean), sum(num_repaired), sum(num_pending),
  sum(num_conflict), sum(num_skipped), sum(num_failed) FROM run_partitions WHERE run_id = r.id)
WHERE id = $1`, cp.RunID)
	return nil
}

// checkpointed reads the results of queueCheckpoint: model.ErrLeaseLost when another
// attempt claimed the partition since, or the run was cancelled. The run's counts were
// updated all the same: the caller rolls back.
func checkpointed(br pgx.BatchResults, cp model.Checkpoint, status model.PartitionStatus) error {
	if status != model.PartitionRunning {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock the partitions of run %d: %w", cp.RunID, err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("checkpoint partition %d of run %d: %w", cp.Partition, cp.RunID, err)
	}
	leaseLost := tag.RowsAffected() == 0
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("count run %d: %w", cp.RunID, err)
	}
	if leaseLost {
		return model.ErrLeaseLost
	}
	return nil
}

// EndPartition records a partition's end. When it was the run's last, the run ends too:
// completed when every partition completed (and then an incremental position moves,
// unless the run was a dry run or limited), else failed or cancelled. ended reports that.
func (s *Store) EndPartition(ctx context.Context, e model.PartitionEnd) (ended bool, err error) {
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		// One round trip: the run's lock, the partition's end, and the run and its
		// partitions as they are now.
		runID := e.RunID
		b := &pgx.Batch{}
		b.Queue(lockRunSQL, runID)
		if err := queueCheckpoint(b, e.Checkpoint, e.Status, e.Error); err != nil {
			return err
		}
		b.Queue(runSelect+" WHERE id = $1", runID)
		b.Queue(partitionsSQL, runID)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if err := lockedRun(br, runID); err != nil {
			return err
		}
		if err := checkpointed(br, e.Checkpoint, e.Status); err != nil {
			return err
		}
		spec, err := readRunSpec(br.Query, runID)
		if err != nil {
			return err
		}
		parts, err := readPartitions(br.Query, runID)
		if err == nil {
			err = br.Close()
		}
		if err != nil {
			return err
		}
		ended, err = endRun(ctx, tx, spec, parts, "")
		return err
	})
	return ended, err
}

// partitionsSQL reads run $1's partitions.
var partitionsSQL = partitionSelect + " WHERE run_id = $1 ORDER BY partition"

// readPartitions reads run runID's partitions from the rows of partitionsSQL query gives.
func readPartitions(query func() (pgx.Rows, error), runID int64) ([]partitionRow, error) {
	rows, err := query()
	if err != nil {
		return nil, fmt.Errorf("read partitions of run %d: %w", runID, err)
	}
	parts, err := pgx.CollectRows(rows, scanPartition)
	if err != nil {
		return nil, fmt.Errorf("read partitions of run %d: %w", runID, err)
	}
	return parts, nil
}

// endRunIfDone ends a running run whose partitions have all ended, with the totals of
// what it committed (committedTotals). why, when set, is why it was ended from outside:
// cancelled on request, or endAbandoned, which ends it as abandoned.
func endRunIfDone(ctx context.Context, tx pgx.Tx, runID int64, why string) (bool, error) {
	spec, err := runSpec(ctx, tx, runID)
	if err != nil || spec.Status != model.RunRunning {
		return false, err
	}
	parts, err := readPartitions(func() (pgx.Rows, error) { return tx.Query(ctx, partitionsSQL, runID) }, runID)
	if err != nil {
		return false, err
	}
	return endRun(ctx, tx, spec, parts, why)
}

// endRun is endRunIfDone with the run spec and its partitions parts read.
func endRun(ctx context.Context, tx pgx.Tx, spec model.RunSpec, parts []partitionRow, why string) (bool, error) {
	if spec.Status != model.RunRunning {
		return false, nil
	}
	runID := spec.ID
	status := model.RunCompleted
	var errs []string
	for i, p := range parts {
		switch p.status {
		case model.PartitionPending, model.PartitionRunning:
			return false, nil
		case model.PartitionFailed:
			status = model.RunFailed
			errs = append(errs, fmt.Sprintf("partition %d: %s", i, p.err))
		case model.PartitionCancelled:
			if status == model.RunCompleted {
				status = model.RunCancelled
			}
		}
	}
	msg := strings.Join(errs, "; ")
	switch {
	case why == endAbandoned:
		status, msg = model.RunAbandoned, why
	case status == model.RunCancelled && msg == "":
		msg = cmp.Or(why, "stopped before the run completed")
	}
	total, err := committedTotals(ctx, tx, runID, parts)
	if err != nil {
		return false, err
	}
	var through time.Time
	if spec.ScannedThrough != nil {
		through = *spec.ScannedThrough
	}
	var from time.Time
	if spec.ScannedFrom != nil {
		from = *spec.ScannedFrom
	}
	f := model.Finish{RunID: runID, Status: status, Counts: total.Counts, ScannedFrom: from, ScannedThrough: through,
		Error: msg, Source: spec.ScanSource, Summary: total.Summary(),
		AdvanceScanState: status == model.RunCompleted && !spec.DryRun && spec.Options.Limit == 0}
	return true, finishRun(ctx, tx, f)
}

// committedTotals is what a run adds up to, from what it committed, read in the
// transaction that ends it: every session that is not clean has one report row in the
// run (a resumed partition counts those it finds instead of handling them again), so
// its statuses, stages, issues and dialects are counted from the rows; clean sessions,
// and those held after a rollback, have none and are counted from the partitions'
// checkpoints. No report of the run commits after this (endRunNow, partitionLockKey).
func committedTotals(ctx context.Context, tx pgx.Tx, runID int64, parts []partitionRow) (model.RunResult, error) {
	total := model.NewRunResult()
	for _, p := range parts {
		total.AddStatus(model.StatusClean, p.soFar.ByStatus[model.StatusClean])
		total.AddStatus(model.StatusHeld, p.soFar.ByStatus[model.StatusHeld])
		// Compaction's bytes saved are not on the report rows: from the checkpoints too.
		total.Compaction.Merge(p.soFar.Compaction)
	}
	// One read of the run's reports, in one round trip.
	rows, err := tx.Query(ctx, `WITH r AS MATERIALIZED (
  SELECT status, dialect, issue_codes, stage_counts FROM repair_reports WHERE run_id = $1)
SELECT 0, status, count(*) FROM r GROUP BY 2
UNION ALL SELECT 1, dialect, count(*) FROM r WHERE dialect IS NOT NULL GROUP BY 2
UNION ALL SELECT 2, code, count(*) FROM r, unnest(issue_codes) AS code GROUP BY 2
UNION ALL SELECT 3, s.key, sum(s.value::int) FROM r, jsonb_each_text(stage_counts) AS s GROUP BY 2`, runID)
	if err != nil {
		return total, fmt.Errorf("count the reports of run %d: %w", runID, err)
	}
	var kind int
	var k string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&kind, &k, &n}, func() error {
		switch kind {
		case 0:
			total.AddStatus(model.SessionStatus(k), n)
		case 1:
			total.ByDialect[k] += n
		case 2:
			total.ByIssue[k] += n
		case 3:
			total.ByStage[repair.Stage(k)] += n
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("count the reports of run %d: %w", runID, err)
	}
	return total, nil
}

// CancelRun cancels a running scan: its unfinished partitions end as cancelled (a job
// still working one stops at its next checkpoint or write; what it committed stays, each
// session whole), cancelJobs cancels their River jobs in the same transaction, and the
// run ends as cancelled. The run as it ended is returned; model.ErrNotFound for no such run.
func (s *Store) CancelRun(ctx context.Context, runID int64, cancelJobs CancelJobs) (model.RunRow, error) {
	var row model.RunRow
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockRun(ctx, tx, runID); err != nil {
			return err
		}
		spec, err := runSpec(ctx, tx, runID)
		if err != nil {
			return err
		}
		if spec.Status == model.RunRunning {
			if err := endRunNow(ctx, tx, runID, model.PartitionCancelled, "", cancelJobs); err != nil {
				return err
			}
			if _, err := endRunIfDone(ctx, tx, runID, "cancelled on request"); err != nil {
				return err
			}
		}
		spec, err = runSpec(ctx, tx, runID)
		row = spec.RunRow
		return err
	})
	return row, err
}

// RunReports returns the reports run runID recorded for any of the sessions ids, by id:
// a resumed partition counts those instead of handling them again.
func (s *Store) RunReports(ctx context.Context, runID int64, ids []string) (map[string]model.ReportRow, error) {
	rows, err := s.pool.Query(ctx, reportSelect+" WHERE run_id = $1 AND source_key = $2 AND session_id = ANY($3)", runID, s.key, ids)
	if err != nil {
		return nil, classify(fmt.Errorf("read reports of run %d: %w", runID, err))
	}
	list, err := pgx.CollectRows(rows, scanReport)
	if err != nil {
		return nil, classify(fmt.Errorf("read reports of run %d: %w", runID, err))
	}
	out := make(map[string]model.ReportRow, len(list))
	for _, r := range list {
		out[r.SessionID] = r
	}
	return out, nil
}
