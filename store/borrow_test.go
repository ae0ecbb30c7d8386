package store_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// A borrowed session (Query.Borrow) is the content read, still valid after the read's
// ctx ends; it holds its connection until Release, which gives it back to the pool.
func TestBorrowedSessionHoldsItsReadUntilReleased(t *testing.T) {
	t.Parallel()
	pool := storetest.NewDB(t)
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	storetest.Sessions(t, pool, model.Session{ID: "s1", Messages: []byte(broken)})

	conns := pool.Stat().TotalConns()
	ctx, cancel := context.WithCancel(t.Context())
	page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "s1", MaxBytes: 1 << 20, Borrow: true})
	cancel() // as the scanner's read timeout ends once the read returns
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.NotNil(t, page[0].Release, "not borrowed")
	require.Equal(t, int32(1), pool.Stat().AcquiredConns(), "the read is not held open")
	require.JSONEq(t, broken, string(page[0].Messages))
	require.Equal(t, len(page[0].Messages), page[0].Size)

	page[0].Release()
	page[0].Release() // once only
	require.Equal(t, int32(0), pool.Stat().AcquiredConns())
	require.Equal(t, max(conns, 1), pool.Stat().TotalConns(), "the connection was closed rather than given back")
}

// endAtReply is a connection that ends a context (end, when set) once the reply to a
// statement's execution (a Bind message, which pgx sends with the Execute) starts to
// come: after the statement went out, while its rows are read.
type endAtReply struct {
	net.Conn
	end  *atomic.Pointer[context.CancelFunc]
	sent atomic.Bool // written by pgx's writers (a COPY writes from a goroutine of its own), read by its reader
}

func (c *endAtReply) Write(p []byte) (int, error) {
	if c.end.Load() != nil && len(p) > 0 && p[0] == 'B' {
		c.sent.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *endAtReply) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if end := c.end.Load(); n > 0 && end != nil && c.sent.CompareAndSwap(true, false) {
		(*end)()
	}
	return n, err
}

// uncut leaves a read going when its context ends, as when the row is in before the end
// reaches the connection.
type uncut struct{}

func (uncut) HandleCancel(context.Context) {}
func (uncut) HandleUnwatchAfterCancel()    {}

// A borrowed read whose context ends before the row is handed over (before the read, or
// while the row comes and is read whole) returns the context's error and holds nothing:
// its read closed, the connection back in the pool. Nothing hangs; the pool reads on.
func TestBorrowedReadEndedByItsContextHoldsNothing(t *testing.T) {
	t.Parallel()
	cfg, err := store.ParseConfig(storetest.NewDBURL(t), "")
	require.NoError(t, err)
	var end atomic.Pointer[context.CancelFunc]
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		return &endAtReply{Conn: c, end: &end}, err
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(*pgconn.PgConn) ctxwatch.Handler { return uncut{} }
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if pool.Stat().AcquiredConns() == 0 { // else Close would wait for it forever
			pool.Close()
		}
	})
	st, err := store.Open(t.Context(), pool, store.DefaultSource, false)
	require.NoError(t, err)
	storetest.Sessions(t, pool, model.Session{ID: "s1", Messages: []byte(broken)})
	q := model.Query{Mode: model.ModeSession, SessionID: "s1", MaxBytes: 1 << 20, Borrow: true}

	for _, when := range []string{"before the read", "while the row is read"} {
		ctx, cancel := context.WithCancel(t.Context())
		if when == "before the read" {
			cancel()
		} else {
			end.Store(&cancel)
		}
		page, err := st.Sessions(ctx, q)
		end.Store(nil)
		require.ErrorIs(t, err, context.Canceled, when)
		require.Nil(t, page, when)
		require.Eventually(t, func() bool { return pool.Stat().AcquiredConns() == 0 }, 10*time.Second, time.Millisecond,
			"%s: the read is held", when)
	}
	page, err := st.Sessions(t.Context(), q)
	require.NoError(t, err)
	require.JSONEq(t, broken, string(page[0].Messages))
	page[0].Release()
}
