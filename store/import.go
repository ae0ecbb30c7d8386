package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// Import upserts sessions into tmend's own sessions table (for trials, demos and tests;
// a user's table is written by its own application). It copies them into a temporary
// table and merges from there, in one transaction.
func Import(ctx context.Context, q interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, sessions []model.Session) (int, error) {
	tx, err := q.Begin(ctx)
	if err != nil {
		return 0, classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE import_sessions (id text, messages text, updated_at timestamptz) ON COMMIT DROP`); err != nil {
		return 0, classify(fmt.Errorf("import: %w", err))
	}
	now := time.Now()
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"import_sessions"}, []string{"id", "messages", "updated_at"},
		pgx.CopyFromSlice(len(sessions), func(i int) ([]any, error) {
			s := sessions[i]
			ua := s.UpdatedAt
			if ua.IsZero() {
				ua = now
			}
			return []any{s.ID, string(s.Messages), ua}, nil
		}))
	if err != nil {
		return 0, classify(fmt.Errorf("import: copy sessions: %w", err))
	}
	tag, err := tx.Exec(ctx, `INSERT INTO sessions (id, messages, updated_at)
SELECT id, messages::jsonb, updated_at FROM import_sessions
ON CONFLICT (id) DO UPDATE SET messages = excluded.messages, updated_at = excluded.updated_at`)
	if err != nil {
		return 0, classify(fmt.Errorf("import: merge sessions: %w", err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, classify(err)
	}
	return int(tag.RowsAffected()), nil
}
