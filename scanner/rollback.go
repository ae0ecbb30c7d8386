package scanner

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tmend/tmend/store/model"
)

// Rollback restores what tmend replaced: one session, or every session a run repaired.
// Either is recorded as a rollback run of its own, with restored, refused and failed
// counts, which the rollback's reports and versions name. A session that cannot be
// restored is counted and the rollback goes on. The error is for the rollback as a
// whole: the run, the session or the version asked for does not exist (nothing is
// recorded then), or the database failed before any session was tried.
func (s *Scanner) Rollback(ctx context.Context, o model.RollbackOptions) (model.RollbackOutcome, error) {
	out := model.RollbackOutcome{DryRun: o.DryRun}
	var reqs []model.RollbackRequest
	if o.RunID == 0 {
		// A session that does not exist is the caller's mistake, not a failed rollback.
		if err := s.exists(ctx, o.SessionID); err != nil {
			return out, err
		}
		if err := s.hasVersion(ctx, o.SessionID, o.To); err != nil {
			return out, err
		}
		reqs = append(reqs, model.RollbackRequest{SessionID: o.SessionID, To: o.To})
	} else {
		sessions, err := s.store.RunSessions(ctx, o.RunID)
		if err != nil {
			return out, err
		}
		if len(sessions) == 0 {
			_, err := s.store.Run(ctx, o.RunID) // not found, or repaired nothing
			return out, err
		}
		for _, r := range sessions {
			reqs = append(reqs, model.RollbackRequest{SessionID: r.SessionID, Written: r.ToVersion, To: r.FromVersion})
		}
	}
	err := s.retry(ctx, "start run", func() error {
		var err error
		out.RunID, _, err = s.store.StartRun(ctx, model.Run{Trigger: o.Trigger, Actor: o.Actor, Mode: model.ModeRollback,
			DryRun: o.DryRun, Source: s.cfg.Source, Options: model.RunOptions{RollbackOf: o.RunID, SessionID: o.SessionID}})
		return err
	})
	if err != nil {
		return out, err
	}
	for _, req := range reqs {
		req.Force, req.DryRun, req.Trigger, req.Actor, req.RunID = o.Force, o.DryRun, o.Trigger, o.Actor, out.RunID
		res, err := s.store.Rollback(ctx, req)
		switch {
		case err != nil:
			out.Failed++
			res.SessionID, res.Status, res.Error = req.SessionID, model.RollbackFailed, err.Error()
			s.log.Error().Err(err).Str("session_id", req.SessionID).Int64("run_id", out.RunID).Msg("session not rolled back")
		case res.Restored():
			out.Restored++
		default:
			out.Refused++
		}
		out.Sessions = append(out.Sessions, res)
	}
	status := model.RunCompleted
	if out.Failed > 0 {
		status = model.RunFailed
	}
	counts := model.RunCounts{Scanned: len(reqs), Restored: out.Restored, Refused: out.Refused, Failed: out.Failed}
	if err := s.store.FinishRun(context.WithoutCancel(ctx), model.Finish{RunID: out.RunID, Status: status,
		Counts: counts, Source: s.cfg.Source}); err != nil {
		return out, err
	}
	return out, nil
}

// hasVersion refuses a --to-version the session has no saved version of (pruned, or
// never written) before a rollback run is recorded: there is nothing to roll back to.
// Rollback checks again under the session's lock.
func (s *Scanner) hasVersion(ctx context.Context, id string, to int) error {
	if to == 0 {
		return nil
	}
	var vs []model.VersionRow
	err := s.retry(ctx, "read versions", func() error {
		var err error
		vs, err = s.store.Versions(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	saved := make([]string, len(vs))
	for i, v := range vs {
		if v.Version == to {
			return nil
		}
		saved[i] = strconv.Itoa(v.Version)
	}
	have := "it has no saved version"
	switch {
	case len(saved) > 10:
		have = fmt.Sprintf("it has %d saved versions, %s to %s", len(saved), saved[0], saved[len(saved)-1])
	case len(saved) > 0:
		have = "its saved versions are " + strings.Join(saved, ", ")
	}
	return fmt.Errorf("version %d of session %q %w (pruned, or never written): nothing to roll back to; %s", to, id, model.ErrNotFound, have)
}
