package model

import (
	"errors"
	"time"
)

// NewRun is a scan to record and split into partitions.
type NewRun struct {
	Run
	// Partitions is how many partitions to aim for; the run may get fewer, one per
	// distinct range its sample of the ids gives.
	Partitions int
	// ScannedFrom starts an incremental run's window; the window ends when the run is
	// recorded (the database's clock), which is also the run's Now for quiet periods.
	ScannedFrom time.Time
	// Owner is the River client id of the process that starts the run and waits for it
	// (tmend scan): the run lives while that process does. Empty for runs that any
	// worker carries on (the daemon's).
	Owner string
}

// RunSpec is what every partition of a run needs to know about it: the recorded run and
// the options its creator chose, so that all partitions, on any machine, do the same.
type RunSpec struct {
	RunRow
	Options RunOptions
}

// RunOptions are a run's options as recorded on its row (repair_runs.options); every
// partition of a scan repairs with them, on whatever machine it runs.
type RunOptions struct {
	Limit       int    `json:"limit,omitempty"`
	Force       bool   `json:"force,omitempty"`
	MaxBytes    int    `json:"max_bytes,omitempty"`
	Overlap     string `json:"overlap,omitempty"`
	QuietPeriod string `json:"quiet_period,omitempty"`
	FailedTurns string `json:"failed_turns,omitempty"`
	Target      string `json:"target,omitempty"`
	Dialect     string `json:"dialect,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	RollbackOf  int64  `json:"rollback_of_run,omitempty"`
	// Compact is the compaction profile of a run with --compact; "" for none.
	Compact string `json:"compact,omitempty"`
}

// PartitionStatus is where one partition of a run is.
type PartitionStatus string

// The partition statuses; the last three are final.
const (
	PartitionPending   PartitionStatus = "pending"
	PartitionRunning   PartitionStatus = "running"
	PartitionCompleted PartitionStatus = "completed"
	PartitionFailed    PartitionStatus = "failed"
	PartitionCancelled PartitionStatus = "cancelled"
)

// Claim is a partition handed to one job attempt.
type Claim struct {
	Run       RunSpec
	Partition int
	Slice     Slice
	// Attempt identifies this claim: checkpoints of an older attempt are refused.
	Attempt int
	// Done is set when there is nothing to do: the partition or its run already ended.
	Done bool
	// After and So far are the last checkpoint: where to resume and what was counted
	// up to there. Resumed is set when an earlier attempt worked the partition, so
	// sessions past the checkpoint may already be reported.
	After   Cursor
	SoFar   RunResult
	Resumed bool
}

// Checkpoint records a partition's progress: every session up to After is handled and
// counted in SoFar.
type Checkpoint struct {
	RunID     int64
	Partition int
	Attempt   int
	After     Cursor
	SoFar     RunResult
}

// PartitionEnd closes a partition; a zero Attempt closes it whatever attempt holds it.
type PartitionEnd struct {
	Checkpoint
	Status PartitionStatus
	Error  string
}

// ErrLeaseLost is a checkpoint's error when a newer attempt (or a cancel) took the
// partition over: the attempt must stop without writing anything more.
var ErrLeaseLost = errors.New("the partition was taken over by another attempt, or its run was cancelled")

// PartitionRow is one partition of a run as an operator sees it: where it is, what it
// counted up to its last checkpoint, and the River client working it.
type PartitionRow struct {
	Partition int
	Status    PartitionStatus
	Attempt   int
	Scanned   int
	Repaired  int
	Failed    int
	// Worker is the River client id of the job's latest attempt (empty before one).
	Worker    string
	Error     string
	UpdatedAt time.Time
}
