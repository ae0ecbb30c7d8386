package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/storetest"
)

// brokenSession is an OpenAI chat transcript whose call never got its result.
const brokenSession = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"hello?"}]`

func insertSession(t *testing.T, b *dbBundle, id, msgs string) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `INSERT INTO sessions (id, messages, updated_at) VALUES ($1, $2::jsonb, now() - interval '1 day')`, id, msgs)
	require.NoError(t, err)
}

func TestRollbackAndRollbackOfRollback(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	original := storetest.Content(t, b.pool, "a")

	r := runCLI(t, "", b.env, "repair", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	repaired := storetest.Content(t, b.pool, "a")
	require.NotEqual(t, original, repaired)

	r = runCLI(t, "", b.env, "rollback", "--session", "a", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would restore version 1")
	require.Equal(t, repaired, storetest.Content(t, b.pool, "a"))

	r = runCLI(t, "", b.env, "rollback", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "a: restored version 1 as version 3")
	require.Equal(t, original, storetest.Content(t, b.pool, "a"))

	// Scheduled and full runs leave the rolled-back session alone, broken as it is.
	r = runCLI(t, "", b.env, "scan", "--full", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"held":1`)
	require.Equal(t, original, storetest.Content(t, b.pool, "a"))

	// Rolling back the rollback restores the repair.
	r = runCLI(t, "", b.env, "rollback", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "restored version 2 as version 4")
	require.Equal(t, repaired, storetest.Content(t, b.pool, "a"))

	r = runCLI(t, "", b.env, "report", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, s := range []string{"repaired", "rolled_back", "original", "restored", "restored version 1", "restored version 2"} {
		require.Contains(t, r.stdout, s)
	}
	r = runCLI(t, "", b.env, "report", "--session", "a", "--diff", "--version", "2")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "version 1 (original) → version 2 (repaired)")
	require.Contains(t, r.stdout, "inserted")
	require.Contains(t, r.stdout, "[tmend]")
	require.NotContains(t, r.stdout, "\x1b[", "no colour when not on a terminal")

	// --json prints the diff the API and the console serve.
	r = runCLI(t, "", b.env, "report", "--session", "a", "--diff", "--version", "2", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	requireShape(t, "Diff", r.stdout)
	var d report.TranscriptDiff
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), r.stdout)
	require.Equal(t, []int{1, 2}, []int{d.From.Version, d.To.Version})
	require.Equal(t, 1, d.Counts[report.ChangeSynthesized])
	require.NotEmpty(t, d.Actions, "the repair's actions are beside the diff")
}

// TestSourceIsNamedByItsKey: logs, runs (report, the API's JSON) and errors name the
// source as README does, schema.table(id_column,messages_column); the name its scan
// position is kept under still finds it (the second scan starts where the first ended).
func TestSourceIsNamedByItsKey(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	var runs []map[string]any
	for range 2 {
		r := runCLI(t, "", b.env, "scan", "--json")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Contains(t, r.stderr, `"source":"tmend.sessions(id,messages)"`)
		var run map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
		require.Equal(t, "tmend.sessions(id,messages)", run["source"])
		runs = append(runs, run)
	}
	require.Nil(t, runs[0]["scanned_from"])
	require.NotNil(t, runs[1]["scanned_from"], "the second scan starts from the first's position")
	r := runCLI(t, "", b.env, "report")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "tmend.sessions(id,messages)")
	require.NotContains(t, r.stdout+r.stderr, "updated_at)")
}

// TestRollbackOfWhatDoesNotExistRecordsNothing: a version, session or run that does not
// exist is refused, saying so, before a rollback run or report is written.
func TestRollbackOfWhatDoesNotExistRecordsNothing(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	r := runCLI(t, "", b.env, "repair", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	recorded := func() (n int) {
		err := b.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM repair_runs) + (SELECT count(*) FROM repair_reports)`).Scan(&n)
		require.NoError(t, err)
		return n
	}
	before := recorded()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--session", "a", "--to-version", "99"}, `version 99 of session "a" not found (pruned, or never written): nothing to roll back to; its saved versions are 1, 2`},
		{[]string{"--session", "a", "--to-version", "99", "--dry-run"}, `version 99 of session "a" not found`},
		{[]string{"--session", "nope"}, `session "nope" not found`},
		{[]string{"--run", "999"}, "run 999: not found"},
	} {
		r := runCLI(t, "", b.env, append([]string{"rollback"}, c.args...)...)
		require.Equal(t, ExitRuntime, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.want, c.args)
		require.Empty(t, r.stdout)
		require.Equal(t, before, recorded(), "%v recorded nothing", c.args)
	}
	r = runCLI(t, "", b.env, "rollback", "--session", "a", "--to-version", "1")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "restored version 1 as version 3")
}

func TestRollbackRefusesChangedSessionsUnlessForced(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "repair", "--session", "a").code)
	_, err := b.pool.Exec(context.Background(), `UPDATE sessions SET messages = messages || '[{"role":"user","content":"agent wrote this"}]'::jsonb WHERE id = 'a'`)
	require.NoError(t, err)
	changed := storetest.Content(t, b.pool, "a")

	r := runCLI(t, "", b.env, "rollback", "--session", "a")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stdout, "refused: the session changed after tmend wrote version 2")
	require.Equal(t, changed, storetest.Content(t, b.pool, "a"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'rollback_refused'"))

	r = runCLI(t, "", b.env, "rollback", "--session", "a", "--force")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "its changed content kept as version 3")
	var kept string
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT content FROM session_versions WHERE session_id = 'a' AND version = 3").Scan(&kept))
	require.Equal(t, changed, kept, "--force must keep what it replaces")
}

func TestRunRollbackRestoresOnlyUnchangedSessions(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	for i := range 6 {
		insertSession(t, b, fmt.Sprintf("s%d", i), brokenSession)
	}
	r := runCLI(t, "", b.env, "scan", "--full", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var run struct {
		RunID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	_, err := b.pool.Exec(context.Background(), `UPDATE sessions SET messages = messages || '[{"role":"user","content":"later"}]'::jsonb WHERE id IN ('s1', 's4')`)
	require.NoError(t, err)

	// --json prints one object, whatever was refused; the error goes to stderr.
	r = runCLI(t, "", b.env, "rollback", "--run", fmt.Sprint(run.RunID), "--dry-run", "--json")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "2 of 6 sessions would not be restored", "a dry run restores nothing")
	requireShape(t, "RollbackOutcome", r.stdout)
	lines := jsonLines(t, r.stdout)
	require.Len(t, lines, 1, r.stdout)
	require.Equal(t, 4.0, lines[0]["would_restore"])
	require.NotContains(t, lines[0], "restored", "a dry run restored nothing")
	require.Equal(t, 2.0, lines[0]["refused"])
	statuses := map[any]int{}
	for _, s := range lines[0]["sessions"].([]any) {
		statuses[s.(map[string]any)["status"]]++
	}
	require.Equal(t, map[any]int{"would_restore": 4, "refused": 2}, statuses)

	r = runCLI(t, "", b.env, "rollback", "--run", fmt.Sprint(run.RunID))
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stdout, "restored 4, refused 2, failed 0")
	require.Contains(t, r.stderr, "2 of 6 sessions were not restored")
	for i := range 6 {
		content := storetest.Content(t, b.pool, fmt.Sprintf("s%d", i))
		if i == 1 || i == 4 {
			require.Contains(t, content, "later")
		} else {
			require.NotContains(t, content, "[tmend]")
		}
	}
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM repair_runs WHERE mode = 'rollback' AND NOT dry_run AND num_restored = 4 AND num_refused = 2 AND num_repaired = 0 AND num_conflict = 0"))

	// Once the content changes again, the hold ends and the next run repairs it.
	_, err = b.pool.Exec(context.Background(), `UPDATE sessions SET messages = messages || '[{"role":"user","content":"again"}]'::jsonb WHERE id = 's0'`)
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "scan", "--full", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, storetest.Content(t, b.pool, "s0"), "[tmend]")
	require.NotContains(t, storetest.Content(t, b.pool, "s2"), "[tmend]", "still held")
}

func TestPruneKeepsWhatRollbackNeeds(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "repair", "--session", "a").code)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "rollback", "--session", "a").code)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "rollback", "--session", "a").code) // versions 1..4
	_, err := b.pool.Exec(context.Background(), `UPDATE session_versions SET created_at = now() - interval '100 days';
UPDATE repair_reports SET created_at = now() - interval '100 days'`)
	require.NoError(t, err)

	r := runCLI(t, "", b.env, "prune", "--older-than", "30d", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would delete 2 versions and 3 reports")
	require.Equal(t, 4, b.count(t, "SELECT count(*) FROM session_versions"))
	// Weeks and years, in Prometheus's units: 100 days is over 2w and under 1y.
	r = runCLI(t, "", b.env, "prune", "--older-than", "2w", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would delete 2 versions and 3 reports")
	r = runCLI(t, "", b.env, "prune", "--older-than", "1y", "--dry-run")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would delete 0 versions and 0 reports")

	r = runCLI(t, "", b.env, "prune", "--older-than", "30d", "--dry-run", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"dry_run":true,"would_delete":{"versions":2,"reports":3}}`, r.stdout)

	r = runCLI(t, "", b.env, "prune", "--older-than", "30d", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"dry_run":false,"deleted":{"versions":2,"reports":3}}`, r.stdout)
	require.Equal(t, []int{3, 4}, versionsOf(t, b, "a"))
	// What the latest write replaced is still there to go back to.
	r = runCLI(t, "", b.env, "rollback", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)

	r = runCLI(t, "", b.env, "prune", "--older-than", "0d")
	require.Equal(t, ExitUsage, r.code)
}

// Prune never takes what a run needs: a completed run can still be rolled back whole
// after its rows passed the cutoff (rollback --run finds its sessions by their repaired
// reports), and nothing of a running run goes, not even with --all.
func TestPruneKeepsWhatRunsNeed(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 40, "1")
	ctx := context.Background()
	age := func() {
		t.Helper()
		_, err := b.pool.Exec(ctx, `UPDATE session_versions SET created_at = now() - interval '100 days';
UPDATE repair_reports SET created_at = now() - interval '100 days'`)
		require.NoError(t, err)
	}
	r := runCLI(t, "", b.env, "scan", "--full", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var run struct {
		ID     int64          `json:"id"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	repaired := run.Counts["repaired"]
	require.Positive(t, repaired)
	// One session is repaired again later, by hand: the scan's write is no longer its
	// latest, so the scan's report of it may go.
	var again string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT min(session_id) FROM repair_reports WHERE status = 'repaired'`).Scan(&again))
	_, err := b.pool.Exec(ctx, `UPDATE sessions SET messages = messages || '[{"role":"toolResult","toolCallId":"ghost","toolName":"bash","content":[],"isError":false}]'::jsonb WHERE id = $1`, again)
	require.NoError(t, err)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "repair", "--session", again).code)
	age()

	r = runCLI(t, "", b.env, "prune", "--older-than", "30d", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"dry_run":false,"deleted":{"versions":2,"reports":1}}`, r.stdout,
		"only the first repair of the session repaired twice: its two versions and its report")
	r = runCLI(t, "", b.env, "rollback", "--run", fmt.Sprint(run.ID), "--dry-run", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var undo struct {
		WouldRestore int `json:"would_restore"`
		Refused      int `json:"refused"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &undo))
	require.Equal(t, repaired-1, undo.WouldRestore, "every session that still holds the run's repair")
	require.Zero(t, undo.Refused)

	// A run in progress: its reports and the versions it wrote or names stay, --all or not.
	for _, sql := range []string{`INSERT INTO repair_runs (trigger, mode, source) VALUES ('cli', 'full', 'x')`,
		`UPDATE repair_reports SET run_id = (SELECT max(id) FROM repair_runs) WHERE run_id = $1`,
		`UPDATE session_versions SET run_id = (SELECT max(id) FROM repair_runs) WHERE run_id = $1`} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, run.ID)
		}
		_, err = b.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	age()
	before := b.count(t, "SELECT count(*) FROM repair_reports WHERE run_id = (SELECT max(id) FROM repair_runs)")
	r = runCLI(t, "", b.env, "prune", "--older-than", "30d", "--all", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, before, b.count(t, "SELECT count(*) FROM repair_reports WHERE run_id = (SELECT max(id) FROM repair_runs)"))
	require.Equal(t, 2*(repaired-1), b.count(t, "SELECT count(*) FROM session_versions WHERE run_id = (SELECT max(id) FROM repair_runs)"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM session_versions WHERE run_id IS DISTINCT FROM (SELECT max(id) FROM repair_runs)"),
		"--all takes the rest: the later repair's versions")
}

func versionsOf(t *testing.T, b *dbBundle, id string) []int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT version FROM session_versions WHERE session_id = $1 ORDER BY version", id)
	require.NoError(t, err)
	var out []int
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	return out
}

func TestReportFiltersAndPagination(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	// 3,000 audit rows across statuses, dialects, stages and issue codes.
	_, err := b.pool.Exec(context.Background(), `INSERT INTO repair_runs (trigger, mode, source) VALUES ('cli', 'full', 'x');
INSERT INTO repair_reports (run_id, session_id, status, trigger, dialect, issue_codes, stage_counts, created_at)
SELECT 1, 's' || g, (ARRAY['repaired','conflict','would_repair'])[g % 3 + 1], 'cli',
  (ARRAY['anthropic','openclaw'])[g % 2 + 1],
  CASE WHEN g % 5 = 0 THEN ARRAY['misplaced_tool_result'] ELSE ARRAY['tool_call_without_result'] END,
  CASE WHEN g % 5 = 0 THEN '{"move_results": 1}'::jsonb ELSE '{"synthesize_missing_results": 1}'::jsonb END,
  now() - g * interval '1 minute'
FROM generate_series(1, 3000) g`)
	require.NoError(t, err)

	want := b.count(t, `SELECT count(*) FROM repair_reports WHERE status = 'repaired' AND dialect = 'openclaw'
  AND issue_codes @> ARRAY['misplaced_tool_result'] AND stage_counts ? 'move_results' AND created_at >= now() - interval '2000 minutes'`)
	require.Positive(t, want)
	seen := map[float64]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		args := []string{"report", "--status", "repaired", "--dialect", "openclaw", "--issue", "misplaced_tool_result",
			"--stage", "move_results", "--since", "2000m", "--limit", "7", "--json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		r := runCLI(t, "", b.env, args...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		requireShape(t, "Report", r.stdout)
		rows := jsonLines(t, r.stdout)
		for _, row := range rows {
			require.Equal(t, "repaired", row["status"])
			require.Equal(t, "openclaw", row["dialect"])
			require.False(t, seen[row["id"].(float64)], "row on two pages")
			seen[row["id"].(float64)] = true
		}
		if len(rows) < 7 {
			break
		}
		cursor = fmt.Sprint(int64(rows[len(rows)-1]["id"].(float64)))
		require.Less(t, pages, 1000)
	}
	require.Len(t, seen, want)

	r := runCLI(t, "", b.env, "report")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "RUN")
	r = runCLI(t, "", b.env, "report", "--since", "yesterday")
	require.Equal(t, ExitUsage, r.code)
	// Statuses are checked against their lists: a typo is a usage error, not an empty page.
	for _, args := range [][]string{{"--status", "repaird"}, {"--status", "completed"}, {"--run-status", "repaired"}, {"--run-status", "done"}} {
		r = runCLI(t, "", b.env, append([]string{"report"}, args...)...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "unknown", args)
	}
	r = runCLI(t, "", b.env, "report", "--run-status", "running", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Len(t, jsonLines(t, r.stdout), 1)
}

// TestAuditTextEscapesIDs: a session id from the database cannot forge lines or drive
// the terminal in repair, report and rollback output.
func TestAuditTextEscapesIDs(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	const id = "a\nforged 1 restored\x1b[2J\u202e"
	insertSession(t, b, id, brokenSession)
	for _, args := range [][]string{
		{"repair", "--session", id},
		{"report"},
		{"report", "--status", "repaired"},
		{"report", "--session", id},
		{"report", "--session", id, "--diff"},
		{"rollback", "--session", id, "--dry-run"},
		{"rollback", "--session", id},
	} {
		r := runCLI(t, "", b.env, args...)
		require.Equal(t, ExitOK, r.code, "%q: %s", args, r.stderr)
		out := r.stdout + r.stderr
		require.NotContains(t, out, "\x1b", "%q", args)
		require.NotContains(t, out, "\u202e", "%q", args)
		for _, l := range strings.Split(out, "\n") {
			require.False(t, strings.HasPrefix(strings.TrimSpace(l), "forged"), "%q: forged line in %q", args, out)
		}
	}
}
