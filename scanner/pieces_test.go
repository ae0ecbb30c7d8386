package scanner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// pieced wraps the store to note which sessions' repairs were written in pieces.
type pieced struct {
	*store.Store
	mu  sync.Mutex
	ids map[string]bool
}

func (s *pieced) ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error) {
	s.mu.Lock()
	for _, a := range as {
		if a.NewPieces != nil {
			s.ids[a.Session.ID] = true
		}
	}
	s.mu.Unlock()
	return s.Store.ApplyBatch(ctx, as)
}

// manyTurns is an Anthropic transcript of n turns of 4 calls, the answer to every 7th
// call missing, spaced as a person might write it (json keeps the spaces), each call's
// input pad bytes long.
func manyTurns(n, pad int) string {
	var b strings.Builder
	b.WriteString(` [ {"role": "user", "content": "go"}`)
	for turn := range n {
		var calls, results []string
		for j := range 4 {
			id := fmt.Sprintf("t%d", 4*turn+j)
			calls = append(calls, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"ls","input":{"p":%q}}`, id, strings.Repeat("x", pad)))
			if (4*turn+j)%7 != 6 {
				results = append(results, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%q,"content":"ok"}`, id))
			}
		}
		fmt.Fprintf(&b, ",\n {\"role\":\"assistant\",\"content\":[%s]} , {\"role\":\"user\",\"content\":[%s]}",
			strings.Join(calls, ","), strings.Join(results, ", "))
	}
	b.WriteString(`, {"role":"assistant","content":"done"} ] `)
	return b.String()
}

// A session read alone (larger than the budget) is written from its repair's pieces,
// never joined: what the table holds is Repair's array byte for byte (a json column keeps
// the text as sent), as are the repaired version and the report's size and hash; a
// rollback of the run restores what was read, byte for byte. Smaller sessions are written
// from Repair's array as before, with the same result.
func TestRepairsInPiecesAreRepairsArray(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	_, err := pool.Exec(ctx, `CREATE TABLE public.chats (id text PRIMARY KEY, body json NOT NULL)`)
	require.NoError(t, err)
	sessions := map[string]string{
		"small": manyTurns(3, 10),     // read with its page: Repair
		"mid":   manyTurns(400, 300),  // read alone, under sendBackMax
		"large": manyTurns(2000, 300), // read alone, over sendBackMax
		"clean": `[{"role":"user","content":"hi"}]`,
	}
	want := map[string]string{}
	for id, body := range sessions {
		_, err := pool.Exec(ctx, `INSERT INTO public.chats VALUES ($1, $2)`, id, body)
		require.NoError(t, err)
		r, err := repair.Repair([]byte(body), repair.Options{})
		require.NoError(t, err)
		want[id] = string(r.Messages)
	}
	require.Greater(t, len(want["mid"]), 300_000)
	require.Less(t, len(want["mid"]), 1<<20)
	require.Greater(t, len(want["large"]), 1<<20)

	src := store.Source{Table: "public.chats", IDColumn: "id", MessagesColumn: "body"}
	st, err := store.Open(ctx, pool, src, false)
	require.NoError(t, err)
	ps := &pieced{Store: st, ids: map[string]bool{}}
	sc := scanner.New(ps, zerolog.Nop(), scanner.Config{Source: src.Name(), Workers: 2, MaxInflightBytes: 300_000})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
	require.NoError(t, err)
	require.Equal(t, 3, res.Counts.Repaired)
	require.Equal(t, map[string]bool{"mid": true, "large": true}, ps.ids, "written in pieces")

	for _, id := range []string{"small", "mid", "large"} {
		var body, version, hash, afterHash string
		var size, afterBytes int
		require.NoError(t, pool.QueryRow(ctx, `SELECT c.body::text, v.content, v.content_hash, v.size_bytes, r.after_hash, r.after_bytes
FROM public.chats c JOIN session_versions v ON v.session_id = c.id AND v.kind = 'repaired'
JOIN repair_reports r ON r.session_id = c.id AND r.run_id = $2 WHERE c.id = $1`, id, res.RunID).
			Scan(&body, &version, &hash, &size, &afterHash, &afterBytes))
		require.True(t, body == want[id], "%s: the table holds %d bytes, Repair's array is %d", id, len(body), len(want[id]))
		require.True(t, version == want[id], "%s: the repaired version is not what was written", id)
		require.Equal(t, model.ContentHash([]byte(want[id])), hash, id)
		require.Equal(t, model.ContentHash([]byte(want[id])), afterHash, id)
		require.Equal(t, len(want[id]), size, id)
		require.Equal(t, len(want[id]), afterBytes, id)
	}

	out, err := sc.Rollback(ctx, model.RollbackOptions{RunID: res.RunID, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, 3, out.Restored, "%+v", out.Sessions)
	for id, body := range sessions {
		var got string
		require.NoError(t, pool.QueryRow(ctx, `SELECT body::text FROM public.chats WHERE id = $1`, id).Scan(&got))
		require.True(t, got == body, "%s: not restored byte for byte", id)
	}
}
