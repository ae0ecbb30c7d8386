package console

import (
	"strconv"
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
	require.Equal(t, []legend{{"s-repaired", termOf("repaired", ""), 7}, {"s-failed", termOf("failed", ""), 1}}, outcome.Legend)
	require.Equal(t, 8, outcome.Ticks[4].Value)
	// The tallest bar reaches 5/8 of the plot's height.
	require.Equal(t, f1(float64(chartH-padUp-padDown)*5/8), outcome.Bars[2].H)
	// One slot per run, labelled with the run's id under its bars.
	require.Equal(t, []label{{f1(padLeft + float64(chartW-padLeft-padRight)/4), "3"},
		{f1(padLeft + float64(chartW-padLeft-padRight)*3/4), "9"}}, outcome.Labels)
	require.True(t, charts[1].Empty, "no issue codes")
	require.Equal(t, "Issues found per run, by code", charts[1].Title, "issues, not sessions: a session may have several")
	require.True(t, runCharts(nil)[0].Empty)
}

// TestChartAxesFit: with many runs and large counts, the y-axis labels fit the margin
// and the run labels do not overlap, the newest run always labelled.
func TestChartAxesFit(t *testing.T) {
	t.Parallel()
	var runs []model.RunRow
	for i := range 50 {
		runs = append(runs, model.RunRow{ID: int64(10049 - i), Counts: model.RunCounts{Repaired: 12345 - i}})
	}
	c := runCharts(runs)[0]
	require.Equal(t, []string{"0", "4k", "8k", "12k", "16k"}, []string{c.Ticks[0].Text, c.Ticks[1].Text, c.Ticks[2].Text,
		c.Ticks[3].Text, c.Ticks[4].Text})
	for _, tk := range c.Ticks {
		require.LessOrEqual(t, len(tk.Text)*digitW+6, padLeft, "tick %q is clipped", tk.Text)
	}
	require.Equal(t, "10049", c.Labels[len(c.Labels)-1].Text)
	for i := 1; i < len(c.Labels); i++ {
		a, err := strconv.ParseFloat(c.Labels[i-1].X, 64)
		require.NoError(t, err)
		b, err := strconv.ParseFloat(c.Labels[i].X, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, b-a, float64(5*digitW+gapW), "labels %d and %d overlap", i-1, i)
	}
	for v, want := range map[int]string{950: "950", 1000: "1k", 7500: "7.5k", 10000: "10k", 120000: "120k", 1_200_000: "1.2M"} {
		require.Equal(t, want, shortNumber(v))
	}
}
