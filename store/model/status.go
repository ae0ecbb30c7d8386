package model

import (
	"fmt"
	"strings"

	"github.com/tmend/tmend/repair"
)

// SessionStatus is what became of one session in a run, a rollback or a file check: the
// status of its report row. The engine's statuses (repair.Status) are among them. These
// strings are audit rows and JSON output: they never change once shipped.
type SessionStatus string

// The session statuses. Every status a report row, an outcome or a file report may carry
// is here; SessionStatuses lists them.
const (
	StatusClean          = SessionStatus(repair.StatusClean)
	StatusRepaired       = SessionStatus(repair.StatusRepaired)
	StatusPending        = SessionStatus(repair.StatusPending)
	StatusUnparseable    = SessionStatus(repair.StatusUnparseable)
	StatusUnknownDialect = SessionStatus(repair.StatusUnknownDialect)
	StatusUnsupported    = SessionStatus(repair.StatusUnsupported)
	StatusBroken         = SessionStatus(repair.StatusBroken) // check: faults a repair would fix

	StatusWouldRepair SessionStatus = "would_repair"                       // dry run
	StatusConflict    SessionStatus = "conflict"                           // the session changed between read and write
	StatusFailed      SessionStatus = "failed"                             // an error while handling it; the run went on
	StatusTooLarge                  = SessionStatus(repair.StatusTooLarge) // over the size or memory limit; left alone
	StatusRolledBack  SessionStatus = "rolled_back"                        // a rollback restored a saved version
	StatusRefused     SessionStatus = "rollback_refused"                   // a rollback left it alone, with the reason
	StatusHeld        SessionStatus = "held"                               // rolled back earlier; not a problem, no report row
)

// Compaction (scan and repair --compact) of a session that needed no repair; a repaired
// session that was also compacted keeps status repaired, and its outcome and the run's
// Compaction counts say so.
const (
	StatusCompacted       SessionStatus = "compacted"
	StatusWouldCompact    SessionStatus = "would_compact"    // dry run
	StatusCompactRejected SessionStatus = "compact_rejected" // the compacted content failed a check; nothing of it written
)

// SessionStatuses returns every session status, the engine's first.
func SessionStatuses() []SessionStatus {
	return []SessionStatus{
		StatusClean, StatusRepaired, StatusPending, StatusUnparseable, StatusUnknownDialect, StatusUnsupported, StatusBroken,
		StatusWouldRepair, StatusConflict, StatusFailed, StatusTooLarge, StatusRolledBack, StatusRefused, StatusHeld,
		StatusCompacted, StatusWouldCompact, StatusCompactRejected,
	}
}

// EngineStatus is the session status for an engine status.
func EngineStatus(s repair.Status) SessionStatus { return SessionStatus(s) }

// ParseSessionStatus returns the session status named s, or an error listing the valid ones.
func ParseSessionStatus(s string) (SessionStatus, error) {
	for _, st := range SessionStatuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown session status %q (one of %s)", s, join(SessionStatuses()))
}

// RunStatus is the state of a run.
type RunStatus string

// The run statuses; RunStatuses lists them.
const (
	RunRunning   RunStatus = "running"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
	// RunAbandoned: every process working the scan died before it ended; the next scan
	// of its source found no live process working it and ended it (store.CreateRun).
	RunAbandoned RunStatus = "abandoned"
)

// RunStatuses returns every run status.
func RunStatuses() []RunStatus {
	return []RunStatus{RunRunning, RunCompleted, RunFailed, RunCancelled, RunAbandoned}
}

// ParseRunStatus returns the run status named s, or an error listing the valid ones.
func ParseRunStatus(s string) (RunStatus, error) {
	for _, st := range RunStatuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown run status %q (one of %s)", s, join(RunStatuses()))
}

func join[S ~string](list []S) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}
