package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
		require.Equal(t, exitOK, r.code, r.stderr)
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
	require.Equal(t, exitProblems, r.code, r.stderr)
	var dry struct {
		Status string         `json:"status"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry))
	require.Equal(t, "completed", dry.Status)
	broken := dry.Counts["repaired"]
	require.Positive(t, broken)
	require.Zero(t, b.count(t, "SELECT count(*) FROM session_versions"))

	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^  repaired\s+%d$`, broken), r.stdout)
	require.Equal(t, 2*broken, b.count(t, "SELECT count(*) FROM session_versions"))

	// A session broken later is repaired on demand, and the command says what changed.
	_, err := b.pool.Exec(context.Background(), `UPDATE sessions SET messages = messages || '[{"role":"toolResult","toolCallId":"ghost","toolName":"bash","content":[],"isError":false}]'::jsonb WHERE id = 's-000003'`)
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "repair", "--session", "s-000003", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "drop_orphan_results")
	require.Contains(t, storetest.Content(t, b.pool, "s-000003"), "ghost", "a dry run writes nothing")
	r = runCLI(t, "", b.env, "repair", "--session", "s-000003")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "session s-000003: repaired")
	require.Contains(t, r.stdout, "versions")
	require.NotContains(t, storetest.Content(t, b.pool, "s-000003"), "ghost")

	r = runCLI(t, "", b.env, "repair", "--session", "nope")
	require.Equal(t, exitRuntime, r.code)
	require.Contains(t, r.stderr, `session "nope" not found`)

	r = runCLI(t, "", b.env, "scan", "--table", "missing")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `table "missing" does not exist`)
}

func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tmend.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("table: from_file\nquiet_period: 5m\n"), 0o644))

	// The file's table is used when neither flag nor environment says otherwise...
	r := runCLI(t, "", b.env, "scan", "--config", cfg)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `table "from_file"`)
	// ...the environment beats the file...
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_TABLE": "from_env", "TMEND_CONFIG": cfg}
	r = runCLI(t, "", env, "scan")
	require.Contains(t, r.stderr, `table "from_env"`)
	// ...and the flag beats both.
	r = runCLI(t, "", env, "scan", "--table", "sessions")
	require.Equal(t, exitOK, r.code, r.stderr)

	require.NoError(t, os.WriteFile(cfg, []byte("tabel: typo\n"), 0o644))
	r = runCLI(t, "", b.env, "scan", "--config", cfg)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `unknown option "tabel"`)
}

func TestSchemaVersionIsChecked(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	r := runCLI(t, "", b.env, "migrate", "down", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, exitRuntime, r.code)
	require.Contains(t, r.stderr, "run `tmend migrate up`")

	r = runCLI(t, "", b.env, "migrate", "up")
	require.Equal(t, exitOK, r.code, r.stderr)
	_, err := b.pool.Exec(context.Background(), "UPDATE schema_migrations SET version = version + 1")
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "scan")
	require.Equal(t, exitRuntime, r.code)
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
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}

	b := setupDB(t, 0, "0")
	addr := freeAddr(t)
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_READ_TOKEN": "reader", "TMEND_LOG_LEVEL": "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr syncBuffer
	go func() {
		done <- run(ctx, []string{"serve", "--listen", addr, "--schedule", "0 0 1 1 *"}, strings.NewReader(""), io.Discard, &stderr,
			func(k string) string { return env[k] })
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
		require.Equal(t, exitOK, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	require.Contains(t, stderr.String(), "no API token set")
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// tmendBinary builds the command once, for tests that must kill a real process.
func tmendBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tmend-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "tmend")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

func startTmend(t *testing.T, env map[string]string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(tmendBinary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &out
}

// checkNothingHalfWritten asserts that every session is either untouched (no versions)
// or fully repaired (content equal to its repaired version, with a report).
func checkNothingHalfWritten(t *testing.T, b *dbBundle) (repaired int) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT s.id, s.messages::text,
  (SELECT count(*) FROM session_versions v WHERE v.session_id = s.id),
  (SELECT content FROM session_versions v WHERE v.session_id = s.id AND v.kind = 'repaired' ORDER BY version DESC LIMIT 1),
  (SELECT count(*) FROM repair_reports r WHERE r.session_id = s.id AND r.status = 'repaired')
FROM sessions s`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, content string
		var versions, reports int
		var repairedContent *string
		require.NoError(t, rows.Scan(&id, &content, &versions, &repairedContent, &reports))
		switch versions {
		case 0:
			require.Zero(t, reports, id)
		case 2:
			require.NotNil(t, repairedContent, id)
			require.Equal(t, *repairedContent, content, "%s: stored content is not what tmend wrote", id)
			require.Equal(t, 1, reports, id)
			repaired++
		default:
			t.Fatalf("%s has %d versions: half-written", id, versions)
		}
	}
	require.NoError(t, rows.Err())
	return repaired
}

func TestKilledMidRunLeavesNothingHalfWritten(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 1500, "1")
	cmd, out := startTmend(t, b.env, "scan", "--full", "--workers", "4", "--batch-size", "20")
	waitFor(t, func() bool { return b.count(t, "SELECT count(*) FROM repair_reports") >= 100 })
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	done := checkNothingHalfWritten(t, b)
	require.Positive(t, done)
	require.Less(t, done, 1500, "the kill came too late to test anything: %s", out.String())
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'running'"))

	// The next run completes the work, and records the killed one as abandoned.
	r := runCLI(t, "", b.env, "scan", "--full")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Greater(t, checkNothingHalfWritten(t, b), done)
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'running'"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'failed' AND error LIKE 'abandoned:%'"))
	storetest.AllClean(t, b.pool)
}

func TestSIGTERMDuringARunEndsCleanly(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 1500, "1")
	cmd, out := startTmend(t, b.env, "scan", "--full", "--workers", "4", "--batch-size", "20")
	waitFor(t, func() bool { return b.count(t, "SELECT count(*) FROM repair_reports") >= 100 })
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	require.Error(t, err, "an interrupted scan exits non-zero")
	require.Contains(t, out.String(), "interrupted")
	done := checkNothingHalfWritten(t, b)
	require.Less(t, done, 1500)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'cancelled' AND finished_at IS NOT NULL"))
}

func TestTwoReplicasNeverScanAtOnce(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 300, "0.2")
	// Slow runs (a pause between small pages) that both replicas try to start every second.
	args := []string{"serve", "--schedule", "@every 1s", "--batch-size", "10", "--batch-pause", "100ms", "--log-level", "debug"}
	a, outA := startTmend(t, b.env, append(args, "--listen", freeAddr(t))...)
	c, outC := startTmend(t, b.env, append(args, "--listen", freeAddr(t))...)
	waitFor(t, func() bool {
		return b.count(t, "SELECT count(*) FROM repair_runs WHERE trigger = 'cron' AND status = 'completed'") >= 3
	})
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	require.NoError(t, a.Wait(), outA.String())
	require.NoError(t, c.Wait(), outC.String())
	overlaps := b.count(t, `SELECT count(*) FROM repair_runs x JOIN repair_runs y ON x.id < y.id
WHERE x.trigger = 'cron' AND y.trigger = 'cron'
  AND tstzrange(x.started_at, x.finished_at) && tstzrange(y.started_at, y.finished_at)`)
	require.Zero(t, overlaps, "two scheduled runs overlapped")
	skipped := strings.Count(outA.String()+outC.String(), "another replica is running a scan")
	require.Positive(t, skipped, "the replicas never contended for the lock")
}
