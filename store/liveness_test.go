package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// A run that one process works alone (a single session, a rollback) lives while its
// process holds its liveness lock: the sweep leaves it alone while it does, ends it
// abandoned with the counts of its committed reports once the lock's connection is gone
// (a killed process), and FinishRun drops the lock.
func TestDeadOwnedRunIsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Sessions(t, b.pool, model.Session{ID: "a", Messages: []byte(broken)})
	src := store.DefaultSource.Name()
	ownerLocks := func(id int64) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l, repair_runs r WHERE r.id = $1 AND l.locktype = 'advisory'
  AND l.granted AND (l.classid::bigint << 32) | l.objid::bigint = hashtextextended('tmend:river-client:' || r.owner, 0)`, id).Scan(&n))
		return n
	}

	dead, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeSession, Source: src})
	require.NoError(t, err)
	page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "a", MaxBytes: 1 << 20})
	require.NoError(t, err)
	res, err := repair.Repair(page[0].Messages, repair.Options{})
	require.NoError(t, err)
	_, err = b.store.Apply(ctx, model.Apply{RunID: dead, Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired, Dialect: "openai-chat"}})
	require.NoError(t, err)
	live, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeRollback, Source: src})
	require.NoError(t, err)

	gone, err := b.store.AbandonDeadRuns(ctx)
	require.NoError(t, err)
	require.Empty(t, gone, "runs whose process lives are not abandoned")
	require.Equal(t, 1, ownerLocks(dead))

	// The process of the first run dies: the server ends its lock's connection.
	_, err = b.pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l, repair_runs r WHERE r.id = $1
  AND l.locktype = 'advisory' AND (l.classid::bigint << 32) | l.objid::bigint = hashtextextended('tmend:river-client:' || r.owner, 0)`, dead)
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for ownerLocks(dead) > 0 {
		require.True(t, time.Now().Before(deadline), "the terminated backend still holds its lock")
		time.Sleep(20 * time.Millisecond)
	}
	gone, err = b.store.AbandonDeadRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{dead}, gone)
	run, err := b.store.Run(ctx, dead)
	require.NoError(t, err)
	require.Equal(t, model.RunAbandoned, run.Status)
	require.Contains(t, run.Error, "abandoned")
	require.NotNil(t, run.FinishedAt)
	require.Equal(t, model.RunCounts{Scanned: 1, Repaired: 1}, run.Counts, "the counts are its committed reports")

	run, err = b.store.Run(ctx, live)
	require.NoError(t, err)
	require.Equal(t, model.RunRunning, run.Status)
	require.NoError(t, b.store.FinishRun(ctx, model.Finish{RunID: live, Status: model.RunCompleted, Source: src}))
	require.Zero(t, ownerLocks(live), "FinishRun drops the run's liveness lock")
	gone, err = b.store.AbandonDeadRuns(ctx)
	require.NoError(t, err)
	require.Empty(t, gone, "an ended run is not abandoned")
}

// A scan one process works alone (Scanner.Run: no partitions) is alive while its
// process is: a partitioned scan of its source is refused, not handed it as dead.
func TestLiveSingleProcessScanBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	src := store.DefaultSource.Name()
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: src})
	require.NoError(t, err)
	_, err = b.store.CreateRun(ctx, model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: src},
		Partitions: 1}, store.RunJobs{Enqueue: noJobs})
	require.ErrorIs(t, err, model.ErrBusy)
	run, err := b.store.Run(ctx, id)
	require.NoError(t, err)
	require.Equal(t, model.RunRunning, run.Status)
}

// A single session or a rollback that a tmend before run liveness started has no owner:
// it ends abandoned once it has written nothing for an hour, not before, and a run with
// an owner or a scan is not judged that way.
func TestOwnerlessRunEndsWhenSilent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	src := store.DefaultSource.Name()
	insert := func(mode model.Mode, owner *string, age string) int64 {
		var id int64
		require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO repair_runs (trigger, mode, source, owner, started_at)
VALUES ('cli', $1, $2, $3, now() - $4::interval) RETURNING id`, mode, src, owner, age).Scan(&id))
		return id
	}
	silent := insert(model.ModeSession, nil, "2 hours")
	silentRollback := insert(model.ModeRollback, nil, "3 days")
	young := insert(model.ModeRollback, nil, "10 minutes")
	writing := insert(model.ModeRollback, nil, "5 hours")
	require.NoError(t, b.store.InsertReport(ctx, model.Report{RunID: writing, SessionID: "a", Status: model.StatusRolledBack,
		Trigger: model.TriggerCLI}))
	require.NoError(t, b.store.InsertReport(ctx, model.Report{RunID: silent, SessionID: "b", Status: model.StatusRepaired,
		Trigger: model.TriggerCLI}))
	_, err := b.pool.Exec(ctx, "UPDATE repair_reports SET created_at = now() - interval '90 minutes' WHERE run_id = $1", silent)
	require.NoError(t, err)
	scan := insert(model.ModeFull, nil, "2 hours") // a scan's liveness is its jobs' (CreateRun)

	gone, err := b.store.AbandonDeadRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{silent, silentRollback}, gone)
	run, err := b.store.Run(ctx, silent)
	require.NoError(t, err)
	require.Equal(t, model.RunAbandoned, run.Status)
	require.Contains(t, run.Error, "before run liveness")
	require.Equal(t, model.RunCounts{Scanned: 1, Repaired: 1}, run.Counts, "the counts are its committed reports")
	for _, id := range []int64{young, writing, scan} {
		run, err := b.store.Run(ctx, id)
		require.NoError(t, err)
		require.Equal(t, model.RunRunning, run.Status, "run %d", id)
	}
}
