package store_test

import (
	"context"
	"testing"

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
