package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

const wantCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func requireSecureHeaders(t *testing.T, r response, what string) {
	t.Helper()
	require.Equal(t, wantCSP, r.header.Get("Content-Security-Policy"), what)
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), what)
	require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"), what)
}

// TestPagesNeedACredential: no page, and no JSON, shows audit rows or transcripts
// without the read or the write token; a browser is sent to sign in and back.
func TestPagesNeedACredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pages := []string{"/", fmt.Sprintf("/runs/%d", b.runs[0]), sessionPath(brokenID), "/reports?status=repaired",
		fmt.Sprintf("/console/api/runs/%d", b.runs[0])}
	anon := client(t)
	for _, p := range pages {
		for _, auth := range []string{"", "Bearer nope", "Basic " + readToken, readToken, "Bearer"} {
			r := do(t, anon, "GET", b.base+p, nil, "Authorization", auth)
			requireSecureHeaders(t, r, p)
			require.NotContains(t, r.body, "toolu_cat", "%s with %q", p, auth)
			if strings.HasPrefix(p, "/console/api/") {
				require.Equal(t, http.StatusUnauthorized, r.code, "%s with %q", p, auth)
				continue
			}
			require.Equal(t, http.StatusSeeOther, r.code, "%s with %q", p, auth)
			require.Equal(t, "/login?next="+url.QueryEscape(p), r.header.Get("Location"))
		}
		for _, auth := range []string{"Bearer " + readToken, "bearer " + writeToken} {
			r := do(t, anon, "GET", b.base+p, nil, "Authorization", auth)
			require.Equal(t, http.StatusOK, r.code, "%s with %q: %s", p, auth, r.body)
			requireSecureHeaders(t, r, p)
		}
	}

	// The sign-in page, a wrong token and the assets carry the same headers.
	r := do(t, anon, "GET", b.base+"/login?next=/", nil)
	require.Equal(t, http.StatusOK, r.code)
	requireSecureHeaders(t, r, "sign-in page")
	r = do(t, anon, "POST", b.base+"/login", url.Values{"token": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.body, "That token is not right")
	require.Empty(t, r.header.Values("Set-Cookie"))
	for _, asset := range []string{"/console/static/console.css", "/console/static/console.js"} {
		r := do(t, anon, "GET", b.base+asset, nil)
		require.Equal(t, http.StatusOK, r.code, asset)
		requireSecureHeaders(t, r, asset)
	}
	r = do(t, anon, "GET", b.base+"/console/static/", nil)
	require.Equal(t, http.StatusNotFound, r.code, "no listing of the assets")
	requireSecureHeaders(t, r, "static listing")
}

func TestSignInSetsASignedCookie(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := client(t)
	r := do(t, anon, "POST", b.base+"/login", url.Values{"token": {readToken}, "next": {"/reports"}})
	require.Equal(t, http.StatusSeeOther, r.code)
	require.Equal(t, "/reports", r.header.Get("Location"))
	cookies := (&http.Response{Header: r.header}).Cookies()
	require.Len(t, cookies, 1)
	ck := cookies[0]
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure, "plain HTTP: a Secure cookie would never come back")
	require.NotContains(t, ck.Value, readToken)
	require.NotContains(t, ck.Value, "read-secret")

	require.Equal(t, http.StatusOK, do(t, client(t), "GET", b.base+"/", nil, "Cookie", "tmend_console="+ck.Value).code)
	require.Equal(t, http.StatusSeeOther, do(t, client(t), "GET", b.base+"/", nil, "Cookie", "tmend_console=x"+ck.Value).code)

	// Sign-ins go to local paths only.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", `/\evil.example`, "javascript:alert(1)"} {
		r := do(t, anon, "POST", b.base+"/login", url.Values{"token": {readToken}, "next": {next}})
		require.Equal(t, "/", r.header.Get("Location"), next)
	}

	// A header saying the client used TLS is not TLS.
	r = do(t, anon, "POST", b.base+"/login", url.Values{"token": {writeToken}}, "X-Forwarded-Proto", "https")
	require.False(t, (&http.Response{Header: r.header}).Cookies()[0].Secure)
}

// TestRollbackNeedsTheWriteTokenAndCSRF: a rollback from a browser needs the write
// token's sign-in and its form's CSRF token; the read token never rolls back.
func TestRollbackNeedsTheWriteTokenAndCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	repaired := storetest.Content(t, b.pool, brokenID)
	form := func(token string) url.Values { return url.Values{"id": {brokenID}, "to": {"1"}, "csrf": {token}} }

	reader := b.signIn(t, readToken)
	readerCSRF := csrf(t, reader, b.base+sessionPath(brokenID))
	r := do(t, reader, "POST", b.base+"/session/rollback", form(readerCSRF))
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "needs the write token")
	require.NotContains(t, r.body, "Roll back to version", "no rollback buttons for a reader")

	writer := b.signIn(t, writeToken)
	for name, token := range map[string]string{"None": "", "Wrong": "x" + readerCSRF, "Reader's": readerCSRF} {
		r := do(t, writer, "POST", b.base+"/session/rollback", form(token))
		require.Equal(t, http.StatusForbidden, r.code, name)
		r = do(t, writer, "POST", b.base+fmt.Sprintf("/runs/%d/rollback", b.runs[0]), url.Values{"csrf": {token}})
		require.Equal(t, http.StatusForbidden, r.code, name)
	}
	require.Equal(t, repaired, storetest.Content(t, b.pool, brokenID))
	require.Equal(t, 0, count(t, b, "SELECT count(*) FROM repair_reports WHERE status IN ('rolled_back', 'rollback_refused')"))

	token := csrf(t, writer, b.base+sessionPath(brokenID))
	r = do(t, writer, "POST", b.base+"/session/rollback", form(token))
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Restored version 1 as version 3")
	require.JSONEq(t, brokenSession, storetest.Content(t, b.pool, brokenID))

	// Again: the session no longer holds what tmend wrote before, so it is refused, and
	// force is offered.
	r = do(t, writer, "POST", b.base+"/session/rollback", url.Values{"id": {brokenID}, "to": {"2"}, "csrf": {token}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Restored version 2 as version 4")
	require.Equal(t, repaired, storetest.Content(t, b.pool, brokenID))

	// A bearer write token needs no CSRF token (another site cannot send one).
	r = do(t, client(t), "POST", b.base+"/session/rollback", url.Values{"id": {brokenID}}, "Authorization", "Bearer "+writeToken)
	require.Equal(t, http.StatusOK, r.code, r.body)
	r = do(t, client(t), "POST", b.base+"/session/rollback", url.Values{"id": {brokenID}}, "Authorization", "Bearer "+readToken)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
}

func TestRunRollbackPreviewsThenRestores(t *testing.T) {
	t.Parallel()
	b := setup(t)
	writer := b.signIn(t, writeToken)
	runPage := b.base + fmt.Sprintf("/runs/%d", b.runs[0])
	token := csrf(t, writer, runPage)
	repaired := storetest.Content(t, b.pool, brokenID)

	r := do(t, writer, "POST", runPage+"/rollback", url.Values{"csrf": {token}, "dry_run": {"1"}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Nothing has changed yet")
	require.Contains(t, r.body, "Roll back 2 sessions")
	require.Equal(t, repaired, storetest.Content(t, b.pool, brokenID), "a preview changes nothing")

	r = do(t, writer, "POST", runPage+"/rollback", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Restored <strong>2</strong>, refused <strong>0</strong>")
	require.JSONEq(t, brokenSession, storetest.Content(t, b.pool, brokenID))
	require.JSONEq(t, hostileSession, storetest.Content(t, b.pool, hostileID))
}

// TestTranscriptTextIsEscaped: what a transcript holds is text on every page; its
// markup never reaches the page as markup.
func TestTranscriptTextIsEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	for _, p := range []string{sessionPath(hostileID), sessionPath(hostileID) + "&from=2&to=1", "/reports",
		fmt.Sprintf("/runs/%d", b.runs[0])} {
		r := do(t, reader, "GET", b.base+p, nil)
		require.Equal(t, http.StatusOK, r.code, p)
		require.NotContains(t, r.body, "<script>window", p)
		require.NotContains(t, r.body, "<script>document", p)
		require.NotContains(t, r.body, "<img src=x", p)
		require.NotContains(t, r.body, "<b>", p)
		require.Equal(t, 1, strings.Count(r.body, "<script"), "%s: only the console's own script", p)
	}
	r := do(t, reader, "GET", b.base+sessionPath(hostileID), nil)
	require.Contains(t, r.body, "&lt;script&gt;document.title=")
	require.Contains(t, r.body, "s-&lt;b&gt;&#34;hostile&#34;&amp;x=1")
	require.Contains(t, r.body, "dropped_orphan")
}

func TestDiffMarksTheRepair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	r := do(t, reader, "GET", b.base+sessionPath(brokenID), nil)
	require.Equal(t, http.StatusOK, r.code)
	// The timeline, oldest first: the versions, then the report that wrote them.
	v1, v2, rep := strings.Index(r.body, "version 1 saved"), strings.Index(r.body, "version 2 saved"), strings.Index(r.body, "repaired</span>\n    by cli")
	require.True(t, 0 < v1 && v1 < v2 && v2 < rep, "timeline order: %d %d %d", v1, v2, rep)
	for _, s := range []string{"Version 1 (original) → version 2 (repaired)", `class="badge ch-synthesized"`,
		`class="badge ch-dropped_orphan"`, "synthesize_missing_results</abbr> insert toolu_cat", "drop_orphan_results</abbr> drop toolu_gone",
		"show all", "long-listing-line long-listing-line"} {
		require.Contains(t, r.body, s)
	}
	// Other versions, and bad ones.
	require.Contains(t, do(t, reader, "GET", b.base+sessionPath(brokenID)+"&from=2&to=1", nil).body, `class="badge ch-inserted"`)
	r = do(t, reader, "GET", b.base+sessionPath(brokenID)+"&from=1&to=9", nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "Version 1 or 9 is not saved")
	// A version that is not a transcript (content an agent wrote, kept by a forced
	// rollback) cannot be compared; the page says so.
	_, err := b.pool.Exec(t.Context(), `INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes)
VALUES ($1, $2, 3, 'preserved', 'not a transcript', 'x', 16)`, b.store.Key(), brokenID)
	require.NoError(t, err)
	r = do(t, reader, "GET", b.base+sessionPath(brokenID)+"&from=2&to=3", nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "The versions cannot be compared: read later version: unparseable: invalid JSON")
	r = do(t, reader, "GET", b.base+sessionPath(brokenID)+"&from=x", nil)
	require.Equal(t, http.StatusBadRequest, r.code)
	r = do(t, reader, "GET", b.base+sessionPath("nobody"), nil)
	require.Equal(t, http.StatusNotFound, r.code)
	require.Contains(t, r.body, "tmend has no record of session")
}

func TestReportFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	for q, want := range map[string][]string{
		"status=repaired":                                  {brokenID, laterID, "s-&lt;b&gt;"},
		"dialect=gemini":                                   {laterID},
		"dialect=anthropic":                                {brokenID},
		"issue=tool_result_without_call":                   {brokenID, "s-&lt;b&gt;"},
		"issue=tool_call_without_result&dialect=anthropic": {brokenID},
		"status=conflict":                                  {},
		"since=2000-01-01T00:00&until=2999-01-01T00:00":    {brokenID, laterID, "s-&lt;b&gt;"},
		"since=2999-01-01T00:00":                           {},
	} {
		r := do(t, reader, "GET", b.base+"/reports?"+q, nil)
		require.Equal(t, http.StatusOK, r.code, q)
		for _, id := range []string{brokenID, laterID, "s-&lt;b&gt;"} {
			if contains(want, id) {
				require.Contains(t, r.body, ">"+id, q)
			} else {
				require.NotContains(t, r.body, ">"+id, q)
			}
		}
	}
	for _, q := range []string{"status=nope", "issue=nope", "dialect=nope", "since=yesterday", "cursor=-1", "status=%00"} {
		r := do(t, reader, "GET", b.base+"/reports?"+q, nil)
		require.Equal(t, http.StatusBadRequest, r.code, q)
		requireSecureHeaders(t, r, q)
	}
	// The run page filters its sessions the same way.
	r := do(t, reader, "GET", b.base+fmt.Sprintf("/runs/%d?dialect=anthropic&issue=tool_call_without_result", b.runs[0]), nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, ">"+brokenID)
	require.NotContains(t, r.body, ">s-&lt;b&gt;")
}

func TestRunsPageAndLiveProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader := b.signIn(t, readToken)
	r := do(t, reader, "GET", b.base+"/", nil)
	require.Equal(t, http.StatusOK, r.code)
	for _, s := range []string{"Repaired and failed sessions per run", "<svg", `class="s-repaired"`,
		"tool_call_without_result", "openai-chat", fmt.Sprintf(`href="/runs/%d"`, b.runs[1])} {
		require.Contains(t, r.body, s)
	}

	// A run still going shows the reports it wrote so far, here and in the JSON.
	ctx := t.Context()
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerAPI, Mode: model.ModeFull, Source: b.store.Source().Name()})
	require.NoError(t, err)
	require.NoError(t, b.store.InsertReport(ctx, model.Report{RunID: id, SessionID: "x", Status: model.StatusConflict, Trigger: model.TriggerAPI}))
	r = do(t, reader, "GET", b.base+"/", nil)
	require.Contains(t, r.body, fmt.Sprintf(`data-live-run="%d"`, id))
	var p struct {
		Status model.RunStatus
		Live   bool
		Counts model.RunCounts
	}
	r = do(t, reader, "GET", b.base+fmt.Sprintf("/console/api/runs/%d", id), nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	require.Equal(t, model.RunRunning, p.Status)
	require.True(t, p.Live)
	require.Equal(t, model.RunCounts{Scanned: 1, Conflict: 1}, p.Counts)
	// A checkpoint's counts are ahead of the reports where clean sessions are concerned.
	_, err = b.pool.Exec(ctx, `UPDATE repair_runs SET num_scanned = 40, num_clean = 39 WHERE id = $1`, id)
	require.NoError(t, err)
	r = do(t, reader, "GET", b.base+fmt.Sprintf("/console/api/runs/%d", id), nil)
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	require.Equal(t, model.RunCounts{Scanned: 40, Clean: 39, Conflict: 1}, p.Counts)
	require.NoError(t, b.store.FinishRun(ctx, model.Finish{RunID: id, Status: model.RunCompleted,
		Counts: model.RunCounts{Scanned: 9, Clean: 8, Conflict: 1}, Source: b.store.Source().Name()}))
	r = do(t, reader, "GET", b.base+fmt.Sprintf("/console/api/runs/%d", id), nil)
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	require.Equal(t, model.RunCompleted, p.Status)
	require.False(t, p.Live)
	require.Equal(t, 9, p.Counts.Scanned)
	require.Equal(t, http.StatusNotFound, do(t, reader, "GET", b.base+"/console/api/runs/999999", nil).code)

	r = do(t, reader, "GET", b.base+fmt.Sprintf("/runs/%d", b.runs[0]), nil)
	require.Equal(t, http.StatusOK, r.code)
	for _, s := range []string{"By status", "Actions by stage", "synthesize_missing_results", "Sessions by dialect", "Sessions by issue"} {
		require.Contains(t, r.body, s)
	}
	require.Equal(t, http.StatusNotFound, do(t, reader, "GET", b.base+"/runs/999999", nil).code)
	require.Equal(t, http.StatusNotFound, do(t, reader, "GET", b.base+"/runs/abc", nil).code)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func count(t *testing.T, b *testBundle, q string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), q).Scan(&n))
	return n
}
