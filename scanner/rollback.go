package scanner

import (
	"context"

	"github.com/tmend/tmend/store/model"
)

// Rollback restores what tmend replaced: one session, or every session a run repaired
// (then recorded as a rollback run with restored, refused and failed counts). A session
// that cannot be restored is counted and the rollback goes on. The error is for the
// rollback as a whole: the run or session does not exist, or the database failed
// before any session was tried.
func (s *Scanner) Rollback(ctx context.Context, o model.RollbackOptions) (model.RollbackOutcome, error) {
	out := model.RollbackOutcome{DryRun: o.DryRun}
	var reqs []model.RollbackRequest
	if o.RunID == 0 {
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
		if out.RunID, err = s.store.StartRollbackRun(ctx, o.Trigger, o.RunID, o.DryRun); err != nil {
			return out, err
		}
	}
	for _, req := range reqs {
		req.Force, req.DryRun, req.Trigger, req.RunID = o.Force, o.DryRun, o.Trigger, out.RunID
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
	if out.RunID != 0 {
		status := model.RunCompleted
		if out.Failed > 0 {
			status = model.RunFailed
		}
		counts := model.RunCounts{Scanned: len(reqs), Restored: out.Restored, Refused: out.Refused, Failed: out.Failed}
		if err := s.store.FinishRun(context.WithoutCancel(ctx), model.Finish{RunID: out.RunID, Status: status,
			Counts: counts, Source: s.cfg.Source}); err != nil {
			return out, err
		}
	}
	return out, nil
}
