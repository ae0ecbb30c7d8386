package model

import "encoding/json"

// RollbackRequest says what to restore.
type RollbackRequest struct {
	SessionID string
	// Written is the version tmend wrote that the session must still hold; 0 means the
	// latest version tmend wrote (a repair or an earlier rollback).
	Written int
	// To is the version to restore; 0 means the one before Written (what tmend replaced).
	To int
	// Force restores even when the session changed after tmend wrote it, keeping the
	// current content as a new version first.
	Force   bool
	DryRun  bool
	RunID   int64
	Trigger Trigger
	Actor   string
}

// RollbackStatus is what became of one session in a rollback. These strings are JSON
// output: they never change once shipped.
type RollbackStatus string

// The rollback statuses.
const (
	RollbackRestored     RollbackStatus = "restored"
	RollbackWouldRestore RollbackStatus = "would_restore" // a dry run
	RollbackRefused      RollbackStatus = "refused"
	RollbackFailed       RollbackStatus = "failed" // an error; Error says which
)

// RollbackResult says what happened to one session.
type RollbackResult struct {
	SessionID string         `json:"session_id"`
	Status    RollbackStatus `json:"status"`
	// Reason explains a refusal, or what was restored.
	Reason string `json:"reason,omitempty"`
	// Error is why a failed session could not be rolled back.
	Error     string `json:"error,omitempty"`
	From      int    `json:"from_version"`                // the version tmend wrote
	To        int    `json:"to_version"`                  // the version restored
	Preserved int    `json:"preserved_version,omitempty"` // --force: the changed content, kept
	Written   int    `json:"written_version,omitempty"`   // the version holding what was written now
}

// Restored reports whether the session was restored, or would be in a dry run.
func (r RollbackResult) Restored() bool {
	return r.Status == RollbackRestored || r.Status == RollbackWouldRestore
}

// RollbackOptions say what a rollback restores: one session (SessionID, To) or every
// session a run repaired (RunID), recorded then as a rollback run of its own.
type RollbackOptions struct {
	SessionID string
	To        int
	RunID     int64
	Force     bool
	DryRun    bool
	Trigger   Trigger
	Actor     string
}

// RollbackOutcome sums up a rollback. It is one JSON object wherever it is shown (the
// CLI's --json, the API): a dry run counts would_restore where a real one counts restored.
type RollbackOutcome struct {
	RunID    int64 `json:"run_id,omitempty"` // the rollback run
	DryRun   bool  `json:"dry_run"`
	Restored int   `json:"-"` // restored, or would be in a dry run
	Refused  int   `json:"refused"`
	Failed   int   `json:"failed"`
	// Sessions holds each session's result.
	Sessions []RollbackResult `json:"sessions"`
}

// MarshalJSON names the restored count as the statuses do: restored or would_restore.
func (o RollbackOutcome) MarshalJSON() ([]byte, error) {
	type outcome RollbackOutcome // without this method
	out := struct {
		outcome
		Restored     *int `json:"restored,omitempty"`
		WouldRestore *int `json:"would_restore,omitempty"`
	}{outcome: outcome(o)}
	if o.DryRun {
		out.WouldRestore = &o.Restored
	} else {
		out.Restored = &o.Restored
	}
	if out.Sessions == nil {
		out.Sessions = []RollbackResult{}
	}
	return json.Marshal(out)
}

// LatestWrite returns the latest version tmend wrote (a repair or a rollback) among a
// session's versions and the one before it, which that write replaced: what a diff shows
// when no versions are asked for. ok is false when tmend never wrote the session.
func LatestWrite(versions []VersionRow) (from, to int, ok bool) {
	for _, v := range versions {
		if v.Kind == "repaired" || v.Kind == "restored" {
			from, to, ok = v.Version-1, v.Version, true
		}
	}
	return from, to, ok
}
