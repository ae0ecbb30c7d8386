package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

// dbBundle is a migrated database loaded with generated sessions.
type dbBundle struct {
	url  string
	env  map[string]string
	pool *pgxpool.Pool
}

func setupDB(t *testing.T, sessions int, faultRate string) *dbBundle {
	t.Helper()
	url := storetest.NewDBURL(t)
	b := &dbBundle{url: url, env: map[string]string{"TMEND_DATABASE_URL": url}}
	if sessions > 0 {
		data := genJSONL(t, "--dialect", "openclaw", "--sessions", fmt.Sprint(sessions), "--messages", "20", "--fault-rate", faultRate)
		r := runCLI(t, data, b.env, "import", "-")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf("imported %d sessions", sessions))
	}
	pool, err := store.Connect(t.Context(), url, store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b.pool = pool
	return b
}

func (b *dbBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestScanAndRepairCommands(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 60, "0.5")

	r := runCLI(t, "", b.env, "scan", "--dry-run", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	requireShape(t, "Run", r.stdout)
	var dry struct {
		ID      int64          `json:"id"`
		Status  string         `json:"status"`
		DryRun  bool           `json:"dry_run"`
		Counts  map[string]int `json:"counts"`
		Summary struct {
			ByStatus map[string]int `json:"by_status"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry))
	require.Equal(t, "completed", dry.Status)
	require.True(t, dry.DryRun)
	require.Positive(t, dry.ID)
	// A dry run repaired nothing: its counts and statuses say would_repair.
	broken := dry.Counts["would_repair"]
	require.Positive(t, broken)
	require.NotContains(t, dry.Counts, "repaired")
	require.Equal(t, broken, dry.Summary.ByStatus["would_repair"])
	// The same run, as 'report --run' and the API show it: one shape.
	rr := runCLI(t, "", b.env, "report", "--run", fmt.Sprint(dry.ID), "--json")
	require.Equal(t, ExitOK, rr.code, rr.stderr)
	require.JSONEq(t, r.stdout, rr.stdout)
	require.Zero(t, b.count(t, "SELECT count(*) FROM session_versions"))

	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^  repaired\s+%d$`, broken), r.stdout)
	require.Equal(t, 2*broken, b.count(t, "SELECT count(*) FROM session_versions"))

	// A session broken later is repaired on demand, and the command says what changed.
	_, err := b.pool.Exec(context.Background(), `UPDATE sessions SET messages = messages || '[{"role":"toolResult","toolCallId":"ghost","toolName":"bash","content":[],"isError":false}]'::jsonb WHERE id = 's-000003'`)
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "repair", "--session", "s-000003", "--dry-run")
	require.Equal(t, ExitProblems, r.code, "a dry run that finds work exits 3, as scan's does: %s", r.stderr)
	require.Contains(t, r.stdout, "drop_orphan_results")
	require.Contains(t, storetest.Content(t, b.pool, "s-000003"), "ghost", "a dry run writes nothing")
	r = runCLI(t, "", b.env, "repair", "--session", "s-000003", "--dry-run", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	requireShape(t, "Run", r.stdout)
	var one struct {
		Outcomes []map[string]any `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &one))
	require.Len(t, one.Outcomes, 1)
	require.Equal(t, "would_repair", one.Outcomes[0]["status"])
	require.Equal(t, "s-000003", one.Outcomes[0]["session_id"])
	require.NotContains(t, one.Outcomes[0], "report", "the engine's report is flattened, its status not shown")
	r = runCLI(t, "", b.env, "repair", "--session", "s-000003")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "session s-000003: repaired")
	require.Contains(t, r.stdout, "versions")
	require.NotContains(t, storetest.Content(t, b.pool, "s-000003"), "ghost")

	r = runCLI(t, "", b.env, "repair", "--session", "nope")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, `session "nope" not found`)

	// A run that ended has nothing to cancel; the command says so, as the API's 409 does.
	r = runCLI(t, "", b.env, "scan", "--cancel", fmt.Sprint(dry.ID))
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, fmt.Sprintf("run %d is completed, not running: nothing to cancel", dry.ID))
	require.Empty(t, r.stdout)

	// A session of another table is not found in this one's history: the message says
	// where it looked and which options choose the table.
	for _, args := range [][]string{{"report", "--session", "nope"}, {"report", "--session", "nope", "--diff"}} {
		r = runCLI(t, "", b.env, args...)
		require.Equal(t, ExitRuntime, r.code, "%v", args)
		require.Contains(t, r.stderr, `tmend has no record of session "nope": not found in tmend.sessions(id,messages) (history is kept per table`, "%v", args)
	}

	r = runCLI(t, "", b.env, "scan", "--table", "missing")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `table "missing" does not exist in tmend's schema or in public (give schema.table`)
	require.NotContains(t, r.stderr, "--help", "a table missing from the database is no question of the command line's syntax")
	r = runCLI(t, "", b.env, "scan", "--table", "agents.checkpoints")
	require.Equal(t, ExitUsage, r.code)
	require.Equal(t, "tmend: session source: table \"agents.checkpoints\" does not exist\n", r.stderr, "a schema given is the only one looked in")

	r = runCLI(t, genJSONL(t, "--sessions", "3", "--seed", "9"), b.env, "import", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"imported":3}`, r.stdout)
}

func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tmend.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("table: from_file\nquiet_period: 5m\n"), 0o644))

	// The file's table is used when neither flag nor environment says otherwise...
	r := runCLI(t, "", b.env, "scan", "--config", cfg)
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `table "from_file"`)
	// ...the environment beats the file...
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_TABLE": "from_env", "TMEND_CONFIG": cfg}
	r = runCLI(t, "", env, "scan")
	require.Contains(t, r.stderr, `table "from_env"`)
	// ...and the flag beats both.
	r = runCLI(t, "", env, "scan", "--table", "sessions")
	require.Equal(t, ExitOK, r.code, r.stderr)

	require.NoError(t, os.WriteFile(cfg, []byte("tabel: typo\n"), 0o644))
	r = runCLI(t, "", b.env, "scan", "--config", cfg)
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `unknown option "tabel"`)
}

func TestSchemaVersionIsChecked(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	r := runCLI(t, "", b.env, "migrate", "down", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "run `tmend migrate up`")

	r = runCLI(t, "", b.env, "migrate", "up")
	require.Equal(t, ExitOK, r.code, r.stderr)
	_, err := b.pool.Exec(context.Background(), "UPDATE schema_migrations SET version = version + 1")
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "newer than this tmend knows")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port must be free for the server to take
	return addr
}

// TestServeCommand: serve refuses bad settings before it touches the network or the
// database, and wires the tokens from the environment into a daemon that stops on a
// signal (the context) with exit 0.
func TestServeCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--schedule", "every day"},
		{"--time-zone", "Mars/Olympus"},
		{"--prune-schedule", "0 4 * * *", "--prune-older-than", "soon"},
		{"--prune-schedule", "sometimes"},
		{"--shutdown-timeout", "1 minute"},
	} {
		r := runCLI(t, "", map[string]string{"TMEND_DATABASE_URL": "postgres://127.0.0.1:1/x"}, append([]string{"serve"}, args...)...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
	}

	b := setupDB(t, 0, "0")
	addr := freeAddr(t)
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_READ_TOKEN": "reader", "TMEND_LOG_LEVEL": "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr storetest.Logs
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", addr, "--schedule", "0 0 1 1 *"},
			Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }})
	}()
	base := "http://" + addr
	waitFor(t, func() bool { resp, err := http.Get(base + "/healthz"); return err == nil && resp.Body.Close() == nil })
	get := func(token string) int {
		req, err := http.NewRequest("GET", base+"/v1/runs", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("reader"))
	require.Equal(t, http.StatusUnauthorized, get("nope"))
	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	require.Contains(t, stderr.String(), "no API token set")
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

// TestWorkerLogsNoRepairOptions: a worker repairs with each scan's own options, so its
// start does not log a quiet period or target of its own (it would log 0s and none).
func TestWorkerLogsNoRepairOptions(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	env := map[string]string{"TMEND_DATABASE_URL": b.url}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr storetest.Logs
	go func() {
		done <- Run(ctx, []string{"worker"},
			Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }})
	}()
	waitFor(t, func() bool { return strings.Contains(stderr.String(), `"message":"working"`) })
	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	require.Contains(t, stderr.String(), `"message":"configured"`)
	require.NotContains(t, stderr.String(), "quiet_period")
}
