// Package compact shrinks the tool history of a stored transcript without breaking it:
// it rewrites only the contents of old tool results and call inputs, never adds, removes
// or moves a call, result, message or block, and checks before every write that pairs,
// positions and the transcript's recent suffix are exactly as they were (see
// docs in README.md, "Compaction"). It makes no model calls.
package compact

import (
	"sort"

	"github.com/tmend/tmend/repair"
)

// Status is what happened to one transcript. The strings never change.
type Status string

// The statuses.
const (
	StatusCompacted Status = "compacted"
	StatusSkipped   Status = "compact_skipped"
	// StatusRejected: the compacted transcript failed a check (Report.Reason says which);
	// the input is kept unchanged.
	StatusRejected Status = "compact_rejected"
)

// Skip reasons.
const (
	SkipUnreadable   = "unreadable"
	SkipHasIssues    = "has_issues"
	SkipNoDialect    = "dialect_not_supported"
	SkipNoToolCalls  = "no_tool_calls" // no dialect to detect: nothing compaction clears
	SkipTooSmall     = "below_min_tokens"
	SkipRecent       = "recently_active"
	SkipNothing      = "nothing_to_clear"
	SkipClearAtLeast = "below_clear_at_least"
)

// Action is one content compaction replaced.
type Action struct {
	Rule         Rule     `json:"rule"`
	Target       string   `json:"target"` // "result" or "input"
	CallID       string   `json:"call_id,omitempty"`
	Tool         string   `json:"tool"`
	Category     Category `json:"category"`
	MessageIndex int      `json:"message_index"`
	PartIndex    int      `json:"part_index"`
	BytesBefore  int      `json:"bytes_before"`
	BytesAfter   int      `json:"bytes_after"`
}

// Count sums up actions.
type Count struct {
	Count       int `json:"count"`
	BytesBefore int `json:"bytes_before"`
	BytesAfter  int `json:"bytes_after"`
}

func (c *Count) add(a Action) {
	c.Count++
	c.BytesBefore += a.BytesBefore
	c.BytesAfter += a.BytesAfter
}

// Tiers counts tool uses per tier: protected (system and first turn), history (may be
// compacted), recent (kept whole) and current (the last user turn and unanswered calls).
type Tiers struct {
	Protected int `json:"protected"`
	History   int `json:"history"`
	Recent    int `json:"recent"`
	Current   int `json:"current"`
}

// Report says what Compact found and did.
type Report struct {
	Status  Status         `json:"status"`
	Reason  string         `json:"reason,omitempty"`
	Dialect repair.Dialect `json:"dialect,omitempty"`
	// BytesBefore and BytesAfter are the messages array's sizes; tokens are estimated
	// as bytes/4.
	BytesBefore int `json:"bytes_before"`
	BytesAfter  int `json:"bytes_after"`
	// Boundary is the index of the first message kept byte for byte: only messages
	// before it may change.
	Boundary int              `json:"boundary"`
	Tiers    Tiers            `json:"tiers"`
	Calls    int              `json:"calls"`
	Results  int              `json:"results"`
	ByRule   map[Rule]Count   `json:"by_rule,omitempty"`
	ByTool   map[string]Count `json:"by_tool,omitempty"`
	Actions  []Action         `json:"actions,omitempty"`
}

// SavedBytes is what the compaction saved (or would save, when skipped for a gate).
func (r *Report) SavedBytes() int { return r.BytesBefore - r.BytesAfter }

// EstTokens estimates tokens as bytes/4, the rule of thumb providers publish.
func EstTokens(bytes int) int { return bytes / 4 }

// Result is a compacted transcript.
type Result struct {
	// Messages is the output: the input itself unless the status is StatusCompacted.
	Messages []byte
	Report   Report
}

// Compact compacts the transcript msgs (a JSON array of messages, already repaired: a
// transcript with issues is skipped). It never fails: what it cannot read or check it
// leaves alone, saying why in the report.
func Compact(msgs []byte, opts Options) Result {
	res := Result{Messages: msgs, Report: Report{BytesBefore: len(msgs), BytesAfter: len(msgs)}}
	rep := &res.Report
	skip := func(reason string) Result {
		rep.Status, rep.Reason = StatusSkipped, reason
		return res
	}
	ropts := repair.Options{Dialect: opts.Dialect, QuietPeriod: -1}
	v, err := repair.Validate(msgs, ropts)
	if err != nil {
		return skip(SkipUnreadable)
	}
	rep.Dialect = v.Dialect
	if len(v.Issues) > 0 {
		return skip(SkipHasIssues)
	}
	switch {
	case v.Dialect == "":
		return skip(SkipNoToolCalls)
	case !supported(v.Dialect):
		return skip(SkipNoDialect)
	}
	ol, err := repair.Inspect(msgs, repair.Options{Dialect: v.Dialect})
	if err != nil {
		return skip(SkipUnreadable)
	}
	t := newTranscript(msgs, ol, &opts)
	rep.Calls, rep.Results, rep.Tiers = t.calls, t.results, t.tiers
	rep.Boundary = t.boundary
	if EstTokens(len(msgs)) < opts.MinTokens {
		return skip(SkipTooSmall)
	}
	edits := t.plan()
	if len(edits) == 0 {
		return skip(SkipNothing)
	}
	out := apply(msgs, edits)
	rep.BytesAfter = len(out)
	rep.ByRule, rep.ByTool = map[Rule]Count{}, map[string]Count{}
	for _, e := range edits {
		rep.Actions = append(rep.Actions, e.action)
		c := rep.ByRule[e.action.Rule]
		c.add(e.action)
		rep.ByRule[e.action.Rule] = c
		c = rep.ByTool[e.action.Tool]
		c.add(e.action)
		rep.ByTool[e.action.Tool] = c
	}
	if EstTokens(rep.SavedBytes()) < opts.ClearAtLeast {
		return skip(SkipClearAtLeast)
	}
	if !opts.UpdatedAt.IsZero() && opts.IdleFor > 0 && opts.Now.Sub(opts.UpdatedAt) < opts.IdleFor {
		return skip(SkipRecent)
	}
	if why := verify(msgs, out, ol, t, v); why != "" {
		rep.Status, rep.Reason = StatusRejected, why
		rep.BytesAfter = len(msgs)
		return res
	}
	res.Messages = out
	rep.Status = StatusCompacted
	return res
}

// edit replaces msgs[start:end] with data.
type edit struct {
	start, end int
	data       []byte
	action     Action
}

// apply writes msgs with edits (sorted, not overlapping) applied; every other byte is
// copied as it is.
func apply(msgs []byte, edits []edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	n := len(msgs)
	for _, e := range edits {
		n += len(e.data) - (e.end - e.start)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, e := range edits {
		out = append(out, msgs[at:e.start]...)
		out = append(out, e.data...)
		at = e.end
	}
	return append(out, msgs[at:]...)
}

// Document compacts the transcript of document b (a messages array, or an envelope
// holding one, as repair.ParseDocument reads it); an updated_at in the envelope is the
// session's for IdleFor. Result.Messages is the whole output document.
func Document(b []byte, opts Options) Result {
	doc, err := repair.ParseDocument(b)
	if err != nil {
		return Result{Messages: b, Report: Report{Status: StatusSkipped, Reason: SkipUnreadable,
			BytesBefore: len(b), BytesAfter: len(b)}}
	}
	if !doc.UpdatedAt.IsZero() {
		opts.UpdatedAt = doc.UpdatedAt
	}
	msgs := doc.Messages()
	res := Compact(msgs, opts)
	at, ok := offsetIn(b, msgs)
	if res.Report.Status != StatusCompacted || !ok {
		res.Messages = b
		return res
	}
	out := make([]byte, 0, len(b)-res.Report.SavedBytes())
	out = append(append(append(out, b[:at]...), res.Messages...), b[at+len(msgs):]...)
	res.Messages = out
	return res
}
