package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

var old = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sessions generates n sessions of every dialect, a third of them broken.
func sessions(t *testing.T, n int) []model.Session {
	t.Helper()
	var out []model.Session
	for i, d := range repair.Dialects() {
		cfg := gen.Config{Seed: uint64(i), Dialect: d, Sessions: n / len(repair.Dialects()), Messages: 12, FaultRate: 0.3, Start: old}
		require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
			msgs, _ := json.Marshal(s.Messages)
			out = append(out, model.Session{ID: fmt.Sprintf("%s-%s", d, s.ID), Messages: msgs, UpdatedAt: s.UpdatedAt})
			return nil
		}))
	}
	return out
}

type bundle struct {
	pool  *pgxpool.Pool
	store *store.Store
	sc    *scanner.Scanner
	log   *storetest.Logs
}

func setup(t *testing.T, data []model.Session, cfg scanner.Config) *bundle {
	t.Helper()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, data...)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	cfg.Source = store.DefaultSource.Name()
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 40
	}
	b := &bundle{pool: pool, store: st, log: &storetest.Logs{}}
	b.sc = scanner.New(st, zerolog.New(b.log), cfg)
	return b
}

func (b *bundle) queue(t *testing.T, cfg queue.Config) *queue.Queue {
	t.Helper()
	cfg.Schema = store.DefaultSchema
	q, err := queue.New(b.store, b.sc, zerolog.New(b.log), cfg)
	require.NoError(t, err)
	require.NoError(t, q.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, q.Stop(ctx))
	})
	return q
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func wait(t *testing.T, q *queue.Queue, runID int64) model.RunRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run, err := q.Wait(ctx, runID, nil)
	require.NoError(t, err)
	return run
}

// A scan split into partitions, worked by several workers that yield their turn every
// few pages, ends with the same totals as one process scanning alone, and repairs every
// broken session exactly once.
func TestPartitionedRunEqualsOneProcess(t *testing.T) {
	t.Parallel()
	data := sessions(t, 700)
	alone := setup(t, data, scanner.Config{})
	want, err := alone.sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Positive(t, want.Counts.Repaired)

	b := setup(t, data, scanner.Config{})
	q := b.queue(t, queue.Config{Concurrency: 3, Slice: 30 * time.Millisecond})
	id, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}, 5)
	require.NoError(t, err)
	run := wait(t, q, id)

	require.Equal(t, model.RunCompleted, run.Status, run.Error)
	require.Equal(t, 5, run.Partitions)
	require.Equal(t, want.Counts, run.Counts)
	require.Equal(t, want.Summary(), run.Summary)
	require.Equal(t, 5, count(t, b.pool, `SELECT count(*) FROM run_partitions WHERE run_id = $1 AND status = 'completed'`, id))
	require.Positive(t, count(t, b.pool, `SELECT count(*) FROM run_partitions WHERE run_id = $1 AND attempt > 1`, id),
		"partitions yield and resume from their checkpoints")
	require.Contains(t, b.log.String(), "partition continues from its checkpoint after its time slice")
	require.NotContains(t, b.log.String(), "resuming partition", "a slice's end is not a failed attempt")
	// Exactly once: one report and one repaired version per repaired session.
	require.Equal(t, want.Counts.Repaired, count(t, b.pool, `SELECT count(DISTINCT session_id) FROM repair_reports WHERE run_id = $1 AND status = 'repaired'`, id))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM (SELECT session_id FROM repair_reports WHERE run_id = $1 GROUP BY session_id HAVING count(*) > 1) d`, id))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM (SELECT session_id FROM session_versions WHERE kind = 'repaired' GROUP BY session_id HAVING count(*) > 1) d`))
	storetest.AllClean(t, b.pool)

	// The incremental position moved: the next incremental scan reads nothing.
	id2, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental}, 2)
	require.NoError(t, err)
	run2 := wait(t, q, id2)
	require.Equal(t, model.ModeIncremental, run2.Mode)
	require.Zero(t, run2.Counts.Scanned)
}

// A partition whose database connections are cut is retried by River and resumes from
// its checkpoint: nothing is counted twice, nothing repaired twice.
func TestDroppedConnectionResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	data := sessions(t, 700)
	alone := setup(t, data, scanner.Config{})
	want, err := alone.sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)

	// One attempt at each database operation: a cut connection fails the job attempt.
	b := setup(t, data, scanner.Config{Retries: 1, BatchSize: 10, BatchPause: 20 * time.Millisecond})
	q := b.queue(t, queue.Config{Concurrency: 1})
	id, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}, 1)
	require.NoError(t, err)
	// Once the partition has checkpointed, cut every connection of the pool.
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM run_partitions WHERE run_id = $1 AND num_scanned > 0`, id) > 0
	}, time.Minute, 5*time.Millisecond)
	var app string
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&app))
	_, err = b.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = $1 AND pid <> pg_backend_pid() AND datname = current_database()`, app)
	require.NoError(t, err)

	run := wait(t, q, id)
	require.Equal(t, model.RunCompleted, run.Status, run.Error)
	require.Equal(t, want.Counts, run.Counts)
	require.Equal(t, want.Summary(), run.Summary)
	require.GreaterOrEqual(t, count(t, b.pool, `SELECT attempt FROM run_partitions WHERE run_id = $1`, id), 2)
	require.Contains(t, b.log.String(), "resuming partition from its checkpoint after a failed or interrupted attempt")
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM (SELECT session_id FROM repair_reports WHERE run_id = $1 GROUP BY session_id HAVING count(*) > 1) d`, id))
	storetest.AllClean(t, b.pool)
}

// One scan of a source runs at a time while its owner lives; a scan whose jobs all
// ended without ending it (its last worker died) does not block the next one; a
// cancelled run's jobs never run.
func TestOneScanAtATimeAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, sessions(t, 70), scanner.Config{})
	owner := b.owner(t)             // starts runs and lives, but works nothing
	q := b.queue(t, queue.Config{}) // enqueues only
	ctx := t.Context()
	o := scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}
	other := o
	other.Limit = 1000

	first, err := owner.StartRun(ctx, o, 3)
	require.NoError(t, err)
	require.Equal(t, 3, count(t, b.pool, `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1 AND state = 'available'`, first))
	_, err = q.StartRun(ctx, o, 3)
	require.ErrorIs(t, err, model.ErrBusy)

	run, err := q.Cancel(ctx, first)
	require.NoError(t, err)
	require.Equal(t, model.RunCancelled, run.Status)
	require.Equal(t, 3, count(t, b.pool, `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1 AND state = 'cancelled'`, first))
	require.Equal(t, 3, count(t, b.pool, `SELECT count(*) FROM run_partitions WHERE run_id = $1 AND status = 'cancelled'`, first))

	second, err := owner.StartRun(ctx, o, 2)
	require.NoError(t, err)
	// Its jobs are lost (say, discarded after a worker died on the last attempt).
	_, err = b.pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE (args->>'run_id')::bigint = $1`, second)
	require.NoError(t, err)
	// A scan that asks for another one (a limit) ends it instead of taking it over.
	third, err := owner.StartRun(ctx, other, 1)
	require.NoError(t, err)
	abandoned, err := b.store.Run(ctx, second)
	require.NoError(t, err)
	require.Equal(t, model.RunAbandoned, abandoned.Status)
	require.Contains(t, abandoned.Error, "abandoned")

	// Working the queue now runs only the third run.
	w := b.queue(t, queue.Config{Concurrency: 2})
	done := wait(t, w, third)
	require.Equal(t, model.RunCompleted, done.Status, done.Error)
	require.Equal(t, 70, done.Counts.Scanned)
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id IN ($1, $2)`, first, second))
}

// owner returns a queue that starts runs as tmend scan does (it owns them and is alive
// while they run) but works none of their jobs: its River client never starts. Stop
// drops its liveness locks, as the death of its process would.
func (b *bundle) owner(t *testing.T) *queue.Queue {
	t.Helper()
	q, err := queue.New(b.store, b.sc, zerolog.New(b.log), queue.Config{Schema: store.DefaultSchema, Concurrency: 1, OwnsRuns: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Stop(context.Background())) })
	return q
}

// tmend scan's Wait reads its run as soon as its own worker ends it, not at its next
// poll: with the poll an hour away, it returns the completed run.
func TestWaitWakesWhenItsWorkerEndsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, sessions(t, 70), scanner.Config{})
	q := b.owner(t)
	q.SetPoll(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id, err := q.StartRun(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}, 2)
	require.NoError(t, err)
	polls := 0
	run, err := q.Wait(ctx, id, func(model.RunRow) {
		polls++
		if polls == 1 { // nothing works the run before Wait has read it running
			require.NoError(t, q.Start(context.WithoutCancel(ctx)))
		}
	})
	require.NoError(t, err)
	require.Equal(t, model.RunCompleted, run.Status, run.Error)
	require.Equal(t, 2, polls)
}

// A scan that no live process works or will work never blocks the next one, and River's
// own record of who works each job decides it, not a clock: the next scan takes it over
// when it asks for the same scan (TestDeadRunIsTakenOver); else it ends it as
// abandoned, cancels its jobs, counts what it committed, and starts at once. A scan
// that a live process works, or whose live owner waits for it, blocks the next.
func TestDeadRunsAreAbandonedLiveOnesBlock(t *testing.T) {
	t.Parallel()
	o := scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}
	other := o // another scan: with a limit
	other.Limit = 1000
	jobsOf := `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1 AND state = $2`
	// asRunning makes one of a run's jobs look held by River client id, as a worker
	// that fetched it leaves it.
	asRunning := func(t *testing.T, b *bundle, runID int64, id string) {
		t.Helper()
		_, err := b.pool.Exec(t.Context(), `UPDATE river_job SET state = 'running', attempted_at = now(), attempt = 1,
  attempted_by = array_append(attempted_by, $2) WHERE id = (SELECT min(job_id) FROM run_partitions WHERE run_id = $1)`, runID, id)
		require.NoError(t, err)
	}

	t.Run("OwnerDied", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b := setup(t, sessions(t, 70), scanner.Config{})
		a, next := b.owner(t), b.owner(t)
		first, err := a.StartRun(ctx, o, 3)
		require.NoError(t, err)
		// One partition was in hand when the owner died; its report committed.
		asRunning(t, b, first, a.ClientID())
		_, err = b.pool.Exec(ctx, `INSERT INTO repair_reports (run_id, session_id, status, trigger, source_key)
VALUES ($1, 'x', 'failed', 'cli', $2)`, first, b.store.Key())
		require.NoError(t, err)
		_, err = next.StartRun(ctx, o, 1)
		require.ErrorIs(t, err, model.ErrBusy, "its owner is alive")

		require.NoError(t, a.Stop(ctx)) // the owner dies: its liveness locks go
		second, err := next.StartRun(ctx, other, 1)
		require.NoError(t, err)
		run, err := b.store.Run(ctx, first)
		require.NoError(t, err)
		require.Equal(t, model.RunAbandoned, run.Status)
		require.NotNil(t, run.FinishedAt)
		require.Equal(t, model.RunCounts{Scanned: 1, Failed: 1}, run.Counts, "counted from what it committed")
		require.Equal(t, 2, count(t, b.pool, jobsOf, first, "cancelled"))
		require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1
  AND state = 'running' AND metadata ? 'cancel_attempted_at'`, first), "the dead worker's job is cancelled for River's rescuer")
		require.Equal(t, 3, count(t, b.pool, `SELECT count(*) FROM run_partitions WHERE run_id = $1 AND status = 'failed'`, first))
		require.Contains(t, b.log.String(), "run abandoned")

		w := b.queue(t, queue.Config{Concurrency: 2})
		done := wait(t, w, second)
		require.Equal(t, model.RunCompleted, done.Status, done.Error)
		require.Equal(t, 70, done.Counts.Scanned)
		storetest.AllClean(t, b.pool)
	})

	t.Run("WorkersCarryOn", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b := setup(t, sessions(t, 70), scanner.Config{})
		// A daemon's run: no owner; a live worker (serve, worker) will work its jobs.
		daemon, err := queue.New(b.store, b.sc, zerolog.New(b.log), queue.Config{Schema: store.DefaultSchema, Concurrency: 1})
		require.NoError(t, err)
		first, err := daemon.StartRun(ctx, o, 2)
		require.NoError(t, err)
		next := b.owner(t)
		_, err = next.StartRun(ctx, o, 1)
		require.ErrorIs(t, err, model.ErrBusy, "a live worker will work its queued partitions")
		// A partition held by a client that died, while the worker lives: River rescues it.
		asRunning(t, b, first, "ghost")
		_, err = next.StartRun(ctx, o, 1)
		require.ErrorIs(t, err, model.ErrBusy)

		require.NoError(t, daemon.Stop(ctx)) // the last worker dies
		_, err = next.StartRun(ctx, other, 1)
		require.NoError(t, err)
		run, err := b.store.Run(ctx, first)
		require.NoError(t, err)
		require.Equal(t, model.RunAbandoned, run.Status)
	})

	t.Run("HeldByALiveClient", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b := setup(t, sessions(t, 70), scanner.Config{})
		a := b.owner(t)
		first, err := a.StartRun(ctx, o, 1)
		require.NoError(t, err)
		// Its only job is held by a live client that is not its owner; the owner dies.
		holder := b.owner(t)
		_, err = holder.StartRun(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true}, 1)
		require.ErrorIs(t, err, model.ErrBusy) // (this also takes holder's liveness lock)
		asRunning(t, b, first, holder.ClientID())
		require.NoError(t, a.Stop(ctx))
		_, err = b.owner(t).StartRun(ctx, o, 1)
		require.ErrorIs(t, err, model.ErrBusy, "its partition is in a live client's hands")

		require.NoError(t, holder.Stop(ctx))
		_, err = b.owner(t).StartRun(ctx, other, 1)
		require.NoError(t, err)
		run, err := b.store.Run(ctx, first)
		require.NoError(t, err)
		require.Equal(t, model.RunAbandoned, run.Status)
	})
}

// A scan whose owner died while a partition was in its hands is taken over by the next
// scan that asks for the same one: the run goes on, owned by the new scan, in new jobs
// for its unfinished partitions (the dead ones cancelled), from their checkpoints, and
// ends with every session scanned once.
func TestDeadRunIsTakenOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, sessions(t, 70), scanner.Config{})
	o := scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}
	a, next := b.owner(t), b.owner(t)
	first, err := a.StartRun(ctx, o, 3)
	require.NoError(t, err)
	var job int64
	require.NoError(t, b.pool.QueryRow(ctx, `UPDATE river_job SET state = 'running', attempted_at = now(), attempt = 1,
  attempted_by = array_append(attempted_by, $2) WHERE id = (SELECT min(job_id) FROM run_partitions WHERE run_id = $1) RETURNING id`,
		first, a.ClientID()).Scan(&job))
	_, err = b.pool.Exec(ctx, `UPDATE run_partitions SET status = 'running', attempt = 1 WHERE job_id = $1`, job)
	require.NoError(t, err)
	_, err = next.StartRun(ctx, o, 1)
	require.ErrorIs(t, err, model.ErrBusy, "its owner is alive")

	require.NoError(t, a.Stop(ctx)) // the owner dies: its liveness locks go
	taken, err := next.StartRun(ctx, o, 1)
	require.NoError(t, err)
	require.Equal(t, first, taken, "the dead run goes on")
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM repair_runs`))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM repair_runs WHERE id = $1 AND status = 'running' AND owner = $2`,
		first, next.ClientID()))
	require.Equal(t, 3, count(t, b.pool, `SELECT count(*) FROM river_job j JOIN run_partitions p ON p.job_id = j.id
  WHERE p.run_id = $1 AND j.state = 'available' AND j.id <> $2`, first, job), "a new job for each unfinished partition")
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM river_job WHERE id = $1 AND metadata ? 'cancel_attempted_at'`, job),
		"the dead worker's job is cancelled for River's rescuer")
	require.Contains(t, b.log.String(), "run taken over")

	w := b.queue(t, queue.Config{Concurrency: 2})
	done := wait(t, w, first)
	require.Equal(t, model.RunCompleted, done.Status, done.Error)
	require.Equal(t, 70, done.Counts.Scanned)
	require.Equal(t, 2, count(t, b.pool, `SELECT attempt FROM run_partitions WHERE job_id IS NOT NULL AND run_id = $1 AND partition = 0`, first),
		"the partition in the dead owner's hands resumed as a second attempt")
	storetest.AllClean(t, b.pool)
}

// reportCounts returns a run's report rows by status, in the run's counts' terms.
func reportCounts(t *testing.T, pool *pgxpool.Pool, runID int64) model.RunCounts {
	t.Helper()
	res := model.NewRunResult()
	rows, err := pool.Query(t.Context(), `SELECT status, count(*) FROM repair_reports WHERE run_id = $1 GROUP BY 1`, runID)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		require.NoError(t, rows.Scan(&status, &n))
		res.AddStatus(model.SessionStatus(status), n)
	}
	require.NoError(t, rows.Err())
	return res.Counts
}

// A run's counts are what it committed, however it ends: a run cancelled while its
// workers write counts exactly the reports that committed, none after it ended (the
// partitions' checkpoints lag the writes by up to a second; a write after the cancel is
// refused, and the partition stops).
func TestCancelledRunCountsItsReports(t *testing.T) {
	t.Parallel()
	b := setup(t, sessions(t, 2100), scanner.Config{BatchSize: 10, Workers: 4})
	q := b.queue(t, queue.Config{Concurrency: 2})
	id, err := q.StartRun(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}, 2)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id = $1`, id) >= 150
	}, 2*time.Minute, 2*time.Millisecond)
	run, err := q.Cancel(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, model.RunCancelled, run.Status)
	reported := count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id = $1`, id)
	// Let the workers run into the cancel: whatever they were writing commits before
	// it or not at all.
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1
  AND state NOT IN ('cancelled', 'completed', 'discarded')`, id) == 0
	}, time.Minute, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, q.Stop(ctx))

	run, err = b.store.Run(t.Context(), id)
	require.NoError(t, err)
	got := reportCounts(t, b.pool, id)
	require.Equal(t, reported, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id = $1`, id),
		"no report of the run committed after it ended")
	c := run.Counts
	require.Equal(t, got, model.RunCounts{Scanned: c.Scanned - c.Clean - run.Summary.ByStatus[model.StatusHeld],
		Repaired: c.Repaired, Pending: c.Pending, Conflict: c.Conflict, Skipped: c.Skipped - run.Summary.ByStatus[model.StatusHeld],
		Failed: c.Failed}, "the run's counts are its reports")
	require.Equal(t, c.Repaired, run.Summary.ByStatus[model.StatusRepaired])
}

// keyCount counts how often key is a top-level key of the JSON object line, which
// decoding into a map would hide.
func keyCount(t *testing.T, line, key string) int {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err, line)
	require.Equal(t, json.Delim('{'), tok, line)
	n := 0
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err, line)
		if k == key {
			n++
		}
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v), line)
	}
	return n
}

// TestLogLinesHaveOneComponent: River's lines and the queue's each carry one component.
func TestLogLinesHaveOneComponent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, scanner.Config{})
	logs := &storetest.Logs{}
	q, err := queue.New(b.store, b.sc, zerolog.New(logs), queue.Config{Schema: store.DefaultSchema})
	require.NoError(t, err)
	q.RiverLogger().Warn("a river warning", "job_id", 1)
	q.Log().Warn().Msg("a queue warning")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2)
	for i, want := range []string{"river", "queue"} {
		require.Equal(t, 1, keyCount(t, lines[i], "component"), lines[i])
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &m))
		require.Equal(t, want, m["component"], lines[i])
	}
}

// A daemon's or worker's progress tick ends a run of one session or a rollback whose
// process died (its liveness lock's connection is gone), and says so in the log.
func TestWatchAbandonsDeadRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, sessions(t, 1), scanner.Config{})
	ctx := t.Context()
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerAPI, Mode: model.ModeSession, Source: store.DefaultSource.Name()})
	require.NoError(t, err)
	q := b.queue(t, queue.Config{})
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); q.Watch(wctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-watched }()

	_, err = b.pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l, repair_runs r WHERE r.id = $1
  AND l.locktype = 'advisory' AND (l.classid::bigint << 32) | l.objid::bigint = hashtextextended('tmend:river-client:' || r.owner, 0)`, id)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM repair_runs WHERE id = $1 AND status = 'abandoned'`, id) == 1
	}, 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(b.log.String(), "the process working it died") },
		10*time.Second, 10*time.Millisecond)
}

// Two sources in one database share nothing through the queue: a worker of one source
// never works the other's partitions (it would read its own table for them), and the
// other's scan, whose owner died, is not kept alive by the first source's workers: the
// next scan of that source takes it over at once.
func TestSourcesHaveQueuesOfTheirOwn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, sessions(t, 70), scanner.Config{})
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.other (id text PRIMARY KEY, m jsonb);
INSERT INTO public.other SELECT id, messages FROM sessions`)
	require.NoError(t, err)
	other, err := store.Open(ctx, b.pool, store.Source{Table: "public.other", IDColumn: "id", MessagesColumn: "m"}, false)
	require.NoError(t, err)
	otherSc := scanner.New(other, zerolog.New(b.log), scanner.Config{Source: other.Source().Name(), BatchSize: 40})
	otherQueue := func(cfg queue.Config) *queue.Queue {
		cfg.Schema = store.DefaultSchema
		q, err := queue.New(other, otherSc, zerolog.New(b.log), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Stop(context.Background())) })
		return q
	}
	o := scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull}

	owner := otherQueue(queue.Config{Concurrency: 1, OwnsRuns: true}) // never works
	theirs, err := owner.StartRun(ctx, o, 2)
	require.NoError(t, err)
	w := b.queue(t, queue.Config{Concurrency: 2}) // works the sessions table's queue
	ours, err := w.StartRun(ctx, o, 2)
	require.NoError(t, err)
	done := wait(t, w, ours)
	require.Equal(t, model.RunCompleted, done.Status, done.Error)
	require.Equal(t, 70, done.Counts.Scanned)
	storetest.AllClean(t, b.pool)
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id = $1`, theirs), "the other source's partitions are not ours")
	require.Equal(t, 2, count(t, b.pool, `SELECT count(*) FROM river_job WHERE (args->>'run_id')::bigint = $1 AND state = 'available'`, theirs))

	// Its owner dies while our worker lives: the next scan of the other source is not refused.
	require.NoError(t, owner.Stop(ctx))
	next := otherQueue(queue.Config{Concurrency: 2, OwnsRuns: true})
	taken, err := next.StartRun(ctx, o, 1)
	require.NoError(t, err, "our source's workers do not keep the other source's dead scan alive")
	require.Equal(t, theirs, taken)
	require.NoError(t, next.Start(ctx))
	done = wait(t, next, theirs)
	require.Equal(t, model.RunCompleted, done.Status, done.Error)
	require.Equal(t, 70, done.Counts.Scanned)
	require.Equal(t, 70, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE run_id = $1 AND source_key = $2`, theirs, other.Key())+
		done.Counts.Clean, "every report of the other source's run is of its own table")
	rows, err := b.pool.Query(ctx, `SELECT m::text FROM public.other`)
	require.NoError(t, err)
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, m := range msgs {
		res, err := repair.Repair([]byte(m), repair.Options{})
		if err == nil {
			require.False(t, res.Changed(), "the other table is repaired")
		}
	}
}

// Jobs that a tmend before a queue per source left waiting in the shared queue are moved
// to their source's queue when a worker of that source starts, and worked there: the
// run they belong to completes under its id, and the scheduled tick runs. Another
// source's job stays where it is.
func TestOldQueueJobsAreMoved(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, sessions(t, 70), scanner.Config{})
	id, err := b.queue(t, queue.Config{}).StartRun(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeFull}, 2)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE river_job SET queue = 'tmend' WHERE (args->>'run_id')::bigint = $1`, id)
	require.NoError(t, err)
	insertTick := func(source string) int64 {
		var job int64
		require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, max_attempts, queue)
VALUES ('tmend_scheduled_scan', jsonb_build_object('source', $1::text, 'tick', now()), 10, 'tmend') RETURNING id`, source).Scan(&job))
		return job
	}
	tick := insertTick(store.DefaultSource.Name())
	otherTick := insertTick("public.other(id,m,updated_at)")
	var otherPartition int64
	require.NoError(t, b.pool.QueryRow(ctx, `WITH r AS (INSERT INTO repair_runs (trigger, mode, source, source_key)
  VALUES ('cron', 'full', 'public.other(id,m,updated_at)', 'other') RETURNING id)
INSERT INTO river_job (kind, args, max_attempts, queue) SELECT 'tmend_partition', jsonb_build_object('run_id', id, 'partition', 0), 10, 'tmend'
FROM r RETURNING id`).Scan(&otherPartition))

	w := b.queue(t, queue.Config{Concurrency: 2})
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM river_job WHERE queue = 'tmend' AND id <> ALL($1)`, []int64{otherTick, otherPartition}),
		"the source's waiting jobs left the old queue")
	done := wait(t, w, id)
	require.Equal(t, model.RunCompleted, done.Status, done.Error)
	require.Equal(t, 70, done.Counts.Scanned)
	storetest.AllClean(t, b.pool)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM river_job WHERE id = $1 AND state = 'completed'`, tick) == 1
	}, time.Minute, 20*time.Millisecond, "the scheduled tick is worked")
	require.Equal(t, 2, count(t, b.pool, `SELECT count(*) FROM river_job WHERE id = ANY($1) AND queue = 'tmend' AND state = 'available'`,
		[]int64{otherTick, otherPartition}), "another source's jobs are not this source's to move")
	require.Contains(t, b.log.String(), "jobs moved from the old shared queue")
}
