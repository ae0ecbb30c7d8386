package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// seedAudit fills the audit tables: 1,000 runs and reports audit rows over reports/5
// sessions (five each), with a spread of statuses, dialects, issues and stages, then
// ANALYZEs them so the planner sees their real size.
func seedAudit(tb testing.TB, pool *pgxpool.Pool, reports int) {
	tb.Helper()
	stmts := []struct {
		sql  string
		args []any
	}{
		{sql: `INSERT INTO repair_runs (trigger, mode, source, status, finished_at, summary)
SELECT 'cron', 'incremental', 'x', 'completed', now(), '{"by_status": {"repaired": 1000}}' FROM generate_series(1, 1000)`},
		{sql: `INSERT INTO repair_reports (run_id, session_id, status, trigger, dialect, issue_codes, stage_counts, actions, created_at)
SELECT g % 1000 + 1, 's' || (g % ($1::int / 5)),
  CASE WHEN g % 97 = 0 THEN 'conflict' WHEN g % 11 = 0 THEN 'would_repair' ELSE 'repaired' END, 'cron',
  (ARRAY['openclaw', 'anthropic', 'openai-chat', 'gemini', 'bedrock', 'langchain', 'openai-responses'])[g % 7 + 1],
  CASE WHEN g % 89 = 0 THEN ARRAY['duplicate_tool_call_id'] ELSE ARRAY['tool_call_without_result'] END,
  CASE WHEN g % 83 = 0 THEN '{"rewrite_call_ids": 1}'::jsonb ELSE '{"synthesize_missing_results": 1}'::jsonb END,
  '[{"stage":"synthesize_missing_results","action":"insert","message_index":3}]',
  now() - g * interval '1 second'
FROM generate_series(1, $1::int) g`, args: []any{reports}},
		{sql: `ANALYZE repair_runs`},
		{sql: `ANALYZE repair_reports`},
	}
	for _, st := range stmts {
		if _, err := pool.Exec(context.Background(), st.sql, st.args...); err != nil {
			tb.Fatalf("seed audit tables: %v", err)
		}
	}
}

// queryLog records the statements a pool runs, with their arguments.
type queryLog struct {
	mu      sync.Mutex
	queries []loggedQuery
}

type loggedQuery struct {
	sql  string
	args []any
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, loggedQuery{d.SQL, d.Args})
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements run since the last call.
func (l *queryLog) take() []loggedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queries
	l.queries = nil
	return q
}

// tracedDB is a fresh test database with two pools: traced logs every statement it
// runs, plain does not.
func tracedDB(tb testing.TB) (traced, plain *pgxpool.Pool, log *queryLog) {
	tb.Helper()
	url := storetest.NewDBURL(tb)
	cfg, err := store.ParseConfig(url, store.DefaultSchema)
	require.NoError(tb, err)
	log = &queryLog{}
	traced = tracedPool(tb, cfg, log)
	plain, err = store.Connect(context.Background(), url, store.DefaultSchema)
	require.NoError(tb, err)
	tb.Cleanup(plain.Close)
	return traced, plain, log
}

// tracedPool is a pool of cfg whose statements go through tracer.
func tracedPool(tb testing.TB, cfg *pgxpool.Config, tracer pgx.QueryTracer) *pgxpool.Pool {
	tb.Helper()
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool
}

// seqScans returns the tables a statement's plan reads with a sequential scan.
func seqScans(tb testing.TB, pool *pgxpool.Pool, q loggedQuery) []string {
	tb.Helper()
	var raw []byte
	require.NoError(tb, pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+q.sql, q.args...).Scan(&raw), q.sql)
	var plans []struct{ Plan planNode }
	require.NoError(tb, json.Unmarshal(raw, &plans))
	require.Len(tb, plans, 1)
	var out []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.NodeType == "Seq Scan" {
			out = append(out, n.Relation)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return out
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}

// auditQueries are what 'tmend report' and the API's audit endpoints ask, each with what
// it must return from seedAudit's rows.
var auditQueries = []struct {
	name   string
	filter model.ReportFilter
}{
	{"SessionHistory", model.ReportFilter{SessionID: "s4242", Limit: 10000}},
	{"RunReportsPage", model.ReportFilter{RunID: 500, Status: model.StatusRepaired, Limit: 50}},
	{"RunReports", model.ReportFilter{RunID: 500, Limit: 50}},
	{"Latest", model.ReportFilter{Limit: 50}},
	{"NextPage", model.ReportFilter{Cursor: 100000, Limit: 50}},
	{"RareStatus", model.ReportFilter{Status: model.StatusConflict, Limit: 50}},
	{"RareIssue", model.ReportFilter{Issue: "duplicate_tool_call_id", Limit: 50}},
	{"RareStage", model.ReportFilter{Stage: "rewrite_call_ids", Limit: 50}},
	{"Dialect", model.ReportFilter{Dialect: "gemini", Limit: 50}},
}

// TestAuditQueriesUseIndexes: on an audit table of a realistic size, the statements the
// store runs for audit reads (the real SQL and arguments, caught as they are sent) are
// planned without a sequential scan of repair_reports or repair_runs.
func TestAuditQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	traced, plain, log := tracedDB(t)
	seedAudit(t, plain, 200_000)
	st, err := store.Open(ctx, traced, store.DefaultSource, true)
	require.NoError(t, err)

	check := func(t *testing.T) {
		t.Helper()
		queries := log.take()
		require.NotEmpty(t, queries)
		for _, q := range queries {
			require.Empty(t, seqScans(t, plain, q), "sequential scan in the plan of %s %v", q.sql, q.args)
		}
	}
	for _, tt := range auditQueries {
		t.Run(tt.name, func(t *testing.T) {
			log.take()
			rows, err := st.ListReports(ctx, tt.filter)
			require.NoError(t, err)
			require.NotEmpty(t, rows)
			check(t)
		})
	}
	t.Run("Run", func(t *testing.T) {
		log.take()
		_, err := st.Run(ctx, 500)
		require.NoError(t, err)
		check(t)
	})
	t.Run("Runs", func(t *testing.T) {
		log.take()
		runs, err := st.ListRuns(ctx, model.RunFilter{Limit: 50})
		require.NoError(t, err)
		require.Len(t, runs, 50)
		check(t)
	})
}

// BenchmarkAuditQueries answers a session's history and a run's summary over an audit
// table of 1,000,000 report rows (seeded outside the timer).
//
//	TMEND_TEST_DATABASE_URL=... go test ./store -run '^$' -bench Audit -benchtime 200x
func BenchmarkAuditQueries(b *testing.B) {
	pool := storetest.NewDB(b)
	ctx := context.Background()
	seedAudit(b, pool, 1_000_000)
	st, err := store.Open(ctx, pool, store.DefaultSource, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("SessionHistory", func(b *testing.B) {
		n := 0
		for b.Loop() {
			id := fmt.Sprintf("s%d", n*7919%200000)
			n++
			reports, err := st.ListReports(ctx, model.ReportFilter{SessionID: id, Limit: 10000})
			if err != nil || len(reports) != 5 {
				b.Fatalf("history of %s: %d rows, %v", id, len(reports), err)
			}
			if _, err := st.Versions(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RunSummary", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			if _, err := st.Run(ctx, int64(n%1000+1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RunReportsPage", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			rows, err := st.ListReports(ctx, model.ReportFilter{RunID: int64(n%1000 + 1), Status: model.StatusRepaired, Limit: 50})
			if err != nil || len(rows) != 50 {
				b.Fatalf("%d rows, %v", len(rows), err)
			}
		}
	})
}

// BenchmarkMessagePages reads a LangChain table of 20,000 sessions (about 230,000 rows,
// interleaved as concurrent chats write them, with the (session_id, id) index) whole:
// as a full run's pages (range scans), as an incremental run whose window holds every
// row reads the same pages, and as COPY of the same rows in the same order, the floor.
func BenchmarkMessagePages(b *testing.B) {
	pool := storetest.NewDB(b)
	ctx := context.Background()
	ddl, err := os.ReadFile("testdata/langchain-postgres.sql")
	require.NoError(b, err)
	for _, sql := range []string{"BEGIN; SET LOCAL search_path = public; " + string(ddl) + "; COMMIT",
		`INSERT INTO public.langchain_chat_histories (session_id, message)
SELECT 's' || (g % 20000), jsonb_build_object('type', CASE WHEN g % 2 = 0 THEN 'human' ELSE 'ai' END, 'content', repeat('x', 40 + g % 200))
FROM generate_series(1, 230000) g`,
		`CREATE INDEX ON public.langchain_chat_histories (session_id, id)`,
		`VACUUM ANALYZE public.langchain_chat_histories`} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(b, err)
	}
	src, err := store.Preset("langchain-postgres")
	require.NoError(b, err)
	src.Table = "public." + src.Table
	st, err := store.Open(ctx, pool, src, true)
	require.NoError(b, err)
	pages := func(b *testing.B, q model.Query) {
		for {
			page, err := st.Sessions(ctx, q)
			require.NoError(b, err)
			if len(page) < q.Limit {
				return
			}
			q.After = model.Cursor{ID: page[len(page)-1].ID, Started: true}
		}
	}
	q := model.Query{Limit: 500, MaxBytes: 64 << 20, PageBytes: 16 << 20}
	b.Run("Full", func(b *testing.B) {
		q := q
		q.Mode = model.ModeFull
		for b.Loop() {
			pages(b, q)
		}
	})
	b.Run("Incremental", func(b *testing.B) {
		q := q
		q.Mode, q.To = model.ModeIncremental, time.Now().Add(time.Hour)
		for b.Loop() {
			pages(b, q)
		}
	})
	b.Run("Copy", func(b *testing.B) {
		for b.Loop() {
			conn, err := pool.Acquire(ctx)
			require.NoError(b, err)
			_, err = conn.Conn().PgConn().CopyTo(ctx, io.Discard,
				`COPY (SELECT session_id, id, message FROM public.langchain_chat_histories ORDER BY session_id, id) TO STDOUT`)
			conn.Release()
			require.NoError(b, err)
		}
	})
}
