package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/tmend/tmend/store/storetest"
)

// TestTouchAndNotifyThroughTheCLI: --notify-channel / TMEND_NOTIFY_CHANNEL send one
// notification per session repaired (by repair and by scan) or rolled back, and
// --touch-updated-at / TMEND_TOUCH_UPDATED_AT move the updated-at column, which is left
// alone unless asked.
func TestTouchAndNotifyThroughTheCLI(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	for _, id := range []string{"a", "b", "c"} {
		insertSession(t, b, id, brokenSession)
	}
	listener, err := pgx.Connect(t.Context(), b.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(t.Context(), `LISTEN app_cache`)
	require.NoError(t, err)
	type note struct {
		SessionID string `json:"session_id"`
		Version   int    `json:"version"`
		Action    string `json:"action"`
	}
	next := func() note {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(ctx)
		require.NoError(t, err)
		require.Equal(t, "app_cache", n.Channel)
		var got note
		require.NoError(t, json.Unmarshal([]byte(n.Payload), &got), n.Payload)
		return got
	}
	none := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		n, err := listener.WaitForNotification(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "unexpected notification %+v", n)
	}
	updatedAt := func(id string) time.Time {
		t.Helper()
		var at time.Time
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT updated_at FROM sessions WHERE id = $1`, id).Scan(&at))
		return at
	}
	before, beforeB := updatedAt("a"), updatedAt("b")

	// Neither by default.
	r := runCLI(t, "", b.env, "repair", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	none()
	require.Equal(t, before, updatedAt("a"))

	// Flags: the rollback notifies and touches.
	r = runCLI(t, "", b.env, "rollback", "--session", "a", "--notify-channel", "app_cache", "--touch-updated-at")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, note{"a", 3, "rollback"}, next())
	require.True(t, updatedAt("a").After(before), "updated_at %v, was %v", updatedAt("a"), before)
	none()

	// The environment: a scan notifies once per repaired session; without the touch
	// setting their updated-at stays.
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_NOTIFY_CHANNEL": "app_cache"}
	r = runCLI(t, "", env, "scan", "--full")
	require.Equal(t, ExitOK, r.code, r.stderr)
	got := map[string]note{}
	for range 2 {
		n := next()
		got[n.SessionID] = n
	}
	require.Equal(t, map[string]note{"b": {"b", 2, "repair"}, "c": {"c", 2, "repair"}}, got)
	none()
	require.Equal(t, beforeB, updatedAt("b"))

	env["TMEND_TOUCH_UPDATED_AT"] = "true"
	_, err = b.pool.Exec(t.Context(), `UPDATE sessions SET messages = $1::jsonb, updated_at = $2 WHERE id = 'b'`, brokenSession, beforeB)
	require.NoError(t, err)
	r = runCLI(t, "", env, "repair", "--session", "b")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "repair", next().Action)
	require.True(t, updatedAt("b").After(beforeB))

	env["TMEND_TOUCH_UPDATED_AT"] = "sometimes"
	r = runCLI(t, "", env, "repair", "--session", "b")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--touch-updated-at must be true or false")
}

// TestServeTouchesAndNotifies: the daemon takes the write settings from the environment
// for the API's repairs, and logs where it connected at info.
func TestServeTouchesAndNotifies(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "d", brokenSession)
	var before time.Time
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT updated_at FROM sessions WHERE id = 'd'`).Scan(&before))
	listener, err := pgx.Connect(t.Context(), b.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(t.Context(), `LISTEN app_cache`)
	require.NoError(t, err)

	addr := freeAddr(t)
	env := map[string]string{"TMEND_DATABASE_URL": b.url, "TMEND_API_TOKEN": "writer", "TMEND_NOTIFY_CHANNEL": "app_cache",
		"TMEND_TOUCH_UPDATED_AT": "true"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr storetest.Logs
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", addr, "--schedule", "0 0 1 1 *"},
			Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	base := "http://" + addr
	waitFor(t, func() bool { resp, err := http.Get(base + "/healthz"); return err == nil && resp.Body.Close() == nil })
	req, err := http.NewRequest("POST", base+"/v1/sessions/d/repair", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer writer")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	n, err := listener.WaitForNotification(wctx)
	require.NoError(t, err)
	require.Contains(t, n.Payload, `"session_id":"d"`)
	require.Contains(t, n.Payload, `"action":"repair"`)
	var after time.Time
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT updated_at FROM sessions WHERE id = 'd'`).Scan(&after))
	require.True(t, after.After(before), "updated_at %v, was %v", after, before)
	require.Regexp(t, `"level":"info"[^\n]*"message":"connecting"`, stderr.String())
}
