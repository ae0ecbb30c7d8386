package daemon

import (
	"context"
	"math"
	"time"

	"github.com/tmend/tmend/store/model"
)

// DefaultProgressEvery is Config.ProgressEvery's default.
const DefaultProgressEvery = 30 * time.Second

// runSample is a running run's count at a time, and its estimated total (0: unknown).
type runSample struct {
	scanned int
	at      time.Time
	total   int64
}

// watchRuns sets the running-run gauges and logs the progress of each run this process
// works a partition of, every ProgressEvery, until the hard stop.
func (s *Server) watchRuns() {
	defer s.watching.Done()
	t := time.NewTicker(s.cfg.ProgressEvery)
	defer t.Stop()
	seen := map[int64]runSample{}
	for {
		select {
		case <-s.work.Done():
			return
		case now := <-t.C:
			seen = s.progress(seen, now)
		}
	}
}

// progress reads the running runs once; seen holds the samples of the last tick, and the
// new ones are returned.
func (s *Server) progress(seen map[int64]runSample, now time.Time) map[int64]runSample {
	ctx, cancel := context.WithTimeout(s.work, 5*time.Second)
	defer cancel()
	runs, err := s.cfg.Store.ListRuns(ctx, model.RunFilter{Status: model.RunRunning, Limit: 1000})
	if err != nil {
		s.log.Debug().Err(err).Msg("reading the running runs")
		return seen
	}
	scanned := 0
	for _, r := range runs {
		scanned += r.Counts.Scanned
	}
	s.cfg.Metrics.running.Set(float64(len(runs)))
	s.cfg.Metrics.runningScanned.Set(float64(scanned))

	here := s.queue.WorkedSince(now.Add(-s.cfg.ProgressEvery))
	next := map[int64]runSample{}
	for _, r := range runs {
		if !here[r.ID] {
			continue
		}
		prev, ok := seen[r.ID]
		if !ok {
			prev = runSample{at: r.StartedAt, total: s.estimate(ctx, r)}
		}
		c := r.Counts
		ev := s.log.Info().Int64("run_id", r.ID).Str("mode", string(r.Mode)).Bool("dry_run", r.DryRun).
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

// estimate is how many sessions a run scans, by the table's statistics: known for full
// scans only (an incremental scan reads the sessions changed in its window); 0 when not
// known.
func (s *Server) estimate(ctx context.Context, r model.RunRow) int64 {
	if r.Mode != model.ModeFull {
		return 0
	}
	n, err := s.cfg.Store.EstimateSessions(ctx)
	if err != nil {
		return 0
	}
	if limit, ok := r.Options["limit"].(float64); ok && limit > 0 {
		n = min(n, int64(limit))
	}
	return n
}
