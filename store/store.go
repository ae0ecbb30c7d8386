package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/store/model"
)

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx have in common.
// once sends a statement that a process runs once, or once a run, without preparing it
// first: one round trip instead of two (pgx's default prepares and caches each statement
// on its first use). Its arguments go as text, typed by the server as a prepared
// statement's would be.
const once = pgx.QueryExecModeExec

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store reads and repairs sessions of one source and keeps tmend's audit tables.
type Store struct {
	pool *pgxpool.Pool
	src  Source
	key  string // the source's key in tmend's tables (see checkSource)
	// layout is how the source's table keeps its sessions.
	layout layout
	// origin stamps the run and report rows this store writes.
	origin model.Origin
	// owned holds the liveness locks of the runs StartRun recorded, by id, until FinishRun.
	owned sync.Map
	// advice says what in the source's schema makes tmend's reads slow (Advice).
	advice []string
}

// Advice lists what in the source's schema makes tmend's reads slow, and how to mend
// it: a message table without an index that starts with its session column.
func (s *Store) Advice() []string { return s.advice }

// Open checks the source mapping against the database (table, column types and
// privileges; readOnly skips the UPDATE privilege) and prepares its queries.
func Open(ctx context.Context, pool *pgxpool.Pool, src Source, readOnly bool) (*Store, error) {
	// The layouts use the names as Postgres has them; runs keep the source as given.
	norm, err := src.normalize()
	if err != nil {
		return nil, err
	}
	var l layout
	var advice []string
	switch src.Layout {
	case "", LayoutSessions:
		t, err := checkSource(ctx, pool, norm, readOnly)
		if err != nil {
			return nil, classify(err)
		}
		l = newRowLayout(pool, norm, t)
	case LayoutMessages:
		m, err := openMessageLayout(ctx, pool, norm, readOnly)
		if err != nil {
			return nil, classify(err)
		}
		if a := sessionIndexAdvice(norm, m.t); a != "" {
			advice = append(advice, a)
		}
		l = m
	case LayoutLangGraph:
		g, err := openLangGraphLayout(ctx, pool, norm, readOnly)
		if err != nil {
			return nil, classify(err)
		}
		l = g
	default:
		return nil, fmt.Errorf("%w: unknown layout %q (want %q, %q or %q)", ErrSource, src.Layout, LayoutSessions, LayoutMessages, LayoutLangGraph)
	}
	s := &Store{pool: pool, src: src, key: l.key(), layout: l, advice: advice}
	if g, ok := l.(*langGraphLayout); ok {
		g.origin = &s.origin // its checkpoints' metadata names tmend's version
	}
	return s, nil
}

// SetOrigin sets the binary's version and the host that the run and report rows this
// store writes record. Call it before the store is used.
func (s *Store) SetOrigin(o model.Origin) { s.origin = o }

// Source returns the store's source.
func (s *Store) Source() Source { return s.src }

// Key returns the key that the source's versions, reports, holds and runs carry:
// schema.table(id_column,messages_column), each name quoted where it needs to be.
func (s *Store) Key() string { return s.key }

// Pool returns the pool, for the few callers that run their own statements (health checks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// sessionError is a write refused for what the session holds, found before anything
// was sent: the session fails with it and the run goes on, where an error of the
// database is retried as an outage (classify).
type sessionError struct{ err error }

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// execCounted runs b, the write statements of a transaction conn has begun, and
// commits it once each statement changed the rows counts says (-1: any number). COMMIT
// goes in a round trip of its own: queued with the statements, it would commit before
// their counts were read, and a trigger that skipped a row's change would leave a
// session half written. A transaction that fails is left open, as apply leaves it: the
// pool closes a connection released inside one, and the server rolls it back.
func execCounted(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, counts []int64) error {
	err := sendCounted(ctx, conn, b, counts)
	if err == nil {
		_, err = conn.Exec(ctx, "COMMIT")
	}
	return err
}

// classify wraps failures of the database itself in ErrUnavailable: errors the server
// sends about the connection or its shutdown, and every error that is not the server's
// answer at all (network, connect, closed connection) nor the session's (sessionError).
func classify(err error) error {
	var se *sessionError
	if err == nil || errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, pgx.ErrNoRows) || errors.Is(err, ErrSource) || errors.Is(err, model.ErrNotFound) ||
		errors.Is(err, model.ErrBusy) || errors.Is(err, model.ErrLeaseLost) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		// A protocol violation is tmend's message the server refused, not an outage:
		// sent again it is refused again, so the session fails instead of being retried.
		case pgErr.Code == pgerrcode.ProtocolViolation:
		case pgerrcode.IsConnectionException(pgErr.Code),
			pgErr.Code == pgerrcode.AdminShutdown, pgErr.Code == pgerrcode.CrashShutdown,
			pgErr.Code == pgerrcode.CannotConnectNow, pgErr.Code == pgerrcode.TooManyConnections:
			return fmt.Errorf("%w: %w", model.ErrUnavailable, err)
		}
		return err
	}
	return fmt.Errorf("%w: %w", model.ErrUnavailable, err)
}

// withTx runs fn in a transaction, retrying serialization failures and deadlocks with a
// short jittered, ctx-aware backoff. The rollback after a failure runs even when ctx is
// cancelled, so nothing is left half-written.
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return retryTx(ctx, func() error { return s.tryTx(ctx, fn) })
}

// retryTx runs try, a whole transaction, again after a serialization failure or deadlock.
func retryTx(ctx context.Context, try func() error) error {
	for attempt := 0; ; attempt++ {
		err := try()
		var pgErr *pgconn.PgError
		retry := errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected)
		if !retry || attempt >= 4 {
			return classify(err)
		}
		d := time.Duration(10<<attempt)*time.Millisecond + rand.N(10*time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Now returns the database's clock, which updated_at values come from.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&t)
	return t, classify(err)
}
