package console

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// nopStore has nothing: for tests of what needs no database.
type nopStore struct{}

func (nopStore) ListRuns(context.Context, model.RunFilter) ([]model.RunRow, error) { return nil, nil }
func (nopStore) Run(context.Context, int64) (model.RunRow, error) {
	return model.RunRow{}, model.ErrNotFound
}
func (nopStore) RunProgress(context.Context, int64) (map[model.SessionStatus]int, error) {
	return nil, nil
}
func (nopStore) RunPartitions(context.Context, int64) ([]model.PartitionRow, error) { return nil, nil }
func (nopStore) ListReports(context.Context, model.ReportFilter) ([]model.ReportRow, error) {
	return nil, nil
}
func (nopStore) Versions(context.Context, string) ([]model.VersionRow, error) { return nil, nil }
func (nopStore) Version(context.Context, string, int) (model.VersionRow, error) {
	return model.VersionRow{}, model.ErrNotFound
}
func (nopStore) Cleared(context.Context, string, bool) ([]model.Cleared, error) { return nil, nil }

func newTestConsole(t *testing.T, read, write string) *Console {
	t.Helper()
	c, err := New(Config{Store: nopStore{}, ReadToken: read, WriteToken: write})
	require.NoError(t, err)
	return c
}

func TestSignInCookieCannotBeForged(t *testing.T) {
	t.Parallel()
	c := newTestConsole(t, "read-token", "write-token")
	now := time.Now()
	value := c.signIn(roleRead, now.Add(time.Hour))
	id, ok := c.checkSignIn(value, now)
	require.True(t, ok)
	require.Equal(t, roleRead, id.role)
	require.NotEmpty(t, id.nonce)
	require.NotContains(t, value, "read-token")

	payload, sig, _ := strings.Cut(value, ".")
	raw, err := b64.DecodeString(payload)
	require.NoError(t, err)
	fields := strings.Split(string(raw), "|")
	reencode := func(f ...string) string { return b64.EncodeToString([]byte(strings.Join(f, "|"))) + "." + sig }
	for name, forged := range map[string]string{
		"NoSignature":    payload,
		"OtherSignature": payload + "." + b64.EncodeToString(make([]byte, 32)),
		"WriteRole":      reencode("write", fields[1], fields[2]),
		"LaterExpiry":    reencode(fields[0], "99999999999", fields[2]),
		"OtherNonce":     reencode(fields[0], fields[1], "AAAA"),
		"Empty":          "",
		"Garbage":        "%%%.%%%",
	} {
		_, ok := c.checkSignIn(forged, now)
		require.False(t, ok, name)
	}
	_, ok = c.checkSignIn(value, now.Add(time.Hour))
	require.False(t, ok, "expired")

	// Another token ends the sign-ins of the old one; each role has its own key.
	_, ok = newTestConsole(t, "new-read-token", "write-token").checkSignIn(value, now)
	require.False(t, ok)
	_, ok = newTestConsole(t, "", "read-token").checkSignIn(value, now)
	require.False(t, ok, "the read token set as the write token does not sign read cookies")

	// CSRF tokens are bound to the sign-in.
	other, _ := c.checkSignIn(c.signIn(roleRead, now.Add(time.Hour)), now)
	require.NotEqual(t, c.csrfToken(id), c.csrfToken(other))
	require.Empty(t, c.csrfToken(identity{role: roleWrite}), "no CSRF token for a bearer")
}

func TestSignInCookieIsSecureOverTLS(t *testing.T) {
	t.Parallel()
	c := newTestConsole(t, "read-token", "")
	mux := http.NewServeMux()
	c.Install(mux)
	for target, secure := range map[string]bool{"https://tmend.example/login": true, "http://tmend.example/login": false} {
		req := httptest.NewRequest("POST", target, strings.NewReader(url.Values{"token": {"read-token"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusSeeOther, rec.Code, target)
		ck := rec.Result().Cookies()
		require.Len(t, ck, 1)
		require.Equal(t, secure, ck[0].Secure, target)
		require.True(t, ck[0].HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck[0].SameSite)
	}
}

func TestWithoutTokensNobodySignsIn(t *testing.T) {
	t.Parallel()
	c := newTestConsole(t, "", "")
	mux := http.NewServeMux()
	c.Install(mux)
	for _, tok := range []string{"", " "} {
		req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Contains(t, rec.Body.String(), "No token is set")
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer ")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code)
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/runs/3?x=1": "/runs/3?x=1", "": "/", "https://evil.example/": "/", "//evil.example": "/",
		`/\evil.example`: "/", "javascript:alert(1)": "/", "runs": "/", "/session?id=a%2Fb": "/session?id=a%2Fb",
	} {
		require.Equal(t, want, localPath(in), in)
	}
}

func TestWrongSignInsAreLimitedPerClient(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	c, err := New(Config{Store: nopStore{}, ReadToken: "read-token", Log: zerolog.New(&logs)})
	require.NoError(t, err)
	now := time.Now()
	c.signIns.now = func() time.Time { return now }
	mux := http.NewServeMux()
	c.Install(mux)
	signIn := func(addr, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(logs.String()), "\n") }

	for range signInBurst {
		require.Equal(t, http.StatusUnauthorized, signIn("192.0.2.1:1000", "guess").Code)
	}
	for range 100 {
		rec := signIn("192.0.2.1:1001", "guess")
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		require.Equal(t, "6", rec.Header().Get("Retry-After"))
		require.Contains(t, rec.Body.String(), "try again in 6 seconds")
	}
	require.Equal(t, http.StatusTooManyRequests, signIn("192.0.2.1:1002", "read-token").Code, "the right token waits too")
	require.Equal(t, http.StatusSeeOther, signIn("192.0.2.2:1000", "read-token").Code, "another client is not limited")
	require.Equal(t, http.StatusUnauthorized, signIn("[2001:db8::1]:1000", "guess").Code)
	require.Len(t, lines(), 3, "one line for the first wrong token of each client and one for the first refusal: %s", logs.String())
	require.Contains(t, lines()[1], `"wrong":10`)

	// One more try is allowed after 6 seconds; right tokens spend nothing.
	now = now.Add(signInEvery)
	require.Equal(t, http.StatusSeeOther, signIn("192.0.2.1:1003", "read-token").Code)
	require.Equal(t, http.StatusUnauthorized, signIn("192.0.2.1:1003", "guess").Code)
	require.Equal(t, http.StatusTooManyRequests, signIn("192.0.2.1:1003", "guess").Code)

	// Once the allowance is whole again the burst is summed up in one line and forgotten.
	now = now.Add(signInEvery * signInBurst)
	c.signIns.settle("192.0.2.1")
	c.signIns.settle("2001:db8::/64")
	require.Len(t, lines(), 4, logs.String())
	require.Contains(t, lines()[3], `"message":"console sign-in burst ended"`)
	require.Contains(t, lines()[3], `"wrong":11,"refused":102`)
	require.Empty(t, c.signIns.clients)
	require.Equal(t, http.StatusUnauthorized, signIn("192.0.2.1:1004", "guess").Code)
	require.Len(t, lines(), 5, "a new burst")
}
