// Package model holds the plain records the scanner, the store and report share: sessions,
// runs and their results, audit rows, and the typed session and run statuses. It has no
// database code, so the scanner and report can depend on it (and tests can fake the store)
// without importing pgx; the store implements the scanner's interface with these types.
package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/tmend/tmend/repair"
)

// ErrUnavailable marks failures of the database itself (connection lost, server shutting
// down), as opposed to an error about one statement: worth retrying with backoff.
var ErrUnavailable = errors.New("database unavailable")

// ErrNotFound marks a run, session or version that does not exist.
var ErrNotFound = errors.New("not found")

// ErrBusy is the error of starting a scan while another scan of the source is running.
var ErrBusy = errors.New("another tmend run is in progress on this source; try again when it ends")

// Session is one stored transcript as read for a run.
type Session struct {
	ID string
	// Messages is the column's text; nil when the session is larger than the run's limit.
	Messages []byte
	Size     int
	// Null is set when the messages column is SQL NULL (Messages is nil).
	Null bool
	// Deferred is set on the last session of a page whose content would have taken the
	// page over its byte limit: Messages is nil; read it alone (ModeSession) when there
	// is room for Size bytes.
	Deferred  bool
	UpdatedAt time.Time // zero when the source has no updated-at column
	// Position is the updated-at column's value as stored, for keyset cursors: for a
	// timestamp column, the wall clock labelled UTC (UpdatedAt is the point in time).
	Position time.Time
	// HoldHash is set when a rollback asked scheduled runs to leave the session alone
	// while its content hashes to this.
	HoldHash string
	// Rows are the session's rows in order, for a table that keeps one row per message:
	// Messages is their messages joined into an array, one each. The store matches them
	// again when it writes the session; nil for a table that keeps one row per session.
	Rows *Rows
	// Head is the state read, for a store that keeps its own history (LangGraph: the
	// thread's newest checkpoint id): the store writes only while it is still the newest.
	Head string
	// Unreadable says why the store could not give the session's messages (a blob in a
	// format tmend does not read, a missing one): reported unparseable, left alone.
	Unreadable string
	// InFlight says why the session is being written now (LangGraph: pending writes to
	// its messages): reported pending, left for the next run.
	InFlight string
	// Release is set when Messages is the store's own read buffer rather than a copy
	// (Query.Borrow): the store holds the read open until it is called, once, after the
	// last use of Messages and of anything sliced from it. The scanner also ends its
	// hold on a session handled alone there (Config.Alone).
	Release func()
}

// Rows are the stored rows of a session kept one row per message, in order: for each,
// its primary key as text, its order value (an integer, or a timestamp in microseconds
// since 1970), and the transaction that wrote the version read (Postgres's xmin), which
// every update or re-insert of the row changes: the write checks the rows it locks
// against them. Held as arrays, 16 bytes a row and its key's bytes, rather than a record
// of 32: a session of half a million tiny messages has as many rows, all held at the peak
// of its repair.
type Rows struct {
	keys  string   // the keys one after another
	ends  []int32  // where each key ends in keys
	ords  []int64  // the order values
	xmins []uint32 // the xmins
}

// NewRows returns the rows whose keys are keys cut at ends, with their orders and xmins,
// one each; it keeps the slices.
func NewRows(keys string, ends []int32, orders []int64, xmins []uint32) *Rows {
	if len(orders) != len(ends) || len(xmins) != len(ends) {
		panic("model: rows of unequal lengths")
	}
	return &Rows{keys: keys, ends: ends, ords: orders, xmins: xmins}
}

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.ends) }

// Key is row i's primary key as text.
func (r *Rows) Key(i int) string {
	from := int32(0)
	if i > 0 {
		from = r.ends[i-1]
	}
	return r.keys[from:r.ends[i]]
}

// Order is row i's order value.
func (r *Rows) Order(i int) int64 { return r.ords[i] }

// Xmin is the transaction that wrote row i's version read.
func (r *Rows) Xmin(i int) uint32 { return r.xmins[i] }

// ContentHash is the hash tmend records for a content: hex SHA-256 of its text.
func ContentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Mode is what a run scans.
type Mode string

// The run modes.
const (
	ModeIncremental Mode = "incremental" // changed since the last completed run, with an overlap
	ModeFull        Mode = "full"
	ModeSession     Mode = "session"
	ModeRollback    Mode = "rollback"
)

// Modes lists the run modes.
func Modes() []Mode { return []Mode{ModeIncremental, ModeFull, ModeSession, ModeRollback} }

// Trigger is who started a run.
type Trigger string

// The triggers.
const (
	TriggerCron Trigger = "cron"
	TriggerCLI  Trigger = "cli"
	TriggerAPI  Trigger = "api"
)

// Triggers lists the triggers.
func Triggers() []Trigger { return []Trigger{TriggerCron, TriggerCLI, TriggerAPI} }

// The actors of runs started by the daemon; the CLI's actor is the OS user. Writes
// through the API and the console need the write token, hence ":write".
const (
	ActorCron    = "cron"
	ActorAPI     = "api:write"
	ActorConsole = "console:write"
)

// Origin is which tmend binary, on which host, wrote a run or report row; the store
// stamps every row it writes with its own.
type Origin struct {
	Version string
	Host    string
}

// Cursor is a keyset position: after (UpdatedAt, ID) in incremental runs, after ID in
// full runs. The zero Cursor is the start.
type Cursor struct {
	Position time.Time // the updated-at column's value, as Session.Position
	ID       string
	Started  bool
}

// Query selects one page of sessions.
type Query struct {
	Mode      Mode
	SessionID string    // ModeSession
	From, To  time.Time // ModeIncremental: From <= updated_at < To
	After     Cursor
	Limit     int
	MaxBytes  int // sessions larger than this come without Messages
	// PageBytes bounds the content of one page (0: no bound); see Session.Deferred.
	PageBytes int
	// Slice limits a full or incremental page to one partition of the sessions.
	Slice Slice
	// NoRows leaves Session.Rows out (a dry run writes nothing by them).
	NoRows bool
	// Borrow asks, for ModeSession, that Messages be left in the read buffer rather than
	// copied out of it, and that the read be held open until Session.Release (which a
	// store may leave nil: then Messages is a copy). For a session read alone, where the
	// copy would double what the read holds; each borrowed session holds a connection.
	// A store that borrows also writes a repair given in pieces (Apply.NewPieces).
	Borrow bool
}

// Slice is one partition of the sessions: those whose id is greater than Lower and at
// most Upper, in the id column's order, with the ids as text. A nil bound is open; the
// zero Slice is every session.
type Slice struct {
	Lower, Upper *string
}

// Report is one audit row.
type Report struct {
	RunID       int64
	SessionID   string
	Status      SessionStatus
	Trigger     Trigger
	Actor       string // who started the run (see Run.Actor)
	Dialect     string
	Reason      string
	IssueCodes  []string
	StageCounts map[repair.Stage]int
	Actions     []repair.Action
	BeforeHash  string
	AfterHash   string
	BeforeBytes int
	AfterBytes  int
	FromVersion int
	ToVersion   int
	// Lease, when set, is the partition attempt that writes the report: it commits
	// only while that attempt still holds the partition (ErrLeaseLost otherwise), so
	// that no report of a run commits after the run ended or the partition moved on.
	Lease *Lease
}

// Lease names one attempt at one partition of a run (Claim.Attempt).
type Lease struct {
	RunID     int64
	Partition int
	Attempt   int
}

// Apply asks the store to replace a session's content with a repaired one, provided the
// content is still what was read.
type Apply struct {
	RunID       int64
	Trigger     Trigger
	Session     Session // as read: its Messages are the expected current content
	NewMessages []byte
	// NewPieces, when set instead of NewMessages, are the repaired content in pieces
	// (repair.RepairPieces) that the store writes as they are, joined: for a session read
	// borrowed (Query.Borrow), whose store takes them. Those of the session's own bytes
	// are valid until its Release.
	NewPieces [][]byte
	// Origins, for a session kept one row per message (Session.Rows), are its repaired
	// messages in order and where each came from (repair.RepairWithOrigins), written by
	// this map instead of NewMessages.
	Origins []repair.Origin
	Report  Report
	// Compaction, when set, says NewMessages is also compacted: the store keeps it with
	// the written version, for rollback and 'report --cleared'.
	Compaction *Compaction
}

// Compaction is what the store keeps of a compacted write: how many messages the
// compacted prefix holds, that prefix's text before compaction (from the first
// message's start to the end of message Boundary-1, as in the content compacted), and
// the compaction's report. A rollback after the platform appended turns puts Prefix
// back in front of the current suffix.
type Compaction struct {
	Boundary int
	Prefix   []byte
	Report   []byte // compact.Report as JSON
}

// Outcome is what became of an Apply.
type Outcome struct {
	Applied     bool
	Conflict    bool // not applied: the content changed since it was read; a conflict row was recorded
	FromVersion int  // the saved prior content
	ToVersion   int  // the saved repaired content
}

// Run is a repair_runs row being started.
type Run struct {
	Trigger Trigger
	// Actor is who started it: the OS user for the CLI, ActorAPI, ActorConsole, ActorCron.
	Actor   string
	Mode    Mode
	DryRun  bool
	Source  string
	Options RunOptions
}

// RunCounts are a run's totals. In JSON they are part of a RunRow, whose MarshalJSON
// names them.
type RunCounts struct {
	Scanned  int `json:"scanned"`
	Clean    int `json:"clean"`
	Repaired int `json:"repaired"`
	Pending  int `json:"pending"`
	Conflict int `json:"conflict"`
	Skipped  int `json:"skipped"`
	Failed   int `json:"failed"`
	// Restored and Refused count a rollback run's sessions.
	Restored int `json:"restored,omitempty"`
	Refused  int `json:"refused,omitempty"`
}

// Finish closes a run.
type Finish struct {
	RunID          int64
	Status         RunStatus
	Counts         RunCounts
	ScannedFrom    time.Time
	ScannedThrough time.Time
	Error          string
	// AdvanceScanState moves the source's incremental position to ScannedThrough.
	AdvanceScanState bool
	Source           string
	// Summary is kept on the run row: totals by status, stage, dialect and issue code.
	Summary Summary
}

// Summary is a run's totals by category.
type Summary struct {
	ByStatus  map[SessionStatus]int `json:"by_status"`
	ByStage   map[string]int        `json:"by_stage"`
	ByDialect map[string]int        `json:"by_dialect"`
	ByIssue   map[string]int        `json:"by_issue"`
	// Compaction counts the run's compactions (--compact).
	Compaction CompactionCounts `json:"compaction,omitzero"`
}

// RunRow is a recorded run.
type RunRow struct {
	ID           int64   `json:"id"`
	Trigger      Trigger `json:"trigger"`
	Actor        string  `json:"actor,omitempty"`
	TmendVersion string  `json:"tmend_version,omitempty"`
	Host         string  `json:"host,omitempty"`
	Mode         Mode    `json:"mode"`
	DryRun       bool    `json:"dry_run"`
	// Source is the sessions' table as users see it, the source's key
	// (schema.table(id_column,messages_column)); ScanSource is the name the source's
	// incremental position and running runs are kept under (store.Source.Name).
	Source         string         `json:"source"`
	ScanSource     string         `json:"-"`
	Options        map[string]any `json:"options"`
	Status         RunStatus      `json:"status"`
	StartedAt      time.Time      `json:"started_at"`
	FinishedAt     *time.Time     `json:"finished_at"`
	ScannedFrom    *time.Time     `json:"scanned_from"`
	ScannedThrough *time.Time     `json:"scanned_through"`
	Counts         RunCounts      `json:"counts"`
	Summary        Summary        `json:"summary"`
	Error          string         `json:"error,omitempty"`
	// Partitions is how many partitions (jobs) a scan was split into.
	Partitions int `json:"partitions"`
	// Outcomes are the sessions' outcomes, which a single-session run (repair, scan
	// --session, the API's repair) shows with its row; they are not recorded on it.
	Outcomes []SessionOutcome `json:"outcomes,omitempty"`
}

// MarshalJSON writes the run as it is shown everywhere (the CLI's --json and the HTTP
// API). A dry run changed nothing, so its counts say would_repair (would_restore for a
// rollback) where a real run's say repaired (restored), as its sessions' statuses do.
func (r RunRow) MarshalJSON() ([]byte, error) {
	type row RunRow // without this method
	return json.Marshal(struct {
		row
		Counts countsJSON `json:"counts"`
	}{row(r), r.Counts.json(r.DryRun)})
}

// countsJSON is RunCounts as JSON: a dry run has would_repair and would_restore, a real
// run repaired and restored (these two only in a rollback run).
type countsJSON struct {
	Scanned      int  `json:"scanned"`
	Clean        int  `json:"clean"`
	Repaired     *int `json:"repaired,omitempty"`
	WouldRepair  *int `json:"would_repair,omitempty"`
	Pending      int  `json:"pending"`
	Conflict     int  `json:"conflict"`
	Skipped      int  `json:"skipped"`
	Failed       int  `json:"failed"`
	Restored     int  `json:"restored,omitempty"`
	WouldRestore int  `json:"would_restore,omitempty"`
	Refused      int  `json:"refused,omitempty"`
}

func (c RunCounts) json(dryRun bool) countsJSON {
	out := countsJSON{Scanned: c.Scanned, Clean: c.Clean, Pending: c.Pending, Conflict: c.Conflict, Skipped: c.Skipped,
		Failed: c.Failed, Refused: c.Refused}
	if dryRun {
		out.WouldRepair, out.WouldRestore = &c.Repaired, c.Restored
	} else {
		out.Repaired, out.Restored = &c.Repaired, c.Restored
	}
	return out
}

// ReportRow is a recorded audit row.
type ReportRow struct {
	ID        int64         `json:"id"`
	RunID     *int64        `json:"run_id"`
	SessionID string        `json:"session_id"`
	Status    SessionStatus `json:"status"`
	Trigger   Trigger       `json:"trigger"`
	Actor     string        `json:"actor,omitempty"`
	// TmendVersion and Host are the binary that wrote the row, and where it ran: for a
	// scan worked by several processes, the one that handled the session.
	TmendVersion string          `json:"tmend_version,omitempty"`
	Host         string          `json:"host,omitempty"`
	Dialect      string          `json:"dialect,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	IssueCodes   []string        `json:"issue_codes"`
	StageCounts  map[string]int  `json:"stage_counts"`
	Actions      []repair.Action `json:"actions"`
	BeforeHash   string          `json:"before_hash,omitempty"`
	AfterHash    string          `json:"after_hash,omitempty"`
	BeforeBytes  int             `json:"before_bytes,omitempty"`
	AfterBytes   int             `json:"after_bytes,omitempty"`
	FromVersion  int             `json:"from_version,omitempty"`
	ToVersion    int             `json:"to_version,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
}

// VersionRow is a saved content; Content is empty in listings.
type VersionRow struct {
	SessionID   string    `json:"session_id"`
	Version     int       `json:"version"`
	Kind        string    `json:"kind"`
	ContentHash string    `json:"content_hash"`
	SizeBytes   int       `json:"size_bytes"`
	RunID       *int64    `json:"run_id"`
	CreatedAt   time.Time `json:"created_at"`
	Content     string    `json:"content,omitempty"`
}

// ReportFilter selects audit rows; zero fields do not filter. Results come newest first,
// after Cursor (an id from a previous page's last row) when set.
type ReportFilter struct {
	RunID     int64
	SessionID string
	Since     time.Time
	Until     time.Time
	Status    SessionStatus
	Stage     string
	Issue     string
	Dialect   string
	Cursor    int64
	Limit     int
}

// RunFilter selects runs, newest first.
type RunFilter struct {
	Since, Until time.Time
	Status       RunStatus
	Trigger      Trigger
	// Modes, when set, keeps the runs of these modes.
	Modes []Mode
	// CompactRejected keeps the runs that counted a compaction rejected by its checks.
	CompactRejected bool
	// ThisSource keeps the runs of the store's own source (its table mapping).
	ThisSource bool
	Cursor     int64
	Limit      int
}
