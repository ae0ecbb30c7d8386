package scanner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// A scan is recorded as a run split into partitions, one job each, that any number of
// processes work (see the queue in cmd/tmend). A partition is a range of ids, the
// ranges split at a sample of the ids when the run starts; its job works it for a time slice, checkpointing after its pages,
// and yields, so that long scans move between workers and a worker that dies loses at
// most the pages since its last checkpoint.

// PartitionSessions is how many sessions, by the table's statistics, make a partition
// when the partition count is left to tmend; MaxPartitions caps the count.
const (
	PartitionSessions = 500_000
	MaxPartitions     = 256
)

// Partitions returns the partition count for a table of about n sessions: 1 for small
// tables, one per PartitionSessions, at most MaxPartitions.
func Partitions(n int64) int {
	return int(min(max(1, (n+PartitionSessions-1)/PartitionSessions), MaxPartitions))
}

// Plan returns the run to record for a scan with options o in the given number of
// partitions (0: one per PartitionSessions of what the scan reads, by the table's
// statistics): an incremental run starts where the last completed one ended, less the
// overlap; with nothing to go on (or no updated-at column) it is a full run. A limited
// run goes in one partition, where the limit means what it says.
func (s *Scanner) Plan(ctx context.Context, o RunOptions, partitions int) (model.NewRun, error) {
	if o.Mode != model.ModeIncremental && o.Mode != model.ModeFull {
		return model.NewRun{}, fmt.Errorf("a scan is incremental or full, not %q", o.Mode)
	}
	n := model.NewRun{Run: model.Run{Trigger: o.Trigger, Actor: o.Actor, Mode: o.Mode, DryRun: o.DryRun, Source: s.cfg.Source,
		Options: s.options(o)}, Partitions: partitions}
	if o.Mode == model.ModeIncremental && !s.store.HasUpdatedAt() {
		s.log.Info().Msg("source has no updated-at column; running a full scan")
		n.Mode = model.ModeFull
	}
	if n.Mode == model.ModeIncremental {
		err := s.retry(ctx, "read scan state", func() error {
			pos, ok, err := s.store.ScanPosition(ctx, s.cfg.Source)
			if ok {
				n.ScannedFrom = pos.Add(-s.cfg.Overlap)
			}
			return err
		})
		if err != nil {
			return n, err
		}
		if n.ScannedFrom.IsZero() {
			// Only a completed scan that repairs everything it reads moves the position.
			s.log.Info().Msg("no completed scan of this source without --dry-run or --limit yet; this incremental run scans everything")
			n.Mode = model.ModeFull
		}
	}
	switch {
	case o.Limit > 0:
		n.Partitions = 1
	case n.Partitions <= 0:
		// Every partition of an incremental run reads its window's rows to keep its range
		// of ids, so its partitions follow the rows changed, not the table's size.
		err := s.retry(ctx, "estimate the sessions to read", func() error {
			var rows int64
			var err error
			if n.Mode == model.ModeIncremental {
				rows, err = s.store.EstimateChanged(ctx, n.ScannedFrom)
			} else {
				rows, err = s.store.EstimateSessions(ctx)
			}
			n.Partitions = Partitions(rows)
			return err
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// PartitionOutcome is how one job attempt on a partition ended, when without error.
type PartitionOutcome int

const (
	// PartitionDone: the partition ended (completed, or found already ended).
	PartitionDone PartitionOutcome = iota
	// PartitionYielded: its time slice is up; it checkpointed and wants another turn.
	PartitionYielded
	// RunEnded: the partition was its run's last to end, and the run ended with it.
	RunEnded
)

// PartitionOptions say how long one job attempt works a partition.
type PartitionOptions struct {
	// Slice is how long it works before it yields (0: to the end).
	Slice time.Duration
	// Stop, when closed, makes it yield at the next page boundary (a stopping process).
	Stop <-chan struct{}
	// Last is set on the job's last attempt: an error then ends the partition as failed.
	Last bool
	// Retry is set when an earlier attempt of the job failed or its worker died, as
	// opposed to one that yielded at the end of its slice.
	Retry bool
}

// WorkPartition works partition of run runID as one job attempt: it claims the
// partition, resumes from its last checkpoint, checkpoints as pages complete, and ends
// it when its sessions are done, or yields when its slice is up. An error leaves the
// partition to a retry, from its last checkpoint; on the last attempt, the partition
// ends as failed instead (and with it the run, if it was the run's last).
func (s *Scanner) WorkPartition(ctx context.Context, runID int64, partition int, po PartitionOptions) (PartitionOutcome, error) {
	began := time.Now()
	var c model.Claim
	err := s.retry(ctx, "claim partition", func() error {
		var err error
		c, err = s.store.ClaimPartition(ctx, runID, partition)
		return err
	})
	if err != nil || c.Done {
		return PartitionDone, err
	}
	// claim counts the turns the partition was handed, one per time slice: not retries.
	log := s.log.With().Int64("run_id", runID).Int("partition", partition).Int("claim", c.Attempt).Logger()
	switch {
	case c.Resumed && po.Retry:
		log.Info().Int("num_scanned", c.SoFar.Counts.Scanned).
			Msg("resuming partition from its checkpoint after a failed or interrupted attempt")
	case c.Resumed:
		log.Debug().Int("num_scanned", c.SoFar.Counts.Scanned).Msg("partition continues from its checkpoint after its time slice")
	}
	sc, err := s.forRun(c.Run)
	if err != nil {
		return s.endPartition(ctx, model.PartitionEnd{Checkpoint: model.Checkpoint{RunID: runID,
			Partition: partition, Attempt: c.Attempt, SoFar: c.SoFar}, Status: model.PartitionFailed, Error: err.Error()}, log)
	}

	res := c.SoFar
	res.RunID, res.Trigger, res.Mode, res.DryRun, res.StartedAt = runID, c.Run.Trigger, c.Run.Mode, c.Run.DryRun, c.Run.StartedAt
	if c.Run.ScannedFrom != nil {
		res.ScannedFrom = *c.Run.ScannedFrom
	}
	if c.Run.ScannedThrough != nil {
		res.ScannedThrough = *c.Run.ScannedThrough
	}
	yield := make(chan struct{})
	var once sync.Once
	yieldNow := func() { once.Do(func() { close(yield) }) }
	if po.Slice > 0 {
		t := time.AfterFunc(po.Slice, yieldNow)
		defer t.Stop()
	}
	if po.Stop != nil {
		returned := make(chan struct{})
		defer close(returned)
		go func() {
			select {
			case <-po.Stop:
				yieldNow()
			case <-returned:
			}
		}()
	}
	cp := func(after model.Cursor, soFar model.RunResult) model.Checkpoint {
		return model.Checkpoint{RunID: runID, Partition: partition, Attempt: c.Attempt, After: after, SoFar: soFar}
	}
	o := RunOptions{Trigger: c.Run.Trigger, Actor: c.Run.Actor, Mode: c.Run.Mode, DryRun: c.Run.DryRun, Limit: c.Run.Options.Limit,
		Force: c.Run.Options.Force, part: partScan{
			slice: c.Slice, after: c.After, resumed: c.Resumed, retry: po.Retry, began: began, yield: yield,
			lease: &model.Lease{RunID: runID, Partition: partition, Attempt: c.Attempt},
			checkpoint: func(ctx context.Context, after model.Cursor, soFar model.RunResult) error {
				return sc.retry(ctx, "checkpoint", func() error { return sc.store.Checkpoint(ctx, cp(after, soFar)) })
			}}}
	prog, err := sc.stream(ctx, &res, o, time.Now(), log)
	switch {
	case err == nil:
		return s.endPartition(ctx, model.PartitionEnd{Checkpoint: cp(prog.after, prog.soFar),
			Status: model.PartitionCompleted}, log)
	case errors.Is(err, errYield):
		log.Debug().Int("num_scanned", prog.soFar.Counts.Scanned).Msg("partition yielded")
		return PartitionYielded, nil
	case errors.Is(err, model.ErrLeaseLost):
		log.Info().Msg("partition taken over or cancelled; stopping")
		return PartitionDone, nil
	}
	// Keep what was committed since the last checkpoint, if the database lets us.
	if prog.dirty {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.store.Checkpoint(wctx, cp(prog.after, prog.soFar)) // best effort: a retry redoes those pages
	}
	if po.Last && ctx.Err() == nil {
		return s.endPartition(ctx, model.PartitionEnd{Checkpoint: cp(prog.after, prog.soFar),
			Status: model.PartitionFailed, Error: err.Error()}, log)
	}
	return PartitionDone, err
}

// endPartition records a partition's end, and logs the run's when it was the last.
func (s *Scanner) endPartition(ctx context.Context, e model.PartitionEnd, log zerolog.Logger) (PartitionOutcome, error) {
	var ended bool
	err := s.retry(ctx, "end partition", func() error {
		var err error
		ended, err = s.store.EndPartition(ctx, e)
		return err
	})
	switch {
	case errors.Is(err, model.ErrLeaseLost):
		log.Info().Msg("partition taken over or cancelled; stopping")
		return PartitionDone, nil
	case err != nil:
		return PartitionDone, err
	}
	log.Debug().Str("status", string(e.Status)).Int("num_scanned", e.SoFar.Counts.Scanned).Msg("partition ended")
	if !ended {
		return PartitionDone, nil
	}
	if run, err := s.store.Run(ctx, e.RunID); err == nil {
		ev := log.Info()
		if run.Status == model.RunFailed {
			ev = log.Error().Str("error", run.Error)
		}
		ev.Str("status", string(run.Status)).Int("num_scanned", run.Counts.Scanned).Int("num_repaired", run.Counts.Repaired).
			Int("num_conflict", run.Counts.Conflict).Int("num_failed", run.Counts.Failed).Int("partitions", run.Partitions).
			Msg("run finished")
	}
	return RunEnded, nil
}

// forRun returns a scanner that repairs with the options run was recorded with.
func (s *Scanner) forRun(run model.RunSpec) (*Scanner, error) {
	cfg, o := s.cfg, run.Options
	cfg.Repair.Target, cfg.Repair.Dialect = repair.Target(o.Target), repair.Dialect(o.Dialect)
	cfg.Repair.FailedTurns = repair.FailedTurnPolicy(o.FailedTurns)
	if _, err := compact.ForProfile(compact.Profile(o.Compact)); o.Compact != "" && err != nil {
		return nil, fmt.Errorf("run %d's compaction: %w", run.ID, err)
	}
	cfg.Compact = compact.Profile(o.Compact)
	if o.MaxBytes > 0 {
		cfg.MaxBytes = o.MaxBytes
	}
	if o.QuietPeriod != "" {
		q, err := time.ParseDuration(o.QuietPeriod)
		if err != nil {
			return nil, fmt.Errorf("run %d's quiet period %q: %w", run.ID, o.QuietPeriod, err)
		}
		cfg.Repair.QuietPeriod = q
	}
	sc := *s
	sc.cfg = cfg
	return &sc, nil
}
