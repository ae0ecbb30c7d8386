package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/cmd/tmend/console"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

const (
	writeToken = "write-secret-0123456789"
	readToken  = "read-secret-0123456789"
)

// The seeded sessions, in three dialects. broken has a call without a result and an
// orphan result in one message: the repair synthesizes one and drops the other, block by
// block. hostile carries markup in its results that would run if a page did not escape
// it.
const (
	brokenID  = "s-broken"
	hostileID = `s-<b>"hostile"&x=1`
	laterID   = "s-later"
)

var (
	brokenSession = `[{"role":"user","content":[{"type":"text","text":"List the files, then show notes.txt."}]},
{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_ls","name":"ls","input":{}},{"type":"tool_use","id":"toolu_cat","name":"cat","input":{"path":"notes.txt"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_ls","content":"notes.txt\nplan.md\n` + strings.Repeat("long-listing-line ", 150) + `"},{"type":"tool_result","tool_use_id":"toolu_gone","content":"output of a call that is no longer in the transcript"}]},
{"role":"assistant","content":[{"type":"text","text":"Done."}]}]`
	hostileSession = `[{"role":"user","content":"Fetch the page."},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_get","type":"function","function":{"name":"fetch","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"call_get","content":"<script>document.title='pwned';window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"},
{"role":"tool","tool_call_id":"call_old","content":"<script>window.__pwned=3</script>"},
{"role":"assistant","content":"</pre></td></tr></table><script>window.__pwned=4</script>"}]`
	laterSession = `[{"role":"user","parts":[{"text":"Run the tests."}]},
{"role":"model","parts":[{"functionCall":{"name":"bash","args":{"cmd":"go test ./..."}}}]},
{"role":"user","parts":[{"text":"Still there?"}]}]`
	cleanSession = `[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`
)

type testBundle struct {
	pool    *pgxpool.Pool
	store   *store.Store
	scanner *scanner.Scanner
	base    string
	// runs are the two scans that repaired the seeded sessions.
	runs [2]int64
}

// setup seeds a database with broken sessions, repairs them in two real scans and serves
// the console on it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: st.Source().Name()})
	b := &testBundle{pool: pool, store: st, scanner: sc}

	storetest.Sessions(t, pool,
		model.Session{ID: brokenID, Messages: []byte(brokenSession)},
		model.Session{ID: hostileID, Messages: []byte(hostileSession)},
		model.Session{ID: "s-clean", Messages: []byte(cleanSession)})
	res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 2, res.Counts.Repaired)
	b.runs[0] = res.RunID
	storetest.Sessions(t, pool, model.Session{ID: laterID, Messages: []byte(laterSession)})
	res, err = sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Repaired)
	b.runs[1] = res.RunID

	c, err := console.New(console.Config{Store: st, Rollback: sc, WriteToken: writeToken, ReadToken: readToken,
		Log: zerolog.Nop(), Work: context.Background(), Schedule: hourly{}, ScheduleSpec: "@hourly"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Install(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.base = srv.URL
	return b
}

// hourly is the console's scan schedule in the tests: on the hour.
type hourly struct{}

func (hourly) Next(t time.Time) time.Time { return t.UTC().Truncate(time.Hour).Add(time.Hour) }

// client is a browser-like client: it keeps cookies and does not follow redirects, so
// tests see them.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn returns a client signed in with token.
func (b *testBundle) signIn(t *testing.T, token string) *http.Client {
	t.Helper()
	c := client(t)
	resp, err := c.PostForm(b.base+"/login", url.Values{"token": {token}, "next": {"/"}})
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	return c
}

type response struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values, header ...string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, string(out)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the forms on the page at u.
func csrf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	r := do(t, c, "GET", u, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	m := csrfField.FindStringSubmatch(r.body)
	require.NotNil(t, m, "no CSRF token on %s", u)
	return m[1]
}

func sessionPath(id string) string { return "/session?" + url.Values{"id": {id}}.Encode() }
