package console_test

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// section is the HTML of the element with the given id on a page: from its opening tag
// to the next card's (or the end of the strip).
func section(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `id="`+id+`"`)
	require.Positive(t, start, "no #%s", id)
	rest := body[start:]
	if end := regexp.MustCompile(`<div class="card|</section>`).FindStringIndex(rest[1:]); end != nil {
		return rest[:end[0]+1]
	}
	return rest
}

// TestRunsPageStatusStrip: the runs page opens with the last scheduled scan and its
// outcome, the next tick, what runs now with its partitions and their workers, and the
// runs that failed lately.
func TestRunsPageStatusStrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	reader := b.signIn(t, readToken)

	// A scan going now, with a partition that a River client works, one quiet for ten
	// minutes, and one waiting.
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCron, Mode: model.ModeIncremental, Source: b.store.Source().Name()})
	require.NoError(t, err)
	var job int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, state, attempt, max_attempts, attempted_by, queue, priority)
VALUES ('scan_partition', '{}', 'running', 1, 5, ARRAY['host-a_2026_11_25'], 'default', 1) RETURNING id`).Scan(&job))
	_, err = b.pool.Exec(ctx, `INSERT INTO run_partitions (run_id, partition, status, job_id, attempt, num_scanned, updated_at) VALUES
($1, 0, 'running', $2, 1, 400, now()), ($1, 1, 'running', NULL, 2, 30, now() - interval '10 minutes'), ($1, 2, 'pending', NULL, 0, 0, now())`, id, job)
	require.NoError(t, err)
	// A run that failed.
	failed, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerAPI, Mode: model.ModeFull, Source: b.store.Source().Name()})
	require.NoError(t, err)
	require.NoError(t, b.store.FinishRun(ctx, model.Finish{RunID: failed, Status: model.RunFailed, Error: "the database went away",
		Source: b.store.Source().Name()}))

	r := do(t, reader, "GET", b.base+"/", nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Less(t, strings.Index(r.body, `id="status"`), strings.Index(r.body, `id="runs-title"`), "the strip comes first")

	last := section(t, r.body, "last-scan")
	require.Contains(t, last, fmt.Sprintf(`<a href="/runs/%d">run %d</a>`, b.runs[1], b.runs[1]), "the newest scheduled scan that ended")
	require.Contains(t, last, `rs-completed`)
	require.Contains(t, last, "1 repaired, 0 failed")

	next := section(t, r.body, "next-scan")
	require.Contains(t, next, "<code>@hourly</code>")
	require.Contains(t, next, time.Now().UTC().Truncate(time.Hour).Add(time.Hour).Format("2006-01-02 15:04"))

	running := section(t, r.body, "running")
	require.Contains(t, running, fmt.Sprintf(`<p data-live-run="%d" data-mode="incremental"><a href="/runs/%d">run %d</a>, incremental`, id, id, id))
	require.Contains(t, running, `<td class="id" data-field="worker">host-a_2026_11_25</td>`, "the River client working partition 0")
	require.Contains(t, running, "running (attempt 2)")
	require.Equal(t, 1, strings.Count(running, `class="quiet"`), "only partition 1 has gone quiet")
	require.Contains(t, running, "(no progress: stuck?)")

	// The page's script follows the partitions through the run's progress: a checkpoint
	// shows at the next poll.
	require.Contains(t, running, fmt.Sprintf(`data-parts-of="%d"`, id))
	_, err = b.pool.Exec(ctx, `UPDATE run_partitions SET num_scanned = 1234, updated_at = now() WHERE run_id = $1 AND partition = 1`, id)
	require.NoError(t, err)
	jr := do(t, reader, "GET", b.base+fmt.Sprintf("/console/api/runs/%d", id), nil)
	require.Equal(t, http.StatusOK, jr.code, jr.body)
	var progress struct {
		Partitions []struct {
			Partition, Scanned, Attempt int
			Worker                      string
			Quiet                       bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(jr.body), &progress))
	require.Len(t, progress.Partitions, 3)
	require.Equal(t, 400, progress.Partitions[0].Scanned)
	require.Equal(t, "host-a_2026_11_25", progress.Partitions[0].Worker)
	require.Equal(t, 1234, progress.Partitions[1].Scanned)
	require.False(t, progress.Partitions[1].Quiet, "a checkpoint ends the quiet")

	failures := section(t, r.body, "failures")
	require.Contains(t, failures, fmt.Sprintf(`<a href="/runs/%d">run %d</a> <span class="badge rs-failed">failed</span>`, failed, failed))
	require.Contains(t, failures, "the database went away")
	require.NotContains(t, failures, fmt.Sprintf(`/runs/%d"`, b.runs[0]), "completed runs are not failures")
}

// TestRunsPageKinds: scans are listed apart from housekeeping (rollbacks, single
// sessions), scans by default; a dry rollback shows what it would restore, never as
// repaired.
func TestRunsPageKinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	out, err := b.scanner.Rollback(t.Context(), model.RollbackOptions{RunID: b.runs[0], DryRun: true, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	dry := out.RunID
	require.Positive(t, dry)
	row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr data-mode="rollback">\s*<th scope="row"><a href="/runs/%d">.*?</tr>`, dry))

	r := do(t, reader, "GET", b.base+"/", nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, fmt.Sprintf(`href="/runs/%d"`, b.runs[0]))
	require.Empty(t, row.FindString(r.body), "housekeeping is not among the scans")
	require.Contains(t, r.body, `<option value="scans" selected>`)

	for _, kind := range []string{"housekeeping", "all"} {
		r = do(t, reader, "GET", b.base+"/?kind="+kind, nil)
		require.Equal(t, http.StatusOK, r.code)
		tr := row.FindString(r.body)
		require.NotEmpty(t, tr, kind)
		require.Contains(t, tr, `<span data-field="repaired">2</span> <span class="verb">would be restored</span>`, kind)
		require.Contains(t, tr, fmt.Sprintf(`rollback (dry run) of <a href="/runs/%d">run %d</a>`, b.runs[0], b.runs[0]))
		require.Equal(t, kind == "all", strings.Contains(r.body, fmt.Sprintf(`<th scope="row"><a href="/runs/%d">`, b.runs[0])), kind)
	}
	require.Equal(t, http.StatusBadRequest, do(t, reader, "GET", b.base+"/?kind=nope", nil).code)
}

// TestCodesAreExplained: issue codes and stage names show in words, with the line of
// check --help (repair's meanings) as their tooltip; a diff names the run that wrote it,
// not an internal report id.
func TestCodesAreExplained(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	abbr := func(code, meaning, label string) string {
		return `<abbr title="` + template.HTMLEscapeString(code+": "+meaning) + `">` + label + `</abbr>`
	}
	r := do(t, reader, "GET", b.base+fmt.Sprintf("/runs/%d", b.runs[0]), nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, abbr("synthesize_missing_results", repair.StageSynthesizeMissingResults.Meaning(), "Synthesize missing results"))
	require.Contains(t, r.body, abbr("tool_call_without_result", repair.IssueCallWithoutResult.Meaning(), "Tool call without result"))
	require.NotEmpty(t, repair.StageSynthesizeMissingResults.Meaning())

	r = do(t, reader, "GET", b.base+"/reports", nil)
	require.Contains(t, r.body, abbr("tool_result_without_call", repair.IssueResultWithoutCall.Meaning(), "Tool result without call"))

	r = do(t, reader, "GET", b.base+sessionPath(brokenID), nil)
	require.Regexp(t, fmt.Sprintf(`The actions are those of <a href="/runs/%d">run %d</a>, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.`, b.runs[0], b.runs[0]), r.body)
	require.NotContains(t, r.body, "of report")
}
