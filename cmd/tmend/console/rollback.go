package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

type runRollbackBody struct {
	Run     model.RunRow
	DryRun  bool
	Force   bool
	Outcome model.RollbackOutcome
}

// runRollback previews (dry_run=1) or does the rollback of every session a run repaired.
// A preview is recorded as a dry rollback run, as 'tmend rollback --run --dry-run' is.
func (c *Console) runRollback(w http.ResponseWriter, r *http.Request, who identity) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		c.fail(w, r, who, http.StatusNotFound, badInput("There is no run %q.", r.PathValue("id")))
		return
	}
	run, err := c.cfg.Store.Run(r.Context(), id)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	body := runRollbackBody{Run: run, DryRun: r.PostFormValue("dry_run") == "1", Force: r.PostFormValue("force") == "1"}
	body.Outcome, err = c.cfg.Rollback.Rollback(c.cfg.Work, model.RollbackOptions{RunID: id, Force: body.Force,
		DryRun: body.DryRun, Trigger: model.TriggerAPI, Actor: model.ActorConsole})
	switch {
	case errors.Is(err, store.ErrSource):
		c.fail(w, r, who, http.StatusConflict, badInput("%v", err))
		return
	case err != nil:
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	if !body.DryRun {
		c.log.Info().Int64("run_id", id).Int64("rollback_run_id", body.Outcome.RunID).Int("num_restored", body.Outcome.Restored).
			Int("num_refused", body.Outcome.Refused).Int("num_failed", body.Outcome.Failed).Msg("run rolled back from the console")
	}
	title := fmt.Sprintf("Roll back run %d", id)
	c.render(w, r, http.StatusOK, "runrollback", c.view(who, title, body))
}

type sessionRollbackBody struct {
	ID     string
	To     int
	Force  bool
	Result model.RollbackResult
	Failed bool
}

// sessionRollback restores a version of one session (by default what tmend's latest
// write replaced); refused when the session changed since, unless force.
func (c *Console) sessionRollback(w http.ResponseWriter, r *http.Request, who identity) {
	body := sessionRollbackBody{ID: r.PostFormValue("id"), Force: r.PostFormValue("force") == "1"}
	if body.ID == "" {
		c.fail(w, r, who, http.StatusBadRequest, badInput("Give a session id."))
		return
	}
	if v := r.PostFormValue("to"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			c.fail(w, r, who, http.StatusBadRequest, badInput("to must be a version number"))
			return
		}
		body.To = n
	}
	out, err := c.cfg.Rollback.Rollback(c.cfg.Work, model.RollbackOptions{SessionID: body.ID, To: body.To, Force: body.Force,
		Trigger: model.TriggerAPI, Actor: model.ActorConsole})
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	// One session was tried; the scanner has logged a failure's details.
	body.Result, body.Failed = out.Sessions[0], out.Failed > 0
	status := http.StatusOK
	switch {
	case body.Failed:
		status = http.StatusInternalServerError
	case !body.Result.Restored():
		status = http.StatusConflict
	default:
		c.log.Info().Str("session_id", body.ID).Int("to_version", body.Result.To).Int("written_version", body.Result.Written).
			Msg("session rolled back from the console")
	}
	c.render(w, r, status, "sessionrollback", c.view(who, "Roll back session "+body.ID, body))
}
