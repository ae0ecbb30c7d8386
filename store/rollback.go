package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// ErrRefused marks a rollback that was not done (the result says why).
var ErrRefused = errors.New("rollback refused")

// The statements of Rollback; $1 is the source's key, $2 the session id.
const (
	latestVersionSQL = `SELECT coalesce(max(version), 0),
  (SELECT content_hash FROM session_versions WHERE source_key = $1 AND session_id = $2 ORDER BY version DESC LIMIT 1)
FROM session_versions WHERE source_key = $1 AND session_id = $2`
	latestWrittenSQL = `SELECT coalesce(max(version), 0) FROM session_versions
WHERE source_key = $1 AND session_id = $2 AND kind IN ('repaired', 'restored')`
	versionHashSQL = `SELECT content_hash FROM session_versions WHERE source_key = $1 AND session_id = $2 AND version = $3`
	holdSQL        = `INSERT INTO session_holds (source_key, session_id, content_hash, reason) VALUES ($1, $2, $3, $4)
ON CONFLICT (source_key, session_id) DO UPDATE SET content_hash = excluded.content_hash, reason = excluded.reason, created_at = now()`
)

// Rollback restores a saved version of a session in one transaction, only while the
// session still holds what tmend wrote (or with Force, after saving the current content).
// The restored content is saved as a new version, recorded as a rolled_back report, and
// held: scheduled runs leave it alone until its content changes or it is repaired on
// demand. A refusal is recorded as a rollback_refused report.
func (s *Store) Rollback(ctx context.Context, req model.RollbackRequest) (model.RollbackResult, error) {
	res := model.RollbackResult{SessionID: req.SessionID}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		res = model.RollbackResult{SessionID: req.SessionID}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return err
		}
		curHash, err := s.layout.lock(ctx, tx, req.SessionID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("session %q: %w", req.SessionID, model.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var cur string // "" when the column is NULL: never what tmend wrote
		if curHash != nil {
			cur = *curHash
		}
		var latest int
		var latestHash *string
		if err := tx.QueryRow(ctx, latestVersionSQL, s.key, req.SessionID).Scan(&latest, &latestHash); err != nil {
			return err
		}
		written := req.Written
		if written == 0 {
			err := tx.QueryRow(ctx, latestWrittenSQL, s.key, req.SessionID).Scan(&written)
			if err != nil {
				return err
			}
		}
		if written == 0 {
			return s.refuse(&res, "tmend never wrote this session")
		}
		res.From = written
		res.To = req.To
		if res.To == 0 {
			res.To = written - 1
		}
		var target string
		err = tx.QueryRow(ctx, versionHashSQL, s.key, req.SessionID, res.To).Scan(&target)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.refuse(&res, fmt.Sprintf("version %d is not saved (pruned, or never existed)", res.To))
		}
		if err != nil {
			return err
		}
		var writtenHash string
		if err := tx.QueryRow(ctx, versionHashSQL, s.key, req.SessionID, written).Scan(&writtenHash); err != nil {
			return fmt.Errorf("read version %d: %w", written, err)
		}
		unchanged := latest == written && cur == writtenHash
		// A compacted session the platform appended turns to since: its prefix before
		// compaction goes back in front of what it holds now.
		var uncompacted []byte
		why := ""
		if !unchanged && latest == written && res.To == written-1 {
			if uncompacted, why, err = s.uncompacted(ctx, tx, req.SessionID, written); err != nil {
				return err
			}
		}
		if !unchanged && uncompacted == nil && !req.Force {
			reason := fmt.Sprintf("the session changed after tmend wrote version %d", written)
			if latest != written {
				reason = fmt.Sprintf("tmend wrote the session again after version %d (latest is version %d)", written, latest)
			}
			if why != "" {
				reason = "the session was compacted and " + why
			}
			return s.refuse(&res, reason+"; --force keeps the current content as a new version and restores anyway")
		}
		restored, held := fmt.Sprintf("restored version %d", res.To), fmt.Sprintf("rolled back to version %d", res.To)
		if uncompacted != nil {
			restored = fmt.Sprintf("restored the messages version %d compacted, keeping those added since", written)
			held = "rolled back the compaction of version " + strconv.Itoa(written)
		}
		if req.DryRun {
			res.Status, res.Reason = model.RollbackWouldRestore, "would restore "+strings.TrimPrefix(restored, "restored ")
			return nil
		}
		next := latest + 1
		if latestHash == nil || *latestHash != cur {
			// Keep what is there now before replacing it.
			if _, _, err := s.layout.saveVersion(ctx, tx, req.SessionID, next, "preserved", req.RunID); err != nil {
				return fmt.Errorf("preserve current content: %w", err)
			}
			res.Preserved, next = next, next+1
		}
		if uncompacted != nil {
			if err := s.setContent(ctx, tx, req.SessionID, uncompacted); err != nil {
				return fmt.Errorf("restore the messages version %d compacted: %w", written, err)
			}
		} else if err := s.layout.restore(ctx, tx, req.SessionID, res.To); err != nil {
			return fmt.Errorf("restore version %d: %w", res.To, err)
		}
		afterHash, afterSize, err := s.layout.saveVersion(ctx, tx, req.SessionID, next, "restored", req.RunID)
		if err != nil {
			return fmt.Errorf("save restored content: %w", err)
		}
		res.Written = next
		hold, err := s.layout.holdHash(ctx, tx, req.SessionID, afterHash)
		if err != nil {
			return fmt.Errorf("hold session: %w", err)
		}
		if _, err := tx.Exec(ctx, holdSQL, s.key, req.SessionID, hold, held); err != nil {
			return fmt.Errorf("hold session: %w", err)
		}
		res.Status, res.Reason = model.RollbackRestored, restored
		if err := s.insertReport(ctx, tx, model.Report{RunID: req.RunID, SessionID: req.SessionID, Status: model.StatusRolledBack,
			Trigger: req.Trigger, Actor: req.Actor, Reason: res.Reason, BeforeHash: cur, AfterHash: afterHash, AfterBytes: afterSize,
			FromVersion: written, ToVersion: next}); err != nil {
			return err
		}
		if s.src.NotifyChannel == "" {
			return nil
		}
		if _, err := tx.Exec(ctx, notifySQL, s.src.NotifyChannel, notifyPayload(s.key, req.SessionID, next, actionRollback)); err != nil {
			return fmt.Errorf("notify %q: %w", s.src.NotifyChannel, err)
		}
		return nil
	})
	if errors.Is(err, ErrRefused) {
		if !req.DryRun {
			if rerr := s.insertReport(ctx, s.pool, model.Report{RunID: req.RunID, SessionID: req.SessionID,
				Status: model.StatusRefused, Trigger: req.Trigger, Actor: req.Actor, Reason: res.Reason, FromVersion: res.From}); rerr != nil {
				return res, classify(rerr)
			}
		}
		return res, nil
	}
	return res, classify(err)
}

func (s *Store) refuse(res *model.RollbackResult, reason string) error {
	res.Status, res.Reason = model.RollbackRefused, reason
	return ErrRefused
}

func nilIfZero(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// RunSessions lists the sessions a run repaired, with the versions it wrote and replaced.
// A run of another source is refused (ErrSource): its versions belong to that source,
// and restoring them needs the run's own table mapping.
func (s *Store) RunSessions(ctx context.Context, runID int64) ([]model.ReportRow, error) {
	var key string
	err := s.pool.QueryRow(ctx, `SELECT source_key FROM repair_runs WHERE id = $1`, runID).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", runID, model.ErrNotFound)
	}
	if err != nil {
		return nil, classify(fmt.Errorf("read run %d: %w", runID, err))
	}
	if key != s.key {
		return nil, fmt.Errorf("%w: run %d repaired sessions of %s, not of %s: "+
			"give the run's table and columns (--table, --id-column, --messages-column)", ErrSource, runID, key, s.key)
	}
	rows, err := s.pool.Query(ctx, reportSelect+` WHERE run_id = $1 AND source_key = $2 AND status IN ($3, $4) ORDER BY id`, runID, s.key, model.StatusRepaired, model.StatusCompacted)
	if err != nil {
		return nil, classify(fmt.Errorf("list sessions of run %d: %w", runID, err))
	}
	out, err := pgx.CollectRows(rows, scanReport)
	return out, classify(err)
}
