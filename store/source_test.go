package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

const (
	brokenA = `[{"role":"user","content":"table a"},{"role":"assistant","content":null,"tool_calls":[{"id":"a1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	brokenB = `[{"role":"user","content":"table b"},{"role":"assistant","content":null,"tool_calls":[{"id":"b1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
)

// twoSources is two user tables holding sessions with the same ids.
type twoSources struct {
	pool *pgxpool.Pool
	a, b *store.Store
}

func setupTwoSources(t *testing.T) *twoSources {
	t.Helper()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	for _, q := range []string{`CREATE TABLE public.a (id text PRIMARY KEY, m jsonb)`, `CREATE TABLE public.b (id text PRIMARY KEY, m jsonb)`} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	for _, id := range []string{"x", "y"} {
		_, err := pool.Exec(ctx, `INSERT INTO public.a VALUES ($1, $2)`, id, brokenA)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO public.b VALUES ($1, $2)`, id, brokenB)
		require.NoError(t, err)
	}
	a, err := store.Open(ctx, pool, store.Source{Table: "public.a", IDColumn: "id", MessagesColumn: "m"}, false)
	require.NoError(t, err)
	b, err := store.Open(ctx, pool, store.Source{Table: "public.b", IDColumn: "id", MessagesColumn: "m"}, false)
	require.NoError(t, err)
	return &twoSources{pool: pool, a: a, b: b}
}

func (s *twoSources) content(t *testing.T, table, id string) string {
	t.Helper()
	var c string
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT m::text FROM public.`+table+` WHERE id = $1`, id).Scan(&c))
	return c
}

func repairOne(t *testing.T, st *store.Store, runID int64, id string) model.Outcome {
	t.Helper()
	page, err := st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 1)
	res, err := repair.Repair(page[0].Messages, repair.Options{})
	require.NoError(t, err)
	out, err := st.Apply(t.Context(), model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.True(t, out.Applied)
	return out
}

// Versions, reports, holds and runs belong to a source: two tables with the same ids
// never touch each other.
func TestSourcesAreKeptApart(t *testing.T) {
	t.Parallel()
	t.Run("RollbackForceRestoresItsOwnTable", func(t *testing.T) {
		t.Parallel()
		s := setupTwoSources(t)
		beforeA := s.content(t, "a", "x")
		require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, repairOne(t, s.a, 0, "x"))
		// Numbered per source: b's first versions of x are 1 and 2 too.
		require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, repairOne(t, s.b, 0, "x"))
		repairedB := s.content(t, "b", "x")

		res, err := s.a.Rollback(t.Context(), model.RollbackRequest{SessionID: "x", Force: true, Trigger: model.TriggerCLI})
		require.NoError(t, err)
		require.True(t, res.Restored(), res.Reason)
		require.Zero(t, res.Preserved, "a's content is still what tmend wrote to a")
		require.Equal(t, beforeA, s.content(t, "a", "x"), "a's own original, not b's")
		require.Equal(t, repairedB, s.content(t, "b", "x"))

		versions, err := s.a.Versions(t.Context(), "x")
		require.NoError(t, err)
		require.Len(t, versions, 3)
		reports, err := s.b.ListReports(t.Context(), model.ReportFilter{SessionID: "x"})
		require.NoError(t, err)
		require.Len(t, reports, 1, "b's history has no rollback of a")
		require.Equal(t, model.StatusRepaired, reports[0].Status)
	})
	t.Run("RepairElsewhereKeepsTheHold", func(t *testing.T) {
		t.Parallel()
		s := setupTwoSources(t)
		repairOne(t, s.a, 0, "x")
		res, err := s.a.Rollback(t.Context(), model.RollbackRequest{SessionID: "x", Trigger: model.TriggerCLI})
		require.NoError(t, err)
		require.True(t, res.Restored(), res.Reason)
		held := func(st *store.Store) bool {
			page, err := st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: "x", MaxBytes: 1 << 20})
			require.NoError(t, err)
			return page[0].HoldHash != ""
		}
		require.True(t, held(s.a))
		require.False(t, held(s.b))
		repairOne(t, s.b, 0, "x")
		require.True(t, held(s.a), "repairing b's x must not release a's hold")
	})
	t.Run("RunRollbackRefusesAnotherMapping", func(t *testing.T) {
		t.Parallel()
		s := setupTwoSources(t)
		runID, _, err := s.a.StartRun(t.Context(), model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "a"})
		require.NoError(t, err)
		repairOne(t, s.a, runID, "x")
		repairOne(t, s.a, runID, "y")
		repairedB := s.content(t, "b", "x")

		_, err = s.b.RunSessions(t.Context(), runID)
		require.ErrorIs(t, err, store.ErrSource)
		require.ErrorContains(t, err, "public.a(id,m)")
		require.Equal(t, repairedB, s.content(t, "b", "x"))

		sessions, err := s.a.RunSessions(t.Context(), runID)
		require.NoError(t, err)
		require.Len(t, sessions, 2)
	})
}
