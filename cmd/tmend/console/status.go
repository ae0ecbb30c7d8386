package console

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/tmend/tmend/store/model"
)

// status is the runs page's first answer to an operator: did the last scheduled scan
// succeed, when is the next, what runs now (partitions and who works them), and which
// runs failed, were abandoned or had a compaction rejected by its checks lately.
type status struct {
	// LastScan is the newest scheduled scan that ended; nil before the first.
	LastScan *runRow
	// Next is the schedule's next tick; zero when this daemon schedules no scans.
	Next   time.Time
	NextIn string
	// Spec is the schedule as the daemon was given it.
	Spec string
	// Running are the runs going now, with their partitions.
	Running []liveRun
	// Failed are the failed and abandoned runs since FailedSince, and those with a
	// compaction rejected by its checks (a bug to report), newest first.
	Failed      []model.RunRow
	FailedSince time.Time
}

// liveRun is a running run and its partitions.
type liveRun struct {
	runRow
	Partitions []partition
}

// partition is a run's partition with how long ago it last checkpointed.
type partition struct {
	model.PartitionRow
	Ago string
	// Quiet: no checkpoint for longer than stuckAfter, so maybe stuck.
	Quiet bool
}

const (
	// recentFailures is how far back the strip lists failed and abandoned runs.
	recentFailures = 24 * time.Hour
	// stuckAfter is how long a running partition may go without a checkpoint (a page of
	// sessions takes seconds) before the strip marks it.
	stuckAfter = 5 * time.Minute
	// stripRuns bounds each list of the strip.
	stripRuns = 5
)

func (c *Console) status(ctx context.Context, now time.Time) (status, error) {
	st := status{FailedSince: now.Add(-recentFailures)}
	if c.cfg.Schedule != nil {
		st.Spec = c.cfg.ScheduleSpec
		st.Next = c.cfg.Schedule.Next(now)
		st.NextIn = duration(st.Next.Sub(now))
	}
	scheduled, err := c.cfg.Store.ListRuns(ctx, model.RunFilter{Trigger: model.TriggerCron, Modes: scanModes, Limit: stripRuns})
	if err != nil {
		return st, err
	}
	if i := slices.IndexFunc(scheduled, func(r model.RunRow) bool { return r.Status != model.RunRunning }); i >= 0 {
		row, err := c.runRow(ctx, scheduled[i], now)
		if err != nil {
			return st, err
		}
		st.LastScan = &row
	}
	running, err := c.cfg.Store.ListRuns(ctx, model.RunFilter{Status: model.RunRunning, Limit: stripRuns})
	if err != nil {
		return st, err
	}
	for _, r := range running {
		row, err := c.runRow(ctx, r, now)
		if err != nil {
			return st, err
		}
		parts, err := c.partitions(ctx, r.ID, now)
		if err != nil {
			return st, err
		}
		st.Running = append(st.Running, liveRun{runRow: row, Partitions: parts})
	}
	for _, f := range []model.RunFilter{{Status: model.RunFailed}, {Status: model.RunAbandoned}, {CompactRejected: true}} {
		f.Since, f.Limit = st.FailedSince, stripRuns
		runs, err := c.cfg.Store.ListRuns(ctx, f)
		if err != nil {
			return st, err
		}
		st.Failed = append(st.Failed, runs...)
	}
	slices.SortFunc(st.Failed, func(a, b model.RunRow) int { return cmp.Compare(b.ID, a.ID) })
	st.Failed = slices.CompactFunc(st.Failed, func(a, b model.RunRow) bool { return a.ID == b.ID }) // failed and rejected
	st.Failed = st.Failed[:min(len(st.Failed), stripRuns)]
	return st, nil
}

// partitions are a run's partitions as of their last checkpoint, those that made no
// progress for stuckAfter marked quiet.
func (c *Console) partitions(ctx context.Context, run int64, now time.Time) ([]partition, error) {
	rows, err := c.cfg.Store.RunPartitions(ctx, run)
	if err != nil {
		return nil, err
	}
	var out []partition
	for _, p := range rows {
		quiet := now.Sub(p.UpdatedAt)
		out = append(out, partition{PartitionRow: p, Ago: duration(max(0, quiet)),
			Quiet: p.Status == model.PartitionRunning && quiet > stuckAfter})
	}
	return out, nil
}
