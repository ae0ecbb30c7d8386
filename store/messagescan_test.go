package store_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// A full run reads a messages table by range scans, an incremental run by a statement
// that picks sessions by their changed rows and returns their rows: over a window that
// holds every row, both give the same pages of the same sessions, whatever the limits,
// for each preset and for a table of quoted mixed-case names with NULL messages, ties
// of the order column, bigint session ids and an updated-at column; a session read
// alone is the one the pages give; and over narrower windows (updated-at, the order's
// time, a sequence's marks) an incremental read gives the sessions of the window, each
// as read alone, in the same pages.
func TestMessagesLayoutFullReadIsTheIncrementalRead(t *testing.T) {
	t.Parallel()
	type table struct {
		name string
		// fill creates the table and writes the sessions' rows, interleaved, and
		// returns the source.
		fill func(t *testing.T, pool *pgxpool.Pool, sessions [][]string) store.Source
		// simple reads in the extended protocol's exec mode, whose values are text.
		simple  bool
		missing string // a session id of no session
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ddl := func(t *testing.T, pool *pgxpool.Pool, file string) {
		t.Helper()
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), "BEGIN; SET LOCAL search_path = public; "+string(b)+"; COMMIT")
		require.NoError(t, err)
	}
	// each calls f for every row, session by session in turns, as concurrent chats
	// write them; i is the row's place in its session.
	each := func(sessions [][]string, f func(s, i int, msg string)) {
		for i := 0; ; i++ {
			more := false
			for s, msgs := range sessions {
				if i < len(msgs) {
					f(s, i, msgs[i])
					more = true
				}
			}
			if !more {
				return
			}
		}
	}
	preset := func(name string) store.Source {
		src, err := store.Preset(name)
		require.NoError(t, err)
		src.Table = "public." + src.Table
		return src
	}
	tables := []table{
		{name: "LangChain", missing: "nope", fill: func(t *testing.T, pool *pgxpool.Pool, sessions [][]string) store.Source {
			ddl(t, pool, "testdata/langchain-postgres.sql")
			b := &pgx.Batch{}
			each(sessions, func(s, _ int, msg string) {
				id := fmt.Sprint("s", s)
				if s == 0 {
					id = "" // an empty session id is one too
				}
				b.Queue(`INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ($1, $2)`, id, msg)
			})
			require.NoError(t, pool.SendBatch(t.Context(), b).Close())
			return preset("langchain-postgres")
		}},
		{name: "AISDKChatbot", missing: "00000000-0000-4000-8000-999999999999", fill: func(t *testing.T, pool *pgxpool.Pool, sessions [][]string) store.Source {
			ddl(t, pool, "testdata/ai-sdk-chatbot.sql")
			b := &pgx.Batch{}
			for s := range sessions {
				b.Queue(`INSERT INTO "Chat" (id) VALUES ($1)`, fmt.Sprintf("00000000-0000-4000-8000-%012d", s))
			}
			n := 0
			each(sessions, func(s, i int, msg string) {
				n++
				// Every third row ties with the one before: the key orders them.
				b.Queue(`INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES ($1, $2, $3, $4, '[]', $5)`,
					fmt.Sprintf("00000000-0000-4000-9000-%012d", (n*7919)%100000), fmt.Sprintf("00000000-0000-4000-8000-%012d", s),
					"user", `[{"type":"text","text":`+msg+`}]`, at.Add(time.Duration(i-i%3)*time.Second))
			})
			require.NoError(t, pool.SendBatch(t.Context(), b).Close())
			return preset("ai-sdk-chatbot")
		}},
		{name: "Mastra", simple: true, missing: "nope", fill: func(t *testing.T, pool *pgxpool.Pool, sessions [][]string) store.Source {
			ddl(t, pool, "testdata/mastra.sql")
			b := &pgx.Batch{}
			n := 0
			each(sessions, func(s, i int, msg string) {
				n++
				b.Queue(`INSERT INTO public.mastra_messages (id, thread_id, content, role, type, "createdAt", "createdAtZ") VALUES ($1, $2, $3, 'user', 'v2', $4, $5)`,
					fmt.Sprint("m", (n*7919)%100000), fmt.Sprint("t", s), `{"format":2,"parts":[{"type":"text","text":`+msg+`}]}`,
					at.Add(time.Duration(i)*time.Second), at.Add(time.Duration(i)*time.Second))
			})
			require.NoError(t, pool.SendBatch(t.Context(), b).Close())
			return preset("mastra")
		}},
		{name: "MixedCaseNullsAndUpdatedAt", missing: "2", fill: func(t *testing.T, pool *pgxpool.Pool, sessions [][]string) store.Source {
			_, err := pool.Exec(t.Context(), `CREATE TABLE public."Mixed Msgs" ("Key" uuid PRIMARY KEY, "Sess" bigint NOT NULL,
  "Ord" integer NOT NULL, "Body" jsonb, "Changed At" timestamp)`)
			require.NoError(t, err)
			b := &pgx.Batch{}
			n := 0
			each(sessions, func(s, i int, msg string) {
				n++
				var body, changed any = msg, at.Add(time.Duration(n) * time.Minute)
				switch {
				case s%7 == 3 && i == 1:
					body = nil // a NULL message
				case i%4 == 2:
					changed = nil // rows never changed
				}
				// Orders tie in pairs; session ids sort as numbers, not as text.
				b.Queue(`INSERT INTO public."Mixed Msgs" ("Key", "Sess", "Ord", "Body", "Changed At") VALUES ($1, $2, $3, $4, $5)`,
					fmt.Sprintf("00000000-0000-4000-9000-%012d", (n*7919)%100000), s*s, i/2, body, changed)
			})
			require.NoError(t, pool.SendBatch(t.Context(), b).Close())
			return store.Source{Table: `public."Mixed Msgs"`, Layout: store.LayoutMessages, SessionColumn: `"Sess"`,
				OrderColumn: `"Ord"`, MessageColumn: `"Body"`, UpdatedAtColumn: `"Changed At"`}
		}},
	}
	// The sessions: 1 to 30 messages, two of 150 (more rows than a small page's scan
	// takes), of 3 to 80 bytes of text each.
	rnd := rand.New(rand.NewPCG(1, 2))
	sessions := make([][]string, 40)
	for s := range sessions {
		n := 1 + rnd.IntN(30)
		if s == 5 || s == 6 {
			n = 150
		}
		for range n {
			sessions[s] = append(sessions[s], fmt.Sprintf("%q", strings.Repeat("x", 3+rnd.IntN(78))))
		}
	}
	type limits struct {
		limit, maxBytes, pageBytes int
		lower, upper               int // session indexes of the slice's bounds; -1: open
	}
	cases := []limits{
		{limit: 500, maxBytes: 1 << 20, lower: -1, upper: -1},
		{limit: 3, maxBytes: 1 << 20, lower: -1, upper: -1},
		{limit: 7, maxBytes: 900, pageBytes: 2500, lower: -1, upper: -1},
		{limit: 1, maxBytes: 1500, pageBytes: 1000, lower: -1, upper: -1},
		{limit: 4, maxBytes: 1 << 20, pageBytes: 4000, lower: 3, upper: 30},
		{limit: 5, maxBytes: 2000, lower: 10, upper: -1},
		{limit: 6, maxBytes: 1 << 20, lower: -1, upper: 20},
		{limit: 2, maxBytes: 0, lower: -1, upper: -1},
	}
	for _, tb := range tables {
		t.Run(tb.name, func(t *testing.T) {
			t.Parallel()
			pool := storetest.NewDB(t)
			src := tb.fill(t, pool, sessions)
			if tb.simple {
				cfg := pool.Config().Copy()
				cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
				var err error
				pool, err = pgxpool.NewWithConfig(t.Context(), cfg)
				require.NoError(t, err)
				t.Cleanup(pool.Close)
			}
			st, err := store.Open(t.Context(), pool, src, true)
			require.NoError(t, err)
			// Session ids as the table sorts them, and holds on a few.
			rows, err := pool.Query(t.Context(), fmt.Sprintf("SELECT DISTINCT %s::text, %[1]s FROM %s ORDER BY 2", src.SessionColumn, src.Table))
			require.NoError(t, err)
			var ids []string
			var id string
			var sortKey any
			_, err = pgx.ForEachRow(rows, []any{&id, &sortKey}, func() error { ids = append(ids, id); return nil })
			require.NoError(t, err)
			require.Len(t, ids, len(sessions))
			for _, i := range []int{0, 5, 17} {
				_, err := pool.Exec(t.Context(), `INSERT INTO session_holds (source_key, session_id, content_hash, reason) VALUES ($1, $2, $3, 'test')`,
					st.Key(), ids[i], fmt.Sprint("hash of ", i))
				require.NoError(t, err)
			}

			read := func(t *testing.T, q model.Query) [][]model.Session {
				t.Helper()
				var pages [][]model.Session
				for {
					page, err := st.Sessions(t.Context(), q)
					require.NoError(t, err)
					if len(page) == 0 {
						return pages
					}
					pages = append(pages, page)
					require.Less(t, len(pages), 1000)
					last := page[len(page)-1]
					if len(page) < q.Limit && !last.Deferred {
						return pages
					}
					q.After = model.Cursor{ID: last.ID, Position: last.Position, Started: true}
				}
			}
			var withContent, tooLarge, deferred, nulls, held int
			for _, c := range cases {
				t.Run(fmt.Sprintf("Limit%dMax%dPage%dSlice%d_%d", c.limit, c.maxBytes, c.pageBytes, c.lower, c.upper), func(t *testing.T) {
					q := model.Query{Mode: model.ModeFull, Limit: c.limit, MaxBytes: c.maxBytes, PageBytes: c.pageBytes}
					if c.lower >= 0 {
						q.Slice.Lower = &ids[c.lower]
					}
					if c.upper >= 0 {
						q.Slice.Upper = &ids[c.upper]
					}
					full := read(t, q)
					q.Mode, q.From, q.To = model.ModeIncremental, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
					incr := read(t, q)
					require.NotEmpty(t, full)
					require.Empty(t, cmp.Diff(incr, full, rowsCmp), "pages: incremental (-) and full (+)")
					// A dry run's read: the same pages without the rows, both ways.
					var bare [][]model.Session
					for _, page := range full {
						bare = append(bare, slices.Clone(page))
						for i := range bare[len(bare)-1] {
							bare[len(bare)-1][i].Rows = nil
						}
					}
					q.NoRows = true
					require.Empty(t, cmp.Diff(bare, read(t, q), rowsCmp), "incremental pages without rows")
					q.Mode = model.ModeFull
					require.Empty(t, cmp.Diff(bare, read(t, q), rowsCmp), "full pages without rows")
					for _, page := range full {
						for _, s := range page {
							switch {
							case s.Deferred:
								deferred++
							case s.Null:
								nulls++
							case s.Messages == nil:
								tooLarge++
							default:
								withContent++
								require.Equal(t, strings.Count(string(s.Messages), `"x`), s.Rows.Len())
							}
							if s.HoldHash != "" {
								held++
							}
						}
					}
				})
			}
			// Each kind of session came up.
			require.NotZero(t, withContent)
			require.NotZero(t, tooLarge)
			require.NotZero(t, deferred)
			require.NotZero(t, held)
			if strings.Contains(tb.name, "Null") {
				require.NotZero(t, nulls)
			}

			// A session read alone is the one the pages give.
			q := model.Query{Mode: model.ModeIncremental, Limit: 500, MaxBytes: 1 << 20,
				From: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
			all := read(t, q)
			require.Len(t, all, 1)
			for _, want := range all[0] {
				got, err := st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: want.ID, MaxBytes: 1 << 20})
				require.NoError(t, err)
				require.Empty(t, cmp.Diff([]model.Session{want}, got, rowsCmp), want.ID)
			}
			none, err := st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: tb.missing, MaxBytes: 1 << 20})
			require.NoError(t, err)
			require.Empty(t, none)

			// Narrower windows: an incremental read gives the sessions with a row in the
			// window (by the updated-at column, else the order's time, else above the mark
			// of the latest completed run that started at or before the window's start),
			// each as read alone, paged as a full read pages them.
			col := src.UpdatedAtColumn
			if col == "" {
				col = src.OrderColumn
			}
			var typ string
			require.NoError(t, pool.QueryRow(t.Context(), fmt.Sprintf("SELECT pg_typeof(%s)::text FROM %s LIMIT 1", col, src.Table)).Scan(&typ))
			type window struct {
				from, to time.Time
				cond     string // the rows in it, by the test's own SQL
				args     []any
			}
			var windows []window
			if strings.HasPrefix(typ, "timestamp") {
				var lo, hi time.Time
				require.NoError(t, pool.QueryRow(t.Context(), fmt.Sprintf("SELECT min(%s)::timestamptz, max(%[1]s)::timestamptz FROM %s", col, src.Table)).Scan(&lo, &hi))
				cond := fmt.Sprintf("%s >= $1::timestamptz::%s AND %[1]s < $2::timestamptz::%[2]s", col, typ)
				for _, f := range [][2]float64{{0.1, 0.3}, {0.5, 0.52}, {0.9, 1.5}, {1.5, 2}} {
					from, to := lo.Add(time.Duration(f[0]*float64(hi.Sub(lo)))), lo.Add(time.Duration(f[1]*float64(hi.Sub(lo))))
					windows = append(windows, window{from: from, to: to, cond: cond, args: []any{from, to}})
				}
			} else {
				// Marks at a third and two thirds of the rows, by completed runs an hour
				// apart; a dry run's, a failed run's and another source's are no marks.
				var third, twoThirds int64
				require.NoError(t, pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT percentile_disc(0.33) WITHIN GROUP (ORDER BY %s),
  percentile_disc(0.67) WITHIN GROUP (ORDER BY %[1]s) FROM %s`, col, src.Table)).Scan(&third, &twoThirds))
				runs := []struct {
					status, key string
					dry         bool
					hours       int
					mark        int64
				}{{"completed", st.Key(), false, 1, third}, {"completed", st.Key(), false, 2, twoThirds},
					{"completed", st.Key(), true, 3, 1 << 40}, {"failed", st.Key(), false, 3, 0}, {"completed", "other", false, 3, 0}}
				for _, r := range runs {
					_, err := pool.Exec(t.Context(), `INSERT INTO repair_runs (trigger, mode, dry_run, source, status, started_at, finished_at, source_key, order_mark)
VALUES ('cli', 'incremental', $1, 'test', $2, $3, $3, $4, $5)`, r.dry, r.status, at.Add(time.Duration(r.hours)*time.Hour), r.key, r.mark)
					require.NoError(t, err)
				}
				for _, w := range []struct {
					minutes int
					mark    int64
				}{{0, math.MinInt64}, {90, third}, {240, twoThirds}} {
					from := at.Add(time.Duration(w.minutes) * time.Minute)
					windows = append(windows, window{from: from, to: from.Add(time.Hour), cond: col + " > $1::int8", args: []any{w.mark}})
				}
			}
			pos := make(map[string]int, len(ids))
			for i, id := range ids {
				pos[id] = i
			}
			partial := 0 // windows with some of the sessions
			for wi, w := range windows {
				rows, err := pool.Query(t.Context(), fmt.Sprintf("SELECT DISTINCT %s::text, %[1]s FROM %s WHERE %s ORDER BY 2", src.SessionColumn, src.Table, w.cond), w.args...)
				require.NoError(t, err)
				var changed []string
				_, err = pgx.ForEachRow(rows, []any{&id, &sortKey}, func() error { changed = append(changed, id); return nil })
				require.NoError(t, err)
				if len(changed) > 0 && len(changed) < len(ids) {
					partial++
				}
				for _, c := range cases {
					t.Run(fmt.Sprintf("Window%d_Limit%dMax%dPage%dSlice%d_%d", wi, c.limit, c.maxBytes, c.pageBytes, c.lower, c.upper), func(t *testing.T) {
						var alone []model.Session
						for _, id := range changed {
							if c.lower >= 0 && pos[id] <= c.lower || c.upper >= 0 && pos[id] > c.upper {
								continue
							}
							got, err := st.Sessions(t.Context(), model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: c.maxBytes})
							require.NoError(t, err)
							alone = append(alone, got...)
						}
						q := model.Query{Mode: model.ModeIncremental, Limit: c.limit, MaxBytes: c.maxBytes, PageBytes: c.pageBytes, From: w.from, To: w.to}
						if c.lower >= 0 {
							q.Slice.Lower = &ids[c.lower]
						}
						if c.upper >= 0 {
							q.Slice.Upper = &ids[c.upper]
						}
						require.Empty(t, cmp.Diff(pagesOf(alone, c.limit, c.pageBytes), read(t, q), rowsCmp), "pages: as read alone (-) and incremental (+)")
					})
				}
			}
			require.GreaterOrEqual(t, partial, 2)
		})
	}
}

// pagesOf makes pages of sessions as read alone, as a read pages them: at most limit
// sessions a page, and the session whose content takes the page's content over
// pageBytes (when set) comes without it, deferred, and ends the page.
func pagesOf(sessions []model.Session, limit, pageBytes int) [][]model.Session {
	var pages [][]model.Session
	for len(sessions) > 0 {
		var page []model.Session
		content := 0
		for len(page) < limit && len(sessions) > 0 {
			s := sessions[0]
			sessions = sessions[1:]
			if s.Messages != nil {
				content += s.Size
				if pageBytes > 0 && content > pageBytes {
					s.Messages, s.Rows, s.Deferred = nil, nil, true
					page = append(page, s)
					break
				}
			}
			page = append(page, s)
		}
		pages = append(pages, page)
	}
	return pages
}

// rowsCmp compares the rows sessions hold, as read.
var rowsCmp = cmp.AllowUnexported(model.Rows{})
