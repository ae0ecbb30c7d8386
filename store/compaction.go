package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/store/model"
)

// ErrCompactLayout refuses compaction on a layout that cannot keep it reversible yet.
var ErrCompactLayout = errors.New("compaction is supported for tables that keep one row per session (--layout sessions) only, " +
	"not yet for a row per message or LangGraph checkpoints")

// CanCompact reports whether the source's layout supports compaction (Apply's Compaction).
func (s *Store) CanCompact() bool {
	_, ok := s.layout.(*rowLayout)
	return ok
}

// compactionSQL keeps a compacted write's boundary, prefix and report beside its version,
// in Apply's transaction.
const compactionSQL = `INSERT INTO session_compactions (source_key, session_id, version, run_id, boundary, prefix, report)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

// uncompacted returns what rolling back the compaction of version written gives now
// that the session holds more than tmend wrote: the prefix as it was before compaction,
// then everything the session holds after the compacted prefix, as it is. It returns nil
// and why not when that does not apply: the version was not compacted, or the session's
// first messages are no longer exactly what tmend wrote.
func (s *Store) uncompacted(ctx context.Context, tx pgx.Tx, id string, written int) ([]byte, string, error) {
	l, ok := s.layout.(*rowLayout)
	if !ok {
		return nil, "", nil
	}
	var boundary int
	var prefix, wrote []byte
	err := tx.QueryRow(ctx, `SELECT c.boundary, c.prefix, v.content FROM session_compactions c
JOIN session_versions v USING (source_key, session_id, version)
WHERE c.source_key = $1 AND c.session_id = $2 AND c.version = $3`, s.key, id, written).Scan(&boundary, &prefix, &wrote)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read compaction of version %d: %w", written, err)
	}
	var cur []byte
	if err := tx.QueryRow(ctx, l.sql.current, id).Scan(&cur); err != nil {
		return nil, "", fmt.Errorf("read session: %w", err)
	}
	ws, we, ok := model.PrefixSpan(wrote, boundary)
	cs, ce, cok := model.PrefixSpan(cur, boundary)
	if !ok || !cok || !bytes.Equal(wrote[ws:we], cur[cs:ce]) {
		return nil, fmt.Sprintf("its first %d messages, which tmend compacted, changed after tmend wrote version %d", boundary, written), nil
	}
	out := make([]byte, 0, len(cur)-(ce-cs)+len(prefix))
	return append(append(append(out, cur[:cs]...), prefix...), cur[ce:]...), "", nil
}

// setContent writes content into the session's row (rowLayout only: uncompacted's).
func (s *Store) setContent(ctx context.Context, tx pgx.Tx, id string, content []byte) error {
	_, err := tx.Exec(ctx, s.layout.(*rowLayout).sql.set, id, string(content))
	return err
}

// Cleared lists what the compactions of a session replaced by stubs, newest write first
// (only the latest with latest): per content, the action (rule, tool, call id, bytes)
// and the text before and after, from the saved versions.
func (s *Store) Cleared(ctx context.Context, id string, latest bool) ([]model.Cleared, error) {
	q := `SELECT c.version, c.prefix, c.report, v.content FROM session_compactions c
JOIN session_versions v USING (source_key, session_id, version)
WHERE c.source_key = $1 AND c.session_id = $2 ORDER BY c.version DESC`
	if latest {
		q += " LIMIT 1"
	}
	rows, err := s.pool.Query(ctx, q, s.key, id)
	if err != nil {
		return nil, classify(fmt.Errorf("read compactions of session %q: %w", id, err))
	}
	var out []model.Cleared
	var version int
	var prefix, rep, wrote []byte
	_, err = pgx.ForEachRow(rows, []any{&version, &prefix, &rep, &wrote}, func() error {
		var r compact.Report
		if err := json.Unmarshal(rep, &r); err != nil {
			return fmt.Errorf("version %d's compaction report: %w", version, err)
		}
		var before, after []json.RawMessage
		ws, we, ok := model.PrefixSpan(wrote, r.Boundary)
		if !ok {
			return fmt.Errorf("version %d holds fewer than its %d compacted messages", version, r.Boundary)
		}
		if err := json.Unmarshal(append(append([]byte("["), prefix...), ']'), &before); err != nil {
			return fmt.Errorf("version %d's prefix before compaction: %w", version, err)
		}
		if err := json.Unmarshal(append(append([]byte("["), wrote[ws:we]...), ']'), &after); err != nil {
			return fmt.Errorf("version %d's compacted prefix: %w", version, err)
		}
		for _, a := range r.Actions {
			c := model.Cleared{Version: version, Action: a}
			if a.MessageIndex < len(before) && a.MessageIndex < len(after) {
				c.Original, c.Stub = differ(canonical(before[a.MessageIndex]), canonical(after[a.MessageIndex]))
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("read compactions of session %q: %w", id, err))
	}
	return out, nil
}

// canonical renders a message with its keys sorted and strings escaped alike, for
// display only: the prefix kept is the content compaction read, the version the
// column's rendering of what it wrote (a jsonb column orders keys its own way), and
// only where they differ in value is what a stub replaced. Numbers keep their text.
func canonical(m []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return m
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return m
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// differ returns where a and b differ: a and b without their common head and tail.
func differ(a, b []byte) (string, string) {
	h := 0
	for h < len(a) && h < len(b) && a[h] == b[h] {
		h++
	}
	t := 0
	for t < len(a)-h && t < len(b)-h && a[len(a)-1-t] == b[len(b)-1-t] {
		t++
	}
	return string(a[h : len(a)-t]), string(b[h : len(b)-t])
}
