package queue

import (
	"context"
	"math"
	"time"

	"github.com/tmend/tmend/store/model"
)

// DefaultProgressEvery is how often a daemon or worker reports on running runs.
const DefaultProgressEvery = 30 * time.Second

// runSample is a running run's count at a time, and its estimated total (0: unknown).
type runSample struct {
	scanned int
	at      time.Time
	total   int64
}

// Watch reads the running runs every interval until ctx ends: a run of one session or
// a rollback whose process died ends abandoned (store.AbandonDeadRuns), the source's
// jobs left in an older tmend's shared queue move to its own (store.MoveOldQueueJobs),
// and each run this process works a partition of gets an info line with its counts, its
// rate and, for a full scan, the table's estimated size and the time left.
func (q *Queue) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	seen := map[int64]runSample{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			seen = q.progress(ctx, seen, now, every)
		}
	}
}

// progress reads the running runs once; seen holds the samples of the last tick, and the
// new ones are returned.
func (q *Queue) progress(ctx context.Context, seen map[int64]runSample, now time.Time, every time.Duration) map[int64]runSample {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dead, err := q.store.AbandonDeadRuns(ctx)
	if err != nil {
		q.log.Debug().Err(err).Msg("looking for runs whose process died")
	}
	for _, id := range dead {
		q.log.Warn().Int64("run_id", id).Msg("run abandoned: the process working it died; what it committed stays")
	}
	if err := q.moveOldQueueJobs(ctx); err != nil {
		q.log.Debug().Err(err).Msg("moving jobs out of the old shared queue")
	}
	runs, err := q.store.ListRuns(ctx, model.RunFilter{Status: model.RunRunning, Limit: 1000})
	if err != nil {
		q.log.Debug().Err(err).Msg("reading the running runs")
		return seen
	}
	here := q.WorkedSince(now.Add(-every))
	next := map[int64]runSample{}
	for _, r := range runs {
		if !here[r.ID] {
			continue
		}
		prev, ok := seen[r.ID]
		if !ok {
			prev = runSample{at: r.StartedAt, total: q.estimate(ctx, r)}
		}
		c := r.Counts
		ev := q.log.Info().Int64("run_id", r.ID).Str("mode", string(r.Mode)).Bool("dry_run", r.DryRun).
			Int("num_scanned", c.Scanned).Int("num_repaired", c.Repaired).Int("num_failed", c.Failed)
		rate := 0.0
		if d := now.Sub(prev.at).Seconds(); d > 0 {
			rate = float64(c.Scanned-prev.scanned) / d
			ev.Float64("sessions_per_s", math.Round(rate*10)/10)
		}
		if prev.total > 0 {
			ev.Int64("num_total_estimate", prev.total)
			if left := prev.total - int64(c.Scanned); left > 0 && rate > 0 {
				ev.Int64("eta_ms", int64(float64(left)/rate*1000))
			}
		}
		ev.Msg("run progress")
		next[r.ID] = runSample{scanned: c.Scanned, at: now, total: prev.total}
	}
	return next
}

// estimate is how many sessions a run scans, by the table's statistics; 0 when not
// known.
func (q *Queue) estimate(ctx context.Context, r model.RunRow) int64 {
	n, err := q.store.EstimateRun(ctx, r)
	if err != nil {
		return 0
	}
	return n
}
