// Package report renders what tmend found and did, for people (aligned text) and for
// scripts (JSON Lines), from the same structs.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// Session is the outcome for one transcript.
type Session struct {
	Type         string               `json:"type"`             // always "session"
	File         string               `json:"file,omitempty"`   // in a directory walk
	Backup       string               `json:"backup,omitempty"` // fix --in-place: where the prior file is kept
	Session      string               `json:"session_id,omitempty"`
	Line         int                  `json:"line,omitempty"`
	Status       model.SessionStatus  `json:"status"`
	Dialect      repair.Dialect       `json:"dialect,omitempty"`
	Reason       string               `json:"reason,omitempty"`
	MessagesIn   int                  `json:"messages_in"`
	MessagesOut  int                  `json:"messages_out"`
	BytesIn      int                  `json:"before_bytes"`
	BytesOut     int                  `json:"after_bytes"`
	PendingCalls int                  `json:"pending_calls,omitempty"`
	StageCounts  map[repair.Stage]int `json:"stage_counts,omitempty"`
	Issues       []repair.Issue       `json:"issues,omitempty"`
	Actions      []repair.Action      `json:"actions,omitempty"`
	// A session file's entries off the leaf's path, left alone, and the branches (subtrees
	// off the path) they form.
	OffPath  int `json:"off_path_entries,omitempty"`
	Branches int `json:"branches,omitempty"`
	// The session file's last line was cut off mid-write: skipped, as pi does, and kept.
	CutOffLine bool `json:"cut_off_line,omitempty"`
}

// Name says which session this is: its id, else its line; in its file in a directory
// walk.
func (s *Session) Name() string {
	if s.File != "" {
		c := *s
		c.File = ""
		return s.File + ": " + c.Name()
	}
	switch {
	case s.Session != "":
		return s.Session
	case s.Line > 0:
		return fmt.Sprintf("line %d", s.Line)
	}
	return "input"
}

// Summary totals a batch of sessions.
type Summary struct {
	Type     string                      `json:"type"` // always "summary"
	Sessions int                         `json:"sessions"`
	ByStatus map[model.SessionStatus]int `json:"by_status"`
	ByStage  map[repair.Stage]int        `json:"by_stage,omitempty"`
	ByIssue  map[repair.IssueCode]int    `json:"by_issue,omitempty"`
	// A directory walk or --in-place: the files read, those rewritten (each with a backup
	// beside it), those skipped (symlinks) and the bytes read.
	Files          int   `json:"files,omitempty"`
	FilesRewritten int   `json:"files_rewritten,omitempty"`
	FilesSkipped   int   `json:"files_skipped,omitempty"`
	Bytes          int64 `json:"bytes,omitempty"`
	// InPlace is fix --in-place, which may rewrite files: only then does the text
	// report count those rewritten (check never rewrites any).
	InPlace bool `json:"-"`
}

// Add counts s into the summary.
func (sum *Summary) Add(s *Session) {
	sum.Type = "summary"
	sum.Sessions++
	if sum.ByStatus == nil {
		sum.ByStatus = map[model.SessionStatus]int{}
	}
	sum.ByStatus[s.Status]++
	for st, n := range s.StageCounts {
		if sum.ByStage == nil {
			sum.ByStage = map[repair.Stage]int{}
		}
		sum.ByStage[st] += n
	}
	for _, is := range s.Issues {
		if sum.ByIssue == nil {
			sum.ByIssue = map[repair.IssueCode]int{}
		}
		sum.ByIssue[is.Code]++
	}
}

// Handler receives sessions, then one summary.
type Handler interface {
	Session(*Session) error
	Summary(*Summary) error
}

// NewJSON writes each session and the summary as one JSON object per line.
func NewJSON(w io.Writer) Handler { return jsonHandler{json.NewEncoder(w)} }

type jsonHandler struct{ enc *json.Encoder }

func (h jsonHandler) Session(s *Session) error { s.Type = "session"; return h.enc.Encode(s) }
func (h jsonHandler) Summary(s *Summary) error {
	s.Type = "summary"
	if s.ByStatus == nil {
		s.ByStatus = map[model.SessionStatus]int{} // zero sessions: {}, not null
	}
	return h.enc.Encode(s)
}

// Detail says how much the text handler shows of each session.
type Detail int

const (
	SummaryOnly  Detail = iota // only the summary
	ProblemLines               // a line per session that is not clean
	EveryAction                // that line and each action under it
)

// NewText writes session lines as detail asks, then an aligned summary.
func NewText(w io.Writer, detail Detail) Handler { return &textHandler{w: w, detail: detail} }

type textHandler struct {
	w      io.Writer
	detail Detail
}

func (h *textHandler) Session(s *Session) error {
	if s.Status == model.StatusClean || h.detail == SummaryOnly {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s", Escape(s.Name()), Escape(s.Status))
	if s.Dialect != "" {
		fmt.Fprintf(&b, "\t%s", Escape(string(s.Dialect)))
	}
	if s.Reason != "" {
		fmt.Fprintf(&b, "\t%s", Escape(s.Reason))
	}
	if len(s.Issues) > 0 {
		fmt.Fprintf(&b, "\t%s", issueList(s.Issues))
	}
	if s.Status == model.StatusRepaired {
		fmt.Fprintf(&b, "\t%d→%d messages", s.MessagesIn, s.MessagesOut)
	}
	if s.PendingCalls > 0 {
		fmt.Fprintf(&b, "\t%d pending calls", s.PendingCalls)
	}
	b.WriteByte('\n')
	if h.detail == EveryAction {
		for _, a := range s.Actions {
			b.WriteString(actionLine("  ", a))
		}
	}
	_, err := io.WriteString(h.w, strings.ReplaceAll(b.String(), "\t", "  "))
	return err
}

func issueList(issues []repair.Issue) string {
	counts := map[repair.IssueCode]int{}
	var order []repair.IssueCode
	for _, is := range issues {
		if counts[is.Code] == 0 {
			order = append(order, is.Code)
		}
		counts[is.Code]++
	}
	var parts []string
	for _, c := range order {
		if counts[c] > 1 {
			parts = append(parts, fmt.Sprintf("%s×%d", Escape(string(c)), counts[c]))
		} else {
			parts = append(parts, Escape(string(c)))
		}
	}
	return strings.Join(parts, " ")
}

func (h *textHandler) Summary(s *Summary) error {
	tw := tabwriter.NewWriter(h.w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	if s.Files > 0 {
		p.printf("files\t%d (%d bytes)\n", s.Files, s.Bytes)
		if s.InPlace {
			p.printf("  rewritten\t%d\n", s.FilesRewritten)
		}
		if s.FilesSkipped > 0 {
			p.printf("  skipped\t%d\n", s.FilesSkipped)
		}
	}
	p.printf("sessions\t%d\n", s.Sessions)
	for _, k := range sortedKeys(s.ByStatus) {
		p.printf("  %s\t%d\n", Escape(k), s.ByStatus[k])
	}
	if len(s.ByStage) > 0 {
		p.printf("actions by stage\t\n")
		for _, st := range repair.Stages() {
			if n := s.ByStage[st]; n > 0 {
				p.printf("  %s\t%d\n", st, n)
			}
		}
	}
	if len(s.ByIssue) > 0 {
		p.printf("issues\t\n")
		for _, c := range repair.IssueCodes() {
			if n := s.ByIssue[c.Code]; n > 0 {
				p.printf("  %s\t%d\n", c.Code, n)
			}
		}
	}
	return p.flush(tw)
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
