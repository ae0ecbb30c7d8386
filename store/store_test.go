package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

var _ scanner.Store = (*store.Store)(nil)

const broken = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	return &testBundle{pool: pool, store: st}
}

func TestSourceChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.convs (conv_id uuid PRIMARY KEY, payload json, modified timestamptz, n int);
CREATE TABLE public.bare ()`)
	require.NoError(t, err)

	tests := []struct {
		name string
		src  store.Source
		want string
	}{
		{"MissingTable", store.Source{Table: "nope", IDColumn: "id", MessagesColumn: "m"}, `table "nope" does not exist`},
		{"MissingColumn", store.Source{Table: "public.convs", IDColumn: "id", MessagesColumn: "payload"}, `has no id column "id"`},
		{"TableWithoutColumns", store.Source{Table: "public.bare", IDColumn: "id", MessagesColumn: "m"}, `has no id column "id"`},
		{"WrongMessagesType", store.Source{Table: "public.convs", IDColumn: "conv_id", MessagesColumn: "n"}, `is int4; want jsonb, json or text`},
		{"WrongUpdatedAtType", store.Source{Table: "public.convs", IDColumn: "conv_id", MessagesColumn: "payload", UpdatedAtColumn: "n"}, "want timestamptz or timestamp"},
		{"InjectionIsJustAName", store.Source{Table: `convs"; DROP TABLE sessions; --`, IDColumn: "id", MessagesColumn: "m"}, "does not exist"},
	}
	for _, tt := range tests {
		_, err := store.Open(ctx, b.pool, tt.src, false)
		require.ErrorIs(t, err, store.ErrSource, tt.name)
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	_, err = store.Open(ctx, b.pool, store.Source{Table: "public.convs", IDColumn: "conv_id", MessagesColumn: "payload", UpdatedAtColumn: "modified"}, false)
	require.NoError(t, err)

	// A role that may read but not update passes only read-only.
	_, err = b.pool.Exec(ctx, `CREATE ROLE tmend_reader_`+fmt.Sprint(time.Now().UnixNano())+` ; `)
	require.NoError(t, err)
	var role string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT rolname FROM pg_roles WHERE rolname LIKE 'tmend_reader_%' ORDER BY oid DESC LIMIT 1`).Scan(&role))
	t.Cleanup(func() { b.pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) }) //nolint:errcheck
	_, err = b.pool.Exec(ctx, fmt.Sprintf(`GRANT USAGE ON SCHEMA tmend TO %[1]s; GRANT SELECT ON tmend.sessions TO %[1]s`, role))
	require.NoError(t, err)
	conn := connAs(t, b.pool, role)
	_, err = store.CheckSourceForTest(ctx, conn, store.DefaultSource, false)
	require.ErrorContains(t, err, `may not UPDATE column "messages"`)
	_, err = store.CheckSourceForTest(ctx, conn, store.DefaultSource, true)
	require.NoError(t, err)
	// Column-level UPDATE on the messages column is all writing needs.
	_, err = b.pool.Exec(ctx, fmt.Sprintf(`GRANT UPDATE (messages) ON tmend.sessions TO %s`, role))
	require.NoError(t, err)
	_, err = store.CheckSourceForTest(ctx, conn, store.DefaultSource, false)
	require.NoError(t, err)
	// Touching updated_at needs UPDATE on it too.
	touch := store.DefaultSource
	touch.TouchUpdatedAt = true
	_, err = store.CheckSourceForTest(ctx, conn, touch, false)
	require.ErrorContains(t, err, `may not UPDATE column "updated_at"`)
}

// The messages layout needs SELECT to read, and INSERT, UPDATE, DELETE and the order
// column's sequence to write.
func TestMessageSourcePrivileges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	role := fmt.Sprintf("tmend_msgs_%d", time.Now().UnixNano())
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.msgs (id bigserial PRIMARY KEY, sid text, ord bigserial, msg jsonb);
CREATE ROLE `+role+`; GRANT USAGE ON SCHEMA tmend TO `+role+`; GRANT SELECT ON public.msgs TO `+role)
	require.NoError(t, err)
	t.Cleanup(func() { b.pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) }) //nolint:errcheck
	conn := connAs(t, b.pool, role)
	src := store.Source{Table: "public.msgs", Layout: store.LayoutMessages, SessionColumn: "sid", OrderColumn: "ord", MessageColumn: "msg"}

	require.NoError(t, store.CheckMessageSourceForTest(ctx, conn, src, true))
	err = store.CheckMessageSourceForTest(ctx, conn, src, false)
	require.ErrorIs(t, err, store.ErrSource)
	require.ErrorContains(t, err, `may not INSERT on "public.msgs"`)
	for _, grant := range []struct{ priv, next string }{{"INSERT", "may not UPDATE"}, {"UPDATE", "may not DELETE"}, {"DELETE", "may not use the sequence"}} {
		_, err = b.pool.Exec(ctx, "GRANT "+grant.priv+" ON public.msgs TO "+role)
		require.NoError(t, err)
		err = store.CheckMessageSourceForTest(ctx, conn, src, false)
		require.ErrorIs(t, err, store.ErrSource, grant.priv)
		require.ErrorContains(t, err, grant.next, grant.priv)
	}
	_, err = b.pool.Exec(ctx, "GRANT USAGE ON SEQUENCE public.msgs_ord_seq TO "+role)
	require.NoError(t, err)
	require.NoError(t, store.CheckMessageSourceForTest(ctx, conn, src, false))
}

func TestPagesVisitEverySessionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var sessions []model.Session
	for i := range 1234 {
		// Many share an updated_at, so the keyset must break ties by id.
		sessions = append(sessions, model.Session{ID: fmt.Sprintf("s%05d", i), Messages: []byte(`[]`),
			UpdatedAt: base.Add(time.Duration(i/10) * time.Second)})
	}
	storetest.Sessions(t, b.pool, sessions...)

	for _, q := range []model.Query{
		{Mode: model.ModeFull},
		{Mode: model.ModeIncremental, From: base, To: base.Add(time.Hour)},
	} {
		q.Limit, q.MaxBytes = 100, 1<<20
		seen := map[string]bool{}
		var last string
		for {
			page, err := b.store.Sessions(ctx, q)
			require.NoError(t, err)
			for _, s := range page {
				require.False(t, seen[s.ID], "%s read twice", s.ID)
				require.Greater(t, s.ID, last, "out of keyset order")
				seen[s.ID], last = true, s.ID
			}
			if len(page) < q.Limit {
				break
			}
			l := page[len(page)-1]
			q.After = model.Cursor{Position: l.Position, ID: l.ID, Started: true}
		}
		require.Len(t, seen, 1234, q.Mode)
	}

	// The incremental window bounds what is read.
	page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeIncremental, From: base.Add(100 * time.Second),
		To: base.Add(110 * time.Second), Limit: 1000, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 100)

	// Sessions over the size limit come without content.
	page, err = b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "s00001", MaxBytes: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Nil(t, page[0].Messages)
	require.Equal(t, 2, page[0].Size)
}

func TestApplyKeepsVersionsAndReport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Sessions(t, b.pool, model.Session{ID: "a", Messages: []byte(broken)})
	page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "a", MaxBytes: 1 << 20})
	require.NoError(t, err)
	sess := page[0]
	before := string(sess.Messages)

	res, err := repair.Repair(sess.Messages, repair.Options{})
	require.NoError(t, err)
	runID, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeSession, Source: "x"})
	require.NoError(t, err)
	out, err := b.store.Apply(ctx, model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired, Dialect: "openai-chat", IssueCodes: res.Report.IssueCodeSet(),
			StageCounts: res.Report.StageCounts, Actions: res.Report.Actions}})
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, out)

	after := storetest.Content(t, b.pool, "a")
	require.Contains(t, after, repair.SyntheticResultText)
	type version struct {
		Version int
		Kind    string
		Content string
		Hash    string
	}
	rows, err := b.pool.Query(ctx, `SELECT version, kind, content, content_hash FROM session_versions WHERE session_id = 'a' ORDER BY version`)
	require.NoError(t, err)
	var vs []version
	for rows.Next() {
		var v version
		require.NoError(t, rows.Scan(&v.Version, &v.Kind, &v.Content, &v.Hash))
		vs = append(vs, v)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []version{
		{1, "original", before, model.ContentHash([]byte(before))},
		{2, "repaired", after, model.ContentHash([]byte(after))},
	}, vs)

	var status, beforeHash, afterHash string
	var codes []string
	var actions json.RawMessage
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, before_hash, after_hash, issue_codes, actions FROM repair_reports WHERE session_id = 'a'`).
		Scan(&status, &beforeHash, &afterHash, &codes, &actions))
	require.Equal(t, string(model.StatusRepaired), status)
	require.Equal(t, vs[0].Hash, beforeHash)
	require.Equal(t, vs[1].Hash, afterHash)
	require.Equal(t, []string{"tool_call_without_result"}, codes)
	require.Contains(t, string(actions), `"synthesize_missing_results"`)
}

func TestApplyNeverOverwritesAConcurrentWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Sessions(t, b.pool, model.Session{ID: "a", Messages: []byte(broken)})
	page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "a", MaxBytes: 1 << 20})
	require.NoError(t, err)
	res, err := repair.Repair(page[0].Messages, repair.Options{})
	require.NoError(t, err)

	// A live agent appends between tmend's read and its write.
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET messages = messages || '[{"role":"tool","tool_call_id":"c1","content":"late"}]'::jsonb WHERE id = 'a'`)
	require.NoError(t, err)
	appended := storetest.Content(t, b.pool, "a")

	out, err := b.store.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Conflict: true}, out)
	require.Equal(t, appended, storetest.Content(t, b.pool, "a"), "the writer's append must survive")
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM session_versions`).Scan(&n))
	require.Zero(t, n)
	var status string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM repair_reports WHERE session_id = 'a'`).Scan(&status))
	require.Equal(t, string(model.StatusConflict), status)
}

// Every way Apply refuses to write ends its transaction: on a pool of one connection,
// the next Apply works and nothing was written by the refused ones.
func TestApplyConflictsEndTheirTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.NewDBURL(t)
	cfg, err := store.ParseConfig(url, "")
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := store.Open(ctx, pool, store.DefaultSource, false)
	require.NoError(t, err)
	other, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })

	storetest.Sessions(t, pool, model.Session{ID: "gone", Messages: []byte(broken)},
		model.Session{ID: "held", Messages: []byte(broken)}, model.Session{ID: "ok", Messages: []byte(broken)})
	read := func(id string) model.Session {
		page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
		require.NoError(t, err)
		return page[0]
	}
	apply := func(sess model.Session) model.Outcome {
		res, err := repair.Repair(sess.Messages, repair.Options{})
		require.NoError(t, err)
		out, err := st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired}})
		require.NoError(t, err)
		return out
	}

	gone := read("gone")
	_, err = pool.Exec(ctx, `DELETE FROM sessions WHERE id = 'gone'`)
	require.NoError(t, err)
	require.True(t, apply(gone).Conflict, "a deleted session")

	held := read("held")
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM tmend.sessions WHERE id = 'held' FOR UPDATE`)
	require.NoError(t, err)
	require.True(t, apply(held).Conflict, "a session locked by a live writer")
	require.NoError(t, tx.Rollback(ctx))

	require.True(t, apply(read("ok")).Applied, "the connection is usable again")
	var reasons []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(reason ORDER BY session_id) FROM repair_reports WHERE status = 'conflict'`).Scan(&reasons))
	require.Len(t, reasons, 2)
	require.Contains(t, reasons[0], "deleted")
	require.Contains(t, reasons[1], "locked by another writer")
	var versions []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(DISTINCT session_id) FROM session_versions`).Scan(&versions))
	require.Equal(t, []string{"ok"}, versions)
}

func TestOneLockHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	release, ok, err := b.store.TryLock(ctx, "scheduled")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.store.TryLock(ctx, "scheduled")
	require.NoError(t, err)
	require.False(t, ok, "a second holder must be refused")
	release()
	release2, ok, err := b.store.TryLock(ctx, "scheduled")
	require.NoError(t, err)
	require.True(t, ok)
	release2()
}

func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pool.Close()
	_, err := b.store.Sessions(context.Background(), model.Query{Mode: model.ModeFull, Limit: 1, MaxBytes: 1})
	require.ErrorIs(t, err, model.ErrUnavailable)
}

// The database's CHECK constraints accept exactly the statuses tmend records: every run
// status, and every session status but those that never get a row of their own.
func TestStatusListsMatchTheSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	allowed := func(table string) []string {
		t.Helper()
		var def string
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint
WHERE conname = $1`, table+"_status_check").Scan(&def))
		var out []string
		for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(def, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var runs []string
	for _, st := range model.RunStatuses() {
		runs = append(runs, string(st))
	}
	require.ElementsMatch(t, runs, allowed("repair_runs"))
	var sessions []string
	for _, st := range model.SessionStatuses() {
		switch st {
		case model.StatusClean, model.StatusHeld, model.StatusBroken: // counted on the run, or files only
		default:
			sessions = append(sessions, string(st))
		}
	}
	require.ElementsMatch(t, sessions, allowed("repair_reports"))
}

func TestRunProgressCountsReportsSoFar(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	runID, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "x"})
	require.NoError(t, err)
	other, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "x"})
	require.NoError(t, err)
	for _, r := range []model.Report{
		{RunID: runID, SessionID: "a", Status: model.StatusWouldRepair},
		{RunID: runID, SessionID: "b", Status: model.StatusWouldRepair},
		{RunID: runID, SessionID: "c", Status: model.StatusFailed, Reason: "boom"},
		{RunID: other, SessionID: "d", Status: model.StatusConflict},
	} {
		r.Trigger = model.TriggerCLI
		require.NoError(t, b.store.InsertReport(ctx, r))
	}
	got, err := b.store.RunProgress(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, map[model.SessionStatus]int{model.StatusWouldRepair: 2, model.StatusFailed: 1}, got)
	got, err = b.store.RunProgress(ctx, 9999)
	require.NoError(t, err)
	require.Empty(t, got)
}

// connAs is a connection of pool acting as role until the test ends.
func connAs(t *testing.T, pool *pgxpool.Pool, role string) *pgxpool.Conn {
	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Exec(context.Background(), "RESET ROLE") //nolint:errcheck
		conn.Release()
	})
	_, err = conn.Exec(t.Context(), "SET ROLE "+role)
	require.NoError(t, err)
	return conn
}
