package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// TestRunTotals: ended runs add up by trigger, mode, dryness and status, their
// durations fall into the bucket whose bound is the first at or over them, and their
// summaries add up; running runs count apart, with what they scanned so far.
func TestRunTotals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const insert = `INSERT INTO repair_runs (trigger, mode, dry_run, source, status, started_at, finished_at, num_scanned, summary)
VALUES ($1, $2, false, 'src', $3, $4, $5, $6, $7)`
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		status  string
		took    time.Duration
		summary string
	}{
		{"completed", 50 * time.Millisecond, `{"by_status":{"repaired":2,"clean":5},"by_stage":{"move_results":3},"by_issue":{"misplaced_tool_result":2},"by_dialect":{"anthropic":2}}`},
		{"completed", 100 * time.Millisecond, `{"by_status":{"clean":1}}`}, // on a bound: in its bucket
		{"cancelled", 400 * time.Millisecond, `{"by_status":{"repaired":1},"by_stage":null}`},
		{"abandoned", 2 * time.Second, `{}`},
	} {
		_, err := b.pool.Exec(t.Context(), insert, "api", "full", r.status, start, start.Add(r.took), 7, r.summary)
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(t.Context(), insert, "cron", "incremental", "running", start, nil, 40, `{"by_status":{"clean":40}}`)
	require.NoError(t, err)

	all, tot, err := b.store.RunTotals(t.Context(), []float64{0.1, 0.4, 1.6}, func([]store.RunGroup) bool { return false })
	require.NoError(t, err)
	groups := map[model.RunStatus]store.RunGroup{}
	for _, g := range all {
		groups[g.Status] = g
	}
	require.Len(t, groups, 4)
	require.Equal(t, int64(2), groups[model.RunCompleted].Runs)
	require.Equal(t, start.Add(100*time.Millisecond), groups[model.RunCompleted].LastFinished.UTC())
	require.Equal(t, int64(1), groups[model.RunRunning].Runs)
	require.Equal(t, int64(40), groups[model.RunRunning].Scanned)
	require.Equal(t, model.TriggerCron, groups[model.RunRunning].Trigger)

	require.Len(t, tot.Durations, 1, "running runs have no duration")
	d := tot.Durations[model.TriggerAPI]
	require.Equal(t, uint64(4), d.Count)
	require.InDelta(t, 2.55, d.Sum, 1e-9)
	require.Equal(t, []uint64{2, 1, 0, 1}, d.Buckets)

	want := model.Summary{ByStatus: map[model.SessionStatus]int{model.StatusRepaired: 3, model.StatusClean: 6},
		ByStage: map[string]int{"move_results": 3}, ByIssue: map[string]int{"misplaced_tool_result": 2},
		ByDialect: map[string]int{"anthropic": 2}}
	require.Empty(t, cmp.Diff(want, tot.Sessions), "the running run's sessions are not counted yet")

	_, again, err := b.store.RunTotals(t.Context(), []float64{0.1}, func(g []store.RunGroup) bool {
		require.Equal(t, all, g)
		return true
	})
	require.NoError(t, err)
	require.Nil(t, again, "the caller has the sums of these runs")
}
