package model

import (
	"time"

	"github.com/tmend/tmend/repair"
)

// SessionOutcome is what happened to one session in a run.
type SessionOutcome struct {
	SessionID   string        `json:"session_id"`
	Status      SessionStatus `json:"status"`
	Reason      string        `json:"reason,omitempty"`
	Report      repair.Report `json:"report"`
	BytesBefore int           `json:"bytes_before"`
	BytesAfter  int           `json:"bytes_after"`
	FromVersion int           `json:"from_version,omitempty"`
	ToVersion   int           `json:"to_version,omitempty"`
}

// RunResult sums up a run.
type RunResult struct {
	RunID          int64                 `json:"run_id"`
	Trigger        Trigger               `json:"trigger"`
	Mode           Mode                  `json:"mode"`
	DryRun         bool                  `json:"dry_run"`
	Status         RunStatus             `json:"status"`
	Error          string                `json:"error,omitempty"`
	Counts         RunCounts             `json:"counts"`
	ByStatus       map[SessionStatus]int `json:"by_status"`
	ByStage        map[repair.Stage]int  `json:"by_stage"`
	ByIssue        map[string]int        `json:"by_issue"`
	ByDialect      map[string]int        `json:"by_dialect"`
	StartedAt      time.Time             `json:"started_at"`
	Duration       time.Duration         `json:"duration_ns"`
	ScannedFrom    time.Time             `json:"scanned_from,omitzero"`
	ScannedThrough time.Time             `json:"scanned_through,omitzero"`
	Outcomes       []SessionOutcome      `json:"outcomes,omitempty"`
}

// Problems reports whether the run found sessions needing repair or failing (for a dry
// run's exit code). Sessions held after a rollback are not problems.
func (r *RunResult) Problems() bool {
	c := r.Counts
	return c.Repaired+c.Conflict+c.Failed+c.Skipped-r.ByStatus[StatusHeld] > 0
}

// Summary is what the run row keeps of the result.
func (r *RunResult) Summary() Summary {
	stages := map[string]int{}
	for st, n := range r.ByStage {
		stages[string(st)] = n
	}
	return Summary{ByStatus: r.ByStatus, ByStage: stages, ByDialect: r.ByDialect, ByIssue: r.ByIssue}
}
