package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// Messages as LangGraph JS's JsonPlusSerializer writes a messages channel (dumpsTyped
// of [HumanMessage, AIMessage with two calls, ToolMessage], @langchain/core 1.4.0).
const (
	lgHuman  = `{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"list the files","id":"h1","additional_kwargs":{},"response_metadata":{}}}`
	lgCall2  = `{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":"","id":"a1","tool_calls":[{"id":"c1","name":"ls","args":{}},{"id":"c2","name":"pwd","args":{}}],"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}`
	lgResult = `{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":"a b","tool_call_id":"c1","name":"ls","id":"t1","additional_kwargs":{},"response_metadata":{}}}`
	lgAnswer = `{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":"done","id":"a2","tool_calls":[],"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}`
)

// langgraph is a database with PostgresSaver's tables, created by its own setup().
type langgraph struct {
	pool   *pgxpool.Pool
	st     *store.Store
	schema string
	// base is the time of the checkpoint ids put hands out, a millisecond apart.
	base time.Time
	ids  int
}

func setupLangGraph(t *testing.T, schema string) *langgraph {
	t.Helper()
	pool := storetest.NewDB(t)
	ddl, err := os.ReadFile("testdata/langgraph.sql")
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), strings.ReplaceAll(string(ddl), `"public"`, `"`+schema+`"`))
	require.NoError(t, err)
	src, err := store.Preset("langgraph")
	require.NoError(t, err)
	src.Table = schema + ".checkpoints"
	st, err := store.Open(t.Context(), pool, src, false)
	require.NoError(t, err)
	st.SetOrigin(model.Origin{Version: "v-test", Host: "h"})
	return &langgraph{pool: pool, st: st, schema: schema, base: time.Now().Add(-time.Hour).Truncate(time.Millisecond)}
}

// put writes a checkpoint as the saver's put() does: its new blobs (versions given),
// then the checkpoint row, its channel_versions all the thread's channels. It returns
// the checkpoint id, a uuid6 a millisecond after the last one (LangGraph's ids).
func (l *langgraph) put(t *testing.T, thread, ns, parent string, step int, versions map[string]int, blobs map[string]string) string {
	t.Helper()
	l.ids++
	id := store.UUID6ForTest(l.base.Add(time.Duration(l.ids)*time.Millisecond), int64(step))
	for ch, blob := range blobs {
		typ, data := "json", []byte(blob)
		if strings.HasPrefix(blob, "msgpack:") {
			typ, data = "msgpack", []byte{0x93, 0x01, 0x02, 0x03}
		}
		_, err := l.pool.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %q.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES ($1, $2, $3, $4, $5, $6)`, l.schema), thread, ns, ch, fmt.Sprint(versions[ch]), typ, data)
		require.NoError(t, err)
	}
	cp, err := json.Marshal(map[string]any{"v": 4, "id": id, "ts": "2026-11-01T00:00:00.000Z", "channel_versions": versions,
		"versions_seen": map[string]any{"agent": map[string]int{"branch:to:agent": versions["branch:to:agent"]}}})
	require.NoError(t, err)
	meta := fmt.Sprintf(`{"source":"loop","step":%d,"parents":{}}`, step)
	var par *string
	if parent != "" {
		par = &parent
	}
	_, err = l.pool.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %q.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
VALUES ($1, $2, $3, $4, $5, $6)`, l.schema), thread, ns, id, par, cp, meta)
	require.NoError(t, err)
	return id
}

// thread puts a thread of two checkpoints: [human], then the messages given.
func (l *langgraph) thread(t *testing.T, thread, ns string, msgs ...string) (first, newest string) {
	t.Helper()
	first = l.put(t, thread, ns, "", 1, map[string]int{"messages": 2, "branch:to:agent": 2},
		map[string]string{"messages": "[" + lgHuman + "]", "branch:to:agent": "null"})
	// A later channel version than the messages': versions come from one counter.
	newest = l.put(t, thread, ns, first, 2, map[string]int{"messages": 3, "branch:to:agent": 2, "branch:to:tools": 4},
		map[string]string{"messages": "[" + strings.Join(msgs, ",") + "]", "branch:to:tools": "null"})
	return first, newest
}

type lgCheckpoint struct {
	ID, Parent         string
	Checkpoint, Meta   map[string]any
	MessagesV, Blob    string
	BlobType           string
	ChannelVersionsRaw string
}

// checkpoints are a thread's checkpoints, newest first (the saver's list() order), each
// with its messages blob.
func (l *langgraph) checkpoints(t *testing.T, thread, ns string) []lgCheckpoint {
	t.Helper()
	rows, err := l.pool.Query(t.Context(), fmt.Sprintf(`SELECT c.checkpoint_id, coalesce(c.parent_checkpoint_id, ''), c.checkpoint::text, c.metadata::text,
  c.checkpoint->'channel_versions'->>'messages', coalesce(convert_from(b.blob, 'UTF8'), ''), coalesce(b.type, ''), (c.checkpoint->'channel_versions')::text
FROM %[1]q.checkpoints c LEFT JOIN %[1]q.checkpoint_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
  AND b.channel = 'messages' AND b.version = c.checkpoint->'channel_versions'->>'messages'
WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC`, l.schema), thread, ns)
	require.NoError(t, err)
	var out []lgCheckpoint
	for rows.Next() {
		var c lgCheckpoint
		var cp, meta string
		require.NoError(t, rows.Scan(&c.ID, &c.Parent, &cp, &meta, &c.MessagesV, &c.Blob, &c.BlobType, &c.ChannelVersionsRaw))
		require.NoError(t, json.Unmarshal([]byte(cp), &c.Checkpoint))
		require.NoError(t, json.Unmarshal([]byte(meta), &c.Meta))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

func (l *langgraph) read(t *testing.T, id string) model.Session {
	t.Helper()
	page, err := l.st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 1)
	return page[0]
}

func (l *langgraph) repair(t *testing.T, sess model.Session) (string, model.Outcome) {
	t.Helper()
	res, err := repair.Repair(sess.Messages, repair.Options{})
	require.NoError(t, err)
	require.True(t, res.Changed())
	out, err := l.st.Apply(t.Context(), model.Apply{RunID: 0, Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	return string(res.Messages), out
}

func TestLangGraphRepairIsANewCheckpoint(t *testing.T) {
	t.Parallel()
	l := setupLangGraph(t, "public")
	first, newest := l.thread(t, "t1", "", lgHuman, lgCall2, lgResult)
	before := l.checkpoints(t, "t1", "")

	sess := l.read(t, "t1")
	require.Equal(t, "["+lgHuman+","+lgCall2+","+lgResult+"]", string(sess.Messages), "the newest checkpoint's messages blob, as stored")
	require.Equal(t, newest, sess.Head)
	require.True(t, l.base.Add(2*time.Millisecond).Equal(sess.UpdatedAt), "the time in the newest checkpoint's uuid6: %v", sess.UpdatedAt)
	want, out := l.repair(t, sess)
	require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, out)

	after := l.checkpoints(t, "t1", "")
	require.Len(t, after, 3)
	require.Equal(t, before, after[1:], "the older checkpoints and their blobs stay as they were")
	c := after[0]
	require.Greater(t, c.ID, newest, "LangGraph's newest: the largest id")
	require.Equal(t, newest, c.Parent)
	require.Equal(t, want, c.Blob, "the messages channel holds the whole repaired list")
	require.Equal(t, "json", c.BlobType)
	require.Equal(t, "5", c.MessagesV, "the largest channel version plus one, as getNextVersion bumps it")
	require.JSONEq(t, `{"messages": 5, "branch:to:agent": 2, "branch:to:tools": 4}`, c.ChannelVersionsRaw)
	require.Equal(t, before[0].Checkpoint["versions_seen"], c.Checkpoint["versions_seen"], "no node ran")
	require.EqualValues(t, 4, c.Checkpoint["v"])
	require.Equal(t, c.ID, c.Checkpoint["id"])
	require.Equal(t, map[string]any{"source": "update", "step": 3.0, "parents": map[string]any{},
		"tmend": map[string]any{"version": "v-test", "run": 0.0}}, c.Meta)
	// A uuid6 as LangGraph's uuid6(step) makes it: version 6, the step as clock sequence.
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-6[0-9a-f]{3}-8003-[0-9a-f]{12}$`, c.ID)
	require.NotEqual(t, first, c.ID)

	again := l.read(t, "t1")
	require.Equal(t, want, string(again.Messages), "the next read is the repaired list")
	require.Equal(t, c.ID, again.Head)
}

// A checkpoint LangGraph writes between read and write makes the write a conflict.
func TestLangGraphNewerCheckpointIsAConflict(t *testing.T) {
	t.Parallel()
	l := setupLangGraph(t, "public")
	_, newest := l.thread(t, "t1", "", lgHuman, lgCall2, lgResult)
	sess := l.read(t, "t1")
	// The same messages in a newer checkpoint: still not the state read.
	l.put(t, "t1", "", newest, 3, map[string]int{"messages": 3, "branch:to:agent": 4}, map[string]string{"branch:to:agent": "null"})
	before := l.checkpoints(t, "t1", "")
	res, err := repair.Repair(sess.Messages, repair.Options{})
	require.NoError(t, err)
	out, err := l.st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Conflict: true}, out)
	require.Equal(t, before, l.checkpoints(t, "t1", ""), "nothing written")

	// LangGraph's put writes its blobs, then its checkpoint: a blob at the version tmend
	// takes (the largest plus one) is a conflict, never a blob shared with LangGraph.
	l2 := setupLangGraph(t, "public")
	l2.thread(t, "t1", "", lgHuman, lgCall2, lgResult)
	sess = l2.read(t, "t1")
	_, err = l2.pool.Exec(t.Context(), `INSERT INTO public.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES ('t1', '', 'messages', '5', 'json', '[]')`)
	require.NoError(t, err)
	out, err = l2.st.Apply(t.Context(), model.Apply{Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Conflict: true}, out)
	require.Len(t, l2.checkpoints(t, "t1", ""), 2)
}

func TestLangGraphRollbackIsAFurtherCheckpoint(t *testing.T) {
	t.Parallel()
	l := setupLangGraph(t, "public")
	l.thread(t, "t1", "", lgHuman, lgCall2, lgResult)
	prior := "[" + lgHuman + "," + lgCall2 + "," + lgResult + "]"
	_, _ = l.repair(t, l.read(t, "t1"))
	repaired := l.checkpoints(t, "t1", "")

	res, err := l.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "t1", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRestored, res.Status, res.Reason)
	after := l.checkpoints(t, "t1", "")
	require.Len(t, after, 4)
	require.Equal(t, repaired, after[1:], "the repair's checkpoint stays in the history")
	require.Equal(t, prior, after[0].Blob)
	require.Equal(t, repaired[0].ID, after[0].Parent)
	require.Equal(t, "6", after[0].MessagesV)
	require.Equal(t, map[string]any{"version": "v-test", "restored_version": 1.0}, after[0].Meta["tmend"])
	held := l.read(t, "t1")
	require.Equal(t, model.ContentHash(held.Messages), held.HoldHash, "held: scheduled runs leave it alone")

	// Once LangGraph changes the messages, tmend's write is no longer what the thread holds.
	l2 := setupLangGraph(t, "public")
	l2.thread(t, "t1", "", lgHuman, lgCall2, lgResult)
	_, _ = l2.repair(t, l2.read(t, "t1"))
	top := l2.checkpoints(t, "t1", "")[0]
	l2.base = time.Now().Add(time.Minute) // LangGraph's next step, after tmend's checkpoint
	l2.put(t, "t1", "", top.ID, 4, map[string]int{"messages": 7, "branch:to:agent": 7},
		map[string]string{"messages": "[" + lgHuman + "," + lgAnswer + "]"})
	res, err = l2.st.Rollback(t.Context(), model.RollbackRequest{SessionID: "t1", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRefused, res.Status)
	require.Len(t, l2.checkpoints(t, "t1", ""), 4)
}

func TestLangGraphThreadsLeftAlone(t *testing.T) {
	t.Parallel()
	l := setupLangGraph(t, "public")
	l.put(t, "msgpack", "", "", 1, map[string]int{"messages": 2}, map[string]string{"messages": "msgpack:"})
	l.put(t, "missing", "", "", 1, map[string]int{"messages": 2}, nil)
	l.put(t, "nomessages", "", "", 1, map[string]int{"other": 2}, map[string]string{"other": "1"})
	_, pending := l.thread(t, "pending", "", lgHuman, lgCall2)
	_, crashed := l.thread(t, "crashed", "", lgHuman, lgCall2)
	write := func(thread, checkpoint, channel string) {
		_, err := l.pool.Exec(t.Context(), `INSERT INTO public.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
VALUES ($1, '', $2, 'task', 0, $3, 'json', '"x"')`, thread, checkpoint, channel)
		require.NoError(t, err)
	}
	write("pending", pending, "messages")
	write("crashed", crashed, "__error__")

	page, err := l.st.Sessions(t.Context(), model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20})
	require.NoError(t, err)
	got := map[string]model.Session{}
	for _, s := range page {
		got[s.ID] = s
	}
	require.Len(t, got, 5)
	require.Contains(t, got["msgpack"].Unreadable, "msgpack (Python's serializer)")
	require.Contains(t, got["missing"].Unreadable, "checkpoint_blobs has no such blob")
	require.Contains(t, got["nomessages"].Unreadable, "has no messages channel")
	require.Contains(t, got["pending"].InFlight, "pending writes to messages")
	for _, id := range []string{"msgpack", "missing", "nomessages", "pending"} {
		require.Nil(t, got[id].Messages, id)
	}
	require.Empty(t, got["crashed"].Unreadable+got["crashed"].InFlight, "an __error__ write is no write to the messages")
	require.NotNil(t, got["crashed"].Messages)
}

func TestLangGraphNamespacesAndSchemas(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"t1", ""}, {"t1", "tools:6e2d"}, {"[x", ""}, {`["a","b"]`, "ns"}} {
		id := store.LangGraphSessionIDForTest(c[0], c[1])
		thread, ns := store.ParseLangGraphSessionIDForTest(id)
		require.Equal(t, c, [2]string{thread, ns}, id)
	}
	require.Equal(t, "t1", store.LangGraphSessionIDForTest("t1", ""))
	require.Equal(t, `["t1","tools:6e2d"]`, store.LangGraphSessionIDForTest("t1", "tools:6e2d"))

	l := setupLangGraph(t, "lg")
	l.thread(t, "t1", "", lgHuman, lgCall2, lgResult, lgAnswer)
	l.thread(t, "t1", "tools:6e2d", lgHuman, lgCall2, lgResult)
	root := l.checkpoints(t, "t1", "")
	page, err := l.st.Sessions(t.Context(), model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, []string{"t1", `["t1","tools:6e2d"]`}, []string{page[0].ID, page[1].ID})
	// The cursor after the root namespace reads the subgraph's.
	next, err := l.st.Sessions(t.Context(), model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20,
		After: model.Cursor{ID: "t1", Started: true}})
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, page[1].ID, next[0].ID)

	_, out := l.repair(t, page[1])
	require.True(t, out.Applied)
	require.Len(t, l.checkpoints(t, "t1", "tools:6e2d"), 3)
	require.Equal(t, root, l.checkpoints(t, "t1", ""), "the root namespace is another thread")
	require.Equal(t, `lg.checkpoints(langgraph)`, l.st.Key())

	// Runs are sized by threads, not checkpoints (5 of them, of one thread id).
	_, err = l.pool.Exec(t.Context(), `ANALYZE lg.checkpoints`)
	require.NoError(t, err)
	n, err := l.st.EstimateSessions(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
