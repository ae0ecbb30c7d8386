package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// An updated_at long before the test, so that a touch shows.
var longAgo = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func updatedAt(t *testing.T, pool *pgxpool.Pool, table, id string) time.Time {
	t.Helper()
	var ts time.Time
	require.NoError(t, pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT updated_at FROM %s WHERE id = $1`, table), id).Scan(&ts))
	return ts
}

func TestUpdatedAt(t *testing.T) {
	t.Parallel()
	// tmend's own sessions table (timestamptz) and a user's table with a timestamp column.
	for _, tt := range []struct {
		name, table, column string
	}{
		{"Timestamptz", "sessions", "timestamptz"},
		{"Timestamp", "public.convs", "timestamp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := storetest.NewDB(t)
			src := store.DefaultSource
			if tt.table != "sessions" {
				src.Table = tt.table
				_, err := pool.Exec(ctx, `CREATE TABLE public.convs (id text PRIMARY KEY, messages jsonb, updated_at timestamp)`)
				require.NoError(t, err)
			}
			insert := func(id string) {
				_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, messages, updated_at) VALUES ($1, $2, $3::timestamptz::%s)`,
					tt.table, tt.column), id, broken, longAgo)
				require.NoError(t, err)
			}
			insert("untouched")
			insert("touched")
			before := updatedAt(t, pool, tt.table, "touched")

			// By default a repair and a rollback leave the column alone.
			plain, err := store.Open(ctx, pool, src, false)
			require.NoError(t, err)
			repairOne(t, plain, 0, "untouched")
			require.Equal(t, before, updatedAt(t, pool, tt.table, "untouched"))
			rb, err := plain.Rollback(ctx, model.RollbackRequest{SessionID: "untouched", Trigger: model.TriggerCLI})
			require.NoError(t, err)
			require.True(t, rb.Restored(), rb.Reason)
			require.Equal(t, before, updatedAt(t, pool, tt.table, "untouched"))

			// Opted in, each write sets it to the transaction's time, and only that row.
			src.TouchUpdatedAt = true
			touching, err := store.Open(ctx, pool, src, false)
			require.NoError(t, err)
			var start time.Time
			require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT now()::%s`, tt.column)).Scan(&start))
			repairOne(t, touching, 0, "touched")
			repaired := updatedAt(t, pool, tt.table, "touched")
			require.False(t, repaired.Before(start), "updated_at %v is before the repair began (%v)", repaired, start)
			require.Equal(t, before, updatedAt(t, pool, tt.table, "untouched"))

			// A rollback that is refused or only a dry run writes nothing, so touches nothing.
			rb, err = touching.Rollback(ctx, model.RollbackRequest{SessionID: "touched", DryRun: true, Trigger: model.TriggerCLI})
			require.NoError(t, err)
			require.True(t, rb.Restored())
			require.Equal(t, repaired, updatedAt(t, pool, tt.table, "touched"))
			rb, err = touching.Rollback(ctx, model.RollbackRequest{SessionID: "touched", To: 99, Trigger: model.TriggerCLI})
			require.NoError(t, err)
			require.False(t, rb.Restored())
			require.Equal(t, repaired, updatedAt(t, pool, tt.table, "touched"))

			rb, err = touching.Rollback(ctx, model.RollbackRequest{SessionID: "touched", Trigger: model.TriggerCLI})
			require.NoError(t, err)
			require.True(t, rb.Restored(), rb.Reason)
			require.True(t, updatedAt(t, pool, tt.table, "touched").After(repaired), "the rollback touched it again")
		})
	}
}

func TestTouchUpdatedAtNeedsTheColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	src := store.DefaultSource
	src.TouchUpdatedAt, src.UpdatedAtColumn = true, ""
	_, err := store.Open(ctx, b.pool, src, false)
	require.ErrorIs(t, err, store.ErrSource)
	require.ErrorContains(t, err, "needs one")

	// A role that may update the messages but not updated_at may not touch it.
	role := "tmend_toucher_" + fmt.Sprint(time.Now().UnixNano())
	_, err = b.pool.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s; GRANT USAGE ON SCHEMA tmend TO %[1]s;
GRANT SELECT (id, messages, updated_at), UPDATE (messages) ON tmend.sessions TO %[1]s`, role))
	require.NoError(t, err)
	t.Cleanup(func() { b.pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) }) //nolint:errcheck
	conn := connAs(t, b.pool, role)
	src = store.DefaultSource
	_, err = store.CheckSourceForTest(ctx, conn, src, false)
	require.NoError(t, err, "without the option, UPDATE (messages) is enough")
	src.TouchUpdatedAt = true
	_, err = store.CheckSourceForTest(ctx, conn, src, false)
	require.ErrorContains(t, err, `may not UPDATE column "updated_at"`)
	_, err = store.CheckSourceForTest(ctx, conn, src, true)
	require.NoError(t, err, "read-only commands write nothing")
}

// listener LISTENs on a channel on its own connection.
type listener struct {
	conn    *pgxpool.Conn
	channel string
}

func listen(t *testing.T, pool *pgxpool.Pool, channel string) *listener {
	t.Helper()
	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return &listener{conn: conn, channel: channel}
}

// next returns the next notification's payload.
func (l *listener) next(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := l.conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err, "no notification")
	require.Equal(t, l.channel, n.Channel)
	return n.Payload
}

// nothingSince checks that tmend sent nothing on the channel: notifications arrive in
// commit order, so a marker sent now must be the next one.
func (l *listener) nothingSince(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(t.Context(), "SELECT pg_notify($1, 'marker')", l.channel)
	require.NoError(t, err)
	require.Equal(t, "marker", l.next(t), "tmend sent a notification")
}

type notification struct {
	Source    string `json:"source"`
	SessionID string `json:"session_id"`
	Version   int    `json:"version"`
	Action    string `json:"action"`
}

func decode(t *testing.T, payload string) notification {
	t.Helper()
	var n notification
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&n), payload)
	return n
}

func TestNotify(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(broken), UpdatedAt: longAgo},
		model.Session{ID: "b", Messages: []byte(broken), UpdatedAt: longAgo})
	l := listen(t, pool, store.DefaultNotifyChannel)

	// Off by default.
	plain, err := store.Open(ctx, pool, store.DefaultSource, false)
	require.NoError(t, err)
	repairOne(t, plain, 0, "b")
	_, err = plain.Rollback(ctx, model.RollbackRequest{SessionID: "b", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	l.nothingSince(t, pool)

	src := store.DefaultSource
	src.NotifyChannel = store.DefaultNotifyChannel
	st, err := store.Open(ctx, pool, src, false)
	require.NoError(t, err)
	out := repairOne(t, st, 0, "a")
	require.Equal(t, notification{Source: st.Key(), SessionID: "a", Version: out.ToVersion, Action: "repair"}, decode(t, l.next(t)))
	require.Equal(t, 2, out.ToVersion, "version 1 is the original, 2 the repair")

	// Dry runs and refusals change nothing and say nothing.
	_, err = st.Rollback(ctx, model.RollbackRequest{SessionID: "a", DryRun: true, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	_, err = st.Rollback(ctx, model.RollbackRequest{SessionID: "a", To: 99, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	l.nothingSince(t, pool)

	rb, err := st.Rollback(ctx, model.RollbackRequest{SessionID: "a", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.True(t, rb.Restored(), rb.Reason)
	require.Equal(t, notification{Source: st.Key(), SessionID: "a", Version: rb.Written, Action: "rollback"}, decode(t, l.next(t)))
	require.Equal(t, 3, rb.Written)

	// A session that changed after it was read is a conflict: nothing written, nothing sent.
	page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "a", MaxBytes: 1 << 20})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sessions SET messages = '[]' WHERE id = 'a'`)
	require.NoError(t, err)
	res, err := repair.Repair(page[0].Messages, repair.Options{})
	require.NoError(t, err)
	out, err = st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.NoError(t, err)
	require.True(t, out.Conflict)
	l.nothingSince(t, pool)
}

// A notification is part of the write's transaction: when the transaction fails at
// commit, there is none.
func TestNotifyOnlyOnCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	storetest.Sessions(t, pool, model.Session{ID: "a", Messages: []byte(broken), UpdatedAt: longAgo})
	src := store.DefaultSource
	src.NotifyChannel = "tmend_test_channel"
	st, err := store.Open(ctx, pool, src, false)
	require.NoError(t, err)
	l := listen(t, pool, src.NotifyChannel)
	before := storetest.Content(t, pool, "a")

	// A deferred constraint trigger fails the transaction at COMMIT, after pg_notify ran.
	_, err = pool.Exec(ctx, `CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON repair_reports DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION public.refuse()`)
	require.NoError(t, err)
	page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: "a", MaxBytes: 1 << 20})
	require.NoError(t, err)
	res, err := repair.Repair(page[0].Messages, repair.Options{})
	require.NoError(t, err)
	_, err = st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
		Report: model.Report{Status: model.StatusRepaired}})
	require.ErrorContains(t, err, "refused at commit")
	require.Equal(t, before, storetest.Content(t, pool, "a"), "nothing was written")
	l.nothingSince(t, pool)

	_, err = pool.Exec(ctx, `DROP TRIGGER refuse ON repair_reports`)
	require.NoError(t, err)
	repairOne(t, st, 0, "a")
	require.Equal(t, "repair", decode(t, l.next(t)).Action)
}

func TestNotifyChannelLength(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := store.DefaultSource
	src.NotifyChannel = "c23456789012345678901234567890123456789012345678901234567890123" // 63 bytes
	_, err := store.Open(t.Context(), b.pool, src, false)
	require.NoError(t, err)
	src.NotifyChannel += "4"
	_, err = store.Open(t.Context(), b.pool, src, false)
	require.ErrorIs(t, err, store.ErrSource)
}
