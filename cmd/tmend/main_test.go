package main

// Tests of the tmend binary: what needs a real process (a kill, a signal, replicas) and
// the version stamped at build time. The commands themselves are tested in package cli,
// in-process, and the daemon's API in package daemon.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/cmd/tmend/cli"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pool health checker outlives single tests.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// What deploy_test.go uses of the CLI, in its own words: runCLI and its result, exitOK,
// envName, and newRootCmd over an env.

type result struct {
	code           int
	stdout, stderr string
}

const exitOK = cli.ExitOK

// runCLI runs tmend in-process with the given environment (nothing else leaks in).
func runCLI(t *testing.T, stdin string, envs map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), version, args, cli.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return envs[k] }})
	return result{code, out.String(), errb.String()}
}

var envName = cli.EnvName

type env struct{ getenv func(string) string }

func newRootCmd(e *env) *cobra.Command {
	return cli.NewRootCommand(version, &cli.Env{Getenv: e.getenv})
}

// stampedVersion is the version tmendBinary stamps.
const stampedVersion = "v0.0.0-stamped"

// makefileStamp returns the Makefile's -X flag without its value: "-X main.version".
func makefileStamp() (string, error) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`-X (\S+)=\$\(VERSION\)`).FindSubmatch(b)
	if m == nil {
		return "", errors.New("the Makefile's LDFLAGS stamp no version (-X ...=$(VERSION))")
	}
	return "-X " + string(m[1]), nil
}

// The Makefile's -X flag reaches the version the binary prints.
func TestVersionIsStamped(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(tmendBinary(t), "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "tmend "+stampedVersion+"\n", string(out))
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

// freeAddr returns a local address that was free a moment ago, for a process to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port must be free for the server to take
	return addr
}

// dbBundle is a migrated database loaded with generated sessions.
type dbBundle struct {
	env  map[string]string
	pool *pgxpool.Pool
}

func setupDB(t *testing.T, sessions int, faultRate float64) *dbBundle {
	t.Helper()
	url := storetest.NewDBURL(t)
	pool, err := store.Connect(t.Context(), url, store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	storetest.Generated(t, pool, gen.Config{Dialect: repair.OpenClaw, Sessions: sessions, Messages: 20, FaultRate: faultRate, Seed: 1})
	return &dbBundle{env: map[string]string{"TMEND_DATABASE_URL": url}, pool: pool}
}

func (b *dbBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// tmendBinary builds the command once, for tests that need a real process, with the
// version stamped as the Makefile does.
func tmendBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tmend-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "tmend")
		stamp, err := makefileStamp()
		if err != nil {
			binaryErr = err
			return
		}
		out, err := exec.Command("go", "build", "-ldflags", stamp+"="+stampedVersion, "-o", binaryPath, ".").CombinedOutput()
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
	b := setupDB(t, 1500, 1)
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
	b := setupDB(t, 1500, 1)
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
	b := setupDB(t, 300, 0.2)
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
