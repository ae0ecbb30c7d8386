package model

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

// RollbackResult says what happened to one session.
type RollbackResult struct {
	SessionID string `json:"session_id"`
	Restored  bool   `json:"restored"`
	// Reason explains a refusal, or what was restored.
	Reason    string `json:"reason"`
	From      int    `json:"from_version"`                // the version tmend wrote
	To        int    `json:"to_version"`                  // the version restored
	Preserved int    `json:"preserved_version,omitempty"` // --force: the changed content, kept
	Written   int    `json:"written_version,omitempty"`   // the version holding what was written now
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

// RollbackOutcome sums up a rollback.
type RollbackOutcome struct {
	RunID    int64 `json:"run_id,omitempty"` // the rollback run
	Restored int   `json:"restored"`
	Refused  int   `json:"refused"`
	Failed   int   `json:"failed"`
	// Sessions holds each session's result, failures with the error as Reason.
	Sessions []RollbackResult `json:"sessions"`
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
