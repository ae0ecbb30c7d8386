package scanner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
	// broken lists the ids of loaded sessions that a repair changes.
	broken map[string]bool
}

var old = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// setup loads n generated sessions of several dialects, updated long ago.
func setup(t *testing.T, n int) *testBundle {
	t.Helper()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	b := &testBundle{pool: pool, store: st, broken: map[string]bool{}}
	var sessions []model.Session
	dialects := repair.Dialects()
	for i, d := range dialects {
		cfg := gen.Config{Seed: uint64(i), Dialect: d, Sessions: max(1, n/len(dialects)), Messages: 20, FaultRate: 0.3, Start: old}
		require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
			msgs, _ := json.Marshal(s.Messages)
			id := fmt.Sprintf("%s-%s", d, s.ID)
			sessions = append(sessions, model.Session{ID: id, Messages: msgs, UpdatedAt: s.UpdatedAt})
			return nil
		}))
	}
	storetest.Sessions(t, pool, sessions...)
	// What the database stores (jsonb) is what a run reads; decide brokenness on that.
	rows, err := pool.Query(t.Context(), "SELECT id, messages::text FROM sessions")
	require.NoError(t, err)
	for rows.Next() {
		var id, msgs string
		require.NoError(t, rows.Scan(&id, &msgs))
		if res, _ := repair.Repair([]byte(msgs), repair.Options{}); res.Changed() {
			b.broken[id] = true
		}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, b.broken)
	return b
}

func newScanner(st scanner.Store) *scanner.Scanner {
	return scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 37, RetryBase: time.Millisecond})
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func TestFullRunRepairsAndRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, 210)
	ctx := t.Context()
	res, err := newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, model.ModeFull, res.Mode, "the first incremental run scans everything")
	require.Equal(t, model.RunCompleted, res.Status)
	require.Equal(t, 210, res.Counts.Scanned)
	require.Equal(t, len(b.broken), res.Counts.Repaired)
	require.Equal(t, 210-len(b.broken), res.Counts.Clean)

	// Every repaired session has its two versions and a report; clean ones have nothing.
	require.Equal(t, 2*len(b.broken), count(t, b.pool, "SELECT count(*) FROM session_versions"))
	require.Equal(t, len(b.broken), count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE status = 'repaired' AND run_id = $1", res.RunID))
	require.Equal(t, len(b.broken), count(t, b.pool, "SELECT count(DISTINCT session_id) FROM session_versions"))
	require.Equal(t, len(b.broken), count(t, b.pool, "SELECT num_repaired FROM repair_runs WHERE id = $1 AND status = 'completed'", res.RunID))
	storetest.AllClean(t, b.pool)

	// The next incremental run reads nothing: nothing changed since.
	res2, err := newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, model.ModeIncremental, res2.Mode)
	require.Zero(t, res2.Counts.Scanned)
}

func TestDryRunWritesNoContent(t *testing.T) {
	t.Parallel()
	b := setup(t, 70)
	ctx := t.Context()
	before := count(t, b.pool, "SELECT hashtext(string_agg(messages::text, ',' ORDER BY id)) FROM sessions")
	res, err := newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, len(b.broken), res.Counts.Repaired)
	require.True(t, res.Problems())
	require.Equal(t, before, count(t, b.pool, "SELECT hashtext(string_agg(messages::text, ',' ORDER BY id)) FROM sessions"))
	require.Zero(t, count(t, b.pool, "SELECT count(*) FROM session_versions"))
	require.Equal(t, len(b.broken), count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE status = 'would_repair'"))
	require.Zero(t, count(t, b.pool, "SELECT count(*) FROM scan_state"), "a dry run must not move the incremental position")

	// So an incremental run after it still scans everything, and says why.
	logs := &storetest.Logs{}
	sc := scanner.New(b.store, zerolog.New(logs), scanner.Config{Source: store.DefaultSource.Name()})
	res, err = sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, model.ModeFull, res.Mode)
	require.Contains(t, logs.String(), "no completed scan of this source without --dry-run or --limit yet; this incremental run scans everything")
}

// interfering wraps the store to act between a run's read and its write.
type interfering struct {
	*store.Store
	beforeApply func(id string) error
	sessions    func() error
}

// ApplyBatch calls beforeApply for each session; a session it fails is not written.
func (s *interfering) ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error) {
	outs, errs := make([]model.Outcome, len(as)), make([]error, len(as))
	var pass []int
	for i, a := range as {
		if s.beforeApply != nil {
			if errs[i] = s.beforeApply(a.Session.ID); errs[i] != nil {
				continue
			}
		}
		pass = append(pass, i)
	}
	sub := make([]model.Apply, len(pass))
	for j, i := range pass {
		sub[j] = as[i]
	}
	os, es := s.Store.ApplyBatch(ctx, sub)
	for j, i := range pass {
		outs[i], errs[i] = os[j], es[j]
	}
	return outs, errs
}

func (s *interfering) Sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	if s.sessions != nil {
		if err := s.sessions(); err != nil {
			return nil, err
		}
	}
	return s.Store.Sessions(ctx, q)
}

func TestAWriterAppendingDuringARunLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 35)
	ctx := t.Context()
	victim := slices.Sorted(maps.Keys(b.broken))[0]
	const appendSQL = `UPDATE sessions SET messages = messages || '[{"role":"user","content":"appended by the agent"}]'::jsonb, updated_at = now() WHERE id = $1`
	wrapped := &interfering{Store: b.store, beforeApply: func(id string) error {
		if id == victim {
			_, err := b.pool.Exec(ctx, appendSQL, id)
			return err
		}
		return nil
	}}
	res, err := newScanner(wrapped).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Conflict)
	require.Equal(t, len(b.broken)-1, res.Counts.Repaired)
	require.Contains(t, storetest.Content(t, b.pool, victim), "appended by the agent")
	require.Zero(t, count(t, b.pool, "SELECT count(*) FROM session_versions WHERE session_id = $1", victim))

	// The next run repairs it, append included. The append just changed the session, and
	// in some dialects the appended message does not start a turn of its own, so the
	// quiet period would leave its calls pending: force it.
	res, err = newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental, Force: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Repaired)
	content := storetest.Content(t, b.pool, victim)
	require.Contains(t, content, "appended by the agent")
	v, err := repair.Validate([]byte(content), repair.Options{})
	require.NoError(t, err)
	require.Empty(t, v.Issues)
	require.Equal(t, 2, count(t, b.pool, "SELECT count(*) FROM session_versions WHERE session_id = $1", victim))
}

func TestQuietPeriodLeavesRunningCallsAlone(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	ctx := t.Context()
	// Updated just now, last turn's call without a result: it may still be running.
	_, err = pool.Exec(ctx, `INSERT INTO sessions (id, messages) VALUES ('live', $1::jsonb)`,
		`[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`)
	require.NoError(t, err)
	before := storetest.Content(t, pool, "live")

	res, err := newScanner(st).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Pending)
	require.Equal(t, before, storetest.Content(t, pool, "live"))

	res, err = newScanner(st).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeSession, SessionID: "live", Force: true, KeepOutcomes: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Repaired)
	require.Len(t, res.Outcomes, 1)
	require.Equal(t, 2, res.Outcomes[0].ToVersion)
	require.Contains(t, storetest.Content(t, pool, "live"), "[tmend]")
}

func TestUserTableWithItsOwnShape(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE TABLE public.conversations (conv_id uuid PRIMARY KEY, "Payload" json NOT NULL, modified timestamp NOT NULL DEFAULT '2026-01-01')`)
	require.NoError(t, err)
	for i := range 30 {
		msgs := `[{"role":"user","content":"n=12345678901234567890"}]`
		if i%3 == 0 {
			msgs = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"still there?"}]`
		}
		_, err := pool.Exec(ctx, `INSERT INTO public.conversations (conv_id, "Payload") VALUES (gen_random_uuid(), $1)`, msgs)
		require.NoError(t, err)
	}
	src := store.Source{Table: "public.conversations", IDColumn: "conv_id", MessagesColumn: "Payload", UpdatedAtColumn: "modified"}
	st, err := store.Open(ctx, pool, src, false)
	require.NoError(t, err)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: src.Name(), BatchSize: 7})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, 30, res.Counts.Scanned)
	require.Equal(t, 10, res.Counts.Repaired)
	require.Equal(t, 10, count(t, pool, `SELECT count(*) FROM public.conversations WHERE "Payload"::text LIKE '%[tmend]%'`))
	// json keeps the exact text of what was not touched.
	require.Equal(t, 20, count(t, pool, `SELECT count(*) FROM public.conversations WHERE "Payload"::text = '[{"role":"user","content":"n=12345678901234567890"}]'`))
}

func TestIncrementalRunReadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	b := setup(t, 350)
	ctx := t.Context()
	_, err := newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET updated_at = now() WHERE id IN (SELECT id FROM sessions ORDER BY id LIMIT 4)`)
	require.NoError(t, err)
	var reads atomic.Int64
	counting := &interfering{Store: b.store}
	res, err := newScanner(countingStore{counting, &reads}).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, model.ModeIncremental, res.Mode)
	require.Equal(t, 4, res.Counts.Scanned)
	require.EqualValues(t, 4, reads.Load())
}

type countingStore struct {
	*interfering
	reads *atomic.Int64
}

func (s countingStore) Sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	page, err := s.interfering.Sessions(ctx, q)
	s.reads.Add(int64(len(page)))
	return page, err
}

func TestDatabaseLostMidRun(t *testing.T) {
	t.Parallel()
	t.Run("Transient", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 35)
		var fails atomic.Int64
		flaky := &interfering{Store: b.store, beforeApply: func(string) error {
			if fails.Add(1) <= 3 {
				return fmt.Errorf("%w: connection reset", model.ErrUnavailable)
			}
			return nil
		}}
		res, err := newScanner(flaky).Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
		require.NoError(t, err)
		require.Equal(t, len(b.broken), res.Counts.Repaired)
	})
	t.Run("Permanent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 70)
		var applies atomic.Int64
		gone := &interfering{Store: b.store, beforeApply: func(string) error {
			if applies.Add(1) > 3 {
				return fmt.Errorf("%w: connection refused", model.ErrUnavailable)
			}
			return nil
		}}
		// Retries long enough for the writes let through to commit on a loaded machine.
		sc := scanner.New(gone, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 37, RetryBase: 20 * time.Millisecond})
		res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
		require.Error(t, err)
		require.True(t, errors.Is(err, model.ErrUnavailable))
		require.Equal(t, model.RunFailed, res.Status)
		require.Contains(t, res.Error, "still unavailable")
		// What committed before stays whole (up to the three writes let through; one still
		// in flight when the run gave up is rolled back); nothing else was touched.
		written := count(t, b.pool, "SELECT count(DISTINCT session_id) FROM session_versions")
		require.True(t, written >= 1 && written <= 3, "%d sessions written", written)
		require.Equal(t, 2*written, count(t, b.pool, "SELECT count(*) FROM session_versions"))
		require.Equal(t, written, count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'"))
		require.Equal(t, 1, count(t, b.pool, "SELECT count(*) FROM repair_runs WHERE status = 'failed' AND error LIKE '%unavailable%'"))
		require.Zero(t, count(t, b.pool, "SELECT count(*) FROM scan_state"))
	})
}

// A stored session within --max-bytes whose repair would take more memory than the
// run's default bound (16 MiB + 8 x --max-bytes) is reported too_large with the reason
// and left as it is; the run goes on with the others.
func TestSessionOverTheMemoryBoundIsReported(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	ctx := t.Context()
	// A million empty blocks: 4 MB as jsonb renders them (", {}"), within --max-bytes,
	// and their records over the 48 MiB bound.
	dense := `[{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}` + strings.Repeat(`,{}`, 1_000_000) + `]}]`
	storetest.Sessions(t, pool,
		model.Session{ID: "dense", Messages: []byte(dense), UpdatedAt: old},
		model.Session{ID: "broken", Messages: []byte(`[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`), UpdatedAt: old},
	)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: "x", MaxBytes: 4 << 20})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, model.RunCompleted, res.Status)
	require.Equal(t, 1, res.Counts.Repaired)
	require.Equal(t, 1, res.Counts.Skipped)
	var status, reason string
	require.NoError(t, pool.QueryRow(ctx, "SELECT status, reason FROM repair_reports WHERE session_id = 'dense'").Scan(&status, &reason))
	require.Equal(t, "too_large", status)
	require.Contains(t, reason, "MiB limit; left unchanged")
	require.Zero(t, count(t, pool, "SELECT count(*) FROM session_versions WHERE session_id = 'dense'"), "nothing was written")
}

// unknownCallShape answers a call written in a block shape tmend does not know: the
// result must not be taken for an orphan and dropped.
const unknownCallShape = `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_invocation","id":"c9","tool":"g"}]},{"role":"toolResult","toolCallId":"c9","toolName":"g","content":"real output"}]`

func TestSessionsTmendCannotHandleAreReported(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	ctx := t.Context()
	storetest.Sessions(t, pool,
		model.Session{ID: "big", Messages: []byte(`[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]`), UpdatedAt: old},
		model.Session{ID: "mixed", Messages: []byte(`[{"role":"assistant","content":[{"type":"toolCall","id":"a","name":"f","arguments":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]`), UpdatedAt: old},
		model.Session{ID: "notarray", Messages: []byte(`{"messages":[]}`), UpdatedAt: old},
		model.Session{ID: "unknowncall", Messages: []byte(unknownCallShape), UpdatedAt: old},
		model.Session{ID: "fine", Messages: []byte(`[{"role":"user","content":"hi"}]`), UpdatedAt: old},
	)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: "x", MaxBytes: 250})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, model.RunCompleted, res.Status)
	require.Equal(t, 4, res.Counts.Skipped)
	require.Equal(t, 1, res.Counts.Clean)
	require.Zero(t, count(t, pool, "SELECT count(*) FROM session_versions"), "nothing was written")
	var stored string
	require.NoError(t, pool.QueryRow(ctx, "SELECT messages::text FROM sessions WHERE id = 'unknowncall'").Scan(&stored))
	require.JSONEq(t, unknownCallShape, stored, "a transcript with a call shape tmend does not know is left as it is")
	for id, status := range map[string]string{"big": "too_large", "mixed": "unknown_dialect", "notarray": "unparseable", "unknowncall": "unsupported"} {
		var got, reason string
		require.NoError(t, pool.QueryRow(ctx, "SELECT status, reason FROM repair_reports WHERE session_id = $1", id).Scan(&got, &reason))
		require.Equal(t, status, got, id)
		require.NotEmpty(t, reason, id)
	}
}

// A row whose content is SQL NULL, not JSON or not an array is reported on its own and
// the run goes on, in every messages column type.
func TestUnreadableContentIsReportedAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	const fixable = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"still there?"}]`
	for _, msgType := range []string{"jsonb", "json", "text"} {
		t.Run(strings.ToUpper(msgType[:1])+msgType[1:], func(t *testing.T) {
			t.Parallel()
			pool := storetest.NewDB(t)
			ctx := t.Context()
			_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE public.convs (id bigint PRIMARY KEY, payload %s)`, msgType))
			require.NoError(t, err)
			rows := map[int]*string{1: nil, 2: ptr(`{"messages":[]}`), 3: ptr(`null`), 4: ptr(fixable), 5: ptr(`"text"`)}
			if msgType == "text" {
				rows[6] = ptr(`not json at all`)
				rows[7] = ptr(`[{"role":"user"`)
			}
			for id, v := range rows {
				_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO public.convs VALUES ($1, $2::text::%s)`, msgType), id, v)
				require.NoError(t, err)
			}
			src := store.Source{Table: "public.convs", IDColumn: "id", MessagesColumn: "payload"}
			st, err := store.Open(ctx, pool, src, false)
			require.NoError(t, err)
			sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: src.Name(), BatchSize: 2, Retries: 2, RetryBase: time.Millisecond})
			res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
			require.NoError(t, err)
			require.Equal(t, model.RunCompleted, res.Status)
			require.Equal(t, len(rows), res.Counts.Scanned)
			require.Equal(t, 1, res.Counts.Repaired)
			require.Equal(t, len(rows)-1, res.Counts.Skipped)
			for id := range rows {
				if id == 4 {
					continue
				}
				var status, reason string
				require.NoError(t, pool.QueryRow(ctx, "SELECT status, reason FROM repair_reports WHERE session_id = $1", fmt.Sprint(id)).
					Scan(&status, &reason), id)
				require.Equal(t, string(repair.StatusUnparseable), status, id)
				require.NotEmpty(t, reason, id)
				if id == 1 {
					require.Contains(t, reason, "NULL")
				}
			}
			require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM public.convs WHERE payload IS NULL"), "left alone")
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An updated-at column of type timestamp (no time zone) holds the database's local wall
// clock. Incremental windows and the quiet period must read it in the database's time
// zone, whichever it is.
func TestTimestampColumnInAnyTimeZone(t *testing.T) {
	t.Parallel()
	const answered = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"still there?"}]`
	const running = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	for _, tz := range []string{"Asia/Tokyo", "America/Los_Angeles", "UTC"} {
		t.Run(strings.NewReplacer("/", "", "_", "").Replace(tz), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := storetest.NewDBURL(t)
			admin, err := store.Connect(ctx, url, store.DefaultSchema)
			require.NoError(t, err)
			_, err = admin.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET timezone = %%L', current_database(), '%s'); END $$`, tz))
			require.NoError(t, err)
			admin.Close()
			pool, err := store.Connect(ctx, url, store.DefaultSchema) // new connections: the database's time zone
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			var got string
			require.NoError(t, pool.QueryRow(ctx, "SHOW timezone").Scan(&got))
			require.Equal(t, tz, got)

			_, err = pool.Exec(ctx, `CREATE TABLE public.convs (id text PRIMARY KEY, payload jsonb NOT NULL, modified timestamp NOT NULL DEFAULT now())`)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `INSERT INTO public.convs (id, payload, modified) VALUES ('a', '[]', now() - interval '2 days'), ('b', '[]', now() - interval '2 days')`)
			require.NoError(t, err)
			src := store.Source{Table: "public.convs", IDColumn: "id", MessagesColumn: "payload", UpdatedAtColumn: "modified"}
			st, err := store.Open(ctx, pool, src, false)
			require.NoError(t, err)
			sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: src.Name()})
			res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
			require.NoError(t, err)
			require.Equal(t, model.ModeFull, res.Mode)
			require.Equal(t, 2, res.Counts.Scanned)

			// Changed after the completed run, by the database's clock: the next incremental
			// run reads them. 'a' is broken and answerable; 'b' has a call of its last turn,
			// changed just now: it may still be running.
			_, err = pool.Exec(ctx, `UPDATE public.convs SET payload = $1, modified = now() WHERE id = 'a'`, answered)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `UPDATE public.convs SET payload = $1, modified = now() WHERE id = 'b'`, running)
			require.NoError(t, err)
			res, err = sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental})
			require.NoError(t, err)
			require.Equal(t, model.ModeIncremental, res.Mode)
			require.Equal(t, 2, res.Counts.Scanned, "sessions changed since the last run")
			require.Equal(t, 2, res.Counts.Repaired+res.Counts.Pending)
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM repair_reports WHERE session_id = 'b' AND status = 'pending' AND run_id = $1`, res.RunID),
				"a call of the last turn changed just now is within the quiet period")
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM public.convs WHERE id = 'b' AND payload::text NOT LIKE '%[tmend]%'`))

			// And nothing changed since: the run after reads nothing new but what the overlap
			// re-reads, and the pages walk the column in its own type.
			res, err = sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental})
			require.NoError(t, err)
			require.LessOrEqual(t, res.Counts.Scanned, 2)
		})
	}
}

// inflight wraps the store to track the content read and not yet reported on: a dry run
// reports every broken session, so what a page brings is in flight until its report.
type inflight struct {
	*store.Store
	mu      sync.Mutex
	cur     int
	peak    int
	bigSeen bool // a session over the budget was read while nothing else was in flight
	limit   int
	bad     []string
}

func (s *inflight) Sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	page, err := s.Store.Sessions(ctx, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range page {
		if len(sess.Messages) > s.limit {
			if s.cur != 0 {
				s.bad = append(s.bad, fmt.Sprintf("%s (%d bytes) read with %d bytes in flight", sess.ID, len(sess.Messages), s.cur))
			}
			s.bigSeen = true
		}
		s.cur += len(sess.Messages)
	}
	s.peak = max(s.peak, s.cur)
	return page, err
}

func (s *inflight) InsertReports(ctx context.Context, rs []model.Report) error {
	s.mu.Lock()
	for _, r := range rs {
		s.cur -= r.BeforeBytes
	}
	s.mu.Unlock()
	return s.Store.InsertReports(ctx, rs)
}

// The content a run holds is bounded in bytes, not in sessions: pages and workers stay
// within MaxInflightBytes, and a session larger than that is read and handled alone.
func TestBytesInFlightAreBounded(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	const limit = 300_000
	var sessions []model.Session
	for i := range 40 {
		size := 60_000
		if i == 17 {
			size = 700_000 // over the whole budget
		}
		msgs := fmt.Sprintf(`[{"role":"user","content":"%s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`,
			strings.Repeat("x", size))
		sessions = append(sessions, model.Session{ID: fmt.Sprintf("s%02d", i), Messages: []byte(msgs), UpdatedAt: old})
	}
	storetest.Sessions(t, pool, sessions...)

	// Alone is told of each session handled alone, and done with it once.
	var mu sync.Mutex
	var alone []int
	var open int
	onAlone := func(size int) func() {
		mu.Lock()
		defer mu.Unlock()
		alone, open = append(alone, size), open+1
		return func() {
			mu.Lock()
			defer mu.Unlock()
			open--
		}
	}
	for _, workers := range []int{1, 4} {
		w := &inflight{Store: st, limit: limit}
		alone = nil
		sc := scanner.New(w, zerolog.Nop(), scanner.Config{Source: "x", Workers: workers, MaxInflightBytes: limit, Alone: onAlone})
		res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
		require.NoError(t, err)
		require.Equal(t, 40, res.Counts.Scanned)
		require.Equal(t, 40, res.Counts.Repaired)
		require.Empty(t, w.bad)
		require.True(t, w.bigSeen)
		require.LessOrEqual(t, w.peak, 700_200, "only the large session alone may exceed the budget")
		require.Zero(t, w.cur)
		require.Len(t, alone, 1)
		require.Greater(t, alone[0], 700_000)
		require.Zero(t, open)
	}
	// Pages of small sessions stay within the budget too.
	w := &inflight{Store: st, limit: limit}
	_, err = pool.Exec(t.Context(), `DELETE FROM sessions WHERE id = 's17'`)
	require.NoError(t, err)
	alone = nil
	sc := scanner.New(w, zerolog.Nop(), scanner.Config{Source: "x", Workers: 4, MaxInflightBytes: limit, Alone: onAlone})
	res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 39, res.Counts.Repaired)
	require.Empty(t, alone)
	require.LessOrEqual(t, w.peak, limit)
	require.Greater(t, w.peak, limit/2, "the budget is used, not one session at a time")
}

// A run's rollback counts restored, refused and failed sessions as such, on its result
// and on its run row (not as repaired and conflict).
func TestRollbackOfARunCountsWhatHappened(t *testing.T) {
	t.Parallel()
	b := setup(t, 28)
	ctx := t.Context()
	sc := newScanner(b.store)
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, len(b.broken), res.Counts.Repaired)
	require.GreaterOrEqual(t, len(b.broken), 2)
	var changed string
	for id := range b.broken {
		changed = id
		break
	}
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET messages = messages || '[{"role":"user","content":"later"}]'::jsonb WHERE id = $1`, changed)
	require.NoError(t, err)

	out, err := sc.Rollback(ctx, model.RollbackOptions{RunID: res.RunID, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, len(b.broken)-1, out.Restored)
	require.Equal(t, 1, out.Refused)
	require.Zero(t, out.Failed)
	require.Len(t, out.Sessions, len(b.broken))
	require.NotZero(t, out.RunID)

	row, err := b.store.Run(ctx, out.RunID)
	require.NoError(t, err)
	require.Equal(t, model.ModeRollback, row.Mode)
	require.Equal(t, model.RunCompleted, row.Status)
	require.Equal(t, model.RunCounts{Scanned: len(b.broken), Restored: len(b.broken) - 1, Refused: 1}, row.Counts)

	// A run that does not exist is an error; nothing is recorded for it.
	_, err = sc.Rollback(ctx, model.RollbackOptions{RunID: 999999, Trigger: model.TriggerCLI})
	require.ErrorIs(t, err, model.ErrNotFound)
}

// Repairing a session that does not exist is the caller's mistake: no run is recorded
// (a failed run would page the operator).
func TestMissingSessionRecordsNoRun(t *testing.T) {
	t.Parallel()
	b := setup(t, 7)
	_, err := newScanner(b.store).Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerAPI, Mode: model.ModeSession, SessionID: "nope"})
	require.ErrorIs(t, err, model.ErrNotFound)
	require.Zero(t, count(t, b.pool, "SELECT count(*) FROM repair_runs"))
}

// A session whose write fails (a trigger of the table raises) is failed alone, with the
// database's reason, in the run's counts and its report; the sessions written with it
// are repaired.
func TestASessionThatFailsItsWriteFailsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, 140)
	ctx := t.Context()
	victim := slices.Sorted(maps.Keys(b.broken))[len(b.broken)/2]
	_, err := b.pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id = '%s' THEN RAISE EXCEPTION 'this session is frozen'; END IF; RETURN NEW; END $$;
CREATE TRIGGER refuse BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse()`, strings.ReplaceAll(victim, "'", "''")))
	require.NoError(t, err)
	res, err := newScanner(b.store).Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Failed)
	require.Equal(t, len(b.broken)-1, res.Counts.Repaired)
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE session_id = $1 AND status = 'failed' AND reason LIKE '%this session is frozen%'`, victim))
	require.Equal(t, len(b.broken)-1, count(t, b.pool, `SELECT count(*) FROM repair_reports WHERE status = 'repaired'`))
	require.Equal(t, 2*(len(b.broken)-1), count(t, b.pool, `SELECT count(*) FROM session_versions`))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM session_versions WHERE session_id = $1`, victim))
	require.Equal(t, 1, count(t, b.pool, `SELECT num_failed FROM repair_runs WHERE id = $1`, res.RunID))
}

// A dry run's reports, written by the writers in batches, are all there, once each, and
// the run counts the sessions they report.
func TestDryRunReportsAllPresentAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, 140)
	ctx := t.Context()
	var odd []model.Session
	for i := range 30 {
		odd = append(odd, model.Session{ID: fmt.Sprintf("large-%02d", i), UpdatedAt: old,
			Messages: []byte(`[{"role":"user","content":"` + strings.Repeat("x", 200_000) + `"}]`)})
		odd = append(odd, model.Session{ID: fmt.Sprintf("odd-%02d", i), UpdatedAt: old, Messages: []byte(`{"not":"an array"}`)})
	}
	storetest.Sessions(t, b.pool, odd...)
	sc := scanner.New(b.store, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 23, MaxBytes: 100_000,
		RetryBase: time.Millisecond})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 200, res.Counts.Scanned)
	reported := res.Counts.Scanned - res.Counts.Clean
	require.Equal(t, len(b.broken)+60, reported)
	require.Equal(t, reported, count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE run_id = $1", res.RunID))
	require.Equal(t, reported, count(t, b.pool, "SELECT count(DISTINCT session_id) FROM repair_reports WHERE run_id = $1", res.RunID))
	require.Equal(t, len(b.broken), count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE run_id = $1 AND status = 'would_repair'", res.RunID))
	require.Equal(t, 30, count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE run_id = $1 AND status = 'too_large'", res.RunID))
	require.Equal(t, 30, count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE run_id = $1 AND session_id LIKE 'odd-%'", res.RunID))
	require.Equal(t, res.Counts.Scanned, count(t, b.pool, "SELECT num_scanned FROM repair_runs WHERE id = $1", res.RunID))
}

// reportCalls counts the store calls that write reports alone.
type reportCalls struct {
	*store.Store
	calls atomic.Int32
}

func (s *reportCalls) InsertReports(ctx context.Context, rs []model.Report) error {
	s.calls.Add(1)
	return s.Store.InsertReports(ctx, rs)
}

// A dry run's reports wait for more to go with them (a transaction each, on the database
// the run reads, was most of what a dry run's writes cost it): with a linger longer than
// the run, every batch but each writer's last is full.
func TestDryRunReportsGoTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, 300)
	st := &reportCalls{Store: b.store}
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: store.DefaultSource.Name(), BatchSize: 23,
		RetryBase: time.Millisecond, ReportsLinger: time.Hour})
	res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
	require.NoError(t, err)
	reported := res.Counts.Scanned - res.Counts.Clean
	require.Greater(t, reported, 64)
	require.Equal(t, reported, count(t, b.pool, "SELECT count(*) FROM repair_reports WHERE run_id = $1", res.RunID))
	require.LessOrEqual(t, int(st.calls.Load()), reported/64+2, "%d reports", reported)
}

// Reports waiting for more hold their sessions' budget: a writer stops waiting at a
// quarter of it, so that the reader, waiting for room, never waits for the linger.
func TestWaitingReportsLeaveTheReaderRoom(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	var sessions []model.Session
	for i := range 20 {
		msgs := fmt.Sprintf(`[{"role":"user","content":"%s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`,
			strings.Repeat("x", 60_000))
		sessions = append(sessions, model.Session{ID: fmt.Sprintf("s%02d", i), Messages: []byte(msgs), UpdatedAt: old})
	}
	storetest.Sessions(t, pool, sessions...)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: "x", MaxInflightBytes: 300_000, ReportsLinger: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 20, res.Counts.Repaired)
}

// borrowing wraps the store to check a session read alone without a copy (Query.Borrow):
// its content must be what was read until it is written, and be released once, after
// that (a dry run's report needs none of it: released once handled).
type borrowing struct {
	*store.Store
	mu       sync.Mutex
	want     map[string][]byte // borrowed sessions' content as read
	released map[string]int
	early    []string
}

func (s *borrowing) Sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	page, err := s.Store.Sessions(ctx, q)
	for i, sess := range page {
		if sess.Release == nil {
			continue
		}
		s.mu.Lock()
		s.want[sess.ID] = slices.Clone(sess.Messages)
		s.mu.Unlock()
		release := sess.Release
		page[i].Release = func() {
			s.mu.Lock()
			s.released[sess.ID]++
			s.mu.Unlock()
			release()
		}
	}
	return page, err
}

// held notes a borrowed session used after its release, or whose content changed.
func (s *borrowing) held(id string, msgs []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if want, ok := s.want[id]; ok && (s.released[id] > 0 || string(msgs) != string(want)) {
		s.early = append(s.early, id)
	}
}

func (s *borrowing) ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error) {
	for _, a := range as {
		s.held(a.Session.ID, a.Session.Messages)
	}
	return s.Store.ApplyBatch(ctx, as)
}

// A session larger than the whole budget is read alone and not copied out of the read:
// the read stays open (its content valid) until the repair is written, and is then
// released, once; in a dry run too.
func TestASessionReadAloneIsHeldUntilWritten(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	var sessions []model.Session
	for i, size := range []int{1000, 700_000, 2000} {
		msgs := fmt.Sprintf(`[{"role":"user","content":"%s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`,
			strings.Repeat("x", size))
		sessions = append(sessions, model.Session{ID: fmt.Sprintf("s%d", i), Messages: []byte(msgs), UpdatedAt: old})
	}
	storetest.Sessions(t, pool, sessions...)

	for _, dry := range []bool{true, false} {
		b := &borrowing{Store: st, want: map[string][]byte{}, released: map[string]int{}}
		sc := scanner.New(b, zerolog.Nop(), scanner.Config{Source: "x", Workers: 2, MaxInflightBytes: 300_000})
		res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: dry})
		require.NoError(t, err)
		require.Equal(t, 3, res.Counts.Repaired)
		require.Equal(t, []string{"s1"}, slices.Collect(maps.Keys(b.want)), "only the session over the budget is borrowed")
		require.Empty(t, b.early, "released before it was written")
		require.Equal(t, map[string]int{"s1": 1}, b.released)
	}
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM sessions WHERE messages::text LIKE '%"tool_calls"%' AND messages::text NOT LIKE '%"role": "tool"%'`), "all written")
}
