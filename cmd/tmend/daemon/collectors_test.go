package daemon_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// scrape reads /metrics into sample values by `name{label="value",...}` (labels sorted;
// a histogram as its _count and _sum).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := call(t, "GET", base+"/metrics", "", "")
	require.Equal(t, 200, code, body)
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := func(n string) string {
				if len(ls) == 0 {
					return n
				}
				return n + "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key(name)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key(name)] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key(name+"_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key(name+"_sum")] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// sum adds the samples of a metric name.
func sum(m map[string]float64, name string) float64 {
	total := 0.0
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// TestMetricsCountCancelledRun: a scan cancelled through the API is counted as
// cancelled, once, with the sessions it scanned, as soon as DELETE answers; the
// running-run gauge says 0 at once (it reads the rows, not a poll of them).
func TestMetricsCountCancelledRun(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	storetest.Generated(t, pool, gen.Config{Dialect: repair.OpenAIChat, Sessions: 400, Messages: 4, FaultRate: 0.2, Seed: 5})
	b := serveFrom(t, pool, pool, func(c *daemon.Config) {
		// Small, slow pages: the run is still running when it is cancelled.
		st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
		require.NoError(t, err)
		c.Scanner = scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 10,
			BatchPause: 100 * time.Millisecond})
	})
	rd, w := "Bearer "+readToken, "Bearer "+apiToken
	const cancelled = `tmend_runs_total{mode="full",status="cancelled",trigger="api"}`

	code, m := callJSON(t, "POST", b.base+"/v1/runs", w, `{"mode":"full"}`)
	require.Equal(t, 202, code, m)
	runPath := fmt.Sprintf("/v1/runs/%d", int64(m["id"].(float64)))
	waitFor(t, func() bool {
		_, run := callJSON(t, "GET", b.base+runPath, rd, "")
		require.Equal(t, "running", run["status"], "the run ended before it was cancelled")
		return run["counts"].(map[string]any)["scanned"].(float64) > 0
	})
	before := scrape(t, b.base)
	require.Equal(t, 1.0, before["tmend_running_runs"])
	require.Positive(t, before["tmend_running_run_sessions_scanned"])
	require.Zero(t, before[cancelled])
	require.Zero(t, sum(before, "tmend_sessions_total"))

	code, run := callJSON(t, "DELETE", b.base+runPath, w, "")
	require.Equal(t, 200, code, run)
	require.Equal(t, "cancelled", run["status"])
	scanned := run["counts"].(map[string]any)["scanned"].(float64)
	require.Positive(t, scanned)
	for range 2 { // counted once, however often it is scraped
		after := scrape(t, b.base)
		require.Zero(t, after["tmend_running_runs"], "the row says cancelled")
		require.Zero(t, after["tmend_running_run_sessions_scanned"])
		require.Equal(t, 1.0, after[cancelled])
		require.Equal(t, 1.0, sum(after, "tmend_runs_total"))
		require.Equal(t, scanned, sum(after, "tmend_sessions_total"), "the cancelled run's sessions are counted")
		require.Equal(t, 1.0, after[`tmend_run_duration_seconds_count{trigger="api"}`])
		require.Positive(t, after[`tmend_last_run_timestamp_seconds{dry_run="false",mode="full",status="cancelled",trigger="api"}`])
	}
}

// TestMetricsCountRunsOfEveryProcess: two daemons on one database, and a run by hand
// (tmend repair), each end runs; both daemons count every run, once, as it ends.
func TestMetricsCountRunsOfEveryProcess(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool,
		model.Session{ID: "a", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-time.Hour)},
		model.Session{ID: "b", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-time.Hour)},
		model.Session{ID: "c", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-time.Hour)})
	one, two := serveFrom(t, pool, pool, nil), serveFrom(t, pool, pool, nil)
	w := "Bearer " + apiToken
	code, _ := call(t, "POST", one.base+"/v1/sessions/a/repair", w, "")
	require.Equal(t, 200, code)
	for _, b := range []*testBundle{one, two} {
		require.Equal(t, 1.0, scrape(t, b.base)[`tmend_sessions_total{status="repaired"}`])
	}
	// A second run of the same trigger, mode and outcome: its sessions are added too.
	code, _ = call(t, "POST", two.base+"/v1/sessions/b/repair", w, "")
	require.Equal(t, 200, code)
	for _, b := range []*testBundle{one, two} {
		require.Equal(t, 2.0, scrape(t, b.base)[`tmend_sessions_total{status="repaired"}`])
	}
	one.repair(t, "c")
	for _, b := range []*testBundle{one, two} {
		m := scrape(t, b.base)
		require.Equal(t, 2.0, m[`tmend_runs_total{mode="session",status="completed",trigger="api"}`])
		require.Equal(t, 1.0, m[`tmend_runs_total{mode="session",status="completed",trigger="cli"}`])
		require.Equal(t, 3.0, sum(m, "tmend_runs_total"))
		require.Equal(t, 3.0, m[`tmend_sessions_total{status="repaired"}`])
		require.Equal(t, 3.0, m[`tmend_issues_total{code="tool_call_without_result"}`])
		require.Equal(t, 3.0, m[`tmend_stage_actions_total{stage="synthesize_missing_results"}`])
		require.Equal(t, 3.0, m[fmt.Sprintf(`tmend_sessions_by_dialect_total{dialect=%q}`, repair.OpenAIChat)])
	}
}

// TestHTTPMetricsAndAccessLog: requests are counted and timed by route pattern, method
// and status, unknown paths under one route label; each is logged at debug with one
// component key.
func TestHTTPMetricsAndAccessLog(t *testing.T) {
	t.Parallel()
	var logs storetest.Logs
	b := setup(t, func(c *daemon.Config) { c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel) })
	rd := "Bearer " + readToken
	code, _ := call(t, "GET", b.base+"/v1/runs/1", rd, "")
	require.Equal(t, 404, code)
	code, _ = call(t, "GET", b.base+"/v1/runs?limit=5", rd, "")
	require.Equal(t, 200, code)
	code, _ = call(t, "GET", b.base+"/no/such/thing", rd, "")
	require.Equal(t, 404, code)

	m := scrape(t, b.base)
	require.Equal(t, 1.0, m[`tmend_http_requests_total{code="404",method="GET",route="/v1/runs/{id}"}`])
	require.Equal(t, 1.0, m[`tmend_http_requests_total{code="200",method="GET",route="/v1/runs"}`])
	require.Equal(t, 1.0, m[`tmend_http_requests_total{code="404",method="GET",route="unmatched"}`])
	require.Equal(t, 1.0, m[`tmend_http_request_duration_seconds_count{code="200",method="GET",route="/v1/runs"}`])

	var seen []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Equal(t, 1, strings.Count(line, `"component"`), line)
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		if l["component"] == "http" {
			require.Equal(t, "debug", l["level"], line)
			require.Contains(t, l, "duration_ms")
			seen = append(seen, fmt.Sprintf("%v %v %v", l["route"], l["path"], l["status"]))
		}
	}
	for _, want := range []string{"/v1/runs/{id} /v1/runs/1 404", "/v1/runs /v1/runs 200", "unmatched /no/such/thing 404"} {
		require.True(t, slices.Contains(seen, want), "access log lacks %q: %v", want, seen)
	}
}

// TestPoolAndRiverMetrics: the pool's statistics, and River's jobs: a scan no process
// works waits in the queue (its depth and age grow); once worked, its job is completed.
func TestPoolAndRiverMetrics(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-time.Hour)})
	const (
		available = `tmend_river_jobs{kind="tmend_partition",state="available"}`
		completed = `tmend_river_jobs{kind="tmend_partition",state="completed"}`
	)
	idle := serveFrom(t, pool, pool, func(c *daemon.Config) { c.Queue.Concurrency = 0 })
	code, run := callJSON(t, "POST", idle.base+"/v1/runs", "Bearer "+apiToken, `{"mode":"full"}`)
	require.Equal(t, 202, code, run)
	var m map[string]float64
	waitFor(t, func() bool { m = scrape(t, idle.base); return m["tmend_river_oldest_available_job_age_seconds"] > 0 })
	parts := run["partitions"].(float64)
	require.Equal(t, parts, m[available], "nobody works the queue")
	require.Zero(t, m[completed])
	require.Zero(t, m[`tmend_river_jobs{kind="tmend_scheduled_scan",state="available"}`], "series exist at zero")
	require.Zero(t, m[`tmend_river_jobs_rescued{kind="tmend_partition",state="available"}`])
	require.Zero(t, m[`tmend_river_jobs_errored{kind="tmend_partition",state="available"}`])
	require.Equal(t, 1.0, m["tmend_running_runs"])
	// What River's rescuer records on a job it takes from a worker that went silent.
	_, err := pool.Exec(t.Context(), `UPDATE river_job SET errors = ARRAY[
  '{"at": "2026-01-01T00:00:00Z", "attempt": 1, "error": "Stuck job rescued by JobRescuer", "trace": ""}'::jsonb]`)
	require.NoError(t, err)
	m = scrape(t, idle.base)
	require.Equal(t, parts, m[`tmend_river_jobs_rescued{kind="tmend_partition",state="available"}`])
	require.Equal(t, parts, m[`tmend_river_jobs_errored{kind="tmend_partition",state="available"}`])

	max := m["tmend_db_pool_max_connections"]
	require.Positive(t, max)
	require.Positive(t, m["tmend_db_pool_acquires_total"])
	require.Positive(t, m["tmend_db_pool_new_connections_total"])
	require.Positive(t, m["tmend_db_pool_acquire_duration_seconds_total"])
	require.LessOrEqual(t, m["tmend_db_pool_connections"], max)
	require.Equal(t, m["tmend_db_pool_connections"],
		m["tmend_db_pool_acquired_connections"]+m["tmend_db_pool_idle_connections"]+m["tmend_db_pool_constructing_connections"])

	worker := serveFrom(t, pool, pool, nil) // works the queue
	waitFor(t, func() bool { m = scrape(t, worker.base); return m["tmend_running_runs"] == 0 })
	waitFor(t, func() bool { m = scrape(t, worker.base); return m[completed] == parts })
	require.Zero(t, m[available])
	require.Zero(t, m["tmend_river_oldest_available_job_age_seconds"])
	require.Equal(t, 1.0, m[`tmend_runs_total{mode="full",status="completed",trigger="api"}`])
}
