package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// LangGraph JS's JSON serializer's messages (see store/langgraph_test.go).
const (
	lgHuman  = `{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"list the files","id":"h1","additional_kwargs":{},"response_metadata":{}}}`
	lgCall   = `{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":"","id":"a1","tool_calls":[{"id":"c1","name":"ls","args":{}}],"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}`
	lgResult = `{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":"a b","tool_call_id":"c1","name":"ls","id":"t1","additional_kwargs":{},"response_metadata":{}}}`
)

// A full scan of PostgresSaver's tables in partitions reads each thread once (namespaces
// included), repairs the broken ones as new checkpoints, reports what it cannot read or
// what is in flight, and a rollback of the run restores every thread.
func TestScanRepairsLangGraphThreads(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	ctx := t.Context()
	ddl, err := os.ReadFile("../../../store/testdata/langgraph.sql")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, string(ddl))
	require.NoError(t, err)

	batch := &pgx.Batch{}
	n := 0
	var putAt func(thread, ns, typ string, blob []byte, id string) string
	// put writes a thread's one checkpoint as the saver does, its id a uuid6 of 2025.
	put := func(thread, ns, typ string, blob []byte) string {
		n++
		return putAt(thread, ns, typ, blob, fmt.Sprintf("1f0c%04x-0000-6000-8001-000000000000", n))
	}
	putAt = func(thread, ns, typ string, blob []byte, id string) string {
		batch.Queue(`INSERT INTO public.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, $2, 'messages', '2', $3, $4)`,
			thread, ns, typ, blob)
		batch.Queue(`INSERT INTO public.checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) VALUES ($1, $2, $3, $4, '{"source":"loop","step":1,"parents":{}}')`,
			thread, ns, id, fmt.Sprintf(`{"v":4,"id":%q,"ts":"2025-01-01T00:00:00.000Z","channel_versions":{"messages":2,"__start__":1},"versions_seen":{}}`, id))
		return id
	}
	broken := 0
	for i := range 30 {
		msgs := "[" + lgHuman + "," + lgCall + "," + lgResult + "]"
		if i%3 == 0 {
			msgs, broken = "["+lgHuman+","+lgCall+"]", broken+1
		}
		ns := ""
		if i%5 == 0 {
			put(fmt.Sprintf("thread-%02d", i), "", "json", []byte(msgs))
			ns = "tools:abc" // the same thread id in a subgraph's namespace: another session
			broken++
			msgs = "[" + lgHuman + "," + lgCall + "]"
		}
		put(fmt.Sprintf("thread-%02d", i), ns, "json", []byte(msgs))
	}
	put("python", "", "msgpack", []byte{0x91, 0x01})
	pending := put("pending", "", "json", []byte("["+lgHuman+","+lgCall+"]"))
	batch.Queue(`INSERT INTO public.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob) VALUES ('pending', '', $1, 'task', 0, 'messages', 'json', '[]')`, pending)
	// Checkpointed a moment ago (a uuid6 of now): its last turn's calls may be running.
	ts := uint64(time.Now().UnixNano()/100) + 0x01B21DD213814000
	putAt("recent", "", "json", []byte("["+lgHuman+","+lgCall+"]"),
		fmt.Sprintf("%08x-%04x-%04x-8001-000000000000", ts>>28, (ts>>12)&0xffff, 0x6000|ts&0x0fff))
	require.NoError(t, b.pool.SendBatch(ctx, batch).Close())
	checkpoints := b.count(t, `SELECT count(*) FROM public.checkpoints`)

	lg := []string{"--layout", "langgraph", "--json"}
	r := runCLI(t, "", b.env, append([]string{"scan", "--full", "--partitions", "3"}, lg...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var run struct {
		ID     int64          `json:"id"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	require.Equal(t, 30+6+3, run.Counts["scanned"], "each thread and namespace read once: %s", r.stdout)
	require.Equal(t, broken, run.Counts["repaired"], r.stdout)
	require.Equal(t, 2, run.Counts["pending"], "pending writes to messages, and a thread within the quiet period")
	require.Equal(t, checkpoints+broken, b.count(t, `SELECT count(*) FROM public.checkpoints`), "a checkpoint more for each repair")
	var reason string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status || ': ' || reason FROM tmend.repair_reports WHERE session_id = 'python'`).Scan(&reason))
	require.Contains(t, reason, "unparseable: the messages blob of checkpoint")
	require.Contains(t, reason, "msgpack")

	r = runCLI(t, "", b.env, append([]string{"scan", "--full"}, lg...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	require.Zero(t, run.Counts["repaired"], "the newest checkpoints hold the repaired lists: %s", r.stdout)

	r = runCLI(t, "", b.env, "rollback", "--layout", "langgraph", "--session", `["thread-05","tools:abc"]`)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var list string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT convert_from(b.blob, 'UTF8') FROM public.checkpoints c JOIN public.checkpoint_blobs b USING (thread_id, checkpoint_ns)
WHERE c.thread_id = 'thread-05' AND c.checkpoint_ns = 'tools:abc' AND b.channel = 'messages' AND b.version = c.checkpoint->'channel_versions'->>'messages'
ORDER BY c.checkpoint_id DESC LIMIT 1`).Scan(&list))
	require.Equal(t, "["+lgHuman+","+lgCall+"]", list, "the rollback's checkpoint holds the prior list")
}
