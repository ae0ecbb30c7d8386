package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// EndedRuns is what the rows of the ended runs in tmend's schema add up to, whichever
// process ran or ended them.
type EndedRuns struct {
	// Durations are the runs' durations by trigger.
	Durations map[model.Trigger]*RunDurations
	// Sessions are the runs' sessions by status, stage, issue and dialect.
	Sessions model.Summary
}

// RunGroup is the runs of one trigger, mode, dryness and status, as RunGroups reads them.
type RunGroup struct {
	Trigger model.Trigger
	Mode    model.Mode
	DryRun  bool
	Status  model.RunStatus
	Runs    int64
	// LastFinished is when the last of them ended; zero for running runs.
	LastFinished time.Time
	// Scanned is the sessions they scanned, so far for running runs (as their
	// partitions checkpoint).
	Scanned int64
}

// RunDurations counts durations into the buckets of RunTotals' bounds: Buckets[i] holds
// those over bounds[i-1] and at most bounds[i]; the last, those over every bound.
type RunDurations struct {
	Count   uint64
	Sum     float64
	Buckets []uint64
}

const (
	runGroupsSQL = `SELECT trigger, mode, dry_run, status, count(*), max(finished_at), coalesce(sum(num_scanned), 0)
FROM repair_runs GROUP BY 1, 2, 3, 4`
	// The bucket of a duration d is the number of bounds below it: of n bounds, n less
	// those at or over d, which width_bucket counts over the bounds negated ($1, ascending).
	runDurationsSQL = `SELECT trigger, cardinality($1::float8[]) - width_bucket(-d, $1::float8[]), count(*), sum(d)
FROM (SELECT trigger, extract(epoch FROM finished_at - started_at)::float8 AS d
      FROM repair_runs WHERE status <> 'running') r
GROUP BY 1, 2`
	runSessionsSQL = `SELECT f.kind, e.key, sum(e.value::bigint)
FROM repair_runs r
CROSS JOIN LATERAL (VALUES ('status', r.summary->'by_status'), ('stage', r.summary->'by_stage'),
  ('issue', r.summary->'by_issue'), ('dialect', r.summary->'by_dialect'),
  -- A dry run's compactions saved nothing; its rejections count all the same.
  ('compaction', CASE WHEN r.dry_run THEN (r.summary->'compaction') - 'compacted' - 'saved_bytes' ELSE r.summary->'compaction' END)) f(kind, obj)
CROSS JOIN LATERAL jsonb_each_text(CASE WHEN jsonb_typeof(f.obj) = 'object' THEN f.obj ELSE '{}' END) e
WHERE r.status <> 'running'
GROUP BY 1, 2`
)

// RunTotals counts the runs recorded in tmend's schema by trigger, mode, dryness and
// status, and reads what the ended runs add up to (bounds are the upper bounds of the
// duration buckets, ascending), in one snapshot: a run is in both or in neither. Run
// rows are never deleted and an ended run's row no longer changes, so the counts of
// ended runs only grow, and while they stay the same so does what the ended runs add up
// to: when known says the counts are those of sums the caller already has, the ended
// runs are not read again (nil).
func (s *Store) RunTotals(ctx context.Context, bounds []float64, known func([]RunGroup) bool) ([]RunGroup, *EndedRuns, error) {
	var groups []RunGroup
	var ended *EndedRuns
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if groups, err = runGroups(ctx, tx); err != nil || known(groups) {
				return err
			}
			e, err := endedRuns(ctx, tx, bounds)
			ended = &e
			return err
		})
	if err != nil {
		return nil, nil, classify(fmt.Errorf("read the runs' totals: %w", err))
	}
	return groups, ended, nil
}

func runGroups(ctx context.Context, tx pgx.Tx) ([]RunGroup, error) {
	rows, err := tx.Query(ctx, runGroupsSQL)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	var out []RunGroup
	var g RunGroup
	var last *time.Time
	_, err = pgx.ForEachRow(rows, []any{&g.Trigger, &g.Mode, &g.DryRun, &g.Status, &g.Runs, &last, &g.Scanned}, func() error {
		g.LastFinished = time.Time{}
		if last != nil {
			g.LastFinished = *last
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return out, nil
}

// endedRuns reads what the ended runs add up to, in one round trip.
func endedRuns(ctx context.Context, tx pgx.Tx, bounds []float64) (EndedRuns, error) {
	t := EndedRuns{Durations: map[model.Trigger]*RunDurations{},
		Sessions: model.Summary{ByStatus: map[model.SessionStatus]int{}, ByStage: map[string]int{},
			ByIssue: map[string]int{}, ByDialect: map[string]int{}}}
	b := &pgx.Batch{}
	negated := make([]float64, len(bounds))
	for i, bound := range bounds {
		negated[len(bounds)-1-i] = -bound
	}
	b.Queue(runDurationsSQL, negated).Query(func(rows pgx.Rows) error {
		var tr model.Trigger
		var bucket int
		var n uint64
		var sum float64
		_, err := pgx.ForEachRow(rows, []any{&tr, &bucket, &n, &sum}, func() error {
			d := t.Durations[tr]
			if d == nil {
				d = &RunDurations{Buckets: make([]uint64, len(bounds)+1)}
				t.Durations[tr] = d
			}
			d.Count += n
			d.Sum += sum
			d.Buckets[bucket] += n
			return nil
		})
		return err
	})
	b.Queue(runSessionsSQL).Query(func(rows pgx.Rows) error {
		var kind, key string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&kind, &key, &n}, func() error {
			switch kind {
			case "status":
				t.Sessions.ByStatus[model.SessionStatus(key)] = n
			case "stage":
				t.Sessions.ByStage[key] = n
			case "issue":
				t.Sessions.ByIssue[key] = n
			case "dialect":
				t.Sessions.ByDialect[key] = n
			case "compaction":
				c := &t.Sessions.Compaction
				switch key {
				case "compacted":
					c.Compacted = n
				case "rejected":
					c.Rejected = n
				case "saved_bytes":
					c.SavedBytes = int64(n)
				}
			}
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return t, fmt.Errorf("add up the ended runs: %w", err)
	}
	return t, nil
}

// RiverJobs is what River's job table in tmend's schema holds now: jobs by state and
// kind, those an attempt failed or River's rescuer rescued (while River keeps them), and
// how long the oldest job ready to run has waited.
type RiverJobs struct {
	Groups []RiverJobGroup
	// OldestAvailable is how long the oldest job ready to run has waited (by the
	// database's clock); zero for none.
	OldestAvailable time.Duration
}

// RiverJobGroup is the jobs of one state and kind.
type RiverJobGroup struct {
	State, Kind string
	Jobs        int64
	// Errored counts those that failed an attempt; Rescued, those River's rescuer took
	// from a worker that went silent.
	Errored, Rescued int64
}

// riverRescued is the error River's rescuer records on a job it rescues.
const riverRescued = "Stuck job rescued by JobRescuer"

const riverJobsSQL = `SELECT state::text, kind, count(*),
  count(*) FILTER (WHERE cardinality(errors) > 0),
  count(*) FILTER (WHERE EXISTS (SELECT 1 FROM unnest(errors) e WHERE e->>'error' = $1)),
  coalesce(extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available')), 0)::float8
FROM river_job GROUP BY 1, 2`

// RiverJobs reads River's job table in one query.
func (s *Store) RiverJobs(ctx context.Context) (RiverJobs, error) {
	var out RiverJobs
	rows, err := s.pool.Query(ctx, riverJobsSQL, riverRescued)
	if err != nil {
		return out, classify(fmt.Errorf("read River's jobs: %w", err))
	}
	var g RiverJobGroup
	var waited float64
	_, err = pgx.ForEachRow(rows, []any{&g.State, &g.Kind, &g.Jobs, &g.Errored, &g.Rescued, &waited}, func() error {
		out.Groups = append(out.Groups, g)
		out.OldestAvailable = max(out.OldestAvailable, time.Duration(waited*float64(time.Second)))
		return nil
	})
	if err != nil {
		return out, classify(fmt.Errorf("read River's jobs: %w", err))
	}
	return out, nil
}
