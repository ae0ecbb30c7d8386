package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

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
func (nopStore) ListReports(context.Context, model.ReportFilter) ([]model.ReportRow, error) {
	return nil, nil
}
func (nopStore) Versions(context.Context, string) ([]model.VersionRow, error) { return nil, nil }
func (nopStore) Version(context.Context, string, int) (model.VersionRow, error) {
	return model.VersionRow{}, model.ErrNotFound
}

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
