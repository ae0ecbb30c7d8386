package store

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// txBeginner is a pool or a connection.
type txBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ImportJSONLines imports sessions from JSON Lines, one object per line with "id",
// "updated_at" (optional) and the messages ("messages", "input" or "contents"), a
// thousand at a time, and returns how many it imported. A line that is not a session
// ends the import; the batches written before it stay.
func ImportJSONLines(ctx context.Context, q txBeginner, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	var batch []model.Session
	total, line := 0, 0
	flush := func() error {
		n, err := Import(ctx, q, batch)
		total += n
		batch = batch[:0]
		return err
	}
	for sc.Scan() {
		line++
		doc, err := repair.ParseDocument(sc.Bytes())
		if err != nil {
			return total, fmt.Errorf("line %d: %w", line, err)
		}
		if doc.ID == "" {
			return total, fmt.Errorf("line %d: session has no id", line)
		}
		batch = append(batch, model.Session{ID: doc.ID, Messages: append([]byte(nil), doc.Messages()...), UpdatedAt: doc.UpdatedAt})
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("read input: %w", err)
	}
	return total, flush()
}

// Import upserts sessions into tmend's own sessions table (for trials, demos and tests;
// a user's table is written by its own application). It copies them into a temporary
// table and merges from there, in one transaction.
func Import(ctx context.Context, q txBeginner, sessions []model.Session) (int, error) {
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
