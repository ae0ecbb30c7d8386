package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// LangChain messages as PostgresChatMessageHistory stores them ({type, ...data}).
const (
	lcHuman    = `{"type":"human","content":"list the files"}`
	lcCall2    = `{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"ls","args":{},"type":"tool_call"},{"id":"c2","name":"pwd","args":{},"type":"tool_call"}]}`
	lcCall1    = `{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"ls","args":{},"type":"tool_call"}]}`
	lcResult1  = `{"type":"tool","content":"a b","tool_call_id":"c1","name":"ls"}`
	lcOrphan   = `{"type":"tool","content":"stale","tool_call_id":"zz","name":"ls"}`
	lcHuman2   = `{"type":"human","content":"and then?"}`
	lcAnswer   = `{"type":"ai","content":"done"}`
	lcAppended = `{"type":"human","content":"appended meanwhile"}`
)

// langchain is a database with LangChain's table, created by its own DDL.
type langchain struct {
	pool *pgxpool.Pool
	st   *store.Store
}

func setupLangchain(t *testing.T) *langchain {
	t.Helper()
	pool := storetest.NewDB(t)
	ddl, err := os.ReadFile("testdata/langchain-postgres.sql")
	require.NoError(t, err)
	// The DDL names no schema: create it in public, as the library would.
	_, err = pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	src, err := store.Preset("langchain-postgres")
	require.NoError(t, err)
	src.Table = "public." + src.Table
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	return &langchain{pool: pool, st: st}
}

// add appends messages to a session as the library does: one INSERT a message.
func (l *langchain) add(t *testing.T, session string, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		_, err := l.pool.Exec(t.Context(), `INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ($1, $2)`, session, m)
		require.NoError(t, err)
	}
}

type lcRow struct {
	ID      int
	Message string
}

// rows are a session's rows as the library reads them: ORDER BY id.
func (l *langchain) rows(t *testing.T, session string) []lcRow {
	t.Helper()
	rows, err := l.pool.Query(t.Context(), `SELECT id, message::text FROM public.langchain_chat_histories WHERE session_id = $1 ORDER BY id`, session)
	require.NoError(t, err)
	var out []lcRow
	for rows.Next() {
		var r lcRow
		require.NoError(t, rows.Scan(&r.ID, &r.Message))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// transcript is what the library's getMessages() reads, as one array.
func (l *langchain) transcript(t *testing.T, session string) string {
	t.Helper()
	var msgs []string
	for _, r := range l.rows(t, session) {
		msgs = append(msgs, r.Message)
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// requireStored checks that the library reads want, as jsonb stores it (keys in its
// order, its spacing): the same JSON values.
func (l *langchain) requireStored(t *testing.T, want, session string, msgAndArgs ...any) {
	t.Helper()
	var norm string
	require.NoError(t, l.pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(e::text, ',' ORDER BY i), '') FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x (e, i)`, want).Scan(&norm))
	require.Equal(t, "["+norm+"]", l.transcript(t, session), msgAndArgs...)
}

// whole is every column of a session's rows, as JSON.
func (l *langchain) whole(t *testing.T, session string) string {
	t.Helper()
	var s string
	require.NoError(t, l.pool.QueryRow(t.Context(), `SELECT coalesce(json_agg(t ORDER BY id)::text, '') FROM public.langchain_chat_histories t WHERE session_id = $1`, session).Scan(&s))
	return s
}

func (l *langchain) read(t *testing.T, session string) model.Session {
	t.Helper()
	page, err := l.st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: session, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 1)
	return page[0]
}

// repair repairs a session as read and writes it, and returns the repaired transcript.
func (l *langchain) repair(t *testing.T, sess model.Session) (string, model.Outcome) {
	t.Helper()
	res, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
	require.NoError(t, err)
	require.True(t, res.Changed())
	out, err := l.st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess,
		Origins: origins, Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	return string(repair.JoinOrigins(origins)), out
}

func TestMessagesLayoutRepairsRowsInPlace(t *testing.T) {
	t.Parallel()
	t.Run("ASyntheticResultInTheMiddleRenumbersTheRowsAfterIt", func(t *testing.T) {
		t.Parallel()
		l := setupLangchain(t)
		l.add(t, "s", lcHuman, lcCall2, lcResult1, lcHuman2, lcAnswer)
		before := l.rows(t, "s")
		sess := l.read(t, "s")
		require.Equal(t, l.transcript(t, "s"), string(sess.Messages), "a session is its rows' messages in order")
		want, out := l.repair(t, sess)
		require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, out)

		after := l.rows(t, "s")
		l.requireStored(t, want, "s", "ORDER BY id reads the repaired transcript")
		require.Len(t, after, 6)
		require.Equal(t, before[:3], after[:3], "rows before the insertion keep their ids and bytes")
		// The synthetic result and the two rows after it take new ids, in order.
		require.Greater(t, after[3].ID, before[4].ID)
		require.Equal(t, before[3].Message, after[4].Message)
		require.Equal(t, before[4].Message, after[5].Message)
		require.Contains(t, after[3].Message, `"tool_call_id": "c2"`)
	})
	t.Run("ADroppedMessageDeletesItsRowOnly", func(t *testing.T) {
		t.Parallel()
		l := setupLangchain(t)
		l.add(t, "s", lcHuman, lcOrphan, lcAnswer)
		before := l.rows(t, "s")
		want, _ := l.repair(t, l.read(t, "s"))
		l.requireStored(t, want, "s")
		require.Equal(t, []lcRow{before[0], before[2]}, l.rows(t, "s"))
	})
	t.Run("AMovedResultRenumbersFromWhereItGoes", func(t *testing.T) {
		t.Parallel()
		l := setupLangchain(t)
		l.add(t, "s", lcHuman, lcCall1, lcHuman2, lcResult1)
		before := l.rows(t, "s")
		want, _ := l.repair(t, l.read(t, "s"))
		after := l.rows(t, "s")
		l.requireStored(t, want, "s")
		require.Equal(t, before[:2], after[:2])
		require.Equal(t, []string{before[3].Message, before[2].Message}, []string{after[2].Message, after[3].Message})
		require.Greater(t, after[2].ID, before[3].ID)
	})
	t.Run("OtherSessionsAreUntouched", func(t *testing.T) {
		t.Parallel()
		l := setupLangchain(t)
		l.add(t, "a", lcHuman, lcCall2)
		l.add(t, "b", lcHuman, lcCall1, lcResult1, lcAnswer)
		l.add(t, "a", lcResult1, lcHuman2)
		b := l.whole(t, "b")
		want, _ := l.repair(t, l.read(t, "a"))
		l.requireStored(t, want, "a")
		require.Equal(t, b, l.whole(t, "b"))
	})
}

// A message appended after the session was read makes the write a conflict: nothing
// changes, and the next run sees the session whole.
func TestMessagesLayoutAppendIsAConflict(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	l.add(t, "s", lcHuman, lcCall2, lcResult1)
	sess := l.read(t, "s")
	l.add(t, "s", lcAppended)
	before := l.whole(t, "s")
	_, out := l.repair(t, sess)
	require.Equal(t, model.Outcome{Conflict: true}, out)
	require.Equal(t, before, l.whole(t, "s"))
	reports, err := l.st.ListReports(t.Context(), model.ReportFilter{SessionID: "s"})
	require.NoError(t, err)
	require.Len(t, reports, 1)
	require.Equal(t, model.StatusConflict, reports[0].Status)

	// Read again, it repairs, the appended message last.
	want, out := l.repair(t, l.read(t, "s"))
	require.True(t, out.Applied)
	l.requireStored(t, want, "s")
	require.True(t, strings.HasSuffix(want, `{"type": "human", "content": "appended meanwhile"}]`), "jsonb's text of the appended message, last")
}

// Versions keep the rows whole; rollback puts them back exactly, ids included, and
// refuses a session whose rows changed since tmend wrote them unless forced.
func TestMessagesLayoutRollbackRestoresTheRows(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	l.add(t, "s", lcHuman, lcCall2, lcResult1, lcHuman2)
	original, originalRows := l.transcript(t, "s"), l.whole(t, "s")
	repaired, out := l.repair(t, l.read(t, "s"))

	// The console and report see transcripts.
	v, err := l.st.Version(t.Context(), "s", out.FromVersion)
	require.NoError(t, err)
	require.Equal(t, original, v.Content)
	v, err = l.st.Version(t.Context(), "s", out.ToVersion)
	require.NoError(t, err)
	l.requireStored(t, v.Content, "s")

	res, err := l.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "s", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRestored, res.Status, res.Reason)
	require.Equal(t, originalRows, l.whole(t, "s"), "every row back, ids included")

	// Held: a scheduled read sees the hold on the restored transcript.
	require.Equal(t, model.ContentHash([]byte(original)), l.read(t, "s").HoldHash)

	// Repaired again, then changed by the platform: rollback refuses unless forced.
	l.repair(t, l.read(t, "s"))
	l.requireStored(t, repaired, "s")
	l.add(t, "s", lcAppended)
	res, err = l.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "s", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRefused, res.Status)
	res, err = l.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "s", Trigger: model.TriggerCLI, Force: true})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRestored, res.Status)
	require.NotZero(t, res.Preserved)
	require.Equal(t, originalRows, l.whole(t, "s"))
	v, err = l.st.Version(t.Context(), "s", res.Preserved)
	require.NoError(t, err)
	require.Contains(t, v.Content, "appended meanwhile", "the forced-over rows are kept as a version")
}

// Pages hold whole sessions in session id order, within their byte bound; a session too
// large or crossing the bound comes without its content.
func TestMessagesLayoutPages(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	for _, id := range []string{"c", "a", "d", "b"} {
		l.add(t, id, lcHuman, lcCall1)
	}
	l.add(t, "a", lcResult1)
	l.add(t, "big", lcHuman, lcAnswer, lcHuman2, lcAnswer, lcHuman2, lcAnswer)
	ctx := t.Context()
	page, err := l.st.Sessions(ctx, model.Query{Mode: model.ModeFull, Limit: 2, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, []string{"a", "b"}, []string{page[0].ID, page[1].ID})
	require.Equal(t, 3, page[0].Rows.Len())
	require.Equal(t, len(page[0].Messages), page[0].Size)

	page, err = l.st.Sessions(ctx, model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 200,
		After: model.Cursor{ID: "b", Started: true}})
	require.NoError(t, err)
	require.Equal(t, []string{"big", "c", "d"}, []string{page[0].ID, page[1].ID, page[2].ID})
	require.Nil(t, page[0].Messages, "over MaxBytes")
	require.Greater(t, page[0].Size, 200)
	require.NotNil(t, page[1].Messages)

	// A byte bound that takes one session: the next comes deferred and ends the page.
	one := l.read(t, "c").Size
	page, err = l.st.Sessions(ctx, model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20, PageBytes: one + 1,
		After: model.Cursor{ID: "big", Started: true}})
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.NotNil(t, page[0].Messages)
	require.True(t, page[1].Deferred)
	require.Nil(t, page[1].Messages)

	// Partitions are ranges of session ids.
	lower, upper := "a", "c"
	page, err = l.st.Sessions(ctx, model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20,
		Slice: model.Slice{Lower: &lower, Upper: &upper}})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "big", "c"}, []string{page[0].ID, page[1].ID, page[2].ID})
}

// A table ordered by a timestamp: a new row goes between its neighbours, every other
// row untouched; with no room (equal times), the rows after it move on by microseconds.
// New rows copy the columns tmend does not set from the row before them.
func TestMessagesLayoutTimeOrder(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, step time.Duration) (*pgxpool.Pool, *store.Store) {
		t.Helper()
		pool := storetest.NewDB(t)
		_, err := pool.Exec(t.Context(), `CREATE TABLE public."Chat Messages" (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "Conv" text NOT NULL, body jsonb NOT NULL, created_at timestamptz NOT NULL, note text NOT NULL)`)
		require.NoError(t, err)
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for i, m := range []string{lcHuman, lcCall2, lcResult1, lcHuman2} {
			// Keys in the order of the messages, which ties of created_at fall back on.
			_, err := pool.Exec(t.Context(), `INSERT INTO public."Chat Messages" (id, "Conv", body, created_at, note) VALUES ($1, 'c', $2, $3, $4)`,
				fmt.Sprintf("00000000-0000-4000-8000-%012d", i), m, at.Add(time.Duration(i)*step), fmt.Sprint("note ", i))
			require.NoError(t, err)
		}
		st, err := store.Open(t.Context(), pool, store.Source{Table: `public."Chat Messages"`, Layout: store.LayoutMessages,
			SessionColumn: `"Conv"`, OrderColumn: "created_at", MessageColumn: "body"}, false)
		require.NoError(t, err)
		return pool, st
	}
	type row struct {
		ID, Body, Note string
		At             time.Time
	}
	rows := func(t *testing.T, pool *pgxpool.Pool) []row {
		t.Helper()
		r, err := pool.Query(t.Context(), `SELECT id::text, body::text, note, created_at FROM public."Chat Messages" ORDER BY created_at, id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(r, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		return out
	}
	repairIt := func(t *testing.T, st *store.Store) {
		t.Helper()
		l := &langchain{st: st}
		l.repair(t, l.read(t, "c"))
	}
	t.Run("Between", func(t *testing.T) {
		t.Parallel()
		pool, st := setup(t, time.Second)
		before := rows(t, pool)
		repairIt(t, st)
		after := rows(t, pool)
		require.Len(t, after, 5)
		require.Equal(t, before[:3], after[:3])
		require.Equal(t, before[3], after[4], "the row after the new one is untouched")
		require.Contains(t, after[3].Body, `"tool_call_id": "c2"`)
		require.Equal(t, before[2].At.Add(500*time.Millisecond), after[3].At, "half way between its neighbours")
		require.Equal(t, "note 2", after[3].Note, "copied from the row before")
	})
	t.Run("NoRoom", func(t *testing.T) {
		t.Parallel()
		pool, st := setup(t, 0)
		before := rows(t, pool)
		repairIt(t, st)
		after := rows(t, pool)
		require.Len(t, after, 5)
		// Equal times: tmend orders them by key, as it read them; the new row and the
		// row after it take the next microseconds, so that ORDER BY created_at alone
		// puts them last, in order.
		require.Contains(t, after[3].Body, `"tool_call_id": "c2"`)
		require.Equal(t, before[0].At.Add(time.Microsecond), after[3].At)
		require.Equal(t, before[0].At.Add(2*time.Microsecond), after[4].At)
		require.Equal(t, compactJSON(t, lcHuman2), compactJSON(t, after[4].Body))
	})
}

// compactJSON is s (jsonb's text) as encoding/json writes it, keys sorted.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// chatbotChat makes the AI SDK chatbot template's tables (its DDL from testdata) in a new
// database's public schema, with one chat, and returns the database and the chat's id.
func chatbotChat(t *testing.T) (*pgxpool.Pool, string) {
	pool := storetest.NewDB(t)
	ddl, err := os.ReadFile("testdata/ai-sdk-chatbot.sql")
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	const chat = "00000000-0000-4000-8000-000000000001"
	_, err = pool.Exec(t.Context(), `INSERT INTO "Chat" (id) VALUES ($1)`, chat)
	require.NoError(t, err)
	return pool, chat
}

// Rollback changes rows in place where it can: a row another table refers to (the
// chatbot template's "Vote_v2" on "Message_v2") is updated, not deleted and inserted
// again, which its foreign key would refuse.
func TestMessagesLayoutRollbackKeepsReferencedRows(t *testing.T) {
	t.Parallel()
	pool, chat := chatbotChat(t)
	var err error
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, m := range [][2]string{
		{"user", `[{"type":"text","text":"Weather in Paris?"}]`},
		{"assistant", `[{"type":"text","text":"Checking."},{"type":"tool-getWeather","toolCallId":"c1","state":"input-available","input":{"city":"Paris"}}]`},
		{"user", `[{"type":"text","text":"Still there?"}]`},
	} {
		_, err := pool.Exec(t.Context(), `INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES ($1, $2, $3, $4, '[]', $5)`,
			fmt.Sprintf("00000000-0000-4000-9000-%012d", i), chat, m[0], m[1], at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	_, err = pool.Exec(t.Context(), `INSERT INTO "Vote_v2" ("chatId", "messageId", "isUpvoted") VALUES ($1, '00000000-0000-4000-9000-000000000001', true)`, chat)
	require.NoError(t, err)
	src, err := store.Preset("ai-sdk-chatbot")
	require.NoError(t, err)
	src.Table = "public." + src.Table
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	whole := func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT json_agg(t ORDER BY "createdAt", id)::text FROM "Message_v2" t`).Scan(&s))
		return s
	}
	before := whole()

	l := &langchain{st: st}
	l.repair(t, l.read(t, chat))
	require.NotEqual(t, before, whole())
	res, err := st.Rollback(t.Context(), model.RollbackRequest{SessionID: chat, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRestored, res.Status, res.Reason)
	require.Equal(t, before, whole(), "every row back, every column")
}

// A row tmend inserts in the chatbot template's table holds a message of its own, with
// no attachments: its "attachments" (json NOT NULL) is [], not the row before's.
func TestChatbotInsertedRowHasNoAttachments(t *testing.T) {
	t.Parallel()
	pool, chat := chatbotChat(t)
	var err error
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const picture = `[{"url":"https://example.com/cat.png","name":"cat.png","contentType":"image/png"}]`
	for i, m := range [][2]string{{"user", `[{"type":"text","text":"What is this?"}]`}, {"assistant", `[{"type":"text","text":"A cat."}]`}} {
		_, err := pool.Exec(t.Context(), `INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES ($1, $2, $3, $4, $5, $6)`,
			fmt.Sprintf("00000000-0000-4000-9000-%012d", i), chat, m[0], m[1], picture, at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	src, err := store.Preset("ai-sdk-chatbot")
	require.NoError(t, err)
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	sess := (&langchain{st: st}).read(t, chat)

	// The transcript with a message appended that no row holds (Origin -1).
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(sess.Messages, &msgs))
	msgs = append(msgs, json.RawMessage(`{"id":"00000000-0000-4000-9000-000000000009","role":"assistant","parts":[{"type":"text","text":"More?"}]}`))
	origins := make([]repair.Origin, len(msgs))
	for i, m := range msgs {
		origins[i] = repair.Origin{Input: int32(i), Msg: m}
	}
	origins[len(msgs)-1].Input = -1
	_, err = st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess,
		Origins: origins, Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)

	rows, err := pool.Query(t.Context(), `SELECT id::text, attachments::text FROM "Message_v2" ORDER BY "createdAt", id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var v [2]string
		return v, r.Scan(&v[0], &v[1])
	})
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"00000000-0000-4000-9000-000000000000", picture}, {"00000000-0000-4000-9000-000000000001", picture},
		{"00000000-0000-4000-9000-000000000009", "[]"}}, got)
}

// A repaired message with a member no column of the map keeps is not written, and the
// error is the session's, not the database's: the session fails with it (README), it is
// not retried as an outage.
func TestMessageMapMissingMemberFailsTheSession(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	_, err := pool.Exec(t.Context(), `CREATE TABLE public.chat (id bigserial PRIMARY KEY, conv text NOT NULL, role text NOT NULL, content jsonb)`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `INSERT INTO public.chat (conv, role, content) VALUES ('c', 'user', '"ls"')`)
	require.NoError(t, err)
	st, err := store.Open(t.Context(), pool, store.Source{Table: "public.chat", Layout: store.LayoutMessages, SessionColumn: "conv",
		OrderColumn: "id", MessageMap: []store.MapField{{Key: "role", Column: "role"}, {Key: "content", Column: "content"}}}, false)
	require.NoError(t, err)
	sess := (&langchain{st: st}).read(t, "c")
	_, err = st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess,
		Origins: []repair.Origin{{Input: 0, Msg: []byte(`{"role":"user","content":"ls"}`)},
			{Input: -1, Msg: []byte(`{"role":"tool","content":"x","tool_call_id":"c1"}`)}},
		Report: model.Report{Status: model.StatusRepaired}})
	require.ErrorContains(t, err, `a repaired message has a member "tool_call_id" that no column of the message map keeps`)
	require.NotErrorIs(t, err, model.ErrUnavailable)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM public.chat`).Scan(&n))
	require.Equal(t, 1, n, "nothing written")
}

// A row the repair would delete that another table refers to (a vote on a retried
// answer) leaves the session as it was, with an error that says what to do.
func TestMessagesLayoutReferencedRowIsNotDeleted(t *testing.T) {
	t.Parallel()
	pool, chat := chatbotChat(t)
	var err error
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	answer := `[{"type":"tool-getWeather","toolCallId":"c1","state":"output-available","input":{"city":"Paris"},"output":{"celsius":21}}]`
	for i, m := range [][2]string{{"user", `[{"type":"text","text":"Weather?"}]`}, {"assistant", answer}, {"assistant", answer}} {
		_, err := pool.Exec(t.Context(), `INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES ($1, $2, $3, $4, '[]', $5)`,
			fmt.Sprintf("00000000-0000-4000-9000-%012d", i), chat, m[0], m[1], at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	// The vote is on the retry's copy, the row the repair drops.
	_, err = pool.Exec(t.Context(), `INSERT INTO "Vote_v2" ("chatId", "messageId", "isUpvoted") VALUES ($1, '00000000-0000-4000-9000-000000000002', true)`, chat)
	require.NoError(t, err)
	src, err := store.Preset("ai-sdk-chatbot")
	require.NoError(t, err)
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	whole := func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT json_agg(t ORDER BY id)::text FROM "Message_v2" t`).Scan(&s))
		return s
	}
	before := whole()
	l := &langchain{st: st}
	sess := l.read(t, chat)
	_, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
	require.NoError(t, err)
	_, err = st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess,
		Origins: origins, Report: model.Report{Status: model.StatusRepaired}})
	require.ErrorContains(t, err, `a row the repair deletes is referenced by another table (Key (id)=(00000000-0000-4000-9000-000000000002) is still referenced from table "Vote_v2".`)
	require.Equal(t, before, whole())
}

// Rollback of a row changed in place leaves an identity column GENERATED ALWAYS alone:
// UPDATE may not set it, and a repair never changes it in a row it keeps.
func TestMessagesLayoutRollbackIdentityAlways(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	_, err := pool.Exec(t.Context(), `CREATE TABLE public.chat (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  n bigint GENERATED ALWAYS AS IDENTITY, conv text NOT NULL, body jsonb NOT NULL, created_at timestamptz NOT NULL)`)
	require.NoError(t, err)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The call's ids repeat: the repair rewrites the call in place and adds a result last.
	dupIDs := `{"type":"ai","content":"","tool_calls":[{"id":"c2","name":"ls","args":{},"type":"tool_call"},{"id":"c2","name":"ls","args":{},"type":"tool_call"}]}`
	for i, m := range []string{lcHuman, dupIDs, `{"type":"tool","content":"x","tool_call_id":"c2","name":"ls"}`} {
		_, err := pool.Exec(t.Context(), `INSERT INTO public.chat (conv, body, created_at) VALUES ('c', $1, $2)`, m, at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	st, err := store.Open(t.Context(), pool, store.Source{Table: "public.chat", Layout: store.LayoutMessages,
		SessionColumn: "conv", OrderColumn: "created_at", MessageColumn: "body"}, false)
	require.NoError(t, err)
	whole := func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT json_agg(t ORDER BY created_at, id)::text FROM public.chat t`).Scan(&s))
		return s
	}
	before := whole()
	l := &langchain{st: st}
	l.repair(t, l.read(t, "c"))
	require.NotEqual(t, before, whole())
	res, err := st.Rollback(t.Context(), model.RollbackRequest{SessionID: "c", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRestored, res.Status, res.Reason)
	require.Equal(t, before, whole())
}

// A row of the saved version whose key another session holds now (Mastra's saveMessages
// moves a message by id) fails the rollback: the session is not called restored
// without it.
func TestMessagesLayoutRollbackKeyTakenElsewhere(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	l.add(t, "s", lcHuman, lcCall2, lcResult1, lcOrphan, lcHuman2)
	l.repair(t, l.read(t, "s"))
	// The orphan's row was deleted by the repair; its key now belongs to another session.
	var orphan int
	require.NoError(t, l.pool.QueryRow(t.Context(), `SELECT id FROM session_versions v, json_to_recordset(v.content::json) AS r (id int, message jsonb)
WHERE v.session_id = 's' AND v.kind = 'original' AND r.message->>'tool_call_id' = 'zz'`).Scan(&orphan))
	_, err := l.pool.Exec(t.Context(), `INSERT INTO public.langchain_chat_histories (id, session_id, message) VALUES ($1, 'other', $2)`, orphan, lcHuman)
	require.NoError(t, err)
	before := l.whole(t, "s")
	_, err = l.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "s", Trigger: model.TriggerCLI})
	require.ErrorContains(t, err, "duplicate key")
	require.Equal(t, before, l.whole(t, "s"), "the session as it was")
}

// The write checks the rows it locks against those read by their keys and xmins: a row
// the platform wrote again in place since the read, even with the same content, makes
// the session a conflict, alone or in a batch, and nothing of it changes.
func TestMessagesLayoutRowWrittenAgainIsAConflict(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	ids := []string{"s1", "s2", "s3"}
	as := map[string]model.Apply{}
	for _, id := range ids {
		l.add(t, id, lcHuman, lcCall2, lcResult1, lcHuman2)
		sess := l.read(t, id)
		_, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
		require.NoError(t, err)
		as[id] = model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
			Report: model.Report{Status: model.StatusRepaired}}
	}
	for _, id := range []string{"s1", "s2"} {
		_, err := l.pool.Exec(ctx, `UPDATE public.langchain_chat_histories SET message = message
WHERE id = (SELECT min(id) FROM public.langchain_chat_histories WHERE session_id = $1)`, id)
		require.NoError(t, err)
	}
	before := map[string]string{"s1": l.whole(t, "s1"), "s2": l.whole(t, "s2")}

	out, err := l.st.Apply(ctx, as["s1"])
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Conflict: true}, out)
	outs, errs := l.st.ApplyBatch(ctx, []model.Apply{as["s2"], as["s3"]})
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []model.Outcome{{Conflict: true}, {Applied: true, FromVersion: 1, ToVersion: 2}}, outs)
	for _, id := range []string{"s1", "s2"} {
		require.Equal(t, before[id], l.whole(t, id), id)
		var n int
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM session_versions WHERE session_id = $1`, id).Scan(&n))
		require.Zero(t, n, id)
	}
}

// A repaired version is the session's rows as they are after the write, byte for byte
// as the rows make them (the hash rollback compares), alone and in a batch.
func TestMessagesLayoutRepairedVersionIsTheRowsWritten(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	// s1 loses a row in the middle (the rows after it stay), s2 gains one (the rows
	// after it are placed anew), s3 has a result moved up; interleaved rows.
	msgs := map[string][]string{
		"s1": {lcHuman, lcCall1, lcResult1, lcOrphan, lcHuman2, lcAnswer},
		"s2": {lcHuman, lcCall2, lcResult1, lcHuman2, lcAnswer},
		"s3": {lcHuman, lcCall1, lcHuman2, lcResult1, lcAnswer},
	}
	for i := range 6 {
		for _, id := range []string{"s1", "s2", "s3"} {
			if i < len(msgs[id]) {
				l.add(t, id, msgs[id][i])
			}
		}
	}
	var as []model.Apply
	for _, id := range []string{"s1", "s2", "s3"} {
		sess := l.read(t, id)
		res, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
		require.NoError(t, err)
		require.True(t, res.Changed(), id)
		as = append(as, model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
			Report: model.Report{Status: model.StatusRepaired}})
	}
	// s1 alone, the others in a batch.
	out, err := l.st.Apply(ctx, as[0])
	require.NoError(t, err)
	require.True(t, out.Applied)
	outs, errs := l.st.ApplyBatch(ctx, as[1:])
	require.Equal(t, []error{nil, nil}, errs)
	require.True(t, outs[0].Applied && outs[1].Applied)
	for _, id := range []string{"s1", "s2", "s3"} {
		var version, rows string
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT content FROM session_versions WHERE session_id = $1 AND kind = 'repaired'`, id).Scan(&version))
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT '[' || string_agg(row_to_json(t)::text, ',' ORDER BY id) || ']'
FROM public.langchain_chat_histories t WHERE session_id = $1`, id).Scan(&rows))
		require.Equal(t, rows, version, id)
	}
}

// A message the platform appends while tmend writes a session (after the check, before
// the repaired version is saved) is kept, and is not part of the repaired version: it is
// not tmend's write, so a rollback must see the session changed since, not delete it.
func TestMessagesLayoutAppendDuringWriteIsNotInRepairedVersion(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	l.add(t, "s1", lcHuman, lcCall2, lcResult1, lcHuman2)
	sess := l.read(t, "s1")
	res, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
	require.NoError(t, err)
	require.True(t, res.Changed())
	// tmend's INSERT of the synthetic result sleeps, after the check, while the flag is up.
	_, err = l.pool.Exec(ctx, `CREATE TABLE public.slow (x int);
INSERT INTO public.slow VALUES (1);
CREATE FUNCTION public.slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM public.slow) THEN PERFORM pg_sleep(2); END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow AFTER INSERT ON public.langchain_chat_histories FOR EACH STATEMENT EXECUTE FUNCTION public.slow()`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		out, err := l.st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: sess,
			Origins: origins, Report: model.Report{Status: model.StatusRepaired}})
		if err == nil && !out.Applied {
			err = fmt.Errorf("not applied: %+v", out)
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event = 'PgSleep'`).Scan(&n))
		return n > 0
	}, 10*time.Second, 10*time.Millisecond)
	const appended = `{"type":"human","data":{"content":"appended while tmend wrote"}}`
	_, err = l.pool.Exec(ctx, `DELETE FROM public.slow`)
	require.NoError(t, err)
	l.add(t, "s1", appended)
	require.NoError(t, <-done)

	var version string
	require.NoError(t, l.pool.QueryRow(ctx, `SELECT content FROM session_versions WHERE session_id = 's1' AND kind = 'repaired'`).Scan(&version))
	require.NotContains(t, version, "appended while tmend wrote")
	rows := l.rows(t, "s1")
	require.Contains(t, rows[len(rows)-1].Message, "appended while tmend wrote")
	var inVersion []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(version), &inVersion))
	require.Len(t, inVersion, len(rows)-1)
}

// A write's statements do work in proportion to the session's rows, never to their
// square: in the plans PostgreSQL ran (auto_explain's, with their actual rows), no node
// handles more rows over all its loops than a few per row of the session, and no filter
// searches each row through an array the statement built (= ANY ($n), an InitPlan's
// output: a constant array is hashed). The repaired version's filter did, through the
// session's keys read, and a session of 56,000 rows outlasted its job.
func TestMessagesLayoutWriteIsLinearInRows(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	// A call without its result near the start: a row inserted there, and every row
	// after it placed anew (a SERIAL order leaves no room).
	const turns = 200
	msgs := []string{lcHuman, lcCall2, lcResult1}
	for range turns - 1 {
		msgs = append(msgs, lcHuman2, lcAnswer)
	}
	l.add(t, "s1", msgs...)
	rows := len(msgs)

	cfg := l.pool.Config()
	for k, v := range map[string]string{"session_preload_libraries": "auto_explain", "auto_explain.log_min_duration": "0",
		"auto_explain.log_analyze": "on", "auto_explain.log_timing": "off", "auto_explain.log_format": "json",
		"auto_explain.log_level": "notice"} {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	var plans []string
	var mu sync.Mutex
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if _, plan, ok := strings.Cut(n.Message, "plan:\n"); ok {
			mu.Lock()
			plans = append(plans, plan)
			mu.Unlock()
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	src, err := store.Preset("langchain-postgres")
	require.NoError(t, err)
	src.Table = "public." + src.Table
	st, err := store.Open(ctx, pool, src, false)
	require.NoError(t, err)
	sess := l.read(t, "s1")
	_, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
	require.NoError(t, err)
	mu.Lock()
	plans = nil
	mu.Unlock()
	out, err := st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.True(t, out.Applied)
	require.Len(t, l.rows(t, "s1"), rows+1, "the synthetic result, a row of its own")

	type node struct {
		Type   string  `json:"Node Type"`
		Rows   float64 `json:"Actual Rows"`
		Loops  float64 `json:"Actual Loops"`
		Plans  []node  `json:"Plans"`
		Filter string  `json:"Filter"`
	}
	var walk func(n node, query string)
	walk = func(n node, query string) {
		require.NotRegexp(t, `= ANY \(\$\d+\)`, n.Filter, "a %s node searches each row through an array in:\n%s", n.Type, query)
		require.LessOrEqual(t, n.Rows*n.Loops, float64(4*rows), "a %s node handles %v rows in %v loops for %d rows in:\n%s",
			n.Type, n.Rows*n.Loops, n.Loops, rows, query)
		for _, c := range n.Plans {
			walk(c, query)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, plans, "auto_explain's plans of the write")
	for _, p := range plans {
		var e struct {
			Query string `json:"Query Text"`
			Plan  node   `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(p), &e), p)
		walk(e.Plan, e.Query)
	}
}

// A message table without an index that starts with its session column is read whole
// for each page or session: opening it says so, with the index to add, until it has one.
func TestMessagesLayoutAdvisesTheSessionIndex(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t) // LangChain creates no index on session_id
	advice := l.st.Advice()
	require.Len(t, advice, 1)
	require.Contains(t, advice[0], `CREATE INDEX ON "public"."langchain_chat_histories" ("session_id", "id")`)

	src, err := store.Preset("langchain-postgres")
	require.NoError(t, err)
	src.Table = "public." + src.Table
	_, err = l.pool.Exec(t.Context(), `CREATE INDEX ON public.langchain_chat_histories (session_id) WHERE id > 0`)
	require.NoError(t, err)
	st, err := store.Open(t.Context(), l.pool, src, false)
	require.NoError(t, err)
	require.Len(t, st.Advice(), 1, "a partial index does not serve every read")
	_, err = l.pool.Exec(t.Context(), `CREATE INDEX ON public.langchain_chat_histories (session_id, id)`)
	require.NoError(t, err)
	st, err = store.Open(t.Context(), l.pool, src, false)
	require.NoError(t, err)
	require.Empty(t, st.Advice())
}
