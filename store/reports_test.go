package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// TestReportsInsertedTogetherAsOneByOne: a batch of reports keeps what each would keep
// alone, and a batch whose attempt lost its partition while it was queued writes none
// of them.
func TestReportsInsertedTogetherAsOneByOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Sessions(t, b.pool, model.Session{ID: "a", Messages: []byte(broken)})
	created, err := b.store.CreateRun(ctx, model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "fence",
		DryRun: true}, Partitions: 1}, store.RunJobs{Enqueue: noJobs})
	require.NoError(t, err)
	runID := created.ID
	first, err := b.store.ClaimPartition(ctx, runID, 0)
	require.NoError(t, err)
	lease := &model.Lease{RunID: runID, Attempt: first.Attempt}
	full := model.Report{RunID: runID, SessionID: "a", Status: model.StatusWouldRepair, Trigger: model.TriggerCLI, Actor: "ops",
		Dialect: "openai", Reason: "why", IssueCodes: []string{"orphan_tool_result"},
		StageCounts: map[repair.Stage]int{"drop": 2}, Actions: []repair.Action{{Stage: "drop", Action: repair.ActionRewrite, Detail: "d"}},
		BeforeBytes: 10, AfterBytes: 7, Lease: lease}
	bare := model.Report{RunID: runID, SessionID: "b", Status: model.StatusPending, Trigger: model.TriggerCLI, Lease: lease}
	require.NoError(t, b.store.InsertReport(ctx, full))
	require.NoError(t, b.store.InsertReport(ctx, bare))
	require.NoError(t, b.store.InsertReports(ctx, []model.Report{full, bare}))
	rows := func() []string {
		rs, err := b.pool.Query(ctx, `SELECT concat_ws('|', session_id, status, trigger, dialect, reason, issue_codes::text,
  stage_counts::text, actions::text, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version, actor,
  tmend_version, host, source_key, run_id) FROM repair_reports WHERE run_id = $1 ORDER BY id`, runID)
		require.NoError(t, err)
		defer rs.Close()
		var out []string
		for rs.Next() {
			var s string
			require.NoError(t, rs.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rs.Err())
		return out
	}
	got := rows()
	require.Len(t, got, 4)
	require.Equal(t, got[:2], got[2:], "a batch's rows are those the reports make one by one")

	// A newer attempt claims the partition after the old one queued its batch.
	_, err = b.store.ClaimPartition(ctx, runID, 0)
	require.NoError(t, err)
	full.SessionID, bare.SessionID = "c", "d"
	require.ErrorIs(t, b.store.InsertReports(ctx, []model.Report{full, bare}), model.ErrLeaseLost)
	require.Len(t, rows(), 4, "none of the old attempt's batch is written")

	// One batch holds one lease.
	bare.Lease = &model.Lease{RunID: runID, Attempt: first.Attempt + 1}
	require.Error(t, b.store.InsertReports(ctx, []model.Report{full, bare}))
	require.Len(t, rows(), 4)
}
