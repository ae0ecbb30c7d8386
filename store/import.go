package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// txBeginner is a pool or a connection.
type txBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ImportJSONLines imports sessions from JSON Lines, one object per line with "id",
// "updated_at" (optional) and the messages ("messages", "input" or "contents"), and
// returns how many it imported. It is all or nothing, in one transaction: a line that is
// not a session (a JSON array among them) or an id already seen on an earlier line is an
// error naming the line, and nothing is imported. Blank lines are skipped. The sessions
// are copied a thousand at a time, so memory stays flat.
func ImportJSONLines(ctx context.Context, q txBeginner, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	tx, err := beginImport(ctx, q)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	var batch []model.Session
	seen := map[string]int{} // id → line
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		switch {
		case len(b) == 0:
			continue
		case b[0] == '[' && len(seen) == 0:
			return 0, errors.New("the input is a JSON array, not JSON Lines: import reads one session object per line " +
				"(an array of sessions converts with jq -c '.[]')")
		case b[0] == '[':
			return 0, fmt.Errorf("line %d is a JSON array, not a session object", line)
		}
		doc, err := repair.ParseDocument(b)
		if err != nil {
			return 0, fmt.Errorf("line %d: %w", line, err)
		}
		if !utf8.Valid(b) {
			return 0, fmt.Errorf("line %d is not UTF-8 text, which Postgres needs; convert the input to UTF-8 (with iconv, say) and import again", line)
		}
		if doc.ID == "" {
			return 0, fmt.Errorf("line %d: session has no id", line)
		}
		if strings.ContainsRune(doc.ID, 0) {
			return 0, fmt.Errorf("line %d: session id %q holds a NUL character, which a Postgres text value cannot; give the session an id without one", line, doc.ID)
		}
		if hasNULEscape(doc.Messages()) {
			return 0, fmt.Errorf("line %d: session %q holds the escape \\u0000 (a NUL character), which Postgres jsonb cannot store; "+
				"remove it or replace it (with \\uFFFD, say) and import again", line, doc.ID)
		}
		if first, ok := seen[doc.ID]; ok {
			return 0, fmt.Errorf("line %d: session id %q is also on line %d; give each session once", line, doc.ID, first)
		}
		seen[doc.ID] = line
		batch = append(batch, model.Session{ID: doc.ID, Messages: append([]byte(nil), doc.Messages()...), UpdatedAt: doc.UpdatedAt})
		if len(batch) == 1000 {
			if err := copyImport(ctx, tx, batch); err != nil {
				return 0, err
			}
			batch = batch[:0]
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read input after line %d: %w", line, err)
	}
	if err := copyImport(ctx, tx, batch); err != nil {
		return 0, err
	}
	return mergeImport(ctx, tx)
}

// hasNULEscape reports whether the JSON text b holds the escape \u0000, which jsonb
// refuses ("unsupported Unicode escape sequence"). In valid JSON a backslash only starts
// an escape, so skipping the character after each one finds every escape.
func hasNULEscape(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 >= len(b) {
			return false
		}
		if bytes.HasPrefix(b[i+1:], []byte("u0000")) {
			return true
		}
		b = b[i+2:]
	}
}

// Import upserts sessions into tmend's own sessions table (for trials, demos and tests;
// a user's table is written by its own application). It copies them into a temporary
// table and merges from there, in one transaction.
func Import(ctx context.Context, q txBeginner, sessions []model.Session) (int, error) {
	tx, err := beginImport(ctx, q)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if err := copyImport(ctx, tx, sessions); err != nil {
		return 0, err
	}
	return mergeImport(ctx, tx)
}

func beginImport(ctx context.Context, q txBeginner) (pgx.Tx, error) {
	tx, err := q.Begin(ctx)
	if err != nil {
		return nil, classify(err)
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE import_sessions (id text, messages text, updated_at timestamptz) ON COMMIT DROP`); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, classify(fmt.Errorf("import: %w", err))
	}
	return tx, nil
}

func copyImport(ctx context.Context, tx pgx.Tx, sessions []model.Session) error {
	now := time.Now()
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"import_sessions"}, []string{"id", "messages", "updated_at"},
		pgx.CopyFromSlice(len(sessions), func(i int) ([]any, error) {
			s := sessions[i]
			ua := s.UpdatedAt
			if ua.IsZero() {
				ua = now
			}
			return []any{s.ID, string(s.Messages), ua}, nil
		}))
	if err != nil {
		return classify(fmt.Errorf("import: copy sessions: %w", err))
	}
	return nil
}

// mergeImport moves the copied sessions into the sessions table, replacing those with
// the same id, and commits.
func mergeImport(ctx context.Context, tx pgx.Tx) (int, error) {
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
