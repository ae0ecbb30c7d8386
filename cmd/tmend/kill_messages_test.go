package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

// Kill trials, a table with a row per message (LangChain's, --preset langchain-postgres):
// 'tmend scan' alone is killed with SIGKILL at points spread over its run, and the next
// scan finishes the work. Every session's rows, read as the library reads them, are then
// either what the platform wrote or, repaired once, exactly the engine's repair of it:
// a session's rows change in one transaction or not at all.
func TestKillTrialsMessagesLayout(t *testing.T) {
	t.Parallel()
	n, seed := killTrials(t, 2)
	r := rand.New(rand.NewPCG(seed, 3))
	args := []string{"scan", "--preset", "langchain-postgres", "--full", "--partitions", "3", "--concurrency", "2",
		"--workers", "2", "--batch-size", "20", "--partition-slice", "2s", "--rescue-after", "6s"}
	for i := range n {
		at := killPoint(r, i, n)
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			url := storetest.NewDBURL(t)
			pool, err := store.Connect(t.Context(), url, store.DefaultSchema)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			b := &dbBundle{env: map[string]string{"TMEND_DATABASE_URL": url}, pool: pool}
			orig := langchainTable(t, b, i)
			scan, out := startTmend(t, b.env, args...)
			waitFor(t, func() bool { return b.count(t, "SELECT count(*) FROM repair_runs") == 1 })
			want := int(at * msgKillSessions / 2)
			waitFor(t, func() bool {
				return b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'") >= want ||
					b.count(t, "SELECT count(*) FROM repair_runs WHERE status <> 'running'") > 0
			})
			require.NoError(t, scan.Process.Signal(syscall.SIGKILL))
			_ = scan.Wait()
			t.Logf("killed at %.0f%% with %d sessions repaired", at*100,
				b.count(t, "SELECT count(*) FROM repair_reports WHERE status = 'repaired'"))

			next, nextOut := startTmend(t, b.env, args...)
			require.NoError(t, waitExit(t, next, nextOut, nextScanBound), "the next scan: %s\nthe killed one: %s",
				nextOut.String(), tail(out.String(), 2000))

			repaired := 0
			for id, before := range orig {
				now := langchainTranscript(t, b, id)
				switch reports := b.count(t, "SELECT count(*) FROM repair_reports WHERE session_id = $1 AND status = 'repaired'", id); reports {
				case 0:
					require.JSONEq(t, before, now, "%s: changed without a report", id)
				case 1:
					res, err := repair.Repair([]byte(before), repair.Options{})
					require.NoError(t, err, id)
					require.JSONEq(t, string(res.Messages), now, "%s: not the repair of what the platform wrote", id)
					repaired++
				default:
					t.Fatalf("%s repaired %d times", id, reports)
				}
				if res, err := repair.Repair([]byte(now), repair.Options{}); err == nil {
					require.False(t, res.Changed(), "session %s still needs repair", id)
				}
			}
			require.Positive(t, repaired)
			checkRunsEnded(t, b)
		})
	}
}

// nextScanBound is far more than the next scan takes to finish a run on a loaded machine
// (seconds): one that has not ended by then never will.
const nextScanBound = 3 * time.Minute

// msgKillSessions keeps these trials short: a session is several rows here.
const msgKillSessions = 1500

// langchainTable creates LangChain's table (its own DDL, in store/testdata) in b's
// database, writes generated LangChain sessions into it, half of them broken, a row a
// message as PostgresChatMessageHistory does, and returns each session's transcript.
func langchainTable(t *testing.T, b *dbBundle, trial int) map[string]string {
	t.Helper()
	ddl, err := os.ReadFile("../../store/testdata/langchain-postgres.sql")
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
	require.NoError(t, err)
	var rows [][]any
	cfg := gen.Config{Dialect: repair.LangChain, Variant: "flat", Sessions: msgKillSessions, Messages: 10, FaultRate: 0.5,
		Seed: uint64(trial + 1), Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
		for _, m := range s.Messages {
			rows = append(rows, []any{s.ID, string(m)})
		}
		return nil
	}))
	_, err = b.pool.CopyFrom(t.Context(), pgx.Identifier{"public", "langchain_chat_histories"}, []string{"session_id", "message"},
		pgx.CopyFromRows(rows))
	require.NoError(t, err)
	orig := map[string]string{}
	ids, err := b.pool.Query(t.Context(), "SELECT DISTINCT session_id FROM public.langchain_chat_histories")
	require.NoError(t, err)
	sessions, err := pgx.CollectRows(ids, pgx.RowTo[string])
	require.NoError(t, err)
	for _, id := range sessions {
		orig[id] = langchainTranscript(t, b, id)
	}
	return orig
}

// langchainTranscript is a session as the library reads it: its messages ORDER BY id.
func langchainTranscript(t *testing.T, b *dbBundle, id string) string {
	t.Helper()
	var msgs []json.RawMessage
	require.NoError(t, b.pool.QueryRow(t.Context(),
		"SELECT coalesce(json_agg(message ORDER BY id), '[]') FROM public.langchain_chat_histories WHERE session_id = $1", id).Scan(&msgs))
	out, err := json.Marshal(msgs)
	require.NoError(t, err)
	return string(out)
}
