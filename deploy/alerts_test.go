package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"
)

// TestAlertsFire evaluates alert expressions over series as two daemon replicas export
// them (the series read from the database are the same on both), as promtool's rule
// tests do: each fires on what it is for and stays quiet otherwise. The `for` durations
// are not evaluated.
func TestAlertsFire(t *testing.T) {
	t.Parallel()
	exprs := map[string]string{}
	for _, g := range objectsOf[monitoringv1.PrometheusRule](loadKubernetes(t))[0].Spec.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr.String()
		}
	}
	// both is a series as each of two replicas exports it, with the same samples.
	both := func(series, samples string) string {
		name, lbls, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		var b strings.Builder
		for _, instance := range []string{"a", "b"} {
			ls := `job="tmend",instance="` + instance + `"`
			if lbls != "" {
				ls = lbls + "," + ls
			}
			fmt.Fprintf(&b, "%s{%s} %s\n", name, ls, samples)
		}
		return b.String()
	}
	cases := []struct {
		name, alert, series string
		fires               bool
	}{
		{"StuckRun", "TmendRunStuck", both("tmend_running_runs", "1x60") +
			both("tmend_running_run_sessions_scanned", "300x60"), true},
		{"RunMoving", "TmendRunStuck", both("tmend_running_runs", "1x60") +
			both("tmend_running_run_sessions_scanned", "0+10x60"), false},
		{"NoRun", "TmendRunStuck", both("tmend_running_runs", "0x60") +
			both("tmend_running_run_sessions_scanned", "0x60"), false},
		{"NobodyWorks", "TmendQueueNotWorked", both(`tmend_river_jobs{kind="tmend_partition",state="available"}`, "4x60") +
			both(`tmend_river_jobs{kind="tmend_partition",state="running"}`, "0x60"), true},
		{"Worked", "TmendQueueNotWorked", both(`tmend_river_jobs{kind="tmend_partition",state="available"}`, "4x60") +
			both(`tmend_river_jobs{kind="tmend_partition",state="running"}`, "1x60"), false},
		{"EmptyQueue", "TmendQueueNotWorked", both(`tmend_river_jobs{kind="tmend_partition",state="available"}`, "0x60") +
			both(`tmend_river_jobs{kind="tmend_partition",state="running"}`, "0x60"), false},
		{"Retrying", "TmendJobsRetrying", both(`tmend_river_jobs{kind="tmend_partition",state="retryable"}`, "1x60"), true},
		{"NotRetrying", "TmendJobsRetrying", both(`tmend_river_jobs{kind="tmend_partition",state="retryable"}`, "0x60"), false},
		{"AcquiresCanceled", "TmendPoolExhausted", both("tmend_db_pool_canceled_acquires_total", "0+1x60") +
			both("tmend_db_pool_acquires_total", "0+600x60") + both("tmend_db_pool_acquire_duration_seconds_total", "0+6x60"), true},
		{"AcquiresSlow", "TmendPoolExhausted", both("tmend_db_pool_canceled_acquires_total", "0x60") +
			both("tmend_db_pool_acquires_total", "0+60x60") + both("tmend_db_pool_acquire_duration_seconds_total", "0+120x60"), true},
		{"AcquiresFast", "TmendPoolExhausted", both("tmend_db_pool_canceled_acquires_total", "0x60") +
			both("tmend_db_pool_acquires_total", "0+600x60") + both("tmend_db_pool_acquire_duration_seconds_total", "0+6x60"), false},
		{"RunCancelledOnly", "TmendRunFailed", both(`tmend_runs_total{trigger="api",mode="full",status="failed"}`, "0x60") +
			both(`tmend_runs_total{trigger="api",mode="full",status="cancelled"}`, "0x30 1x30"), false},
		{"CompactRejected", "TmendCompactRejected", both(`tmend_compact_sessions_total{status="compact_rejected"}`, "0x30 1x30") +
			both(`tmend_compact_sessions_total{status="compacted"}`, "0+5x60"), true},
		{"CompactedOnly", "TmendCompactRejected", both(`tmend_compact_sessions_total{status="compact_rejected"}`, "0x60") +
			both(`tmend_compact_sessions_total{status="compacted"}`, "0+5x60"), false},
		{"RunAbandoned", "TmendRunFailed", both(`tmend_runs_total{trigger="cron",mode="incremental",status="abandoned"}`, "0x30 1x30"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			expr, ok := exprs[c.alert]
			require.True(t, ok, "no alert %s", c.alert)
			v := evalAt(t, c.series, expr, 45*time.Minute)
			require.Equal(t, c.fires, len(v) > 0, "%s over:\n%s%s\ngave %v", c.alert, c.series, expr, v)
		})
	}
}

// evalAt evaluates expr at the time at, over series written as promtool's rule tests
// and PromQL's test scripts write them, one a line, sampled every minute from time 0
// (`metric{label="value"} 0+1x60`).
func evalAt(t *testing.T, series, expr string, at time.Duration) promql.Vector {
	t.Helper()
	var all []storage.Series
	for _, line := range strings.Split(strings.TrimSpace(series), "\n") {
		lset, values, err := parser.NewParser(parser.Options{}).ParseSeriesDesc(strings.TrimSpace(line))
		require.NoError(t, err, line)
		var samples []chunks.Sample
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * time.Minute.Milliseconds(), f: v.Value})
			}
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	db := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out seriesSet
			for _, s := range all {
				matches := true
				for _, m := range ms {
					matches = matches && m.Matches(s.Labels().Get(m.Name))
				}
				if matches {
					out.series = append(out.series, s)
				}
			}
			return &out
		}}}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	q, err := eng.NewInstantQuery(context.Background(), db, nil, expr, time.Unix(0, 0).Add(at))
	require.NoError(t, err, expr)
	defer q.Close()
	res := q.Exec(context.Background())
	require.NoError(t, res.Err, expr)
	v, err := res.Vector()
	require.NoError(t, err, expr)
	return v
}

// seriesSet is a storage.SeriesSet over series in the order given (the test's are
// written sorted).
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                        { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.next-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample of a test series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }
