package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
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

// bigArgs records every statement pgx sent with an argument over SendBackMaxForTest
// bytes, alone or in an array.
type bigArgs struct {
	mu   sync.Mutex
	seen []string
}

func (b *bigArgs) check(sql string, args []any) {
	for _, a := range args {
		big := false
		switch v := a.(type) {
		case []byte:
			big = len(v) > store.SendBackMaxForTest
		case [][]byte:
			big = slices.ContainsFunc(v, func(e []byte) bool { return len(e) > store.SendBackMaxForTest })
		}
		if big {
			b.mu.Lock()
			b.seen = append(b.seen, sql[:min(len(sql), 60)])
			b.mu.Unlock()
		}
	}
}

func (b *bigArgs) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	b.check(d.SQL, d.Args)
	return ctx
}
func (b *bigArgs) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (b *bigArgs) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		b.check(q.SQL, q.Arguments)
	}
	return ctx
}
func (b *bigArgs) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *bigArgs) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A repair over sendBackMax goes to the database from its own buffer, not through pgx's
// parameter encoding (which copies it twice), alone or given to ApplyBatch; and what is
// stored is exactly that content.
func TestLargeRepairIsSentFromItsBuffer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := store.ParseConfig(storetest.NewDBURL(t), "")
	require.NoError(t, err)
	tracer := &bigArgs{}
	pool := tracedPool(t, cfg, tracer)
	st, err := store.Open(ctx, pool, store.DefaultSource, false)
	require.NoError(t, err)

	large := `[{"role":"user","content":"` + strings.Repeat("é", store.SendBackMaxForTest/2) + `"},` + broken[1:]
	ids := []string{"alone", "b1", "b2"}
	for _, id := range ids {
		storetest.Sessions(t, pool, model.Session{ID: id, Messages: []byte(large)})
	}
	runID, _, err := st.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "x"})
	require.NoError(t, err)
	var as []model.Apply
	for _, id := range ids {
		page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 4 << 20})
		require.NoError(t, err)
		res, err := repair.Repair(page[0].Messages, repair.Options{})
		require.NoError(t, err)
		require.Greater(t, len(res.Messages), store.SendBackMaxForTest)
		as = append(as, model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired, Dialect: "openai-chat", IssueCodes: res.Report.IssueCodeSet(),
				StageCounts: res.Report.StageCounts, Actions: res.Report.Actions}})
	}
	written := model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}
	out, err := st.Apply(ctx, as[0])
	require.NoError(t, err)
	require.Equal(t, written, out)
	outs, errs := st.ApplyBatch(ctx, as[1:])
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []model.Outcome{written, written}, outs)
	require.Empty(t, tracer.seen, "statements sent with the repaired content as a pgx argument")

	for _, a := range as {
		var want, content, hash string
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::jsonb::text`, string(a.NewMessages)).Scan(&want))
		require.Equal(t, want, storetest.Content(t, pool, a.Session.ID), a.Session.ID)
		require.NoError(t, pool.QueryRow(ctx, `SELECT content, content_hash FROM session_versions
WHERE session_id = $1 AND version = 2 AND kind = 'repaired'`, a.Session.ID).Scan(&content, &hash))
		require.Equal(t, want, content, a.Session.ID)
		require.Equal(t, model.ContentHash([]byte(want)), hash, a.Session.ID)
	}
}

// A large repair that the table refuses (a trigger raises, or skips the row's change)
// fails that session with the reason and writes nothing; the pool goes on writing.
func TestLargeRepairRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	large := `[{"role":"user","content":"` + strings.Repeat("x", store.SendBackMaxForTest) + `"},` + broken[1:]
	ids := []string{"raise", "skip", "ok"}
	for _, id := range ids {
		storetest.Sessions(t, b.pool, model.Session{ID: id, Messages: []byte(large)})
	}
	_, err := b.pool.Exec(ctx, `CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id = 'raise' THEN RAISE EXCEPTION 'raise may not change'; END IF;
IF NEW.id = 'skip' THEN RETURN NULL; END IF; RETURN NEW; END $$;
CREATE TRIGGER refuse BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION public.refuse()`)
	require.NoError(t, err)
	var as []model.Apply
	for _, id := range ids {
		page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 4 << 20})
		require.NoError(t, err)
		res, err := repair.Repair(page[0].Messages, repair.Options{})
		require.NoError(t, err)
		as = append(as, model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired}})
	}
	outs, errs := b.store.ApplyBatch(ctx, as)
	require.ErrorContains(t, errs[0], "raise may not change")
	require.ErrorContains(t, errs[1], "changed 0 rows")
	for i := range 2 {
		require.NotErrorIs(t, errs[i], model.ErrUnavailable, "the session fails; it is not retried as an outage")
		require.JSONEq(t, large, storetest.Content(t, b.pool, ids[i]), ids[i])
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM session_versions WHERE session_id = $1`, ids[i]).Scan(&n))
		require.Zero(t, n, ids[i])
	}
	require.NoError(t, errs[2])
	require.True(t, outs[2].Applied)
	require.Contains(t, storetest.Content(t, b.pool, "ok"), repair.SyntheticResultText)
}

// A repair in pieces (Apply.NewPieces) is written by a table of one row per session
// only, the one layout that borrows; any other refuses it and writes nothing.
func TestRepairInPiecesOnlyForRowsOfSessions(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	l.add(t, "s", lcHuman, lcCall2, lcResult1)
	sess := l.read(t, "s")
	before := l.whole(t, "s")
	res, err := repair.RepairPieces(sess.Messages, repair.Options{})
	require.NoError(t, err)
	require.NotNil(t, res.Pieces)
	a := model.Apply{Trigger: model.TriggerCLI, Session: sess, NewPieces: res.Pieces, Report: model.Report{Status: model.StatusRepaired}}
	_, err = l.st.Apply(t.Context(), a)
	require.ErrorContains(t, err, "one row per session only")
	b := a
	b.Session.ID = "other" // a batch of two
	_, errs := l.st.ApplyBatch(t.Context(), []model.Apply{a, b})
	require.ErrorContains(t, errs[0], "one row per session only")
	require.Equal(t, before, l.whole(t, "s"))
}
