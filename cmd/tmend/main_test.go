package main

// Tests of the tmend binary: what needs a real process (a kill, a signal, replicas) and
// the version stamped at build time. The commands themselves are tested in package cli,
// in-process, and the daemon's API in package daemon.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
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

// stampedVersion is the version tmendBinary stamps.
const stampedVersion = "v0.0.0-stamped"

// makefileStamp returns the Makefile's -X flag for the version without its value:
// "-X github.com/tmend/tmend/cmd/tmend/buildinfo.version".
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

// The Makefile's -X flag reaches the version the binary prints, in 'tmend version
// --json' and 'tmend --version' alike, beside the schema versions it migrates to.
func TestVersionIsStamped(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(tmendBinary(t), "version", "--json").Output()
	require.NoError(t, err, "%s", out)
	var v struct {
		Version            string `json:"version"`
		GoVersion          string `json:"go_version"`
		SchemaVersion      uint   `json:"schema_version"`
		RiverSchemaVersion int    `json:"river_schema_version"`
	}
	require.NoError(t, json.Unmarshal(out, &v))
	require.Equal(t, stampedVersion, v.Version)
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.Equal(t, migrations.Latest(), v.SchemaVersion)
	require.Equal(t, migrations.RiverLatest(), v.RiverSchemaVersion)
	require.Positive(t, v.RiverSchemaVersion)

	out, err = exec.Command(tmendBinary(t), "--version").Output()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "tmend "+stampedVersion+" ("), "%s", out)
}

// A plain go build of the command is optimised with the committed profile
// (default.pgo, scripts/pgo.sh): without it the engine runs about 7% more instructions.
func TestBuildUsesThePGOProfile(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "version", "-m", tmendBinary(t)).Output()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `\s-pgo=\S*default\.pgo\n`, string(out))
}

// waitFor polls cond every 20ms for up to 30s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitForIn(t, 30*time.Second, cond)
}

// waitForIn polls cond every 20ms for up to d.
func waitForIn(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("condition not met in %s", d)
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
	return setupDBWith(t, gen.Config{Dialect: repair.OpenClaw, Sessions: sessions, Messages: 20, FaultRate: faultRate, Seed: 1})
}

func setupDBWith(t *testing.T, cfg gen.Config) *dbBundle {
	t.Helper()
	url := storetest.NewDBURL(t)
	pool, err := store.Connect(t.Context(), url, store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	storetest.Generated(t, pool, cfg)
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

func startTmend(t *testing.T, env map[string]string, args ...string) (*exec.Cmd, *storetest.Logs) {
	t.Helper()
	cmd := exec.Command(tmendBinary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out storetest.Logs
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &out
}

// waitExit waits for cmd, started by startTmend with output out, to exit and returns its
// error. One still running after d is killed and fails the test with the end of its
// output: a run that never ends (its writes keep failing and River retries them) is a
// failure to report, not a hang until the test binary's timeout.
func waitExit(t *testing.T, cmd *exec.Cmd, out *storetest.Logs, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s still running after %s; its output ends: %s", strings.Join(cmd.Args, " "), d, tail(out.String(), 3000))
		return nil
	}
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

// A scan shared by three worker processes survives one of them being killed: River
// rescues its partition, a new attempt resumes from the checkpoint, and the run ends with
// the totals one process scanning alone gets, every broken session repaired exactly once.
func TestKilledWorkerIsRescued(t *testing.T) {
	t.Parallel()
	const n = 21000
	cfg := gen.Config{Dialect: repair.OpenClaw, Sessions: n, Messages: 8, FaultRate: 0.3, Seed: 7}
	b := setupDBWith(t, cfg)

	// The reference: one process, no queue, over the same generated data.
	ref := storetest.NewDB(t)
	storetest.Generated(t, ref, cfg)
	refStore, err := store.Open(t.Context(), ref, store.DefaultSource, false)
	require.NoError(t, err)
	want, err := scanner.New(refStore, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name()}).
		Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Positive(t, want.Counts.Repaired)

	// Start the run without working it, then let three workers share it.
	st, err := store.Open(t.Context(), b.pool, store.DefaultSource, false)
	require.NoError(t, err)
	q, err := queue.New(st, scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name()}), zerolog.Nop(),
		queue.Config{Schema: store.DefaultSchema})
	require.NoError(t, err)
	// Three partitions for six slots, each worked in slices of half a second that end
	// with a checkpoint: a partition shows its progress well before its end.
	const partitions = 3
	id, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}, partitions)
	require.NoError(t, err)
	args := []string{"worker", "--workers", "2", "--batch-size", "20", "--partition-slice", "500ms", "--rescue-after", "6s", "--log-level", "debug"}
	var workers []*exec.Cmd
	var outs []*storetest.Logs
	for range 3 {
		w, out := startTmend(t, b.env, args...)
		workers, outs = append(workers, w), append(outs, out)
	}
	// Kill the worker holding a partition far from its end: killed between that
	// partition's last commit and River's record of its job done, a worker leaves
	// nothing to rescue.
	var part int
	var holder string
	waitFor(t, func() bool {
		err := b.pool.QueryRow(t.Context(), `SELECT p.partition, j.attempted_by[cardinality(j.attempted_by)]
FROM run_partitions p JOIN river_job j ON j.id = p.job_id
WHERE p.run_id = $1 AND p.status = 'running' AND j.state = 'running' AND p.num_scanned BETWEEN 1 AND $2
ORDER BY p.num_scanned LIMIT 1`, id, n/partitions/2).Scan(&part, &holder)
		return err == nil
	})
	killed := slices.IndexFunc(workers, func(w *exec.Cmd) bool {
		return strings.Contains(holder, fmt.Sprintf("_%d_", w.Process.Pid))
	})
	require.NotEqual(t, -1, killed, "partition %d is held by %s, none of the workers", part, holder)
	require.NoError(t, workers[killed].Process.Signal(syscall.SIGKILL))
	_ = workers[killed].Wait()
	require.Zero(t, b.count(t, "SELECT count(*) FROM run_partitions WHERE run_id = $1 AND partition = $2 AND status = 'completed'", id, part),
		"the killed worker's partition %d was unfinished", part)

	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		rows, _ := b.pool.Query(context.Background(), `SELECT p.partition, p.status, p.attempt, p.num_scanned, j.state, j.attempt, j.errors::text
FROM run_partitions p LEFT JOIN river_job j ON j.id = p.job_id WHERE p.run_id = $1 ORDER BY 1`, id)
		for rows.Next() {
			var part, attempt, scanned int
			var status string
			var jstate, jerr *string
			var jattempt *int
			_ = rows.Scan(&part, &status, &attempt, &scanned, &jstate, &jattempt, &jerr)
			t.Logf("partition %d %s attempt %d scanned %d job %v/%v %v", part, status, attempt, scanned, deref(jstate), deref(jattempt), deref(jerr))
		}
		rows.Close()
		for i, o := range outs {
			t.Logf("worker %d:\n%s", i, tail(o.String(), 3000))
		}
	})
	waitForIn(t, 3*time.Minute, func() bool {
		return b.count(t, "SELECT count(*) FROM repair_runs WHERE id = $1 AND status <> 'running'", id) == 1
	})
	for i, w := range workers {
		if i != killed {
			require.NoError(t, w.Process.Signal(syscall.SIGTERM))
		}
	}
	for i, w := range workers {
		if i != killed {
			require.NoError(t, w.Wait(), outs[i].String())
		}
	}
	run, err := st.Run(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, model.RunCompleted, run.Status, run.Error)
	require.Equal(t, want.Counts, run.Counts)
	require.Equal(t, want.Summary(), run.Summary)
	require.Positive(t, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'tmend_partition' AND (args->>'run_id')::bigint = $1
  AND errors::text LIKE '%rescued%'`, id), "the killed worker's partition was rescued")
	// Exactly once, and nothing half-written.
	require.Equal(t, want.Counts.Repaired, checkNothingHalfWritten(t, b))
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT session_id FROM repair_reports WHERE run_id = $1
  GROUP BY session_id HAVING count(*) > 1) d`, id))
	require.Equal(t, repairedIDs(t, ref), repairedIDs(t, b.pool), "the same sessions were repaired")
}

func repairedIDs(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT session_id FROM repair_reports WHERE status = 'repaired' ORDER BY 1`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
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

// Two replicas with the same schedule produce at most one run per tick: River's leader
// enqueues each tick's job once, and a tick never starts a second scan of the source.
// Whatever the machine's speed, every tick whose job ran either started the one run or
// was skipped because a scan was still running (a slow scan outlasts the 2s schedule),
// and the runs never overlap; ticks enqueued as the replicas stop may not run at all.
func TestTwoReplicasOneRunPerTick(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 300, 0.2)
	args := []string{"serve", "--schedule", "@every 2s", "--batch-size", "10", "--log-level", "debug"}
	a, outA := startTmend(t, b.env, append(args, "--listen", freeAddr(t))...)
	c, outC := startTmend(t, b.env, append(args, "--listen", freeAddr(t))...)
	waitForIn(t, time.Minute, func() bool {
		return b.count(t, "SELECT count(*) FROM repair_runs WHERE trigger = 'cron' AND status = 'completed'") >= 3
	})
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	require.NoError(t, a.Wait(), outA.String())
	require.NoError(t, c.Wait(), outC.String())
	ticks := b.count(t, `SELECT count(DISTINCT args->>'tick') FROM river_job WHERE kind = 'tmend_scheduled_scan'`)
	require.GreaterOrEqual(t, ticks, 3)
	require.Equal(t, ticks, b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'tmend_scheduled_scan'`),
		"a tick was enqueued twice")
	runs := b.count(t, `SELECT count(*) FROM repair_runs WHERE trigger = 'cron'`)
	require.LessOrEqual(t, runs, ticks, "at most one run per tick")
	skip := "a scan of this source is still running; skipping this tick"
	skipped := strings.Count(outA.String(), skip) + strings.Count(outC.String(), skip)
	worked := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'tmend_scheduled_scan' AND state = 'completed'`)
	require.Equal(t, worked, runs+skipped, "every tick that ran started one run or was skipped (%d ticks, %d runs, %d skipped)",
		ticks, runs, skipped)
	t.Logf("%d ticks: %d runs, %d skipped", ticks, runs, skipped)
	overlaps := b.count(t, `SELECT count(*) FROM repair_runs x JOIN repair_runs y ON x.id < y.id
WHERE x.trigger = 'cron' AND y.trigger = 'cron'
  AND tstzrange(x.started_at, x.finished_at) && tstzrange(y.started_at, y.finished_at)`)
	require.Zero(t, overlaps, "two scheduled runs overlapped")
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
