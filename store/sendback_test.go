package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// A session over sendBackMax is not sent back with its write: its original version is
// copied from the locked row, and is still exactly what was read, alone and in a batch.
func TestApplyCopiesLargeOriginalFromRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	large := `[{"role":"user","content":"` + strings.Repeat("x", store.SendBackMaxForTest) + `"},` + broken[1:]
	ids := []string{"alone", "b1", "b2"}
	for _, id := range ids {
		storetest.Sessions(t, b.pool, model.Session{ID: id, Messages: []byte(large)})
	}
	runID, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "x"})
	require.NoError(t, err)
	var as []model.Apply
	for _, id := range ids {
		page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 4 << 20})
		require.NoError(t, err)
		sess := page[0]
		require.Greater(t, len(sess.Messages), store.SendBackMaxForTest)
		res, err := repair.Repair(sess.Messages, repair.Options{})
		require.NoError(t, err)
		as = append(as, model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired, Dialect: "openai-chat", IssueCodes: res.Report.IssueCodeSet(),
				StageCounts: res.Report.StageCounts, Actions: res.Report.Actions}})
	}
	written := model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}
	out, err := b.store.Apply(ctx, as[0])
	require.NoError(t, err)
	require.Equal(t, written, out)
	outs, errs := b.store.ApplyBatch(ctx, as[1:])
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []model.Outcome{written, written}, outs)
	for _, a := range as {
		var content, hash string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT content, content_hash FROM session_versions
WHERE session_id = $1 AND version = 1 AND kind = 'original'`, a.Session.ID).Scan(&content, &hash))
		require.Equal(t, string(a.Session.Messages), content, a.Session.ID)
		require.Equal(t, model.ContentHash(a.Session.Messages), hash, a.Session.ID)
		require.Contains(t, storetest.Content(t, b.pool, a.Session.ID), repair.SyntheticResultText)
	}
}
