package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

const (
	apiToken  = "write-secret"
	readToken = "read-secret"
)

// startServe runs 'tmend serve' against url until the test ends.
func startServe(t *testing.T, url string, extra map[string]string) string {
	t.Helper()
	addr := freeAddr(t)
	env := map[string]string{"TMEND_DATABASE_URL": url, "TMEND_API_TOKEN": apiToken, "TMEND_READ_TOKEN": readToken, "TMEND_LOG_LEVEL": "error"}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", addr, "--schedule", "0 0 1 1 *"}, strings.NewReader(""), io.Discard, io.Discard,
			func(k string) string { return env[k] })
	}()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + addr
	waitFor(t, func() bool { resp, err := http.Get(base + "/healthz"); return err == nil && resp.Body.Close() == nil })
	return base
}

// call sends a request with the given Authorization header value (none when empty) and
// returns the status and body.
func call(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestAPIReadsNeedAToken(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	require.Equal(t, exitOK, runCLI(t, "", b.env, "repair", "--session", "a").code)
	base := startServe(t, b.url, nil)

	gets := []string{"/v1/runs", "/v1/runs/1", "/v1/reports", "/v1/sessions/a/reports", "/v1/sessions/a/versions/1"}
	for _, path := range gets {
		for _, auth := range []string{"", "Bearer nope", "Basic " + readToken, readToken, "Bearer"} {
			code, body := call(t, "GET", base+path, auth, "")
			require.Equal(t, http.StatusUnauthorized, code, "%s with %q: %s", path, auth, body)
			require.NotContains(t, body, "tool_calls")
		}
		for _, auth := range []string{"Bearer " + readToken, "Bearer " + apiToken, "bearer " + readToken, "BEARER  " + apiToken} {
			code, body := call(t, "GET", base+path, auth, "")
			require.Equal(t, http.StatusOK, code, "%s with %q: %s", path, auth, body)
		}
	}
	code, body := call(t, "GET", base+"/v1/sessions/a/versions/1", "Bearer "+readToken, "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "tool_calls")

	// The read token does not write; the API token's scheme is case-insensitive too.
	code, _ = call(t, "POST", base+"/v1/sessions/a/repair?dry_run=true", "Bearer "+readToken, "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = call(t, "POST", base+"/v1/sessions/a/repair?dry_run=true", "bearer "+apiToken, "")
	require.Equal(t, http.StatusOK, code, body)

	// Probes and metrics stay open.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, _ := call(t, "GET", base+path, "", "")
		require.Equal(t, http.StatusOK, code, path)
	}

	// Without any token set, reads are refused, not open.
	base = startServe(t, b.url, map[string]string{"TMEND_API_TOKEN": "", "TMEND_READ_TOKEN": ""})
	code, _ = call(t, "GET", base+"/v1/sessions/a/versions/1", "", "")
	require.Equal(t, http.StatusForbidden, code)
	// The read token alone enables reads.
	base = startServe(t, b.url, map[string]string{"TMEND_API_TOKEN": ""})
	code, _ = call(t, "GET", base+"/v1/sessions/a/versions/1", "Bearer "+readToken, "")
	require.Equal(t, http.StatusOK, code)
}

func TestAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	base := startServe(t, b.url, nil)
	w, rd := "Bearer "+apiToken, "Bearer "+readToken
	for _, tt := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/sessions/%00/reports", rd, ""},
		{"GET", "/v1/sessions/%FF/reports", rd, ""},
		{"GET", "/v1/sessions/a%00b/versions/1", rd, ""},
		{"GET", "/v1/sessions/%C3/versions/1", rd, ""},
		{"GET", "/v1/reports?status=%00", rd, ""},
		{"GET", "/v1/reports?dialect=%FF", rd, ""},
		{"GET", "/v1/reports?status=repaird", rd, ""},
		{"GET", "/v1/reports?status=completed", rd, ""},
		{"GET", "/v1/sessions/a/reports?status=repaird", rd, ""},
		{"GET", "/v1/runs?status=repaird", rd, ""},
		{"GET", "/v1/runs?status=repaired", rd, ""},
		{"POST", "/v1/sessions/%00/repair", w, ""},
		{"POST", "/v1/sessions/%FF/repair", w, ""},
		{"POST", "/v1/sessions/%00/rollback", w, "{}"},
		{"POST", "/v1/runs", w, "null"},
		{"POST", "/v1/runs", w, "[]"},
		{"POST", "/v1/runs", w, `"full"`},
		{"POST", "/v1/runs", w, "42"},
		{"POST", "/v1/runs", w, `{"mode":"full"} {"mode":"full"}`},
		{"POST", "/v1/runs", w, `{"mode":"full"} null`},
		{"POST", "/v1/sessions/a/rollback", w, "null"},
	} {
		code, body := call(t, tt.method, base+tt.path, tt.auth, tt.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %s %q: %s", tt.method, tt.path, tt.body, body)
		require.NotContains(t, body, "SQLSTATE")
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_runs"), "no bad request started a run")
	require.Zero(t, b.count(t, "SELECT count(*) FROM repair_reports"), "nor repaired or rolled back anything")
}

func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(http.NotFoundHandler())
	require.Positive(t, srv.ReadHeaderTimeout)
	require.Positive(t, srv.ReadTimeout)
	require.Positive(t, srv.IdleTimeout)
	require.LessOrEqual(t, srv.IdleTimeout, 2*time.Minute)
}

// tcpProxy forwards connections to a database until cut, which drops them all and
// refuses new ones: a database outage on demand.
type tcpProxy struct {
	ln     net.Listener
	dial   func() (net.Conn, error)
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	copies sync.WaitGroup
}

func newTCPProxy(t *testing.T, dial func() (net.Conn, error)) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, dial: dial}
	p.copies.Add(1)
	go func() {
		defer p.copies.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); p.cut(); p.copies.Wait() })
	return p
}

func (p *tcpProxy) forward(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = c.Close()
		return
	}
	up, err := p.dial()
	if err != nil {
		_ = c.Close()
		return
	}
	p.conns = append(p.conns, c, up)
	for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
		p.copies.Add(1)
		go func() {
			defer p.copies.Done()
			_, _ = io.Copy(pair[0], pair[1])
			_ = pair[0].Close()
			_ = pair[1].Close()
		}()
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	require.Equal(t, exitOK, runCLI(t, "", b.env, "repair", "--session", "a").code)

	cfg, err := pgconn.ParseConfig(b.url)
	require.NoError(t, err)
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", cfg.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.Port))
	}
	proxy := newTCPProxy(t, func() (net.Conn, error) { return net.Dial(network, addr) })
	u, err := url.Parse(b.url)
	require.NoError(t, err)
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery, u.Host = q.Encode(), proxy.ln.Addr().String()
	base := startServe(t, u.String(), nil)

	rd, w := "Bearer "+readToken, "Bearer "+apiToken
	code, body := call(t, "GET", base+"/v1/sessions/a/reports", rd, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _ = call(t, "GET", base+"/readyz", "", "")
	require.Equal(t, http.StatusOK, code)

	proxy.cut()
	for _, tt := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/runs", rd, ""},
		{"GET", "/v1/runs/1", rd, ""},
		{"GET", "/v1/reports", rd, ""},
		{"GET", "/v1/sessions/a/reports", rd, ""},
		{"GET", "/v1/sessions/a/versions/1", rd, ""},
		{"POST", "/v1/runs", w, `{"mode":"full"}`},
		{"POST", "/v1/sessions/a/rollback", w, "{}"},
	} {
		code, body := call(t, tt.method, base+tt.path, tt.auth, tt.body)
		require.Equal(t, http.StatusServiceUnavailable, code, "%s %s: %s", tt.method, tt.path, body)
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &m))
		require.Equal(t, "database unavailable; try again later", m["error"])
	}
	code, body = call(t, "GET", base+"/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status":"not ready","reason":"database unavailable"}`, body)
	require.NotContains(t, body, cfg.User)
	require.NotContains(t, body, "127.0.0.1")
	code, _ = call(t, "GET", base+"/healthz", "", "")
	require.Equal(t, http.StatusOK, code, "liveness does not depend on the database")
}
