package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// langchainTable creates LangChain's table with the library's own DDL and writes
// generated langchain sessions into it, a row per message in order, as
// PostgresChatMessageHistory.addMessage does. It returns the ids of the sessions a
// repair changes.
func langchainTable(t *testing.T, b *dbBundle, sessions int) map[string]bool {
	t.Helper()
	ctx := t.Context()
	ddl, err := os.ReadFile("../../../store/testdata/langchain-postgres.sql")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	data := genJSONL(t, "--dialect", "langchain", "--sessions", fmt.Sprint(sessions), "--messages", "12", "--fault-rate", "0.5")
	broken := map[string]bool{}
	batch := &pgx.Batch{}
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s struct {
			ID       string            `json:"id"`
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
		for _, m := range s.Messages {
			batch.Queue(`INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ($1, $2)`, s.ID, string(m))
		}
	}
	require.NoError(t, b.pool.SendBatch(ctx, batch).Close())
	// What the library reads back (jsonb's text) decides which sessions are broken.
	for id, msgs := range langchainSessions(t, b) {
		if res, _ := repair.Repair([]byte(msgs), repair.Options{}); res.Changed() {
			broken[id] = true
		}
	}
	require.NotEmpty(t, broken)
	return broken
}

// langchainSessions reads every session as the library's getMessages() does (ORDER BY
// id), as one array each.
func langchainSessions(t *testing.T, b *dbBundle) map[string]string {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `SELECT session_id, '[' || string_agg(message::text, ',' ORDER BY id) || ']'
FROM public.langchain_chat_histories GROUP BY session_id`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var id, msgs string
		require.NoError(t, rows.Scan(&id, &msgs))
		out[id] = msgs
	}
	require.NoError(t, rows.Err())
	return out
}

// langchainRows is every row of the table, every column.
func langchainRows(t *testing.T, b *dbBundle) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT json_agg(t ORDER BY id)::text FROM public.langchain_chat_histories t`).Scan(&s))
	return s
}

// A LangChain table, repaired where it is with the preset: the library's own read then
// gives transcripts tmend finds nothing to repair in, clean sessions keep their rows
// byte for byte, and rolling the run back restores every row exactly.
func TestScanRepairsALangChainTable(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	broken := langchainTable(t, b, 30)
	before := langchainSessions(t, b)
	beforeRows := langchainRows(t, b)
	preset := []string{"--preset", "langchain-postgres", "--table", "public.langchain_chat_histories"}

	r := runCLI(t, "", b.env, append([]string{"scan", "--dry-run", "--json"}, preset...)...)
	require.Equal(t, ExitProblems, r.code, r.stderr)
	var dry struct {
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry))
	require.Equal(t, len(broken), dry.Counts["would_repair"])
	require.Equal(t, 30, dry.Counts["scanned"], "a session is all its rows, read once")
	require.Equal(t, beforeRows, langchainRows(t, b), "a dry run writes nothing")

	r = runCLI(t, "", b.env, append([]string{"scan", "--json"}, preset...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var run struct {
		ID     int64          `json:"id"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	require.Equal(t, len(broken), run.Counts["repaired"])

	after := langchainSessions(t, b)
	require.Len(t, after, 30)
	for id, msgs := range after {
		if !broken[id] {
			require.Equal(t, before[id], msgs, "session %s was clean", id)
			continue
		}
		res, err := repair.Repair([]byte(msgs), repair.Options{})
		require.NoError(t, err, id)
		require.False(t, res.Changed(), "session %s as the library reads it needs no repair: %v", id, res.Report.Actions)
	}
	r = runCLI(t, "", b.env, append([]string{"scan", "--full", "--dry-run"}, preset...)...)
	require.Equal(t, ExitOK, r.code, "nothing left to repair: %s", r.stdout)

	r = runCLI(t, "", b.env, append([]string{"rollback", "--run", fmt.Sprint(run.ID)}, preset...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, beforeRows, langchainRows(t, b), "every row back as it was, ids included")
}
