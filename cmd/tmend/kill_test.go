package main

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// killTrials is how many kill trials each deployment gets: a few in the test suite,
// TMEND_KILL_TRIALS of them (scripts/kill-trials.sh: 32) in full.
func killTrials(t *testing.T, short int) (n int, seed uint64) {
	t.Helper()
	n, seed = short, uint64(time.Now().UnixNano())
	if s := os.Getenv("TMEND_KILL_TRIALS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "TMEND_KILL_TRIALS")
	}
	if s := os.Getenv("TMEND_KILL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "TMEND_KILL_SEED")
	}
	t.Logf("%d trials, seed %d (TMEND_KILL_SEED repeats them)", n, seed)
	return n, seed
}

// killPoint is where trial i of n kills its process: as soon as the run exists for the
// first, else after a share of the broken sessions were repaired, spread over the run
// and drawn at random within each trial's stretch.
func killPoint(r *rand.Rand, i, n int) float64 {
	if i == 0 {
		return 0
	}
	return (float64(i) + r.Float64()) / float64(n) * 0.95
}

const killSessions = 3000

func killData(t *testing.T, trial int) *dbBundle {
	t.Helper()
	return setupDBWith(t, gen.Config{Dialect: repair.OpenClaw, Sessions: killSessions, Messages: 10, FaultRate: 0.5, Seed: uint64(trial + 1),
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}) // long quiet: no call may still be running
}

// checkExactlyOnce asserts what a kill must never cost: every session is old or wholly
// new and repaired at most once (checkNothingHalfWritten), every broken session was
// repaired (nothing lost), and each ended run's counts are its committed reports.
func checkExactlyOnce(t *testing.T, b *dbBundle, broken int) {
	t.Helper()
	require.Equal(t, broken, checkNothingHalfWritten(t, b), "every broken session repaired exactly once")
	checkRunsEnded(t, b)
}

// checkRunsEnded asserts that every run ended and that its counts are its committed
// reports.
func checkRunsEnded(t *testing.T, b *dbBundle) {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `SELECT r.id, r.status, r.num_repaired, r.num_failed, r.num_conflict, r.num_pending,
  (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'repaired'),
  (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'failed'),
  (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'conflict'),
  (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'pending')
FROM repair_runs r ORDER BY r.id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id int64
		var status string
		var counts, reports [4]int
		require.NoError(t, rows.Scan(&id, &status, &counts[0], &counts[1], &counts[2], &counts[3],
			&reports[0], &reports[1], &reports[2], &reports[3]))
		require.NotEqual(t, "running", status, "run %d never ended", id)
		require.Equal(t, reports, counts, "run %d (%s): counts (repaired, failed, conflict, pending) are not its reports", id, status)
	}
	require.NoError(t, rows.Err())
}

// Kill trials, the CronJob and systemd-timer deployments: 'tmend scan' alone, no daemon
// or worker. A scan is killed with SIGKILL at points spread over its run; the next
// scan, the same one, starts within seconds: it finds that no live process works the
// dead run (by River's record of who holds each job and the dead process's liveness
// lock) and takes it over, its unfinished partitions going on from their checkpoints
// in new jobs, to completion. Nothing is lost, nothing is repaired twice, and every
// run's counts are its reports.
func TestKillTrialsScan(t *testing.T) {
	t.Parallel()
	n, seed := killTrials(t, 3)
	r := rand.New(rand.NewPCG(seed, 1))
	args := []string{"scan", "--full", "--partitions", "3", "--concurrency", "2", "--workers", "2", "--batch-size", "20",
		"--partition-slice", "2s", "--rescue-after", "6s"}
	for i := range n {
		at := killPoint(r, i, n)
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			b := killData(t, i)
			scan, out := startTmend(t, b.env, args...)
			waitFor(t, func() bool { return b.count(t, "SELECT count(*) FROM repair_runs") == 1 })
			want := int(at * killSessions / 2)
			waitFor(t, func() bool {
				return b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'") >= want ||
					b.count(t, "SELECT count(*) FROM repair_runs WHERE status <> 'running'") > 0
			})
			require.NoError(t, scan.Process.Signal(syscall.SIGKILL))
			_ = scan.Wait()
			var dead int64
			var owner string
			require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT id, owner FROM repair_runs").Scan(&dead, &owner))
			killedRunning := b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'running'") == 1
			t.Logf("killed at %.0f%% with %d sessions repaired (run still running: %v)", at*100,
				b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'"), killedRunning)

			start := time.Now()
			next, nextOut := startTmend(t, b.env, args...)
			// The next scan's run: the dead one, taken over (its owner changes), or a new one.
			waitForIn(t, 30*time.Second, func() bool {
				return b.count(t, "SELECT count(*) FROM repair_runs WHERE id > $1 OR id = $1 AND owner <> $2", dead, owner) == 1
			})
			started := time.Since(start)
			require.NoError(t, waitExit(t, next, nextOut, nextScanBound), "the next scan: %s\nthe killed one: %s",
				nextOut.String(), tail(out.String(), 2000))
			t.Logf("the next scan started its run in %s", started.Round(time.Millisecond))
			require.Less(t, started, 15*time.Second, "the next scan starts within seconds")

			broken := b.count(t, "SELECT count(DISTINCT session_id) FROM repair_reports WHERE status = 'repaired'")
			require.Positive(t, broken)
			checkExactlyOnce(t, b, broken)
			if killedRunning {
				require.Contains(t, nextOut.String(), "run taken over")
				require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs"), "no new run")
				require.Equal(t, broken, b.count(t, "SELECT num_repaired FROM repair_runs WHERE id = $1 AND status = 'completed'", dead),
					"the dead run, taken over, repaired every broken session")
			} else {
				require.Equal(t, broken, b.count(t, "SELECT num_repaired FROM repair_runs WHERE id = $1", dead))
				require.Zero(t, b.count(t, "SELECT num_repaired FROM repair_runs WHERE id > $1 AND status = 'completed'", dead))
			}
			nothingLeft(t, b)
		})
	}
}

// Kill trials, the daemon deployment: a scan shared by 'tmend serve' processes (started
// by the schedule or the API, so no process owns it) survives SIGKILL of a replica at
// spread points, and of every replica: the replicas that live, or that start again,
// carry it on (River rescues the dead replica's partition, which resumes from its
// checkpoint); nothing is lost, nothing repaired twice, and a scan started afterwards
// is never refused.
func TestKillTrialsDaemon(t *testing.T) {
	t.Parallel()
	n, seed := killTrials(t, 2)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range n {
		at := killPoint(r, i, n)
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			b := killData(t, i)
			st, err := store.Open(t.Context(), b.pool, store.DefaultSource, false)
			require.NoError(t, err)
			q, err := queue.New(st, scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name()}), zerolog.Nop(),
				queue.Config{Schema: store.DefaultSchema})
			require.NoError(t, err)
			id, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerAPI, Mode: model.ModeFull}, 3)
			require.NoError(t, err)
			// serve starts a replica and returns once it listens: a SIGTERM before its
			// signal handler is in place would kill it rather than stop it.
			serve := func() (*exec.Cmd, func() string) {
				addr := freeAddr(t)
				cmd, out := startTmend(t, b.env, "serve", "--listen", addr, "--schedule", "@every 24h", "--workers", "2",
					"--batch-size", "20", "--concurrency", "2", "--partition-slice", "2s", "--rescue-after", "6s")
				waitFor(t, func() bool {
					conn, err := net.Dial("tcp", addr)
					if err == nil {
						_ = conn.Close()
					}
					return err == nil
				})
				return cmd, out.String
			}
			a, _ := serve()
			c, cOut := serve()
			want := int(at * killSessions / 2)
			waitFor(t, func() bool {
				return b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'") >= want ||
					b.count(t, "SELECT count(*) FROM repair_runs WHERE status <> 'running'") > 0
			})
			// One replica dies; on odd trials the other one too, and a replica starts again.
			require.NoError(t, a.Process.Signal(syscall.SIGKILL))
			_ = a.Wait()
			if i%2 == 1 {
				require.NoError(t, c.Process.Signal(syscall.SIGKILL))
				_ = c.Wait()
				c, cOut = serve()
			}
			waitForIn(t, 3*time.Minute, func() bool {
				return b.count(t, "SELECT count(*) FROM repair_runs WHERE id = $1 AND status <> 'running'", id) == 1
			})
			run, err := st.Run(t.Context(), id)
			require.NoError(t, err)
			require.Equal(t, model.RunCompleted, run.Status, "%s\n%s", run.Error, tail(cOut(), 3000))
			require.NoError(t, c.Process.Signal(syscall.SIGTERM))
			require.NoError(t, c.Wait(), tail(cOut(), 3000))

			// A scan afterwards starts at once and finds nothing left to repair.
			scan, out := startTmend(t, b.env, "scan", "--full")
			require.NoError(t, scan.Wait(), out.String())
			broken := b.count(t, "SELECT count(DISTINCT session_id) FROM repair_reports WHERE status = 'repaired'")
			require.Equal(t, broken, b.count(t, "SELECT count(*) FROM repair_reports WHERE run_id = $1 AND status = 'repaired'", id))
			checkExactlyOnce(t, b, broken)
			nothingLeft(t, b)
		})
	}
}

// nothingLeft asserts that no stored session needs repair any more (sessions tmend
// cannot read are left alone by design).
func nothingLeft(t *testing.T, b *dbBundle) {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), "SELECT id, messages::text FROM sessions")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, msgs string
		require.NoError(t, rows.Scan(&id, &msgs))
		if res, err := repair.Repair([]byte(msgs), repair.Options{}); err == nil {
			require.False(t, res.Changed(), "session %s still needs repair", id)
		}
	}
	require.NoError(t, rows.Err())
}

// A 'tmend rollback --run' and a 'tmend repair --session' killed with SIGKILL in the
// middle of a session's transaction (each waits on the session's row, which the test
// holds) leave their runs running only until the next command: its start finds their
// processes' liveness locks gone and ends them abandoned, with the counts of the reports
// they committed. Each session is whole (its content is the last version tmend saved),
// and a second rollback of the run restores each session it did not, once.
func TestKilledRepairAndRollbackAreAbandoned(t *testing.T) {
	t.Parallel()
	b := setupDBWith(t, gen.Config{Dialect: repair.OpenClaw, Sessions: 400, Messages: 10, FaultRate: 0.5, Seed: 3,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	scan, out := startTmend(t, b.env, "scan", "--full")
	require.NoError(t, scan.Wait(), out.String())
	var scanID int64
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT id FROM repair_runs").Scan(&scanID))
	repaired := b.count(t, "SELECT count(*) FROM repair_reports WHERE run_id = $1 AND status = 'repaired'", scanID)
	require.Greater(t, repaired, 100)

	// killMidSession runs tmend on args and kills it while it waits on session id's row.
	killMidSession := func(id string, args ...string) int64 {
		tx, err := b.pool.Begin(t.Context())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		var holder int
		require.NoError(t, tx.QueryRow(t.Context(), "SELECT pg_backend_pid() FROM sessions WHERE id = $1 FOR UPDATE", id).Scan(&holder))
		cmd, _ := startTmend(t, b.env, args...)
		// Waiting on this transaction: the backend of a command killed before may still
		// wait on an earlier one's lock (a backend learns of its client's death only
		// when it next talks to it).
		waitFor(t, func() bool {
			return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", holder) > 0
		})
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		var run int64
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT max(id) FROM repair_runs").Scan(&run))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE id = $1 AND status = 'running'", run),
			"nothing looked yet: the killed run is still recorded as running")
		return run
	}
	sessionOfReport := func(i int) string {
		var id string
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT session_id FROM repair_reports WHERE run_id = $1 AND status = 'repaired'
ORDER BY id OFFSET $2 LIMIT 1`, scanID, i).Scan(&id))
		return id
	}
	scanArg := strconv.FormatInt(scanID, 10)
	deadRollback := killMidSession(sessionOfReport(100), "rollback", "--run", scanArg)
	deadRepair := killMidSession(sessionOfReport(0), "repair", "--session", sessionOfReport(0))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE id = $1 AND status = $2", deadRollback, model.RunAbandoned),
		"the repair that started next ended the killed rollback")

	again, out := startTmend(t, b.env, "rollback", "--run", scanArg)
	err := again.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out.String())
	require.Equal(t, 1, exit.ExitCode(), "those the killed rollback restored are refused: %s", out.String())
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_runs WHERE status = 'running'"), "no run stays running")
	for _, id := range []int64{deadRollback, deadRepair} {
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM repair_runs r WHERE id = $1 AND status = $2 AND error LIKE 'abandoned%'
  AND num_scanned = (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id)
  AND num_restored = (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'rolled_back')
  AND num_repaired = (SELECT count(*) FROM repair_reports x WHERE x.run_id = r.id AND x.status = 'repaired')`, id, model.RunAbandoned),
			"run %d ends abandoned with the counts of its reports", id)
	}
	require.GreaterOrEqual(t, b.count(t, "SELECT num_restored FROM repair_runs WHERE id = $1", deadRollback), 100)
	require.Zero(t, b.count(t, `SELECT count(*) FROM sessions s WHERE EXISTS (SELECT 1 FROM session_versions v WHERE v.session_id = s.id)
  AND (SELECT content::text FROM session_versions v WHERE v.session_id = s.id ORDER BY version DESC LIMIT 1) IS DISTINCT FROM s.messages::text`),
		"a session's content is the last version tmend saved")
	require.Zero(t, b.count(t, `SELECT count(*) FROM (SELECT session_id FROM repair_reports WHERE status = 'rolled_back'
  GROUP BY 1 HAVING count(*) > 1) x`), "no session restored twice")
	// Every session the scan repaired is restored, but the one the killed repair may have
	// repaired again after the killed rollback restored it: the second rollback refuses it.
	require.GreaterOrEqual(t, b.count(t, "SELECT count(DISTINCT session_id) FROM repair_reports WHERE status = 'rolled_back'"), repaired-1)
}
