package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// presetTable is a platform's table with a row per message, created by the platform's
// own DDL (store/testdata), written and read as the platform's code does.
type presetTable struct {
	preset  string
	table   string // as given to --table: the name as Postgres spells it
	ddl     string
	dialect string
	// write queues the inserts the platform makes for one session's messages.
	write func(t *testing.T, batch *pgx.Batch, session string, msgs []json.RawMessage)
	// read returns, per session, its messages as the platform reads and builds them,
	// as one array (ties of the order broken by the primary key, as tmend does).
	read string
	// rows is every row of the table, every column, in key order.
	rows string
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var presetTables = []presetTable{{
	preset:  "langchain-postgres",
	table:   "public.langchain_chat_histories",
	ddl:     "langchain-postgres.sql",
	dialect: "langchain",
	// PostgresChatMessageHistory.addMessage: one INSERT a message.
	write: func(t *testing.T, batch *pgx.Batch, session string, msgs []json.RawMessage) {
		for _, m := range msgs {
			batch.Queue(`INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ($1, $2)`, session, string(m))
		}
	},
	// getMessages(): SELECT message ... ORDER BY id.
	read: `SELECT session_id, '[' || string_agg(message::text, ',' ORDER BY id) || ']'
FROM public.langchain_chat_histories GROUP BY session_id`,
	rows: `SELECT json_agg(t ORDER BY id)::text FROM public.langchain_chat_histories t`,
}, {
	preset:  "ai-sdk-chatbot",
	table:   `public."Message_v2"`,
	ddl:     "ai-sdk-chatbot.sql",
	dialect: "ai-sdk-ui",
	// The template's saveMessages: a Chat, then its messages with their own uuid, no
	// attachments, and the time each was made.
	write: func(t *testing.T, batch *pgx.Batch, session string, msgs []json.RawMessage) {
		chat := fmt.Sprintf("00000000-0000-4000-8000-%012s", strings.TrimPrefix(session, "s-"))
		batch.Queue(`INSERT INTO "Chat" (id) VALUES ($1)`, chat)
		for i, m := range msgs {
			var ui struct {
				Role  string          `json:"role"`
				Parts json.RawMessage `json:"parts"`
			}
			require.NoError(t, json.Unmarshal(m, &ui))
			batch.Queue(`INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES (gen_random_uuid(), $1, $2, $3, '[]', $4)`,
				chat, ui.Role, string(ui.Parts), base.Add(time.Duration(i)*time.Second))
		}
	},
	// getMessagesByChatId, ORDER BY "createdAt", each row as {id, role, parts}.
	read: `SELECT "chatId"::text, '[' || string_agg(json_build_object('id', id, 'role', role, 'parts', parts)::text, ',' ORDER BY "createdAt", id) || ']'
FROM "Message_v2" GROUP BY "chatId"`,
	rows: `SELECT json_agg(t ORDER BY id)::text FROM "Message_v2" t`,
}, {
	preset:  "mastra",
	table:   "public.mastra_messages",
	ddl:     "mastra.sql",
	dialect: "mastra",
	// saveMessages: id, thread_id, content (JSON text), "createdAt", "createdAtZ", role,
	// type, "resourceId".
	write: func(t *testing.T, batch *pgx.Batch, session string, msgs []json.RawMessage) {
		for i, m := range msgs {
			var mm struct {
				ID         string          `json:"id"`
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				Type       string          `json:"type"`
				ResourceID string          `json:"resourceId"`
			}
			require.NoError(t, json.Unmarshal(m, &mm))
			at := base.Add(time.Duration(i) * time.Second)
			batch.Queue(`INSERT INTO public.mastra_messages (id, thread_id, content, "createdAt", "createdAtZ", role, type, "resourceId")
VALUES ($1, $2, $3, $4::timestamptz AT TIME ZONE 'UTC', $4, $5, $6, $7)`,
				session+"-"+mm.ID, session, string(mm.Content), at, mm.Role, mm.Type, mm.ResourceID)
		}
	},
	// getMessages: ORDER BY "createdAt", content parsed.
	read: `SELECT thread_id, '[' || string_agg(json_build_object('id', id, 'role', role, 'content', content::json, 'type', type)::text, ',' ORDER BY "createdAt", id) || ']'
FROM public.mastra_messages GROUP BY thread_id`,
	rows: `SELECT json_agg(t ORDER BY id)::text FROM public.mastra_messages t`,
}}

// create makes the table and writes generated sessions of the platform's dialect into
// it, and returns the ids of the sessions a repair changes, as the platform reads them.
func (p presetTable) create(t *testing.T, b *dbBundle, sessions int) map[string]bool {
	t.Helper()
	ctx := t.Context()
	ddl, err := os.ReadFile("../../../store/testdata/" + p.ddl)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	data := genJSONL(t, "--dialect", p.dialect, "--sessions", fmt.Sprint(sessions), "--messages", "12", "--fault-rate", "0.5")
	batch := &pgx.Batch{}
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s struct {
			ID       string            `json:"id"`
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
		p.write(t, batch, s.ID, s.Messages)
	}
	require.NoError(t, b.pool.SendBatch(ctx, batch).Close())
	broken := map[string]bool{}
	for id, msgs := range p.sessions(t, b) {
		if res, _ := repair.Repair([]byte(msgs), repair.Options{}); res.Changed() {
			broken[id] = true
		}
	}
	require.NotEmpty(t, broken)
	return broken
}

func (p presetTable) sessions(t *testing.T, b *dbBundle) map[string]string {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), p.read)
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

func (p presetTable) allRows(t *testing.T, b *dbBundle) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(t.Context(), p.rows).Scan(&s))
	return s
}

// Each platform's table, repaired where it is with its preset: the platform's own read
// then gives transcripts tmend finds nothing to repair in, clean sessions keep their
// rows byte for byte, and rolling the run back restores every row exactly.
func TestScanRepairsPresetTables(t *testing.T) {
	t.Parallel()
	for _, p := range presetTables {
		t.Run(p.preset, func(t *testing.T) {
			t.Parallel()
			b := setupDB(t, 0, "0")
			const n = 30
			broken := p.create(t, b, n)
			before := p.sessions(t, b)
			beforeRows := p.allRows(t, b)
			preset := []string{"--preset", p.preset, "--table", p.table}

			r := runCLI(t, "", b.env, append([]string{"scan", "--dry-run", "--json"}, preset...)...)
			require.Equal(t, ExitProblems, r.code, r.stderr)
			var dry struct {
				Counts map[string]int `json:"counts"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry))
			require.Equal(t, len(broken), dry.Counts["would_repair"], r.stdout)
			require.Equal(t, n, dry.Counts["scanned"], "a session is all its rows, read once")
			require.Equal(t, beforeRows, p.allRows(t, b), "a dry run writes nothing")
			if p.preset == "ai-sdk-chatbot" {
				// Names as Postgres spells them: the preset's own "Message_v2", found on the
				// search_path, and the same mapping written out.
				for _, args := range [][]string{
					{"--preset", p.preset},
					{"--preset", p.preset, "--table", `"Message_v2"`},
					{"--layout", "messages", "--table", `"Message_v2"`, "--session-column", `"chatId"`,
						"--order-column", `"createdAt"`, "--message-map", "id=id,role=role,parts=parts"},
				} {
					r := runCLI(t, "", b.env, append([]string{"scan", "--dry-run", "--json"}, args...)...)
					require.Equal(t, ExitProblems, r.code, "%v: %s", args, r.stderr)
				}
			}

			// Partitions are ranges of session ids: each session read once, whole.
			r = runCLI(t, "", b.env, append([]string{"scan", "--json", "--partitions", "3"}, preset...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var run struct {
				ID         int64          `json:"id"`
				Counts     map[string]int `json:"counts"`
				Partitions int            `json:"partitions"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
			require.Equal(t, len(broken), run.Counts["repaired"], r.stdout)
			require.Equal(t, n, run.Counts["scanned"], r.stdout)
			require.Greater(t, run.Partitions, 1, r.stdout)

			after := p.sessions(t, b)
			require.Len(t, after, n)
			for id, msgs := range after {
				if !broken[id] {
					require.Equal(t, before[id], msgs, "session %s was clean", id)
					continue
				}
				res, err := repair.Repair([]byte(msgs), repair.Options{})
				require.NoError(t, err, id)
				require.False(t, res.Changed(), "session %s as the platform reads it needs no repair: %v", id, res.Report.Actions)
			}
			r = runCLI(t, "", b.env, append([]string{"scan", "--full", "--dry-run"}, preset...)...)
			require.Equal(t, ExitOK, r.code, "nothing left to repair: %s", r.stdout)

			r = runCLI(t, "", b.env, append([]string{"rollback", "--run", fmt.Sprint(run.ID)}, preset...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Equal(t, beforeRows, p.allRows(t, b), "every row back as it was, keys included")
		})
	}
}

// report lists the runs of every table, unless a source option says which: then only
// that table's runs, as a session's history is kept per table.
func TestReportRunsOfTheSourceGiven(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 5, "0")
	p := presetTables[0]
	p.create(t, b, 5)
	require.Equal(t, ExitOK, runCLI(t, "", b.env, "scan", "--full").code)
	r := runCLI(t, "", b.env, "scan", "--full", "--preset", p.preset, "--table", p.table)
	require.Equal(t, ExitOK, r.code, r.stderr)

	runs := func(args ...string) int {
		r := runCLI(t, "", b.env, append([]string{"report", "--json"}, args...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		return len(jsonLines(t, r.stdout))
	}
	require.Equal(t, 2, runs())
	require.Equal(t, 1, runs("--preset", p.preset, "--table", p.table))
	require.Equal(t, 1, runs("--table", "sessions"))
}
