package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
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

// TestAnOldAttemptNeverWritesAPartitionTakenOver: a write of a partition attempt commits
// only while that attempt holds the partition. A claim by a newer attempt waits for the
// old attempt's write in flight, and the old attempt's later writes, repairs and reports
// alike, are refused; so are the newer attempt's once the partition ended.
func TestAnOldAttemptNeverWritesAPartitionTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Sessions(t, b.pool, model.Session{ID: "a", Messages: []byte(broken)}, model.Session{ID: "b", Messages: []byte(broken)})
	created, err := b.store.CreateRun(ctx, model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "fence"},
		Partitions: 1}, store.RunJobs{Enqueue: noJobs})
	require.NoError(t, err)
	runID := created.ID
	first, err := b.store.ClaimPartition(ctx, runID, 0)
	require.NoError(t, err)
	apply := func(id string, attempt int) (model.Outcome, error) {
		page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
		require.NoError(t, err)
		res, err := repair.Repair(page[0].Messages, repair.Options{})
		require.NoError(t, err)
		return b.store.Apply(ctx, model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired, Lease: &model.Lease{RunID: runID, Attempt: attempt}}})
	}
	waiting := func(locktype string) bool {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = $1 AND NOT granted`, locktype).Scan(&n))
		return n > 0
	}

	// The first attempt's write of a goes as far as its report, which waits for a table
	// lock held here; meanwhile the partition is claimed again.
	hold, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer hold.Rollback(ctx) //nolint:errcheck
	_, err = hold.Exec(ctx, "LOCK TABLE repair_reports IN SHARE MODE")
	require.NoError(t, err)
	type result struct {
		out model.Outcome
		err error
	}
	written := make(chan result, 1)
	go func() {
		out, err := apply("a", first.Attempt)
		written <- result{out, err}
	}()
	require.Eventually(t, func() bool { return waiting("relation") }, 4*time.Second, 10*time.Millisecond)
	claimed := make(chan model.Claim, 1)
	go func() {
		c, err := b.store.ClaimPartition(ctx, runID, 0)
		assert.NoError(t, err)
		claimed <- c
	}()
	require.Eventually(t, func() bool { return waiting("advisory") }, 4*time.Second, 10*time.Millisecond,
		"the claim waits for the write that holds the lease")
	select {
	case <-claimed:
		t.Fatal("the partition was claimed while the old attempt's write was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, hold.Rollback(ctx))
	w := <-written
	require.NoError(t, w.err)
	require.True(t, w.out.Applied, "the write in flight held the lease: it commits")
	second := <-claimed
	require.Equal(t, first.Attempt+1, second.Attempt)

	// From now on the first attempt writes nothing.
	before := storetest.Content(t, b.pool, "b")
	_, err = apply("b", first.Attempt)
	require.ErrorIs(t, err, model.ErrLeaseLost)
	require.Equal(t, before, storetest.Content(t, b.pool, "b"))
	err = b.store.InsertReport(ctx, model.Report{RunID: runID, SessionID: "b", Status: model.StatusFailed, Trigger: model.TriggerCLI,
		Lease: &model.Lease{RunID: runID, Attempt: first.Attempt}})
	require.ErrorIs(t, err, model.ErrLeaseLost)
	require.NoError(t, b.store.InsertReport(ctx, model.Report{RunID: runID, SessionID: "b", Status: model.StatusFailed, Trigger: model.TriggerCLI,
		Lease: &model.Lease{RunID: runID, Attempt: second.Attempt}}))

	// Once the partition ended, not even its last attempt writes.
	_, err = b.store.EndPartition(ctx, model.PartitionEnd{Checkpoint: model.Checkpoint{RunID: runID, Attempt: second.Attempt,
		SoFar: model.NewRunResult()}, Status: model.PartitionCompleted})
	require.NoError(t, err)
	_, err = apply("b", second.Attempt)
	require.ErrorIs(t, err, model.ErrLeaseLost)
	require.Equal(t, before, storetest.Content(t, b.pool, "b"))
	var reports int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM repair_reports WHERE run_id = $1`, runID).Scan(&reports))
	require.Equal(t, 2, reports, "a's repair and b's report of the second attempt")
}

// beginCounter counts the transactions begun on the connections it traces.
type beginCounter struct{ n atomic.Int32 }

func (c *beginCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(d.SQL, "begin") {
		c.n.Add(1)
	}
	return ctx
}

func (c *beginCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// With no dead run to end, a scan is recorded, or refused as busy, in the one transaction
// that looked; a dead run ends in a transaction of its own first.
func TestCreateRunIsOneTransactionWhenNoRunIsDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	cfg := b.pool.Config()
	begins := &beginCounter{}
	pool := tracedPool(t, cfg, begins)
	st, err := store.Open(ctx, pool, store.DefaultSource, false)
	require.NoError(t, err)
	src := store.DefaultSource.Name()
	scan := model.NewRun{Run: model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: src}, Partitions: 1}

	begins.n.Store(0)
	created, err := st.CreateRun(ctx, scan, store.RunJobs{Enqueue: noJobs})
	require.NoError(t, err)
	require.EqualValues(t, 1, begins.n.Load(), "recorded")
	run, err := st.Run(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, model.RunRunning, run.Status)
	require.Equal(t, 1, run.Partitions)

	// Nothing works it: the next scan that asks for another ends it first, in a
	// transaction of its own.
	begins.n.Store(0)
	incr := scan
	incr.Mode = model.ModeIncremental
	next, err := st.CreateRun(ctx, incr, store.RunJobs{Enqueue: noJobs})
	require.NoError(t, err)
	require.Equal(t, []int64{created.ID}, next.Abandoned)
	require.EqualValues(t, 2, begins.n.Load(), "abandoned, then recorded")

	// A scan one process works alone is alive while its process is: busy.
	other := store.Source{Table: "sessions", IDColumn: "id", MessagesColumn: "messages"}
	ost, err := store.Open(ctx, pool, other, false)
	require.NoError(t, err)
	_, _, err = ost.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: other.Name()})
	require.NoError(t, err)
	busy := scan
	busy.Source = other.Name()
	begins.n.Store(0)
	_, err = ost.CreateRun(ctx, busy, store.RunJobs{Enqueue: noJobs})
	require.ErrorIs(t, err, model.ErrBusy)
	require.EqualValues(t, 1, begins.n.Load(), "busy")
}
