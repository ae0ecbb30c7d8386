package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// TestListRunsByTriggerAndMode: the console's strip asks for the scheduled scans, and
// its runs list for scans apart from housekeeping.
func TestListRunsByTriggerAndMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	start := func(tr model.Trigger, m model.Mode) int64 {
		id, _, err := b.store.StartRun(ctx, model.Run{Trigger: tr, Mode: m, Source: b.store.Source().Name()})
		require.NoError(t, err)
		return id
	}
	cron := start(model.TriggerCron, model.ModeIncremental)
	full := start(model.TriggerCLI, model.ModeFull)
	rollback := start(model.TriggerCron, model.ModeRollback)
	ids := func(f model.RunFilter) []int64 {
		runs, err := b.store.ListRuns(ctx, f)
		require.NoError(t, err)
		var out []int64
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []int64{rollback, cron}, ids(model.RunFilter{Trigger: model.TriggerCron}))
	require.Equal(t, []int64{full, cron}, ids(model.RunFilter{Modes: []model.Mode{model.ModeIncremental, model.ModeFull}}))
	require.Equal(t, []int64{cron}, ids(model.RunFilter{Trigger: model.TriggerCron, Modes: []model.Mode{model.ModeIncremental}}))
	require.Equal(t, []int64{rollback, full, cron}, ids(model.RunFilter{}))
}

// TestRunPartitions: a run's partitions in order, each with the River client of its
// job's latest attempt, and none for a job River has deleted.
func TestRunPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCron, Mode: model.ModeFull, Source: b.store.Source().Name()})
	require.NoError(t, err)
	var job int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, state, attempt, max_attempts, attempted_by, queue, priority)
VALUES ('x', '{}', 'running', 2, 5, ARRAY['first', 'second'], 'default', 1) RETURNING id`).Scan(&job))
	_, err = b.pool.Exec(ctx, `INSERT INTO run_partitions (run_id, partition, status, job_id, attempt, num_scanned, num_repaired, num_failed, error)
VALUES ($1, 1, 'failed', 999999, 1, 5, 1, 2, 'boom'), ($1, 0, 'running', $2, 2, 40, 3, 0, NULL)`, id, job)
	require.NoError(t, err)
	parts, err := b.store.RunPartitions(ctx, id)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Equal(t, model.PartitionRow{Partition: 0, Status: model.PartitionRunning, Attempt: 2, Scanned: 40, Repaired: 3,
		Worker: "second", UpdatedAt: parts[0].UpdatedAt}, parts[0])
	require.Equal(t, model.PartitionRow{Partition: 1, Status: model.PartitionFailed, Attempt: 1, Scanned: 5, Repaired: 1, Failed: 2,
		Error: "boom", UpdatedAt: parts[1].UpdatedAt}, parts[1])
	none, err := b.store.RunPartitions(ctx, id+1)
	require.NoError(t, err)
	require.Empty(t, none)
}
