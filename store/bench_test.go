package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// BenchmarkAuditQueries answers a session's history and a run's summary over an audit
// table of 1,000,000 report rows (seeded outside the timer), and logs the query plans.
//
//	TMEND_TEST_DATABASE_URL=... go test ./store -run '^$' -bench Audit -benchtime 200x
func BenchmarkAuditQueries(b *testing.B) {
	pool := storetest.NewDB(b)
	ctx := context.Background()
	st, err := store.Open(ctx, pool, store.DefaultSource, true)
	if err != nil {
		b.Fatal(err)
	}
	// 1,000 runs; 1,000,000 reports over 200,000 sessions, five each.
	for _, q := range []string{
		`INSERT INTO repair_runs (trigger, mode, source, status, finished_at, summary)
SELECT 'cron', 'incremental', 'x', 'completed', now(), '{"by_status": {"repaired": 1000}}' FROM generate_series(1, 1000)`,
		`INSERT INTO repair_reports (run_id, session_id, status, trigger, dialect, issue_codes, stage_counts, actions, created_at)
SELECT g % 1000 + 1, 's' || (g % 200000), 'repaired', 'cron', 'openclaw', ARRAY['tool_call_without_result'],
  '{"synthesize_missing_results": 1}', '[{"stage":"synthesize_missing_results","action":"insert","message_index":3}]',
  now() - g * interval '1 second'
FROM generate_series(1, 1000000) g`,
		`ANALYZE repair_reports`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	explain := func(q string, args ...any) {
		rows, err := pool.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			b.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan = append(plan, line)
		}
		fmt.Fprintf(os.Stderr, "plan:\n  %s\n", strings.Join(plan, "\n  "))
	}
	explain(`SELECT * FROM repair_reports WHERE session_id = $1 ORDER BY id DESC LIMIT 10000`, "s4242")
	explain(`SELECT * FROM repair_runs WHERE id = $1`, int64(500))
	explain(`SELECT * FROM repair_reports WHERE run_id = $1 AND status = 'repaired' ORDER BY id DESC LIMIT 50`, int64(500))

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
