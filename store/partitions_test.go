package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// noJobs stands in for River's insert: these tests claim the partitions themselves.
func noJobs(_ context.Context, _ pgx.Tx, _ int64, parts []int) ([]int64, error) {
	return make([]int64, len(parts)), nil
}

// readSlice pages through one partition as a partition job does and returns its ids.
func readSlice(t *testing.T, st *store.Store, q model.Query) []string {
	t.Helper()
	var ids []string
	for {
		page, err := st.Sessions(t.Context(), q)
		require.NoError(t, err)
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		if len(page) < q.Limit {
			return ids
		}
		l := page[len(page)-1]
		q.After = model.Cursor{Position: l.Position, ID: l.ID, Started: true}
	}
}

// TestPartitionsAreRangesOfIds: a run's partitions split the ids into disjoint ranges
// of similar size that cover every session, in full and incremental runs, for text and
// uuid ids alike; a table too small for the partitions asked for gets fewer.
func TestPartitionsAreRangesOfIds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const n = 5000
	// Ids of two lengths, so that their text order is not their numeric order.
	for _, sql := range []string{
		"CREATE TABLE public.convs (conv_id uuid PRIMARY KEY, payload jsonb, modified timestamptz)",
		"INSERT INTO public.convs SELECT gen_random_uuid(), '[]', now() - interval '1 hour' FROM generate_series(1, $1)",
		"INSERT INTO tmend.sessions (id, messages, updated_at) SELECT 'x' || g, '[]', now() - interval '1 hour' FROM generate_series(1, $1) g",
		"ANALYZE public.convs", "ANALYZE tmend.sessions",
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, n)
		}
		_, err := b.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// What an incremental run from a time reads, by the statistics.
	all, err := b.store.EstimateChanged(ctx, time.Now().Add(-2*time.Hour))
	require.NoError(t, err)
	require.InDelta(t, n, all, n*0.1)
	none, err := b.store.EstimateChanged(ctx, time.Now())
	require.NoError(t, err)
	require.Less(t, none, int64(n/100))
	since := time.Now().Add(-2 * time.Hour)
	for _, tt := range []struct {
		run     model.RunRow
		atLeast int64
	}{
		{model.RunRow{Mode: model.ModeFull}, n * 9 / 10},
		{model.RunRow{Mode: model.ModeIncremental, ScannedFrom: &since}, n * 9 / 10},
		{model.RunRow{Mode: model.ModeFull, Options: map[string]any{"limit": 100.0}}, 100},
	} {
		est, err := b.store.EstimateRun(ctx, tt.run)
		require.NoError(t, err)
		require.GreaterOrEqual(t, est, tt.atLeast, "%+v", tt.run)
		require.LessOrEqual(t, est, max(tt.atLeast*12/10, 100), "%+v", tt.run)
	}

	convs, err := store.Open(ctx, b.pool, store.Source{Table: "public.convs", IDColumn: "conv_id", MessagesColumn: "payload",
		UpdatedAtColumn: "modified"}, false)
	require.NoError(t, err)

	for name, st := range map[string]*store.Store{"text": b.store, "uuid": convs} {
		for _, mode := range []model.Mode{model.ModeFull, model.ModeIncremental} {
			src := fmt.Sprintf("%s-%s", name, mode)
			created, err := st.CreateRun(ctx, model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: mode, Source: src},
				Partitions: 7, ScannedFrom: time.Now().Add(-24 * time.Hour)}, store.RunJobs{Enqueue: noJobs})
			require.NoError(t, err)
			runID := created.ID
			seen := map[string]int{}
			for p := range 7 {
				c, err := st.ClaimPartition(ctx, runID, p)
				require.NoError(t, err)
				require.Equal(t, p == 0, c.Slice.Lower == nil, "only the first range is open below")
				require.Equal(t, p == 6, c.Slice.Upper == nil, "only the last range is open above")
				ids := readSlice(t, st, model.Query{Mode: mode, From: time.Now().Add(-24 * time.Hour), To: time.Now(),
					Limit: 100, MaxBytes: 1 << 20, Slice: c.Slice})
				require.InDelta(t, n/7, len(ids), n/7*0.3, "%s partition %d holds about a seventh", src, p)
				for _, id := range ids {
					seen[id]++
				}
			}
			require.Equal(t, n, len(seen), "%s: sessions read", src)
			for id, times := range seen {
				require.Equal(t, 1, times, "%s: %s read by %d partitions", src, id, times)
			}
			_, err = b.pool.Exec(ctx, "UPDATE repair_runs SET status = 'completed', finished_at = now() WHERE id = $1", runID)
			require.NoError(t, err)
		}
	}

	// Three sessions make at most three ranges, whatever was asked; none makes one.
	small := setup(t)
	_, err = small.pool.Exec(ctx, "INSERT INTO tmend.sessions (id, messages) VALUES ('a', '[]'), ('b', '[]'), ('c', '[]')")
	require.NoError(t, err)
	for _, tc := range []struct { // in this order: the second deletes the sessions
		want   int
		source string
	}{{3, "three"}, {1, "empty"}} {
		want, source := tc.want, tc.source
		if want == 1 {
			_, err = small.pool.Exec(ctx, "DELETE FROM tmend.sessions")
			require.NoError(t, err)
		}
		created, err := small.store.CreateRun(ctx, model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull,
			Source: source}, Partitions: 50}, store.RunJobs{Enqueue: noJobs})
		require.NoError(t, err)
		runID := created.ID
		run, err := small.store.Run(ctx, runID)
		require.NoError(t, err)
		require.Equal(t, want, run.Partitions, source)
		_, err = small.pool.Exec(ctx, "UPDATE repair_runs SET status = 'completed', finished_at = now() WHERE id = $1", runID)
		require.NoError(t, err)
	}
}

// TestEstimateRunIsUnknownBeforeAnalyze: a table never analyzed (as after an import)
// has no estimate, rather than the planner's guess from its pages; once analyzed it has.
func TestEstimateRunIsUnknownBeforeAnalyze(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const n = 3000
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.fresh (id text PRIMARY KEY, messages jsonb, updated_at timestamptz);
INSERT INTO public.fresh SELECT 'f' || g, '[]', now() - interval '1 hour' FROM generate_series(1, 3000) g`)
	require.NoError(t, err)
	st, err := store.Open(ctx, b.pool, store.Source{Table: "public.fresh", IDColumn: "id", MessagesColumn: "messages", UpdatedAtColumn: "updated_at"}, false)
	require.NoError(t, err)
	since := time.Now().Add(-2 * time.Hour)
	runs := []model.RunRow{{Mode: model.ModeFull}, {Mode: model.ModeIncremental, ScannedFrom: &since}}
	for _, r := range runs {
		est, err := st.EstimateRun(ctx, r)
		require.NoError(t, err)
		require.Zero(t, est, "never analyzed: unknown (%s)", r.Mode)
	}
	_, err = b.pool.Exec(ctx, "ANALYZE public.fresh")
	require.NoError(t, err)
	for _, r := range runs {
		est, err := st.EstimateRun(ctx, r)
		require.NoError(t, err)
		require.InDelta(t, n, est, n*0.1, r.Mode)
	}
}
