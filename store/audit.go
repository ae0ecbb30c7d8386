package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

const defaultLimit = 50

// ListRuns returns runs newest first, after f.Cursor (a run id) when set.
func (s *Store) ListRuns(ctx context.Context, f model.RunFilter) ([]model.RunRow, error) {
	var c conds
	add := c.add
	if f.Cursor > 0 {
		add("id < $%d", f.Cursor)
	}
	if !f.Since.IsZero() {
		add("started_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("started_at < $%d", f.Until)
	}
	if f.Status != "" {
		add("status = $%d", f.Status)
	}
	if f.Trigger != "" {
		add("trigger = $%d", f.Trigger)
	}
	if len(f.Modes) > 0 {
		add("mode = ANY($%d)", f.Modes)
	}
	if f.ThisSource {
		add("source_key = $%d", s.key)
	}
	if f.CompactRejected {
		add("(summary->'compaction'->>'rejected')::int >= $%d", 1)
	}
	q, args := c.newestFirst(runSelect, f.Limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("list runs: %w", err))
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	return runs, classify(err)
}

// conds collects WHERE conditions, numbering their placeholders in order.
type conds struct {
	where []string
	args  []any
}

// add appends a condition whose one placeholder is written %d.
func (c *conds) add(cond string, v any) {
	c.args = append(c.args, v)
	c.where = append(c.where, fmt.Sprintf(cond, len(c.args)))
}

// newestFirst completes base with the conditions, id order and limit.
func (c *conds) newestFirst(base string, limit int) (string, []any) {
	q := base
	if len(c.where) > 0 {
		q += " WHERE " + strings.Join(c.where, " AND ")
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	args := append(c.args, min(limit, 10000))
	return q + fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args)), args
}

const reportSelect = `SELECT id, run_id, session_id, status, trigger, coalesce(dialect, ''), coalesce(reason, ''),
  issue_codes, stage_counts, actions, coalesce(before_hash, ''), coalesce(after_hash, ''),
  coalesce(before_bytes, 0), coalesce(after_bytes, 0), coalesce(from_version, 0), coalesce(to_version, 0), created_at,
  coalesce(actor, ''), coalesce(tmend_version, ''), coalesce(host, '')
FROM repair_reports`

func scanReport(row pgx.CollectableRow) (model.ReportRow, error) {
	var r model.ReportRow
	err := row.Scan(&r.ID, &r.RunID, &r.SessionID, &r.Status, &r.Trigger, &r.Dialect, &r.Reason, &r.IssueCodes,
		&r.StageCounts, &r.Actions, &r.BeforeHash, &r.AfterHash, &r.BeforeBytes, &r.AfterBytes, &r.FromVersion,
		&r.ToVersion, &r.CreatedAt, &r.Actor, &r.TmendVersion, &r.Host)
	return r, err
}

// ListReports returns audit rows matching f, newest first. Every filter is served by an
// index (see the migrations).
func (s *Store) ListReports(ctx context.Context, f model.ReportFilter) ([]model.ReportRow, error) {
	var c conds
	add := c.add
	if f.Cursor > 0 {
		add("id < $%d", f.Cursor)
	}
	if f.RunID > 0 {
		add("run_id = $%d", f.RunID)
	}
	if f.SessionID != "" {
		// A session id names a session only within its source.
		add("source_key = $%d", s.key)
		add("session_id = $%d", f.SessionID)
	}
	if !f.Since.IsZero() {
		add("created_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("created_at < $%d", f.Until)
	}
	if f.Status != "" {
		add("status = $%d", f.Status)
	}
	if f.Stage != "" {
		add("stage_counts ? $%d", f.Stage)
	}
	if f.Issue != "" {
		add("issue_codes @> ARRAY[$%d::text]", f.Issue)
	}
	if f.Dialect != "" {
		add("dialect = $%d", f.Dialect)
	}
	q, args := c.newestFirst(reportSelect, f.Limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("list reports: %w", err))
	}
	out, err := pgx.CollectRows(rows, scanReport)
	return out, classify(err)
}

// RunProgress counts a run's reports by status. A running run's row has no counts yet
// (they are written when it ends), but each session it does not find clean has its
// report as soon as it is handled.
func (s *Store) RunProgress(ctx context.Context, runID int64) (map[model.SessionStatus]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM repair_reports WHERE run_id = $1 GROUP BY status`, runID)
	if err != nil {
		return nil, classify(fmt.Errorf("count reports of run %d: %w", runID, err))
	}
	out := map[model.SessionStatus]int{}
	var st model.SessionStatus
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		out[st] = n
		return nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("count reports of run %d: %w", runID, err))
	}
	return out, nil
}

// Versions lists a session's saved versions without their content, oldest first.
func (s *Store) Versions(ctx context.Context, sessionID string) ([]model.VersionRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT session_id, version, kind, content_hash, size_bytes, run_id, created_at
FROM session_versions WHERE source_key = $1 AND session_id = $2 ORDER BY version`, s.key, sessionID)
	if err != nil {
		return nil, classify(fmt.Errorf("list versions of %q: %w", sessionID, err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.VersionRow, error) {
		var v model.VersionRow
		return v, r.Scan(&v.SessionID, &v.Version, &v.Kind, &v.ContentHash, &v.SizeBytes, &v.RunID, &v.CreatedAt)
	})
	return out, classify(err)
}

// Version returns one saved version with its content, as the session's transcript.
func (s *Store) Version(ctx context.Context, sessionID string, version int) (model.VersionRow, error) {
	var v model.VersionRow
	err := s.pool.QueryRow(ctx, `SELECT session_id, version, kind, content_hash, size_bytes, run_id, created_at, content
FROM session_versions WHERE source_key = $1 AND session_id = $2 AND version = $3`, s.key, sessionID, version).
		Scan(&v.SessionID, &v.Version, &v.Kind, &v.ContentHash, &v.SizeBytes, &v.RunID, &v.CreatedAt, &v.Content)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("version %d of session %q: %w", version, sessionID, model.ErrNotFound)
	}
	if err != nil {
		return v, classify(err)
	}
	if v.Content, err = s.layout.transcript(v.Content); err != nil {
		return v, fmt.Errorf("version %d of session %q: %w", version, sessionID, err)
	}
	return v, nil
}

// History returns what tmend recorded of a session: its reports and its saved versions
// (without their content). A session with neither is model.ErrNotFound.
func (s *Store) History(ctx context.Context, sessionID string) ([]model.ReportRow, []model.VersionRow, error) {
	reports, err := s.ListReports(ctx, model.ReportFilter{SessionID: sessionID, Limit: 10000})
	if err != nil {
		return nil, nil, err
	}
	versions, err := s.Versions(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	if len(reports) == 0 && len(versions) == 0 {
		return nil, nil, fmt.Errorf("tmend has no record of session %q: %w", sessionID, model.ErrNotFound)
	}
	return reports, versions, nil
}

// VersionPair returns a session's version n, with content, and the version before it; n
// zero means the latest version tmend wrote (by a repair or a rollback).
func (s *Store) VersionPair(ctx context.Context, sessionID string, n int) (before, after model.VersionRow, err error) {
	if n == 0 {
		versions, err := s.Versions(ctx, sessionID)
		if err != nil {
			return before, after, err
		}
		var ok bool
		if _, n, ok = model.LatestWrite(versions); !ok {
			return before, after, fmt.Errorf("tmend never wrote session %q: nothing to diff", sessionID)
		}
	}
	if after, err = s.Version(ctx, sessionID, n); err != nil {
		return before, after, err
	}
	before, err = s.Version(ctx, sessionID, n-1)
	return before, after, err
}

// Prune deletes versions and reports created before cutoff. It never deletes what a
// running run needs: its reports (a resumed partition counts what it already reported)
// and the versions it wrote or its reports name. Unless all is set, it also keeps what
// undoing each session's latest write needs: the latest version tmend wrote and the one
// before it, and, when that write was a repair, its report, which 'rollback --run'
// finds the session by. It returns what it deleted (or would, with dryRun).
func (s *Store) Prune(ctx context.Context, cutoff time.Time, all, dryRun bool) (versions, reports int, err error) {
	const (
		running = `(SELECT id FROM repair_runs WHERE status = 'running')`
		// latest is, per session, the version tmend wrote last.
		latest = `(SELECT source_key, session_id, max(version) AS version FROM session_versions
     WHERE kind IN ('repaired', 'restored') GROUP BY source_key, session_id)`
		keepVersions = `NOT (coalesce(v.run_id IN ` + running + `, false)
  OR EXISTS (SELECT 1 FROM repair_reports r WHERE r.run_id IN ` + running + `
             AND r.source_key = v.source_key AND r.session_id = v.session_id AND v.version IN (r.from_version, r.to_version))
  OR NOT $2::bool AND (v.source_key, v.session_id, v.version) IN (
    SELECT l.source_key, l.session_id, x.version FROM ` + latest + ` l
    CROSS JOIN LATERAL (VALUES (l.version), (l.version - 1)) x(version)))`
		keepReports = `NOT (coalesce(r.run_id IN ` + running + `, false)
  OR NOT $2::bool AND r.status IN ('repaired', 'compacted') AND (r.source_key, r.session_id, r.to_version) IN (SELECT * FROM ` + latest + ` l))`
	)
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		// A run whose process died needs nothing kept: it ends now, not never.
		if !dryRun {
			if _, err := abandonOwnedRuns(ctx, tx); err != nil {
				return err
			}
		}
		verb := "DELETE FROM session_versions v WHERE v.created_at < $1 AND " + keepVersions
		if dryRun {
			verb = "SELECT 1 FROM session_versions v WHERE v.created_at < $1 AND " + keepVersions
		}
		tag, err := tx.Exec(ctx, verb, cutoff, all)
		if err != nil {
			return fmt.Errorf("prune versions: %w", err)
		}
		versions = int(tag.RowsAffected())
		verb = "DELETE FROM repair_reports r WHERE r.created_at < $1 AND " + keepReports
		if dryRun {
			verb = "SELECT 1 FROM repair_reports r WHERE r.created_at < $1 AND " + keepReports
		}
		if tag, err = tx.Exec(ctx, verb, cutoff, all); err != nil {
			return fmt.Errorf("prune reports: %w", err)
		}
		reports = int(tag.RowsAffected())
		return nil
	})
	return versions, reports, err
}
