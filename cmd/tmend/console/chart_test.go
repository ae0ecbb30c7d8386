package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

func TestNiceMax(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 4, 1: 4, 4: 4, 5: 8, 9: 12, 13: 16, 30: 32, 41: 60, 100: 100, 101: 120, 999: 1000, 12345: 16000} {
		got := niceMax(n)
		require.Equal(t, want, got, "%d", n)
		require.GreaterOrEqual(t, got, n)
		require.Zero(t, got%4, "%d: ticks are whole numbers", n)
	}
}

func TestBarChart(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	runs := []model.RunRow{
		{ID: 9, StartedAt: start.Add(48 * time.Hour), Counts: model.RunCounts{Repaired: 5, Failed: 1}},
		{ID: 3, StartedAt: start, Counts: model.RunCounts{Repaired: 2}},
		{ID: 4, StartedAt: start, DryRun: true, Counts: model.RunCounts{Repaired: 50}},
		{ID: 5, StartedAt: start, Mode: model.ModeRollback, Counts: model.RunCounts{Restored: 50}},
	}
	charts := runCharts(runs)
	outcome := charts[0]
	require.False(t, outcome.Empty)
	// Oldest first; dry runs and rollbacks left out; a repaired and a failed bar a run.
	require.Len(t, outcome.Bars, 4)
	require.Contains(t, outcome.Bars[0].Title, "run 3, 2026-01-02 03:00 UTC: 2 repaired")
	require.Contains(t, outcome.Bars[3].Title, "run 9, 2026-01-04 03:00 UTC: 1 failed")
	require.Equal(t, []legend{{"s-repaired", "repaired", 7}, {"s-failed", "failed", 1}}, outcome.Legend)
	require.Equal(t, 8, outcome.Ticks[4].Value)
	// The tallest bar reaches 5/8 of the plot's height.
	require.Equal(t, f1(float64(chartH-padUp-padDown)*5/8), outcome.Bars[2].H)
	require.Equal(t, []label{{f1(padLeft + float64(chartW-padLeft-padRight)/4), "01-02 03:00"},
		{f1(padLeft + float64(chartW-padLeft-padRight)*3/4), "01-04 03:00"}}, outcome.Labels)
	require.True(t, charts[1].Empty, "no issue codes")
	require.True(t, runCharts(nil)[0].Empty)
}
