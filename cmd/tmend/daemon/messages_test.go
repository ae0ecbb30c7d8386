package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

// A daemon over a table kept one row per message (LangChain's, by its preset, as `tmend
// serve --preset langchain-postgres` opens it): a session repaired through the API shows
// its versions, diff and reports in the API and the console, and rolls back through the
// API, every row as it was.
func TestAPIOverAMessagesTable(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	ddl, err := os.ReadFile("../../../store/testdata/langchain-postgres.sql")
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	// A call (c2) never answered, and a result (zz) whose call does not exist.
	for _, m := range []string{`{"type":"human","content":"list the files"}`,
		`{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"ls","args":{},"type":"tool_call"},{"id":"c2","name":"pwd","args":{},"type":"tool_call"}]}`,
		`{"type":"tool","content":"a b","tool_call_id":"c1","name":"ls"}`,
		`{"type":"tool","content":"stale","tool_call_id":"zz","name":"ls"}`,
		`{"type":"human","content":"and then?"}`} {
		_, err := pool.Exec(t.Context(), `INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ('s', $1)`, m)
		require.NoError(t, err)
	}
	rows := func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT json_agg(t ORDER BY id)::text FROM public.langchain_chat_histories t`).Scan(&s))
		return s
	}
	before := rows()
	var original string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT json_agg(message ORDER BY id)::text FROM public.langchain_chat_histories`).Scan(&original))
	src, err := store.Preset("langchain-postgres")
	require.NoError(t, err)
	src.Table = "public." + src.Table
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	b := serveFrom(t, pool, pool, func(cfg *daemon.Config) {
		cfg.Store = st
		cfg.Scanner = scanner.New(st, zerolog.Nop(), scanner.Config{Source: src.Name()})
	})
	rd, w := "Bearer "+readToken, "Bearer "+apiToken

	code, m := callJSON(t, "POST", b.base+"/v1/sessions/s/repair", w, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, 1.0, m["counts"].(map[string]any)["repaired"], m)
	runID := m["id"].(float64)
	repaired := rows()
	require.NotEqual(t, before, repaired)

	code, m = callJSON(t, "GET", b.base+"/v1/sessions/s/versions", rd, "")
	require.Equal(t, 200, code, m)
	items := m["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, []any{"original", "repaired"}, []any{items[0].(map[string]any)["kind"], items[1].(map[string]any)["kind"]})
	code, m = callJSON(t, "GET", b.base+"/v1/sessions/s/versions/1", rd, "")
	require.Equal(t, 200, code, m)
	content, err := json.Marshal(m["content"])
	require.NoError(t, err)
	require.JSONEq(t, original, string(content), "a version shows as the transcript its rows made")

	var d report.TranscriptDiff
	code, body := call(t, "GET", b.base+"/v1/sessions/s/diff", rd, "")
	require.Equal(t, 200, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, []int{1, 2}, []int{d.From.Version, d.To.Version})
	require.Equal(t, map[report.Change]int{report.ChangeSynthesized: 1, report.ChangeDroppedOrphan: 1}, d.Counts, body)
	require.Len(t, d.Actions, 2)
	code, m = callJSON(t, "GET", b.base+"/v1/sessions/s/reports", rd, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, "repaired", m["items"].([]any)[0].(map[string]any)["status"])

	code, body = call(t, "GET", b.base+"/session?id=s", rd, "")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "synthesized")
	require.Contains(t, body, "stale", "the dropped result shows in the diff")
	code, body = call(t, "GET", fmt.Sprintf("%s/runs/%.0f", b.base, runID), rd, "")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `href="/session?id=s"`, "the run's page lists the session")

	code, m = callJSON(t, "POST", b.base+"/v1/sessions/s/rollback", w, `{"dry_run":true}`)
	require.Equal(t, 200, code, m)
	require.Equal(t, 1.0, m["would_restore"], m)
	require.Equal(t, repaired, rows(), "a dry run restores nothing")
	code, m = callJSON(t, "POST", b.base+"/v1/sessions/s/rollback", w, "{}")
	require.Equal(t, 200, code, m)
	require.Equal(t, 1.0, m["restored"], m)
	require.Equal(t, before, rows(), "every row back, every column")
	code, m = callJSON(t, "GET", b.base+"/v1/sessions/s/versions", rd, "")
	require.Equal(t, 200, code, m)
	items = m["items"].([]any)
	require.Len(t, items, 3, "the rollback saved what it restored as a version")
	require.Equal(t, "restored", items[2].(map[string]any)["kind"])

	// The console's rollback button rolls the rollback back: the repair is restored.
	req, err := http.NewRequest("POST", b.base+"/session/rollback", strings.NewReader("id=s"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", w)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	require.Equal(t, repaired, rows(), "every row of the repair back")
}
