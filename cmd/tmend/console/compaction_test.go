package console_test

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// compactScan runs a full scan with --compact=aggressive, as the store's tests do.
func compactScan(t *testing.T, b *testBundle, dryRun bool) model.RunResult {
	t.Helper()
	sc := scanner.New(b.store, zerolog.Nop(), scanner.Config{Source: b.store.Source().Name(), Compact: compact.Aggressive,
		Repair: repair.Options{QuietPeriod: -1}})
	res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: dryRun,
		Force: true, KeepOutcomes: true})
	require.NoError(t, err)
	require.Positive(t, res.Compaction.Compacted, "nothing to compact: make the sessions longer")
	return res
}

// TestConsoleShowsCompactions: the runs table and a run's page give a run's compactions
// beside its repairs (a dry run's as would-be), compact_RULE stages in words with the
// rule's meaning; a session's page shows a compaction as its own event with its actions
// by rule and tool, and what each stub replaced as report --cleared prints it, escaped;
// a run with a compaction rejected by its checks is among the strip's failures.
func TestConsoleShowsCompactions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	storetest.Generated(t, b.pool, gen.Config{Seed: 11, Dialect: repair.OpenAIChat, Sessions: 3, Messages: 600,
		Workload: gen.WorkloadCoding, FaultRate: 0.5})
	dry := compactScan(t, b, true)
	res := compactScan(t, b, false)
	reader := b.signIn(t, readToken)

	r := do(t, reader, "GET", b.base+"/?kind=all", nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, fmt.Sprintf("%d compacted, ", res.Compaction.Compacted))
	require.Contains(t, r.body, fmt.Sprintf("%d would compact, ", dry.Compaction.Compacted))
	require.NotContains(t, r.body, "rejected</span>")

	r = do(t, reader, "GET", b.base+fmt.Sprintf("/runs/%d", res.RunID), nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, fmt.Sprintf("%d compacted, ", res.Compaction.Compacted))

	var o *model.SessionOutcome
	for i := range res.Outcomes {
		if c := res.Outcomes[i].Compaction; c != nil && c.Status == compact.StatusCompacted && len(c.Actions) > 0 {
			o = &res.Outcomes[i]
			break
		}
	}
	require.NotNil(t, o, "no session was compacted")
	r = do(t, reader, "GET", b.base+sessionPath(o.SessionID), nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `<li class="report compaction">`)
	require.Contains(t, r.body, fmt.Sprintf("%d contents replaced by stubs, by rule and tool", len(o.Compaction.Actions)))
	a := o.Compaction.Actions[0]
	require.Contains(t, r.body, fmt.Sprintf("%s %s: %d -&gt; %d bytes", a.Category, a.Target, a.BytesBefore, a.BytesAfter))
	require.Contains(t, r.body, fmt.Sprintf(`<abbr title="compact_%s: %s">Compact %s</abbr>`, a.Rule,
		template.HTMLEscapeString(a.Rule.Meaning()), strings.ReplaceAll(string(a.Rule), "_", " ")))
	cleared, err := b.store.Cleared(t.Context(), o.SessionID, false)
	require.NoError(t, err)
	var want strings.Builder
	require.NoError(t, report.ClearedText(&want, o.SessionID, cleared))
	require.Contains(t, want.String(), `"`, "nothing in the cleared text to escape")
	require.Contains(t, r.body, `<pre class="cleared">`+template.HTMLEscapeString(want.String())+`</pre>`)

	// A session that needed no repair: its compaction's saving, and the dry run's.
	i := slices.IndexFunc(res.Outcomes, func(o model.SessionOutcome) bool { return o.Status == model.StatusCompacted })
	require.NotEqual(t, -1, i, "every compacted session was repaired too")
	r = do(t, reader, "GET", b.base+sessionPath(res.Outcomes[i].SessionID), nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	saved := `<span class="badge kind-compaction">compaction</span>\s+[0-9.]+ (bytes|kB|MB) `
	require.Regexp(t, saved+`saved`, r.body)
	require.Regexp(t, saved+`to save \(dry run\)`, r.body)

	// A rejected compaction stands out in the runs table and the strip (the scanner's
	// checks never fail on these sessions, so the run's summary says so by hand).
	_, err = b.pool.Exec(t.Context(), `UPDATE repair_runs SET summary = jsonb_set(summary, '{compaction,rejected}', '2') WHERE id = $1`, res.RunID)
	require.NoError(t, err)
	r = do(t, reader, "GET", b.base+"/?kind=all", nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `<span class="badge st-compact_rejected">2 rejected</span>`)
	strip := r.body[strings.Index(r.body, `id="failures"`):strings.Index(r.body, `class="runs-page"`)]
	require.Contains(t, strip, fmt.Sprintf(`<a href="/runs/%d">run %d</a>`, res.RunID, res.RunID))
	require.Contains(t, strip, "2 compact_rejected")

	// A session whose compaction its checks rejected says so (its row, rewritten by hand
	// for want of a failing check, keeps no actions: nothing was written).
	// A repaired session's rejected compaction is in its reason.
	for _, row := range [][2]string{{"compact_rejected", "calls moved"}, {"repaired", "compact_rejected: calls moved"}} {
		_, err = b.pool.Exec(t.Context(), `UPDATE repair_reports SET status = $3, actions = '[]', reason = $4
WHERE run_id = $1 AND session_id = $2`, res.RunID, o.SessionID, row[0], row[1])
		require.NoError(t, err)
		r = do(t, reader, "GET", b.base+sessionPath(o.SessionID), nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, `<span class="badge st-compact_rejected">compact_rejected</span> its checks failed: nothing of it was written`, row)
	}
}
