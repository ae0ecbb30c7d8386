package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// layout is how a source's table keeps its sessions: the statements that read pages of
// sessions, lock one, write a repaired one, save and restore its versions, and split the
// table into partitions. The rest of the store (runs, reports, versions' bookkeeping,
// rollback's decisions) and everything above it see a session as one transcript, whatever
// the layout. rowLayout (one row per session, holding the messages array) is the first.
//
// A version's content is what the layout saves of a session; its hash is what lock
// returns, so that rollback can tell whether a session still holds what tmend wrote.
type layout interface {
	// key identifies the source in tmend's tables (see Store.Key).
	key() string
	// hasUpdatedAt reports whether incremental runs can select what changed.
	hasUpdatedAt() bool

	// sessions reads one page of sessions (see Store.Sessions).
	sessions(ctx context.Context, q model.Query) ([]model.Session, error)
	// apply is one attempt at Apply's transaction (see Store.Apply): it locks the session,
	// returns a *conflictError when it no longer holds what was read (want is the hash of
	// the transcript read), and otherwise writes a.NewMessages with the prior and repaired
	// versions and the report (report is reportInsert's arguments) in one transaction.
	apply(ctx context.Context, a model.Apply, want string, report []any) (model.Outcome, error)

	// lock locks the session in tx and returns the hash of what a version of it would hold
	// now (nil: the session holds nothing a version can match); pgx.ErrNoRows when there
	// is no such session.
	lock(ctx context.Context, tx pgx.Tx, id string) (*string, error)
	// saveVersion saves what the session holds now as version n of the given kind, and
	// returns the saved content's hash and size.
	saveVersion(ctx context.Context, tx pgx.Tx, id string, n int, kind string, runID int64) (hash string, size int, err error)
	// restore replaces what the session holds with its saved version n.
	restore(ctx context.Context, tx pgx.Tx, id string, n int) error
	// holdHash is the hash of the transcript a session read by sessions would have
	// (Session.HoldHash) once it holds the saved content whose hash is versionHash.
	holdHash(ctx context.Context, tx pgx.Tx, id, versionHash string) (string, error)
	// transcript returns a saved version's content as the session's transcript.
	transcript(content string) (string, error)

	// estimateChanged is the planner's estimate of the rows an incremental run from since
	// reads; only called when hasUpdatedAt.
	estimateChanged(ctx context.Context, since time.Time) (float64, error)
	// split returns the bounds of partitions of the session ids at the given fractions of
	// a sample of percent of the table's pages (see splitPoints).
	split(ctx context.Context, q querier, fractions []float64, percent float64) ([]string, error)
}

// whereAll is a WHERE clause of the conditions that are not empty, or "".
func whereAll(conds ...string) string {
	conds = slices.DeleteFunc(conds, func(c string) bool { return c == "" })
	if len(conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(conds, " AND ")
}

// sliceBounds picks the page statement of a slice (bit 1: a lower bound, bit 2: an upper
// one) and the bounds it takes last.
func sliceBounds(sl model.Slice) (variant int, bounds []any) {
	if sl.Lower != nil {
		variant, bounds = variant|1, append(bounds, *sl.Lower)
	}
	if sl.Upper != nil {
		variant, bounds = variant|2, append(bounds, *sl.Upper)
	}
	return variant, bounds
}

// estimateRows is the planner's estimate of the rows a statement reads; sql is its
// EXPLAIN (FORMAT JSON).
func estimateRows(ctx context.Context, q querier, sql string, args ...any) (float64, error) {
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	err := q.QueryRow(ctx, sql, append([]any{once}, args...)...).Scan(&plan) // once a run: see once
	if err == nil && len(plan) == 0 {
		err = errors.New("EXPLAIN gave no plan")
	}
	if err != nil {
		return 0, err
	}
	return plan[0].Plan.Rows, nil
}
