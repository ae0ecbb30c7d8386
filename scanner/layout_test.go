package scanner_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// messageTable is a table with a row per message, as a platform writes and reads it.
type messageTable struct {
	name   string
	create func(t *testing.T, pool *pgxpool.Pool)
	src    store.Source
	// insert is the platform's append of one message; at orders the loaded sessions'
	// messages (an appended one takes the time it is written).
	insert func(session, msg string, at *time.Time) (string, []any)
	// read is the platform's read of one session, in its order.
	read string
}

var messageTables = []messageTable{{
	// LangChain's table: a SERIAL id orders the rows, so tmend places rows with the
	// table locked against appends.
	name: "Sequence",
	create: func(t *testing.T, pool *pgxpool.Pool) {
		ddl, err := os.ReadFile("../store/testdata/langchain-postgres.sql")
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(ddl)+"; COMMIT")
		require.NoError(t, err)
	},
	src: store.Source{Table: "public.langchain_chat_histories", Layout: store.LayoutMessages,
		SessionColumn: "session_id", OrderColumn: "id", MessageColumn: "message"},
	insert: func(session, msg string, _ *time.Time) (string, []any) {
		return `INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ($1, $2)`, []any{session, msg}
	},
	read: `SELECT message::text FROM public.langchain_chat_histories WHERE session_id = $1 ORDER BY id`,
}, {
	// A time orders the rows; appends take the time they are written.
	name: "Time",
	create: func(t *testing.T, pool *pgxpool.Pool) {
		_, err := pool.Exec(t.Context(), `CREATE TABLE public.chat_messages (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  conversation text NOT NULL, body jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
		require.NoError(t, err)
	},
	src: store.Source{Table: "public.chat_messages", Layout: store.LayoutMessages,
		SessionColumn: "conversation", OrderColumn: "created_at", MessageColumn: "body"},
	insert: func(session, msg string, at *time.Time) (string, []any) {
		if at == nil {
			return `INSERT INTO public.chat_messages (conversation, body) VALUES ($1, $2)`, []any{session, msg}
		}
		return `INSERT INTO public.chat_messages (conversation, body, created_at) VALUES ($1, $2, $3)`, []any{session, msg, *at}
	},
	read: `SELECT body::text FROM public.chat_messages WHERE conversation = $1 ORDER BY created_at, id`,
}}

// humans are the contents of a transcript's human messages, in order.
func humans(t *testing.T, msgs []string) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		var h struct{ Type, Content string }
		if json.Unmarshal([]byte(m), &h) == nil && h.Type == "human" {
			out = append(out, h.Content)
		}
	}
	return out
}

// Messages appended to sessions while runs repair them, as fast as the database takes
// them: every appended message ends up in its session exactly once, after the messages
// that were there and in the order appended, and once the appends stop a run leaves
// every session, as the platform reads it, with nothing to repair.
func TestAppendsDuringRunsAreNeitherLostNorDuplicated(t *testing.T) {
	t.Parallel()
	for _, mt := range messageTables {
		t.Run(mt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := storetest.NewDB(t)
			mt.create(t, pool)
			const sessions, appends = 16, 20
			var ids []string
			original := map[string][]string{}
			batch := &pgx.Batch{}
			at := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			require.NoError(t, gen.Generate(gen.Config{Seed: 5, Dialect: repair.LangChain, Variant: "flat", Sessions: sessions, Messages: 10, FaultRate: 0.8},
				func(s gen.Session) error {
					ids = append(ids, s.ID)
					for _, m := range s.Messages {
						b, err := json.Marshal(m)
						if err != nil {
							return err
						}
						at = at.Add(time.Second)
						sql, args := mt.insert(s.ID, string(b), &at)
						batch.Queue(sql, args...)
						original[s.ID] = append(original[s.ID], string(b))
					}
					return nil
				}))
			require.NoError(t, pool.SendBatch(ctx, batch).Close())
			src := mt.src
			st, err := store.Open(ctx, pool, src, false)
			require.NoError(t, err)
			sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: src.Name(), BatchSize: 5, RetryBase: time.Millisecond,
				Repair: repair.Options{QuietPeriod: -1}})

			// Two writers, each appending to its own half of the sessions in turn.
			done := make(chan struct{})
			errs := make(chan error, 2)
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := range appends {
						for i, id := range ids {
							if i%2 != w {
								continue
							}
							// The platform's transaction takes a moment between its insert
							// and its commit, as one that does more work would.
							sql, args := mt.insert(id, fmt.Sprintf(`{"type":"human","content":"append %s %d"}`, id, n), nil)
							err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
								if _, err := tx.Exec(ctx, sql, args...); err != nil {
									return err
								}
								_, err := tx.Exec(ctx, "SELECT pg_sleep(0.002)")
								return err
							})
							if err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			go func() { wg.Wait(); close(done) }()
			runs, repaired, conflicts := 0, 0, 0
			for running := true; running; {
				select {
				case <-done:
					running = false
				default:
				}
				res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
				require.NoError(t, err)
				runs, repaired, conflicts = runs+1, repaired+res.Counts.Repaired, conflicts+res.Counts.Conflict
				require.Zero(t, res.Counts.Failed)
			}
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull})
			require.NoError(t, err)
			require.Zero(t, res.Counts.Conflict+res.Counts.Failed)
			t.Logf("%d runs while appending: %d repaired, %d conflicts; then %d repaired", runs, repaired, conflicts, res.Counts.Repaired)

			// A session repaired once stays valid whatever is appended after it: repairing
			// it again means a message was once read among rows tmend placed.
			var twice int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT session_id FROM repair_reports
WHERE status = $1 GROUP BY session_id HAVING count(*) > 1) x`, model.StatusRepaired).Scan(&twice))
			require.Zero(t, twice, "sessions repaired twice")
			for _, id := range ids {
				rows, err := pool.Query(ctx, mt.read, id)
				require.NoError(t, err)
				msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				want := humans(t, original[id])
				for n := range appends {
					want = append(want, fmt.Sprintf("append %s %d", id, n))
				}
				require.Equal(t, want, humans(t, msgs), "session %s: every message once, in order", id)
				res, err := repair.Repair([]byte("["+strings.Join(msgs, ",")+"]"), repair.Options{})
				require.NoError(t, err, id)
				require.False(t, res.Changed(), "session %s as the platform reads it: %v", id, res.Report.Actions)
			}
		})
	}
}

// Without an updated-at column, a timestamp order column tells what changed: an
// incremental run reads the sessions with a row added since the last run, whole.
func TestIncrementalRunsReadSessionsWithNewRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mt := messageTables[1]
	pool := storetest.NewDB(t)
	mt.create(t, pool)
	at := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		for _, m := range []string{`{"type":"human","content":"hello"}`, `{"type":"ai","content":"hi"}`} {
			at = at.Add(time.Second)
			sql, args := mt.insert(fmt.Sprint("c", i), m, &at)
			_, err := pool.Exec(ctx, sql, args...)
			require.NoError(t, err)
		}
	}
	st, err := store.Open(ctx, pool, mt.src, false)
	require.NoError(t, err)
	require.True(t, st.HasUpdatedAt())
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: mt.src.Name(), RetryBase: time.Millisecond,
		Repair: repair.Options{QuietPeriod: -1}})
	res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, 10, res.Counts.Scanned)
	require.Zero(t, res.Counts.Repaired)

	// The platform adds a call without a result, and the user's next message.
	for _, m := range []string{`{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"ls","args":{},"type":"tool_call"}]}`,
		`{"type":"human","content":"well?"}`} {
		sql, args := mt.insert("c3", m, nil)
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	res, err = sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
	require.NoError(t, err)
	require.Equal(t, 1, res.Counts.Scanned, "only the session with new rows")
	require.Equal(t, 1, res.Counts.Repaired)
	rows, err := pool.Query(ctx, mt.read, "c3")
	require.NoError(t, err)
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, msgs, 5, "the synthetic result in its own row")
	require.Contains(t, msgs[3], "[tmend]")
}

// Without an updated-at column or a time to order by (LangChain's SERIAL id), runs
// record the sequence's mark: an incremental run reads the sessions with a row above
// the mark of the latest completed run that started before its window (the run before
// the last one, so that a row that took its id before the last run and committed after
// it is read too).
func TestIncrementalRunsFollowTheSequence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mt := messageTables[0]
	pool := storetest.NewDB(t)
	mt.create(t, pool)
	for i := range 10 {
		for _, m := range []string{`{"type":"human","content":"hello"}`, `{"type":"ai","content":"hi"}`} {
			sql, args := mt.insert(fmt.Sprint("c", i), m, nil)
			_, err := pool.Exec(ctx, sql, args...)
			require.NoError(t, err)
		}
	}
	st, err := store.Open(ctx, pool, mt.src, false)
	require.NoError(t, err)
	require.True(t, st.HasUpdatedAt())
	sc := scanner.New(st, zerolog.Nop(), scanner.Config{Source: mt.src.Name(), RetryBase: time.Millisecond, Overlap: time.Nanosecond,
		Repair: repair.Options{QuietPeriod: -1}})
	incremental := func() model.RunCounts {
		t.Helper()
		res, err := sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeIncremental})
		require.NoError(t, err)
		return res.Counts
	}
	require.Equal(t, 10, incremental().Scanned, "no run before: everything")
	require.Equal(t, 10, incremental().Scanned, "no run started before the window: everything")
	require.Equal(t, 0, incremental().Scanned, "nothing above the first run's mark")

	// The platform adds a call without a result, and the user's next message.
	for _, m := range []string{`{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"ls","args":{},"type":"tool_call"}]}`,
		`{"type":"human","content":"well?"}`} {
		sql, args := mt.insert("c3", m, nil)
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	c := incremental()
	require.Equal(t, 1, c.Scanned, "only the session with new rows")
	require.Equal(t, 1, c.Repaired)
	c = incremental()
	require.Equal(t, 1, c.Scanned, "read again, its rows being above the run before's mark")
	require.Zero(t, c.Repaired)
	rows, err := pool.Query(ctx, mt.read, "c3")
	require.NoError(t, err)
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, msgs, 5)
	require.Contains(t, msgs[3], "[tmend]")
}
