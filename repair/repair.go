// Package repair validates and repairs LLM conversation transcripts whose tool calls and
// tool results are out of step. It is pure: no I/O, clock, randomness or environment.
//
// A transcript is a JSON array of messages in one of seven dialects (see Dialects). Repair
// returns the repaired array and a Report of every action, grouped in fixed stages;
// Validate reports the same faults as stable issue codes without changing anything.
// Untouched messages keep their exact bytes; touched ones keep unknown fields and the
// exact text of their numbers.
package repair

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultQuietPeriod is how long after a session's last change the calls of its last turn
// are still taken to be running.
const DefaultQuietPeriod = 10 * time.Minute

// FailedTurnPolicy says what happens to calls of a turn that ended in error or abort
// whose results did arrive.
type FailedTurnPolicy string

const (
	// FailedTurnsKeep keeps such calls with their results (the default).
	FailedTurnsKeep FailedTurnPolicy = "keep"
	// FailedTurnsStrip removes them and their results too, for clients that drop failed
	// turns before sending.
	FailedTurnsStrip FailedTurnPolicy = "strip"
)

// Options tune a repair. The zero value detects the dialect and applies no quiet period.
type Options struct {
	// Dialect forces a dialect; "" detects it.
	Dialect Dialect
	// Now and UpdatedAt (the session's last change) decide the quiet period: while
	// Now-UpdatedAt < QuietPeriod, calls of the last turn may still be running and get no
	// synthetic result. Either one zero means no quiet period.
	Now, UpdatedAt time.Time
	// QuietPeriod defaults to DefaultQuietPeriod; negative disables it.
	QuietPeriod time.Duration
	// Force repairs pending calls too.
	Force bool
	// FailedTurns defaults to FailedTurnsKeep.
	FailedTurns FailedTurnPolicy
	// Target rewrites call ids the provider would reject; "" rewrites none.
	Target Target
}

// Result is a repaired transcript with its report.
type Result struct {
	// Messages is the repaired JSON array; when nothing changed, the input itself.
	Messages []byte
	Report   Report
}

// Changed reports whether Messages differs from the input.
func (r *Result) Changed() bool { return r.Report.Status == StatusRepaired }

// Repair repairs the transcript msgs (a JSON array of messages). A transcript tmend will
// not touch (not JSON, not an array of objects, mixed dialects) comes back unchanged with
// an *UnrepairableError whose status and reason the report repeats.
func Repair(msgs []byte, opts Options) (Result, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return Result{Messages: msgs, Report: p.report}, err
	}
	if len(p.report.Actions) == 0 {
		p.report.MessagesOut = p.report.MessagesIn
		return Result{Messages: msgs, Report: p.report}, nil
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	return Result{Messages: joinArray(out), Report: p.report}, nil
}

// StatusBroken is Validate's status for a transcript with faults a repair would fix.
const StatusBroken Status = "broken"

// Validate reports the faults of msgs without changing anything. The report's Actions
// are what Repair would do. Status is clean, pending, broken, or as for Repair.
func Validate(msgs []byte, opts Options) (Report, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return p.report, err
	}
	r := p.report
	r.MessagesOut = r.MessagesIn
	if len(r.Issues) > 0 {
		r.Status = StatusBroken
	}
	return r, nil
}

type callRef struct {
	msg, part int
	key       string
	turn      int
	results   []int // indices into plan.results, in transcript order
	removed   bool
}

type resultRef struct {
	msg, part int
	key       string
	call      int  // -1: no call
	slotted   bool // in the slot of its call's turn
	inSlot    bool // slotted and, where the dialect needs it, ahead of other parts
}

type turnRef struct {
	first, last int // message range (one message except for Responses item runs)
	slotLast    int // whole dialects: last message of the result run after the turn, or last
	slotMsg     int // block dialects: the user message taking the results, or -1
	incoming    []incoming
}

// incoming is a result to place in a turn's slot: a moved one or a synthetic one.
type incoming struct {
	call   int
	result int // -1 for synthetic
}

type edit struct {
	drop    bool
	stage   Stage  // why it was dropped
	removed []bool // per part
	dirty   bool
}

type plan struct {
	ps      parser
	sc      scanner
	opts    Options
	msgs    []message
	spec    *spec
	calls   []callRef
	results []resultRef
	turns   []turnRef
	slotOf  []int32 // message index -> turn whose slot it is, or -1
	byKey   map[string][]int
	seenID  map[string]bool
	removed []bool // the edits' removed flags, in one slab
	edits   []edit
	after   [][][]byte
	report  Report
}

var plans = sync.Pool{New: func() any {
	return &plan{byKey: map[string][]int{}, seenID: map[string]bool{}}
}}

// newPlan analyses b. Plans are pooled, with their slabs, because repairing many
// transcripts is allocation-bound otherwise; call release when done, and keep nothing of
// the plan but its report.
func newPlan(b []byte, opts Options) (*plan, error) {
	p := plans.Get().(*plan)
	p.opts = opts
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '[' {
		if err := validate(b); err != nil {
			return p, p.fail(StatusUnparseable, "%v", err)
		}
		return p, p.fail(StatusUnparseable, "transcript is a JSON %s, not an array of messages", kindOf(b[i]))
	}
	end, err := p.scan(b, i)
	if err != nil {
		return p, err
	}
	if k := skipSpace(b, end); k != len(b) {
		return p, p.fail(StatusUnparseable, "%v", &SyntaxError{k, "unexpected data after the top-level value"})
	}
	return p, p.analyze()
}

// analyze runs everything after scanning: dialect, parse, pairing and the stages.
func (p *plan) analyze() error {
	if err := p.parse(); err != nil {
		return err
	}
	if p.spec == nil {
		p.report.Status = StatusClean
		return nil
	}
	p.findTurns()
	p.pair()
	p.decide()
	if p.opts.Target != "" {
		p.retarget()
	}
	p.finish()
	return nil
}

// release empties the plan, keeping its slabs' capacity, and returns it to the pool.
// Entries past each slab's length are not cleared: every one is overwritten before it
// is read, and the pool drops plans at each GC, so stale ones keep old input alive only
// briefly (clearing them cost more than the rest of a small repair, in write barriers).
func (p *plan) release() {
	clear(p.byKey)
	clear(p.seenID)
	*p = plan{
		msgs: p.msgs[:0], slotOf: p.slotOf[:0], calls: p.calls[:0], results: p.results[:0],
		turns: p.turns[:0], edits: p.edits[:0], after: p.after[:0], removed: p.removed[:0],
		byKey: p.byKey, seenID: p.seenID,
		sc: scanner{members: p.sc.members[:0], blockMembers: p.sc.blockMembers[:0], blocks: p.sc.blocks[:0]},
		ps: parser{scratch: p.ps.scratch[:0], parts: p.ps.parts[:0]},
	}
	plans.Put(p)
}

// grow returns s resized to n zero elements, reusing its capacity.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func (p *plan) fail(status Status, format string, args ...any) error {
	p.report.Status = status
	p.report.Reason = fmt.Sprintf(format, args...)
	return &UnrepairableError{Status: status, Reason: p.report.Reason}
}

// scan validates the array of messages at b[i] while collecting each message's members
// (one pass over the bytes), and returns the array's end.
func (p *plan) scan(b []byte, i int) (int, error) {
	end, err := scanElements(b, i, 1, func(j int) (int, error) {
		n := len(p.msgs)
		if b[j] != '{' {
			if end, err := scanValue(b, j, 2); err != nil {
				return end, err
			}
			return j, p.fail(StatusUnparseable, "message %d is a JSON %s, not an object", n, kindOf(b[j]))
		}
		ms, arrays, end, err := p.sc.scanMessage(b, j)
		if err != nil {
			return end, p.fail(StatusUnparseable, "message %d: %v", n, err)
		}
		p.msgs = append(p.msgs, message{raw: b[j:end], ms: ms, arrays: arrays})
		return end, nil
	})
	var ue *UnrepairableError
	if err != nil && !errors.As(err, &ue) {
		err = p.fail(StatusUnparseable, "%v", err)
	}
	return end, err
}

// parse detects the dialect (unless forced) and finds each message's calls and results.
func (p *plan) parse() error {
	p.report.MessagesIn = len(p.msgs)
	d := p.opts.Dialect
	if d == "" {
		var err error
		if d, err = detect(p.msgs, &p.ps); err != nil {
			return p.fail(StatusUnknownDialect, "%v", err)
		}
		if d == "" {
			return nil // no tool calls or results of any dialect: nothing to repair
		}
		p.ps.detected = d
	}
	p.spec = specs[d]
	if p.spec == nil {
		return p.fail(StatusUnknownDialect, "unknown dialect %q", d)
	}
	p.report.Dialect = d
	for j := range p.msgs {
		p.ps.msg = j
		if err := p.spec.parse(&p.msgs[j], &p.ps); err != nil {
			return p.fail(StatusUnparseable, "message %d: %v", j, err)
		}
	}
	if p.ps.foreign != "" {
		p.report.Dialect = ""
		return p.fail(StatusUnknownDialect, "shapes of several dialects are mixed: %s, and %s (message %d)",
			d, p.ps.foreign, p.ps.foreignMsg)
	}
	return nil
}

func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// findTurns finds each call turn and the slot right after it where its results belong.
func (p *plan) findTurns() {
	n := len(p.msgs)
	p.slotOf = grow(p.slotOf, n)
	for i := range p.slotOf {
		p.slotOf[i] = -1
	}
	hasCall := func(m *message) bool {
		for _, pt := range m.parts {
			if pt.kind == partCall {
				return true
			}
		}
		return false
	}
	for i := 0; i < n; i++ {
		m := &p.msgs[i]
		if !hasCall(m) {
			continue
		}
		t := turnRef{first: i, last: i, slotMsg: -1}
		if m.kind == msgCall {
			// A Responses turn is a run of call items, reasoning items between them included.
			for j := i + 1; j < n && (p.msgs[j].kind == msgCall || p.msgs[j].reasoning); j++ {
				if p.msgs[j].kind == msgCall {
					t.last = j
				}
			}
		}
		ti := len(p.turns)
		j := t.last + 1
		if p.spec.block {
			if j < n && p.msgs[j].kind == msgUser && p.msgs[j].partsKey != "" &&
				(p.spec.anyUserSlot || hasResult(&p.msgs[j])) {
				t.slotMsg = j
				p.slotOf[j] = int32(ti)
			}
			t.slotLast = t.last
		} else {
			for j < n && p.msgs[j].kind == msgResult {
				p.slotOf[j] = int32(ti)
				j++
			}
			t.slotLast = j - 1
		}
		for k := t.first; k <= t.last; k++ {
			for pi, pt := range p.msgs[k].parts {
				if pt.kind != partCall {
					continue
				}
				c := callRef{msg: k, part: pi, turn: ti, key: pt.id}
				if !pt.hasID {
					c.key = fmt.Sprintf("\x00%d\x00%s\x00%d", ti, pt.name, p.countName(ti, pt.name))
				}
				p.calls = append(p.calls, c)
			}
		}
		p.turns = append(p.turns, t)
		i = t.last
	}
}

func hasResult(m *message) bool {
	for _, pt := range m.parts {
		if pt.kind == partResult {
			return true
		}
	}
	return false
}

// countName counts the id-less calls named name already seen in turn ti, so id-less
// Gemini calls and responses pair by name and order within a turn.
func (p *plan) countName(ti int, name string) int {
	n := 0
	for _, c := range p.calls {
		if c.turn == ti && !p.part(c.msg, c.part).hasID && p.part(c.msg, c.part).name == name {
			n++
		}
	}
	return n
}

func (p *plan) part(msg, pi int) *part { return &p.msgs[msg].parts[pi] }

// pair attaches each result to a call: the matching call of the turn whose slot holds
// it, else the latest matching call before it, else the first after it.
func (p *plan) pair() {
	byKey := p.byKey
	for ci := range p.calls {
		c := &p.calls[ci]
		if p.part(c.msg, c.part).malformed == "" {
			byKey[c.key] = append(byKey[c.key], ci)
		}
	}
	slotNames := map[[2]int]map[string]int{} // (turn, msg) -> name -> id-less results seen
	for mi := range p.msgs {
		m := &p.msgs[mi]
		for pi := range m.parts {
			pt := &m.parts[pi]
			if pt.kind != partResult {
				continue
			}
			r := resultRef{msg: mi, part: pi, call: -1, key: pt.id}
			ti, inSlot := int(p.slotOf[mi]), p.slotOf[mi] >= 0
			if !pt.hasID {
				r.key = ""
				if inSlot {
					k := [2]int{ti, mi}
					if slotNames[k] == nil {
						slotNames[k] = map[string]int{}
					}
					r.key = fmt.Sprintf("\x00%d\x00%s\x00%d", ti, pt.name, slotNames[k][pt.name])
					slotNames[k][pt.name]++
				}
			}
			ri := len(p.results)
			cands := byKey[r.key]
			if inSlot {
				for _, ci := range cands {
					if p.calls[ci].turn == ti && !p.hasSlotResult(ci) {
						r.call, r.slotted = ci, true
						break
					}
				}
				if r.call < 0 {
					for _, ci := range cands {
						if p.calls[ci].turn == ti {
							r.call, r.slotted = ci, true
							break
						}
					}
				}
			}
			if r.call < 0 && len(cands) > 0 {
				r.call = cands[0]
				for _, ci := range cands {
					if p.calls[ci].msg < mi {
						r.call = ci
					}
				}
			}
			r.inSlot = r.slotted
			if r.inSlot && p.spec.resultsFirst {
				for _, prev := range m.parts[:pi] {
					if prev.kind != partResult {
						r.inSlot = false
					}
				}
			}
			p.results = append(p.results, r)
			if r.call >= 0 {
				p.calls[r.call].results = append(p.calls[r.call].results, ri)
			}
		}
	}
}

func (p *plan) hasSlotResult(ci int) bool {
	for _, ri := range p.calls[ci].results {
		if p.results[ri].slotted {
			return true
		}
	}
	return false
}

func (p *plan) act(st Stage, kind ActionKind, msg int, pt *part, detail string) {
	p.report.Actions = append(p.report.Actions, Action{Stage: st, Action: kind, MessageIndex: msg,
		CallID: strings.Clone(pt.id), ToolName: strings.Clone(pt.name), Detail: detail})
}

func (p *plan) issue(code IssueCode, msg int, pt *part, detail string) {
	p.report.Issues = append(p.report.Issues, Issue{Code: code, MessageIndex: msg,
		CallID: strings.Clone(pt.id), ToolName: strings.Clone(pt.name), Detail: detail})
}

// quiet reports whether the session changed within the quiet period.
func (p *plan) quiet() bool {
	o := p.opts
	q := o.QuietPeriod
	if q == 0 {
		q = DefaultQuietPeriod
	}
	return !o.Force && q > 0 && !o.Now.IsZero() && !o.UpdatedAt.IsZero() && o.Now.Sub(o.UpdatedAt) < q
}

// decide runs the stages over the pairing and records edits, actions and issues.
func (p *plan) decide() {
	p.edits = grow(p.edits, len(p.msgs))
	p.after = grow(p.after, len(p.msgs))
	for i := range p.msgs {
		start := len(p.removed)
		p.removed = append(p.removed, make([]bool, len(p.msgs[i].parts))...)
		p.edits[i].removed = p.removed[start:len(p.removed):len(p.removed)]
	}

	lastTurn := -1
	for _, c := range p.calls {
		if p.part(c.msg, c.part).malformed == "" {
			lastTurn = c.turn
		}
	}
	quiet := p.quiet()
	seenID := p.seenID

	// Stage order matters only for attribution: every stage acts on the same pairing.
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if pt.malformed != "" {
			c.removed = true
			p.removePart(c.msg, c.part, StageStripMalformedCalls)
			p.act(StageStripMalformedCalls, ActionDrop, c.msg, pt, pt.malformed)
			p.issue(IssueMalformedCall, c.msg, pt, pt.malformed)
			continue
		}
		if pt.hasID {
			if seenID[pt.id] {
				p.issue(IssueDuplicateCallID, c.msg, pt, "")
			}
			seenID[pt.id] = true
		}
		kept, real := -1, 0
		for _, ri := range c.results {
			if !p.resPart(ri).synthetic {
				real++
			}
		}
		if p.msgs[c.msg].failed && (real == 0 || p.opts.FailedTurns == FailedTurnsStrip) {
			c.removed = true
			p.removePart(c.msg, c.part, StageFailedTurnCalls)
			if real == 0 {
				p.act(StageFailedTurnCalls, ActionDrop, c.msg, pt, "call of a failed or aborted turn without a result")
				p.issue(IssueCallWithoutResult, c.msg, pt, "turn ended in error or abort")
			} else {
				p.act(StageFailedTurnCalls, ActionDrop, c.msg, pt, "call of a failed or aborted turn (--failed-turns strip)")
				p.issue(IssueFailedTurnCall, c.msg, pt, "")
			}
			for _, ri := range c.results {
				r := &p.results[ri]
				p.removePart(r.msg, r.part, StageFailedTurnCalls)
				p.act(StageFailedTurnCalls, ActionDrop, r.msg, p.resPart(ri), "result of a removed call of a failed turn")
			}
			continue
		}
		kept = p.pickKept(c)
		for _, ri := range c.results {
			if ri == kept {
				continue
			}
			r := &p.results[ri]
			p.removePart(r.msg, r.part, StageDropDuplicateResults)
			detail := "later result for the same call"
			if p.resPart(ri).synthetic && !p.resPart(kept).synthetic {
				detail = "synthetic result superseded by a real one"
			}
			p.act(StageDropDuplicateResults, ActionDrop, r.msg, p.resPart(ri), detail)
			p.issue(IssueDuplicateResult, r.msg, p.resPart(ri), "")
		}
		t := &p.turns[c.turn]
		switch {
		case kept >= 0 && p.results[kept].inSlot:
		case kept >= 0:
			r := &p.results[kept]
			p.removePart(r.msg, r.part, StageMoveResults)
			t.incoming = append(t.incoming, incoming{call: ci, result: kept})
			p.act(StageMoveResults, ActionMove, r.msg, p.resPart(kept),
				fmt.Sprintf("to after message %d", t.last))
			p.issue(IssueMisplacedResult, r.msg, p.resPart(kept), "")
		case c.turn == lastTurn && quiet && !p.msgs[c.msg].failed:
			p.report.PendingCalls++
		case pt.callType == "computer_call":
			// A computer_call_output must carry a screenshot; none can be made up.
			c.removed = true
			p.removePart(c.msg, c.part, StageSynthesizeMissingResults)
			p.act(StageSynthesizeMissingResults, ActionDrop, c.msg, pt, "computer call without output cannot be answered; call removed")
			p.issue(IssueCallWithoutResult, c.msg, pt, "")
		default:
			t.incoming = append(t.incoming, incoming{call: ci, result: -1})
			p.act(StageSynthesizeMissingResults, ActionInsert, c.msg, pt, "synthetic error result")
			p.issue(IssueCallWithoutResult, c.msg, pt, "")
		}
	}
	for ri := range p.results {
		r := &p.results[ri]
		if r.call < 0 {
			p.removePart(r.msg, r.part, StageDropOrphanResults)
			p.act(StageDropOrphanResults, ActionDrop, r.msg, p.resPart(ri), "no call with this id")
			p.issue(IssueResultWithoutCall, r.msg, p.resPart(ri), "")
		}
	}
}

func (p *plan) resPart(ri int) *part { r := &p.results[ri]; return p.part(r.msg, r.part) }

// pickKept chooses the result a call keeps: a real one over a synthetic one, and one
// already in place over one that must move.
func (p *plan) pickKept(c *callRef) int {
	best := -1
	score := func(ri int) int {
		s := 0
		if !p.resPart(ri).synthetic {
			s += 2
		}
		if p.results[ri].inSlot {
			s++
		}
		return s
	}
	for _, ri := range c.results {
		if best < 0 || score(ri) > score(best) {
			best = ri
		}
	}
	return best
}

func (p *plan) removePart(msg, pi int, st Stage) {
	e := &p.edits[msg]
	e.removed[pi] = true
	e.dirty = true
	if p.msgs[msg].whole() {
		e.drop, e.stage = true, st
	}
}

// finish places incoming results, drops Responses reasoning items orphaned by removed
// calls, and sums up the report.
func (p *plan) finish() {
	for ti := range p.turns {
		t := &p.turns[ti]
		if len(t.incoming) == 0 {
			continue
		}
		var raws [][]byte
		for _, in := range t.incoming {
			if in.result >= 0 {
				raws = append(raws, p.resPart(in.result).raw)
			} else {
				c := &p.calls[in.call]
				raws = append(raws, p.spec.synth(p.part(c.msg, c.part), SyntheticResultText))
			}
		}
		switch {
		case !p.spec.block:
			p.after[t.slotLast] = append(p.after[t.slotLast], raws...)
		case t.slotMsg >= 0:
			p.edits[t.slotMsg].dirty = true
			p.after[t.slotMsg] = append(p.after[t.slotMsg], raws...) // parts, placed by rebuild
		default:
			p.after[t.last] = append(p.after[t.last], p.spec.wrap(raws))
		}
	}
	p.dropOrphanedReasoning()

	// Report actions in pipeline order, and issues in transcript order.
	rank := map[Stage]int{}
	for i, st := range Stages() {
		rank[st] = i
	}
	sort.SliceStable(p.report.Actions, func(i, j int) bool {
		return rank[p.report.Actions[i].Stage] < rank[p.report.Actions[j].Stage]
	})
	sort.SliceStable(p.report.Issues, func(i, j int) bool {
		return p.report.Issues[i].MessageIndex < p.report.Issues[j].MessageIndex
	})
	counts := map[Stage]int{}
	for _, a := range p.report.Actions {
		counts[a.Stage]++
	}
	if len(counts) > 0 {
		p.report.StageCounts = counts
	}
	switch {
	case len(p.report.Actions) > 0:
		p.report.Status = StatusRepaired
	case p.report.PendingCalls > 0:
		p.report.Status = StatusPending
	default:
		p.report.Status = StatusClean
	}
}

// dropOrphanedReasoning follows the Responses rule that a reasoning item needs the item it
// produced: when that call was removed and nothing it can precede follows, the reasoning
// item goes too (its bytes stay in the saved version and the report).
func (p *plan) dropOrphanedReasoning() {
	for i := range p.msgs {
		if !p.msgs[i].reasoning || i+1 >= len(p.msgs) || !p.edits[i+1].drop || p.msgs[i+1].kind != msgCall {
			continue
		}
		j, gap := i+1, false
		for ; j < len(p.msgs) && p.edits[j].drop; j++ {
			gap = gap || len(p.after[j]) > 0
		}
		if !gap && j < len(p.msgs) && (p.msgs[j].kind == msgCall || string(p.msgs[j].word("role")) == "assistant") {
			continue
		}
		p.edits[i].drop, p.edits[i].stage = true, p.edits[i+1].stage
		p.report.Actions = append(p.report.Actions, Action{Stage: p.edits[i+1].stage, Action: ActionDrop,
			MessageIndex: i, Detail: "reasoning item whose following call was removed"})
	}
}

// assemble builds the repaired message list.
func (p *plan) assemble() [][]byte {
	out := make([][]byte, 0, len(p.msgs)+4)
	for i := range p.msgs {
		m := &p.msgs[i]
		e := &p.edits[i]
		switch {
		case e.drop:
		case m.whole():
			out = append(out, m.parts[0].raw)
		case e.dirty:
			if raw, ok := p.rebuild(i); ok {
				out = append(out, raw)
			}
		default:
			out = append(out, m.raw)
		}
		if !p.spec.block || p.turnSlotMsg(i) < 0 {
			out = append(out, p.after[i]...)
		}
	}
	return out
}

// turnSlotMsg returns i when message i is a block slot receiving parts, else -1.
func (p *plan) turnSlotMsg(i int) int {
	if ti := p.slotOf[i]; ti >= 0 && p.turns[ti].slotMsg == i {
		return i
	}
	return -1
}

// rebuild writes message i with its removed parts gone, its parts' current bytes, and
// any incoming results placed after its leading results. ok is false when nothing of the
// message is left.
func (p *plan) rebuild(i int) ([]byte, bool) {
	m := &p.msgs[i]
	e := &p.edits[i]
	var kept [][]byte
	var in [][]byte
	if p.spec.block && p.turnSlotMsg(i) >= 0 {
		in = p.after[i]
	}
	lead := true
	for pi, pt := range m.parts {
		if e.removed[pi] {
			continue
		}
		if lead && pt.kind != partResult {
			kept, in, lead = append(kept, in...), nil, false
		}
		kept = append(kept, pt.raw)
	}
	kept = append(kept, in...)
	mb, _ := findMember(m.raw, m.ms, m.partsKey)
	if len(kept) > 0 {
		return setMember(m.raw, mb, joinArray(kept)), true
	}
	if !m.otherContent {
		return nil, false
	}
	for idx := range m.ms {
		if m.ms[idx].is(m.raw, m.partsKey) {
			return removeMember(m.raw, m.ms, idx), true
		}
	}
	return m.raw, true
}
