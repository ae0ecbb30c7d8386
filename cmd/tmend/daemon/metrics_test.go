package daemon_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestMetricsSeriesExistFromStart: every series of a fixed label set is exported at
// zero before anything happened; a missing session is a 404 that records no run and
// counts no failure; a repair counts its issue codes and dialect and stamps the last-run
// timestamp of its trigger, mode and dryness.
func TestMetricsSeriesExistFromStart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	metrics := func() string {
		code, body := call(t, "GET", b.base+"/metrics", "", "")
		require.Equal(t, 200, code)
		return body
	}
	m := metrics()
	for _, tr := range model.Triggers() {
		for _, mode := range model.Modes() {
			require.Contains(t, m, fmt.Sprintf(`tmend_runs_total{mode="%s",status="failed",trigger="%s"} 0`, mode, tr))
		}
	}
	for _, ic := range repair.IssueCodes() {
		require.Contains(t, m, fmt.Sprintf(`tmend_issues_total{code="%s"} 0`, ic.Code))
	}
	for _, d := range repair.Dialects() {
		require.Contains(t, m, fmt.Sprintf(`tmend_sessions_by_dialect_total{dialect="%s"} 0`, d))
	}
	require.Contains(t, m, `tmend_sessions_total{status="conflict"} 0`)
	require.Regexp(t, `(?m)^tmend_build_info\{commit="[^"]*",go_version="go[^"]+",version="[^"]+"\} 1$`, m)
	require.Contains(t, m, "tmend_running_runs 0")
	require.NotContains(t, m, "tmend_last_run_timestamp_seconds{", "no run has ended")

	w := "Bearer " + apiToken
	code, _ := call(t, "POST", b.base+"/v1/sessions/nope/repair", w, "")
	require.Equal(t, 404, code)
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_runs"), "a missing session records no run")
	m = metrics()
	require.Contains(t, m, `tmend_runs_total{mode="session",status="failed",trigger="api"} 0`)
	require.NotContains(t, m, "tmend_last_run_timestamp_seconds{")

	code, _ = call(t, "POST", b.base+"/v1/sessions/a/repair?dry_run=true", w, "")
	require.Equal(t, 200, code)
	code, _ = call(t, "POST", b.base+"/v1/sessions/a/repair", w, "")
	require.Equal(t, 200, code)
	m = metrics()
	require.Contains(t, m, `tmend_runs_total{mode="session",status="completed",trigger="api"} 2`)
	require.Contains(t, m, `tmend_issues_total{code="tool_call_without_result"} 2`)
	require.Contains(t, m, fmt.Sprintf(`tmend_sessions_by_dialect_total{dialect="%s"} 2`, repair.OpenAIChat))
	for _, dry := range []string{"true", "false"} {
		require.Regexp(t, fmt.Sprintf(`(?m)^tmend_last_run_timestamp_seconds\{dry_run="%s",mode="session",status="completed",trigger="api"\} \d`, dry), m)
	}
}

// TestRunProgressIsLive: while a scan runs, GET /v1/runs/{id} shows its counts as its
// partitions checkpoint, /metrics has the running-run gauges, and the daemon logs its
// progress with the table's estimated size; after, the gauges go back to zero.
func TestRunProgressIsLive(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	const sessions = 600
	storetest.Generated(t, pool, gen.Config{Dialect: repair.OpenAIChat, Sessions: sessions, Messages: 4, FaultRate: 0.2, Seed: 3})
	_, err := pool.Exec(t.Context(), "ANALYZE sessions")
	require.NoError(t, err)
	var logs storetest.Logs
	b := serveFrom(t, pool, pool, func(c *daemon.Config) {
		// Small, slow pages: the run takes a few seconds, over several checkpoints.
		st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
		require.NoError(t, err)
		c.Scanner = scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 10,
			BatchPause: 60 * time.Millisecond})
		c.Logger = zerolog.New(&logs)
		c.ProgressEvery = 200 * time.Millisecond
	})
	rd, w := "Bearer "+readToken, "Bearer "+apiToken

	code, m := callJSON(t, "POST", b.base+"/v1/runs", w, `{"mode":"full"}`)
	require.Equal(t, 202, code, m)
	runPath := fmt.Sprintf("/v1/runs/%d", int64(m["id"].(float64)))
	var live float64
	waitFor(t, func() bool {
		_, run := callJSON(t, "GET", b.base+runPath, rd, "")
		require.Equal(t, "running", run["status"], "the run ended before its counts were seen moving")
		live = run["counts"].(map[string]any)["scanned"].(float64)
		return live > 0
	})
	require.Less(t, live, float64(sessions))
	_, metrics := call(t, "GET", b.base+"/metrics", "", "")
	require.Contains(t, metrics, "tmend_running_runs 1")
	scanned := regexp.MustCompile(`(?m)^tmend_running_run_sessions_scanned (\d+)$`).FindStringSubmatch(metrics)
	require.NotNil(t, scanned, metrics)

	var run map[string]any
	waitFor(t, func() bool { _, run = callJSON(t, "GET", b.base+runPath, rd, ""); return run["status"] != "running" })
	require.Equal(t, "completed", run["status"])
	require.Equal(t, float64(sessions), run["counts"].(map[string]any)["scanned"])
	waitFor(t, func() bool {
		_, metrics := call(t, "GET", b.base+"/metrics", "", "")
		return strings.Contains(metrics, "tmend_running_runs 0")
	})

	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		if l["message"] == "run progress" {
			lines = append(lines, l)
		}
	}
	require.NotEmpty(t, lines, logs.String())
	id, err := strconv.ParseFloat(strings.TrimPrefix(runPath, "/v1/runs/"), 64)
	require.NoError(t, err)
	for _, l := range lines {
		require.Equal(t, id, l["run_id"])
		require.Equal(t, "info", l["level"])
		require.InDelta(t, sessions, l["num_total_estimate"], sessions/10, "the table's statistics")
		require.Contains(t, l, "num_scanned")
		require.Contains(t, l, "sessions_per_s")
	}
}
