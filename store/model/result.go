package model

import (
	"time"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
)

// SessionOutcome is what happened to one session in a run. In JSON the engine's report
// is flattened into it, with the names a report row and 'tmend check --json' use; its
// status and reason are the outcome's (a dry run's would_repair, not the engine's
// repaired).
type SessionOutcome struct {
	SessionID     string        `json:"session_id"`
	Status        SessionStatus `json:"status"`
	Reason        string        `json:"reason,omitempty"`
	repair.Report               // Status and Reason are shadowed by the outcome's
	BytesBefore   int           `json:"before_bytes"`
	BytesAfter    int           `json:"after_bytes"`
	FromVersion   int           `json:"from_version,omitempty"`
	ToVersion     int           `json:"to_version,omitempty"`
	// Compaction is what compaction (--compact) found and did, after the repair.
	Compaction *compact.Report `json:"compaction,omitempty"`
}

// CompactionCounts are a run's compactions (--compact): sessions compacted (in a dry
// run, that would be), those whose compacted content failed a check (nothing written),
// and the bytes saved (would be).
type CompactionCounts struct {
	Compacted  int   `json:"compacted"`
	Rejected   int   `json:"rejected"`
	SavedBytes int64 `json:"saved_bytes"`
}

// Add counts one session's compaction report.
func (c *CompactionCounts) Add(r *compact.Report) {
	switch r.Status {
	case compact.StatusCompacted:
		c.Compacted++
		c.SavedBytes += int64(r.SavedBytes())
	case compact.StatusRejected:
		c.Rejected++
	}
}

// Merge adds o to c.
func (c *CompactionCounts) Merge(o CompactionCounts) {
	c.Compacted += o.Compacted
	c.Rejected += o.Rejected
	c.SavedBytes += o.SavedBytes
}

// RunResult sums up a run as it goes. It has no JSON form of its own: a run is shown as
// its recorded RunRow, everywhere.
type RunResult struct {
	RunID          int64
	Trigger        Trigger
	Mode           Mode
	DryRun         bool
	Status         RunStatus
	Error          string
	Counts         RunCounts
	ByStatus       map[SessionStatus]int
	ByStage        map[repair.Stage]int
	ByIssue        map[string]int
	ByDialect      map[string]int
	Compaction     CompactionCounts
	StartedAt      time.Time
	Duration       time.Duration
	ScannedFrom    time.Time
	ScannedThrough time.Time
	Outcomes       []SessionOutcome
}

// NewRunResult returns an empty result with its maps made.
func NewRunResult() RunResult {
	return RunResult{ByStatus: map[SessionStatus]int{}, ByStage: map[repair.Stage]int{},
		ByIssue: map[string]int{}, ByDialect: map[string]int{}}
}

// Add counts one session's outcome.
func (r *RunResult) Add(out SessionOutcome) {
	r.Count(out.Status, out.StageCounts, out.IssueCodeSet(), string(out.Dialect))
	if out.Compaction != nil {
		r.Compaction.Add(out.Compaction)
	}
}

// Count counts one session by its status, the stages that changed it, its issue codes
// and its dialect (counted only for sessions that were not clean).
func (r *RunResult) Count(status SessionStatus, stages map[repair.Stage]int, issues []string, dialect string) {
	r.AddStatus(status, 1)
	for st, n := range stages {
		r.ByStage[st] += n
	}
	for _, code := range issues {
		r.ByIssue[code]++
	}
	if dialect != "" && status != StatusClean {
		r.ByDialect[dialect]++
	}
}

// AddStatus counts n sessions of one status (no stages, issues or dialects).
func (r *RunResult) AddStatus(status SessionStatus, n int) {
	if n == 0 {
		return
	}
	c := &r.Counts
	c.Scanned += n
	r.ByStatus[status] += n
	switch status {
	case StatusClean, StatusCompacted, StatusWouldCompact, StatusCompactRejected:
		// Compacted sessions needed no repair; Compaction counts them.
		c.Clean += n
	case StatusRepaired, StatusWouldRepair:
		c.Repaired += n
	case StatusPending:
		c.Pending += n
	case StatusConflict:
		c.Conflict += n
	case StatusFailed:
		c.Failed += n
	default:
		c.Skipped += n
	}
}

// Merge adds the counts of o to r.
func (r *RunResult) Merge(o RunResult) {
	c, oc := &r.Counts, o.Counts
	c.Scanned += oc.Scanned
	c.Clean += oc.Clean
	c.Repaired += oc.Repaired
	c.Pending += oc.Pending
	c.Conflict += oc.Conflict
	c.Skipped += oc.Skipped
	c.Failed += oc.Failed
	c.Restored += oc.Restored
	c.Refused += oc.Refused
	for k, n := range o.ByStatus {
		r.ByStatus[k] += n
	}
	for k, n := range o.ByStage {
		r.ByStage[k] += n
	}
	for k, n := range o.ByIssue {
		r.ByIssue[k] += n
	}
	for k, n := range o.ByDialect {
		r.ByDialect[k] += n
	}
	r.Compaction.Merge(o.Compaction)
}

// Problems reports whether the dry run found sessions needing repair, compaction
// (--compact) or failing (its exit code). Sessions held after a rollback are not problems.
func (r *RunResult) Problems() bool {
	c := r.Counts
	return c.Repaired+c.Conflict+c.Failed+c.Skipped-r.ByStatus[StatusHeld]+r.Compaction.Compacted > 0
}

// Summary is what the run row keeps of the result.
func (r *RunResult) Summary() Summary {
	stages := map[string]int{}
	for st, n := range r.ByStage {
		stages[string(st)] = n
	}
	return Summary{ByStatus: r.ByStatus, ByStage: stages, ByDialect: r.ByDialect, ByIssue: r.ByIssue, Compaction: r.Compaction}
}

// ResultOf is the result a run row or partition row records: its counts and summary.
func ResultOf(c RunCounts, s Summary) RunResult {
	r := NewRunResult()
	r.Counts = c
	for k, n := range s.ByStatus {
		r.ByStatus[k] = n
	}
	for k, n := range s.ByStage {
		r.ByStage[repair.Stage(k)] = n
	}
	for k, n := range s.ByIssue {
		r.ByIssue[k] = n
	}
	for k, n := range s.ByDialect {
		r.ByDialect[k] = n
	}
	r.Compaction = s.Compaction
	return r
}

// Result is the result a recorded run adds up to.
func (r RunRow) Result() RunResult {
	res := ResultOf(r.Counts, r.Summary)
	res.RunID, res.Trigger, res.Mode, res.DryRun, res.Status, res.Error = r.ID, r.Trigger, r.Mode, r.DryRun, r.Status, r.Error
	res.StartedAt = r.StartedAt
	if r.FinishedAt != nil {
		res.Duration = r.FinishedAt.Sub(r.StartedAt)
	}
	if r.ScannedFrom != nil {
		res.ScannedFrom = *r.ScannedFrom
	}
	if r.ScannedThrough != nil {
		res.ScannedThrough = *r.ScannedThrough
	}
	res.Outcomes = r.Outcomes
	return res
}
