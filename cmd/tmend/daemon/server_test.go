package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pool health checker outlives single tests.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

const (
	apiToken  = "write-secret"
	readToken = "read-secret"
)

// brokenSession is an OpenAI chat transcript whose call never got its result.
const brokenSession = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"hello?"}]`

type testBundle struct {
	pool    *pgxpool.Pool // the test database, for checks
	scanner *scanner.Scanner
	srv     *daemon.Server
	base    string // where httptest serves the API
}

// setup serves a Server over httptest for a fresh test database: both tokens set, the
// session "a" (broken, changed a day ago) stored. edit may change the config first.
func setup(t *testing.T, edit func(*daemon.Config)) *testBundle {
	t.Helper()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-24 * time.Hour)})
	return serveFrom(t, pool, pool, edit)
}

// testConfig is a daemon's configuration on pool: both tokens set, one partition at a
// time, and its scanner.
func testConfig(t *testing.T, pool *pgxpool.Pool) (daemon.Config, *scanner.Scanner) {
	t.Helper()
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name()})
	return daemon.Config{Scanner: sc, Store: st, Queue: queue.Config{Schema: store.DefaultSchema, Concurrency: 1},
		Schema: store.DefaultSchema, Logger: zerolog.Nop(), Metrics: daemon.NewMetrics(),
		APIToken: apiToken, ReadToken: readToken, ShutdownTimeout: 30 * time.Second}, sc
}

// serveFrom is setup on a given pool (the server's) and test database (pool).
func serveFrom(t *testing.T, pool, serverPool *pgxpool.Pool, edit func(*daemon.Config)) *testBundle {
	t.Helper()
	cfg, sc := testConfig(t, serverPool)
	if edit != nil {
		edit(&cfg)
	}
	srv, err := daemon.New(cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	mux := http.NewServeMux()
	srv.Install(mux)
	ts := httptest.NewServer(srv.Instrument(mux))
	t.Cleanup(func() {
		ts.Close()
		srv.Shutdown(context.Background())
	})
	return &testBundle{pool: pool, scanner: sc, srv: srv, base: ts.URL}
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// repair repairs one session the way 'tmend repair' does.
func (b *testBundle) repair(t *testing.T, id string) {
	t.Helper()
	res, err := b.scanner.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeSession, SessionID: id})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Repaired)
}

// call sends a request with the given Authorization header value (none when empty) and
// returns the status and body, which must be as openapi.yaml documents them.
func call(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	checkResponse(t, req, resp, b)
	return resp.StatusCode, string(b)
}

// callJSON is call for a JSON object answer.
func callJSON(t *testing.T, method, url, auth, body string) (int, map[string]any) {
	t.Helper()
	code, b := call(t, method, url, auth, body)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(b), &m), b)
	return code, m
}

// waitFor polls cond every 20ms for up to 30s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not met in 30s")
		}
	}
}

// TestServeRunsAndStops serves a real listener: a run started through the API
// completes and is counted in /metrics, and cancelling the context stops Serve cleanly.
func TestServeRunsAndStops(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	storetest.Generated(t, pool, gen.Config{Dialect: repair.OpenClaw, Sessions: 40, Messages: 20, FaultRate: 0.5, Seed: 1})
	cfg, _ := testConfig(t, pool)
	srv, err := daemon.New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	srv.Install(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, mux) }()
	base := "http://" + ln.Addr().String()
	w := "Bearer " + apiToken

	code, _ := call(t, "GET", base+"/readyz", "", "")
	require.Equal(t, 200, code)
	code, _ = call(t, "POST", base+"/v1/runs", "", "")
	require.Equal(t, 401, code)
	code, _ = call(t, "POST", base+"/v1/runs", "Bearer wrong", "")
	require.Equal(t, 401, code)
	code, m := callJSON(t, "POST", base+"/v1/runs", w, `{"mode":"sideways"}`)
	require.Equal(t, 400, code, m)

	code, m = callJSON(t, "POST", base+"/v1/runs", w, `{"mode":"full"}`)
	require.Equal(t, 202, code, m)
	require.Equal(t, "running", m["status"], "the run object, as GET answers it")
	runPath := fmt.Sprintf("/v1/runs/%.0f", m["id"].(float64))
	var run map[string]any
	waitFor(t, func() bool { _, run = callJSON(t, "GET", base+runPath, w, ""); return run["status"] != "running" })
	require.Equal(t, "completed", run["status"])
	repaired := run["counts"].(map[string]any)["repaired"].(float64)
	require.Positive(t, repaired)

	code, m = callJSON(t, "POST", base+"/v1/sessions/s-000001/repair?dry_run=true", w, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, "completed", m["status"])
	require.NotContains(t, m["counts"], "repaired", "a dry run repaired nothing")
	require.Contains(t, m["counts"], "would_repair")
	code, _ = call(t, "POST", base+"/v1/sessions/nope/repair", w, "")
	require.Equal(t, 404, code)
	code, _ = call(t, "GET", base+"/v1/runs/99999", w, "")
	require.Equal(t, 404, code)

	code, metrics := call(t, "GET", base+"/metrics", "", "")
	require.Equal(t, 200, code)
	require.Contains(t, metrics, `tmend_runs_total{mode="full",status="completed",trigger="api"} 1`)
	require.Contains(t, metrics, fmt.Sprintf(`tmend_sessions_total{status="repaired"} %d`, int(repaired)))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
	_, err = http.Get(base + "/healthz")
	require.Error(t, err, "a stopped server still answers")
}

// A daemon whose HTTP server fails stops and says so, so that `tmend serve` exits
// non-zero and its supervisor restarts it.
func TestServeFailsWithItsHTTPServer(t *testing.T) {
	t.Parallel()
	cfg, _ := testConfig(t, storetest.NewDB(t))
	srv, err := daemon.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close()) // accepting on it fails at once
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context(), ln, http.NewServeMux()) }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "http server")
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop after its HTTP server failed")
	}
}

func TestAPIReadsNeedAToken(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.repair(t, "a")

	gets := []string{"/v1/runs", "/v1/runs/1", "/v1/reports", "/v1/sessions/a/reports", "/v1/sessions/a/versions/1",
		"/v1/sessions/a/versions", "/v1/sessions/a/diff", "/v1/sessions/a/diff?from=2&to=1"}
	for _, path := range gets {
		for _, auth := range []string{"", "Bearer nope", "Basic " + readToken, readToken, "Bearer"} {
			code, body := call(t, "GET", b.base+path, auth, "")
			require.Equal(t, http.StatusUnauthorized, code, "%s with %q: %s", path, auth, body)
			require.NotContains(t, body, "tool_calls")
		}
		for _, auth := range []string{"Bearer " + readToken, "Bearer " + apiToken, "bearer " + readToken, "BEARER  " + apiToken} {
			code, body := call(t, "GET", b.base+path, auth, "")
			require.Equal(t, http.StatusOK, code, "%s with %q: %s", path, auth, body)
		}
	}
	code, body := call(t, "GET", b.base+"/v1/sessions/a/versions/1", "Bearer "+readToken, "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "tool_calls")

	// The read token does not write; the API token's scheme is case-insensitive too.
	code, _ = call(t, "POST", b.base+"/v1/sessions/a/repair?dry_run=true", "Bearer "+readToken, "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = call(t, "POST", b.base+"/v1/sessions/a/repair?dry_run=true", "bearer "+apiToken, "")
	require.Equal(t, http.StatusOK, code, body)

	// Probes and metrics stay open.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, _ := call(t, "GET", b.base+path, "", "")
		require.Equal(t, http.StatusOK, code, path)
	}

	// Without any token set, reads are refused, not open.
	none := serveFrom(t, b.pool, b.pool, func(c *daemon.Config) { c.APIToken, c.ReadToken = "", "" })
	code, _ = call(t, "GET", none.base+"/v1/sessions/a/versions/1", "", "")
	require.Equal(t, http.StatusForbidden, code)
	// The read token alone enables reads.
	readOnly := serveFrom(t, b.pool, b.pool, func(c *daemon.Config) { c.APIToken = "" })
	code, _ = call(t, "GET", readOnly.base+"/v1/sessions/a/versions/1", "Bearer "+readToken, "")
	require.Equal(t, http.StatusOK, code)
	code, _ = call(t, "POST", readOnly.base+"/v1/sessions/a/rollback", "Bearer "+readToken, "{}")
	require.Equal(t, http.StatusForbidden, code)
}

// Handlers installed beside the API (the console) can ask what a credential allows.
func TestAccess(t *testing.T) {
	t.Parallel()
	_, err := daemon.New(daemon.Config{Logger: zerolog.Nop(), APIToken: apiToken})
	require.ErrorContains(t, err, "Metrics is required", "a daemon without its metrics would panic at the first run")
	srv, err := daemon.New(daemon.Config{Logger: zerolog.Nop(), Metrics: daemon.NewMetrics(), APIToken: apiToken, ReadToken: readToken})
	require.NoError(t, err)
	for token, want := range map[string]daemon.Access{apiToken: daemon.WriteAccess, readToken: daemon.ReadAccess,
		"": daemon.NoAccess, "nope": daemon.NoAccess, apiToken + " ": daemon.NoAccess} {
		require.Equal(t, want, srv.TokenAccess(token), "%q", token)
	}
	req := httptest.NewRequest("GET", "/console", nil)
	req.Header.Set("Authorization", "bearer "+readToken)
	require.Equal(t, daemon.ReadAccess, srv.RequestAccess(req))
	none, err := daemon.New(daemon.Config{Logger: zerolog.Nop(), Metrics: daemon.NewMetrics()})
	require.NoError(t, err)
	require.Equal(t, daemon.NoAccess, none.TokenAccess(""), "no token set allows nothing")

	// RequireRead and RequireWrite guard any handler the same way as the API's.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", srv.RequireRead(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "page") }))
	mux.HandleFunc("POST /console", srv.RequireWrite(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") }))
	for _, tt := range []struct {
		method, token string
		code          int
	}{{"GET", readToken, 200}, {"GET", apiToken, 200}, {"GET", "", 401}, {"POST", readToken, 401}, {"POST", apiToken, 200}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tt.method, "/console", nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		mux.ServeHTTP(rec, req)
		require.Equal(t, tt.code, rec.Code, "%s with %q", tt.method, tt.token)
	}
	srv.Shutdown(context.Background())
	rec := httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/console", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a stopped server takes no writes")
}

func TestAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w, rd := "Bearer "+apiToken, "Bearer "+readToken
	for _, tt := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/sessions/%00/reports", rd, ""},
		{"GET", "/v1/sessions/%FF/reports", rd, ""},
		{"GET", "/v1/sessions/a%00b/versions/1", rd, ""},
		{"GET", "/v1/sessions/%C3/versions/1", rd, ""},
		{"GET", "/v1/reports?status=%00", rd, ""},
		{"GET", "/v1/reports?dialect=%FF", rd, ""},
		{"GET", "/v1/reports?status=repaird", rd, ""},
		{"GET", "/v1/reports?status=completed", rd, ""},
		{"GET", "/v1/reports?limit=zero", rd, ""},
		{"GET", "/v1/sessions/a/reports?status=repaird", rd, ""},
		{"GET", "/v1/runs?status=repaird", rd, ""},
		{"GET", "/v1/runs?status=repaired", rd, ""},
		{"POST", "/v1/sessions/%00/repair", w, ""},
		{"POST", "/v1/sessions/%FF/repair", w, ""},
		{"POST", "/v1/sessions/%00/rollback", w, "{}"},
		{"POST", "/v1/runs", w, "null"},
		{"POST", "/v1/runs", w, "[]"},
		{"POST", "/v1/runs", w, `"full"`},
		{"POST", "/v1/runs", w, "42"},
		{"POST", "/v1/runs", w, `{"mode":"full"} {"mode":"full"}`},
		{"POST", "/v1/runs", w, `{"mode":"full"} null`},
		{"POST", "/v1/sessions/a/rollback", w, "null"},
		{"GET", "/v1/sessions/%00/versions", rd, ""},
		{"GET", "/v1/sessions/a/diff?from=1", rd, ""},
		{"GET", "/v1/sessions/a/diff?from=x&to=2", rd, ""},
		{"GET", "/v1/sessions/a/diff?from=0&to=2", rd, ""},
		{"POST", "/v1/runs/x/rollback", w, "{}"},
		{"POST", "/v1/runs/1/rollback", w, `{"dry_run":"yes"}`},
		{"POST", "/v1/runs/1/rollback", w, `{"to_version":1}`},
	} {
		code, body := call(t, tt.method, b.base+tt.path, tt.auth, tt.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %s %q: %s", tt.method, tt.path, tt.body, body)
		require.NotContains(t, body, "SQLSTATE")
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_runs"), "no bad request started a run")
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_reports"), "nor repaired or rolled back anything")
}

func TestAuditAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.repair(t, "a")
	rd, w := "Bearer "+readToken, "Bearer "+apiToken

	code, m := callJSON(t, "GET", b.base+"/v1/runs?limit=1", rd, "")
	require.Equal(t, 200, code)
	require.Len(t, m["items"], 1)
	code, m = callJSON(t, "GET", b.base+"/v1/sessions/a/reports", rd, "")
	require.Equal(t, 200, code)
	require.Equal(t, "repaired", m["items"].([]any)[0].(map[string]any)["status"])
	code, m = callJSON(t, "GET", b.base+"/v1/reports?status=repaired&issue=tool_call_without_result", rd, "")
	require.Equal(t, 200, code, m)
	require.Len(t, m["items"], 1)
	code, m = callJSON(t, "GET", b.base+"/v1/sessions/a/versions/1", rd, "")
	require.Equal(t, 200, code)
	require.Equal(t, "original", m["kind"])
	require.IsType(t, []any{}, m["content"], "the content is the transcript's JSON, not a string holding it")
	content, err := json.Marshal(m["content"])
	require.NoError(t, err)
	require.JSONEq(t, brokenSession, string(content))
	code, _ = call(t, "GET", b.base+"/v1/sessions/a/versions/9", rd, "")
	require.Equal(t, 404, code)

	code, _ = call(t, "POST", b.base+"/v1/sessions/a/rollback", "Bearer nope", "{}")
	require.Equal(t, 401, code)
	code, m = callJSON(t, "POST", b.base+"/v1/sessions/a/rollback", w, `{"dry_run":true}`)
	require.Equal(t, 200, code)
	require.Equal(t, 1.0, m["would_restore"])
	require.NotContains(t, m, "restored", "a dry run restored nothing")
	require.Equal(t, "would_restore", m["sessions"].([]any)[0].(map[string]any)["status"])
	require.Contains(t, storetest.Content(t, b.pool, "a"), "[tmend]")
	code, m = callJSON(t, "POST", b.base+"/v1/sessions/a/rollback", w, "{}")
	require.Equal(t, 200, code)
	require.Equal(t, 1.0, m["restored"])
	require.NotContains(t, storetest.Content(t, b.pool, "a"), "[tmend]")
	code, _ = call(t, "POST", b.base+"/v1/sessions/ghost/rollback", w, "{}")
	require.Equal(t, 404, code)
}

// TestVersionsDiffAndRunRollbackAPI: the versions of a session, the diff the console
// shows (what a repair did, by default), and a run's rollback with a dry run first.
func TestVersionsDiffAndRunRollbackAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	original := storetest.Content(t, b.pool, "a")
	res, err := b.scanner.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Repaired)
	repaired := storetest.Content(t, b.pool, "a")
	rd, w := "Bearer "+readToken, "Bearer "+apiToken

	code, m := callJSON(t, "GET", b.base+"/v1/sessions/a/versions", rd, "")
	require.Equal(t, 200, code)
	items := m["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, "repaired", items[1].(map[string]any)["kind"])
	require.NotContains(t, items[0], "content", "a listing has no content")
	code, _ = call(t, "GET", b.base+"/v1/sessions/ghost/versions", rd, "")
	require.Equal(t, 404, code)

	var d report.TranscriptDiff
	code, body := call(t, "GET", b.base+"/v1/sessions/a/diff", rd, "")
	require.Equal(t, 200, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, "a", d.SessionID)
	require.Equal(t, []int{1, 2}, []int{d.From.Version, d.To.Version})
	require.Equal(t, map[report.Change]int{report.ChangeSynthesized: 1}, d.Counts)
	require.Len(t, d.Actions, 1)
	require.NotZero(t, d.ReportID)
	code, body = call(t, "GET", b.base+"/v1/sessions/a/diff?from=2&to=1", rd, "")
	require.Equal(t, 200, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Empty(t, d.Actions, "no report wrote version 1 from 2")
	require.Contains(t, body, `"change":"removed"`)
	for path, want := range map[string]int{"/v1/sessions/a/diff?from=1&to=9": 404, "/v1/sessions/ghost/diff": 404} {
		code, body := call(t, "GET", b.base+path, rd, "")
		require.Equal(t, want, code, "%s: %s", path, body)
	}

	run := fmt.Sprintf("/v1/runs/%d/rollback", res.RunID)
	code, _ = call(t, "POST", b.base+run, rd, `{"dry_run":true}`)
	require.Equal(t, 401, code, "the read token does not roll back")
	code, m = callJSON(t, "POST", b.base+run, w, `{"dry_run":true}`)
	require.Equal(t, 200, code, m)
	require.Equal(t, 1.0, m["would_restore"])
	require.NotContains(t, m, "restored", "a dry run restored nothing")
	require.Equal(t, "would_restore", m["sessions"].([]any)[0].(map[string]any)["status"])
	require.Equal(t, repaired, storetest.Content(t, b.pool, "a"), "a dry run restores nothing")
	code, m = callJSON(t, "POST", b.base+run, w, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, 1.0, m["restored"])
	require.Equal(t, original, storetest.Content(t, b.pool, "a"))
	code, _ = call(t, "POST", b.base+"/v1/runs/999999/rollback", w, "{}")
	require.Equal(t, 404, code)
}

// TestConsoleIsInstalled: the daemon serves the audit console at /, behind the same
// tokens, and stops its rollbacks with its other writes.
func TestConsoleIsInstalled(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-24 * time.Hour)})
	b := serveFrom(t, pool, pool, nil)
	b.repair(t, "a")

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(b.base + "/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login?next=%2F", resp.Header.Get("Location"))
	code, body := call(t, "GET", b.base+"/session?id=a", "Bearer "+readToken, "")
	require.Equal(t, 200, code)
	require.Contains(t, body, "synthesized")
	code, _ = call(t, "GET", b.base+"/healthz", "", "")
	require.Equal(t, 200, code, "the console leaves the probes alone")

	// A stopping daemon takes no rollbacks from the console either.
	stopping := serveFrom(t, pool, pool, nil)
	req, err := http.NewRequest("POST", stopping.base+"/session/rollback", strings.NewReader("id=a"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+apiToken)
	stopping.srv.Shutdown(t.Context())
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, storetest.Content(t, pool, "a"), "[tmend]", "not rolled back")
}

func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	srv := daemon.NewHTTPServer(http.NotFoundHandler())
	require.Positive(t, srv.ReadHeaderTimeout)
	require.Positive(t, srv.ReadTimeout)
	require.Positive(t, srv.IdleTimeout)
	require.LessOrEqual(t, srv.IdleTimeout, 2*time.Minute)
}

// tcpProxy forwards connections to a database until cut, which drops them all and
// refuses new ones: a database outage on demand.
type tcpProxy struct {
	ln     net.Listener
	dial   func() (net.Conn, error)
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	copies sync.WaitGroup
}

func newTCPProxy(t *testing.T, dial func() (net.Conn, error)) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, dial: dial}
	p.copies.Add(1)
	go func() {
		defer p.copies.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); p.cut(); p.copies.Wait() })
	return p
}

func (p *tcpProxy) forward(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = c.Close()
		return
	}
	up, err := p.dial()
	if err != nil {
		_ = c.Close()
		return
	}
	p.conns = append(p.conns, c, up)
	for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
		p.copies.Add(1)
		go func() {
			defer p.copies.Done()
			_, _ = io.Copy(pair[0], pair[1])
			_ = pair[0].Close()
			_ = pair[1].Close()
		}()
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDBURL(t)
	pool, err := store.Connect(t.Context(), dbURL, store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(brokenSession), UpdatedAt: time.Now().Add(-24 * time.Hour)})

	cfg, err := pgconn.ParseConfig(dbURL)
	require.NoError(t, err)
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", cfg.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.Port))
	}
	proxy := newTCPProxy(t, func() (net.Conn, error) { return net.Dial(network, addr) })
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery, u.Host = q.Encode(), proxy.ln.Addr().String()
	proxied, err := store.Connect(t.Context(), u.String(), store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(proxied.Close)
	b := serveFrom(t, pool, proxied, nil)
	b.repair(t, "a")

	rd, w := "Bearer "+readToken, "Bearer "+apiToken
	code, body := call(t, "GET", b.base+"/v1/sessions/a/reports", rd, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _ = call(t, "GET", b.base+"/readyz", "", "")
	require.Equal(t, http.StatusOK, code)

	proxy.cut()
	for _, tt := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/runs", rd, ""},
		{"GET", "/v1/runs/1", rd, ""},
		{"GET", "/v1/reports", rd, ""},
		{"GET", "/v1/sessions/a/reports", rd, ""},
		{"GET", "/v1/sessions/a/versions/1", rd, ""},
		{"POST", "/v1/runs", w, `{"mode":"full"}`},
		{"POST", "/v1/sessions/a/rollback", w, "{}"},
	} {
		code, body := call(t, tt.method, b.base+tt.path, tt.auth, tt.body)
		require.Equal(t, http.StatusServiceUnavailable, code, "%s %s: %s", tt.method, tt.path, body)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &m))
		require.Equal(t, "database unavailable; try again later", m["error"])
	}
	code, body = call(t, "GET", b.base+"/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status":"not ready","reason":"database unavailable"}`, body)
	require.NotContains(t, body, cfg.User)
	require.NotContains(t, body, "127.0.0.1")
	code, _ = call(t, "GET", b.base+"/healthz", "", "")
	require.Equal(t, http.StatusOK, code, "liveness does not depend on the database")
}

// TestUnroutedAnswersJSONError: a method a route does not take answers 405 with Allow,
// and a path no route serves answers 404, both as the JSON Error of every other error.
func TestUnroutedAnswersJSONError(t *testing.T) {
	t.Parallel()
	srv, err := daemon.New(daemon.Config{Metrics: daemon.NewMetrics()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	srv.Install(mux)
	for _, tt := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"PUT", "/v1/runs", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		{"PATCH", "/v1/runs/7", http.StatusMethodNotAllowed, "GET, HEAD, DELETE"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/nothing", http.StatusNotFound, ""},
		{"DELETE", "/nothing/here", http.StatusNotFound, ""},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		require.Equal(t, tt.code, rec.Code, "%s %s", tt.method, tt.path)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "%s %s", tt.method, tt.path)
		require.Equal(t, tt.allow, rec.Header().Get("Allow"), "%s %s", tt.method, tt.path)
		var e struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}
		dec := json.NewDecoder(rec.Body)
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&e), "%s %s", tt.method, tt.path)
		require.Equal(t, tt.code, e.Code)
		require.NotEmpty(t, e.Error)
	}
}

// TestServeLogsScheduleAndNextTick: serve logs its scan schedule and the next tick at
// start, its prune schedule, and the next tick again after each tick.
func TestServeLogsScheduleAndNextTick(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	cfg, _ := testConfig(t, pool)
	var logs storetest.Logs
	cfg.Logger = zerolog.New(&logs)
	scan, err := daemon.ParseSpec("@every 1s", nil)
	require.NoError(t, err)
	cfg.Queue.Schedule = scan
	cfg.Schedule = daemon.Schedule{Scan: "@every 1s", Prune: "0 4 * * *", PruneOlderThan: time.Hour}
	srv, err := daemon.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Serve(ctx, ln, http.NewServeMux()) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	line := func(msg string) map[string]any {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == msg {
				return m
			}
		}
		return nil
	}
	nextTick := func(m map[string]any) time.Time {
		ts, err := time.Parse(time.RFC3339, m["next_tick"].(string))
		require.NoError(t, err, m)
		return ts
	}
	var m map[string]any
	waitFor(t, func() bool { m = line("scan schedule"); return m != nil })
	require.Equal(t, "@every 1s", m["schedule"])
	require.Equal(t, "UTC", m["time_zone"])
	require.WithinDuration(t, start.Add(time.Second), nextTick(m), 2*time.Second)
	m = line("prune schedule")
	require.NotNil(t, m, logs.String())
	require.Equal(t, "0 4 * * *", m["prune_schedule"])
	require.Contains(t, m, "next_prune")

	waitFor(t, func() bool { m = line("scheduled scan tick; the leader enqueues its scan"); return m != nil })
	require.True(t, nextTick(m).After(start), m)
}

// TestRouteHelpIsWhatIsServed: every line of RouteHelp (serve --help) names a pattern
// the installed mux routes to, and every API route is there.
func TestRouteHelpIsWhatIsServed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	help := daemon.RouteHelp()
	mux := http.NewServeMux()
	b.srv.Install(mux)
	listed := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !slices.Contains([]string{"GET", "POST", "DELETE"}, f[0]) {
			continue // a wrapped line of help
		}
		path := strings.NewReplacer("{id}", "7", "{n}", "1").Replace(f[1])
		_, pattern := mux.Handler(httptest.NewRequest(f[0], path, nil))
		require.Equal(t, f[0]+" "+f[1], strings.TrimSuffix(pattern, "{$}"), "help lists %s %s", f[0], f[1])
		listed[f[0]+" "+f[1]] = true
	}
	for _, r := range b.srv.Routes() {
		require.True(t, listed[r], "%s is not in the help", r)
	}
	require.Len(t, listed, len(b.srv.Routes())+11, "the API's routes and the console's 11")
}

// TestConsoleShowsTheSchedule: the console's runs page says when the daemon's next
// scheduled scan is, from the schedule serve was given.
func TestConsoleShowsTheSchedule(t *testing.T) {
	t.Parallel()
	const spec = "0 3 1 1 *" // once a year: no tick while the test runs
	scan, err := daemon.ParseSpec(spec, nil)
	require.NoError(t, err)
	b := setup(t, func(c *daemon.Config) {
		c.Queue.Schedule = scan
		c.Schedule = daemon.Schedule{Scan: spec}
	})
	req, err := http.NewRequest("GET", b.base+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "<code>"+spec+"</code>")
	require.Contains(t, string(body), scan.Next(time.Now()).UTC().Format("2006-01-02 15:04:05")+" UTC")
}
