package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// textfile parses a metrics textfile into sample values by metric name and labels,
// sorted as Prometheus writes them: name{a="x",b="y"}.
func textfile(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			slices.Sort(ls)
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+strings.TrimPrefix(key, name)] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestScanWritesMetricsTextfile: --metrics-textfile (or TMEND_METRICS_TEXTFILE) writes
// the metrics of the runs recorded in the database to a file for node-exporter: the
// totals go on growing across runs, a later dry run by hand keeps the scheduled run's
// last-run timestamp, and the file is replaced whatever it held.
func TestScanWritesMetricsTextfile(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 40, "0.5")
	path := filepath.Join(t.TempDir(), "tmend.prom")

	r := runCLI(t, "", b.env, "scan", "--full", "--scheduled", "--metrics-textfile", path, "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	first := textfile(t, path)
	repaired := first[`tmend_sessions_total{status="repaired"}`]
	require.Positive(t, repaired)
	require.Equal(t, 1.0, first[`tmend_runs_total{mode="full",status="completed",trigger="cron"}`])
	require.Zero(t, first[`tmend_runs_total{mode="full",status="failed",trigger="cron"}`])
	require.Contains(t, first, `tmend_runs_total{mode="full",status="failed",trigger="cron"}`, "series exist at zero")
	scheduled := `tmend_last_run_timestamp_seconds{dry_run="false",mode="full",status="completed",trigger="cron"}`
	require.Positive(t, first[scheduled])
	require.Positive(t, first[`tmend_issues_total{code="tool_call_without_result"}`]+first[`tmend_issues_total{code="tool_result_without_call"}`])
	require.Equal(t, repaired, first[`tmend_sessions_by_dialect_total{dialect="openclaw"}`])
	require.Equal(t, 1.0, first[`tmend_run_duration_seconds_count{trigger="cron"}`])
	var build bool
	for k := range first {
		require.False(t, strings.HasPrefix(k, "go_") || strings.HasPrefix(k, "process_"), "no runtime metrics in a run's file: %s", k)
		build = build || strings.HasPrefix(k, "tmend_build_info{")
	}
	require.True(t, build)

	env := map[string]string{"TMEND_METRICS_TEXTFILE": path}
	for k, v := range b.env {
		env[k] = v
	}
	r = runCLI(t, "", env, "scan", "--full", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	second := textfile(t, path)
	require.Equal(t, first[scheduled], second[scheduled], "a dry run by hand keeps the scheduled run's timestamp")
	require.Positive(t, second[`tmend_last_run_timestamp_seconds{dry_run="true",mode="full",status="completed",trigger="cli"}`])
	require.Equal(t, 1.0, second[`tmend_runs_total{mode="full",status="completed",trigger="cron"}`])
	require.Equal(t, 1.0, second[`tmend_runs_total{mode="full",status="completed",trigger="cli"}`])
	require.Equal(t, repaired, second[`tmend_sessions_total{status="repaired"}`], "counters carry over")
	require.Equal(t, first[`tmend_sessions_total{status="clean"}`]+40, second[`tmend_sessions_total{status="clean"}`])
	require.Equal(t, 1.0, second[`tmend_run_duration_seconds_count{trigger="cron"}`])
	require.Equal(t, 1.0, second[`tmend_run_duration_seconds_count{trigger="cli"}`])

	require.NoError(t, os.WriteFile(path, []byte("not metrics {\n"), 0o644))
	r = runCLI(t, "", env, "scan", "--full", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	third := textfile(t, path)
	require.Equal(t, 2.0, third[`tmend_runs_total{mode="full",status="completed",trigger="cli"}`], "totals, not the file's")
}
