package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// Change says what became of a message or a block from one version to the other. The
// strings appear in JSON output and never change.
type Change string

// The changes.
const (
	ChangeUnchanged Change = "unchanged"
	// ChangeChanged is a message in both versions whose blocks differ (see its blocks).
	ChangeChanged     Change = "changed"
	ChangeMoved       Change = "moved" // the same content at another place
	ChangeInserted    Change = "inserted"
	ChangeSynthesized Change = "synthesized" // an inserted result that a repairer wrote, not the tool
	ChangeRemoved     Change = "removed"
	// ChangeDroppedOrphan is a removed result whose call is not in the later version.
	ChangeDroppedOrphan Change = "dropped_orphan"
	// ChangeDroppedDuplicate is a removed result whose call keeps another result.
	ChangeDroppedDuplicate Change = "dropped_duplicate"
	ChangeRewrittenID      Change = "rewritten_id" // the same call or result under another id
	ChangeRewritten        Change = "rewritten"    // the same call or result (same id) in another shape
)

// Changes lists every change in a stable order, for legends and filters.
func Changes() []Change {
	return []Change{ChangeUnchanged, ChangeChanged, ChangeMoved, ChangeInserted, ChangeSynthesized, ChangeRemoved,
		ChangeDroppedOrphan, ChangeDroppedDuplicate, ChangeRewrittenID, ChangeRewritten}
}

// TranscriptDiff is what changed between two versions of a transcript: the messages of
// both aligned side by side and, inside a message that changed, its blocks (content
// blocks, tool_calls elements, Gemini parts). Calls and results are read as the engine
// reads them, so synthesized results, dropped orphans and duplicates, moves and rewritten
// ids are marked as such, each with the actions of the report that made it. Every message
// and block of both versions is in it with its full content: renderers fold long content,
// they never cut it.
type TranscriptDiff struct {
	SessionID string            `json:"session_id,omitempty"`
	From      *model.VersionRow `json:"from,omitempty"` // without content
	To        *model.VersionRow `json:"to,omitempty"`
	// ReportID is the report that wrote To from From, whose actions these are.
	ReportID       int64          `json:"report_id,omitempty"`
	Dialect        repair.Dialect `json:"dialect,omitempty"`
	MessagesBefore int            `json:"messages_before"`
	MessagesAfter  int            `json:"messages_after"`
	// Counts counts each change at the finest level it is known: blocks inside changed
	// messages, else messages. A move counts once.
	Counts   map[Change]int  `json:"counts"`
	Messages []MessageDiff   `json:"messages"`
	Actions  []repair.Action `json:"actions"`
}

// MessageDiff is one message of either version, or a message of each side by side.
type MessageDiff struct {
	Change Change `json:"change"`
	Before int    `json:"before"` // its index in the earlier version; -1 when not there
	After  int    `json:"after"`  // its index in the later version; -1 when not there
	Kind   string `json:"kind,omitempty"`
	// Tool is set when the message is itself one call or result (OpenAI chat tool
	// messages, Responses items).
	Tool *Tool `json:"tool,omitempty"`
	// Content is an unchanged or moved message's text; the others have their two sides.
	Content       json.RawMessage `json:"content,omitempty"`
	BeforeContent json.RawMessage `json:"before_content,omitempty"`
	AfterContent  json.RawMessage `json:"after_content,omitempty"`
	Blocks        []BlockDiff     `json:"blocks,omitempty"`
	// Actions are indexes into TranscriptDiff.Actions: what the repair did here.
	Actions []int `json:"actions,omitempty"`
}

// Tool describes a call or result.
type Tool struct {
	Kind      repair.PartKind `json:"kind"`
	CallID    string          `json:"call_id,omitempty"`
	NewCallID string          `json:"new_call_id,omitempty"` // for rewritten_id
	ToolName  string          `json:"tool_name,omitempty"`
}

// BlockDiff is one block of a message that changed.
type BlockDiff struct {
	Change Change `json:"change"`
	Tool
	Before int `json:"before"` // its index among the message's blocks in the earlier version; -1 when not there
	After  int `json:"after"`  // ... in the later version
	// MovedFrom and MovedTo say where a block that crossed messages came from or went.
	MovedFrom     *Position       `json:"moved_from,omitempty"`
	MovedTo       *Position       `json:"moved_to,omitempty"`
	Content       json.RawMessage `json:"content,omitempty"` // unchanged and moved blocks
	BeforeContent json.RawMessage `json:"before_content,omitempty"`
	AfterContent  json.RawMessage `json:"after_content,omitempty"`
	Actions       []int           `json:"actions,omitempty"`
	// callAt is, for an inserted Gemini response without an id, where the call it answers
	// is in the earlier version: the action that synthesized it names that message.
	callAt *Position
}

// Position is a block's place: a message index and a block index in it.
type Position struct {
	Message int `json:"message"`
	Block   int `json:"block"`
}

// DiffVersions compares two saved versions of a session. The actions shown are those of
// the report that wrote to from from, when one did (a repair); reports may hold any of
// the session's reports.
func DiffVersions(from, to model.VersionRow, reports []model.ReportRow) (*TranscriptDiff, error) {
	var actions []repair.Action
	var reportID int64
	for _, r := range reports {
		if r.FromVersion == from.Version && r.ToVersion == to.Version && len(r.Actions) > 0 {
			actions, reportID = r.Actions, r.ID
		}
	}
	d, err := DiffTranscripts([]byte(from.Content), []byte(to.Content), actions)
	if err != nil {
		return nil, err
	}
	from.Content, to.Content = "", ""
	d.SessionID, d.From, d.To, d.ReportID = to.SessionID, &from, &to, reportID
	return d, nil
}

// DiffTranscripts compares two transcripts (JSON arrays of messages); actions are the
// report's that turned before into after, if any, to show beside what they did.
func DiffTranscripts(before, after []byte, actions []repair.Action) (*TranscriptDiff, error) {
	b, err := readSide(after, "")
	if err != nil {
		return nil, fmt.Errorf("read later version: %w", err)
	}
	a, err := readSide(before, b.dialect)
	if err != nil {
		return nil, fmt.Errorf("read earlier version: %w", err)
	}
	if b.dialect == "" && a.dialect != "" {
		if b, err = readSide(after, a.dialect); err != nil {
			return nil, fmt.Errorf("read later version: %w", err)
		}
	}
	d := &TranscriptDiff{Dialect: b.dialect, MessagesBefore: len(a.msgs), MessagesAfter: len(b.msgs),
		Counts: map[Change]int{}, Actions: actions}
	if d.Dialect == "" {
		d.Dialect = a.dialect
	}
	if d.Actions == nil {
		d.Actions = []repair.Action{}
	}
	ops := pairMessages(a, b, alignMessages(a, b))
	matchBlocks(a, b, ops)
	for _, o := range ops {
		d.Messages = append(d.Messages, messageDiff(a, b, o))
	}
	for i := range d.Messages {
		countChanges(d.Counts, &d.Messages[i])
	}
	linkActions(d)
	return d, nil
}

// side is one version, read for diffing.
type side struct {
	dialect repair.Dialect
	msgs    []*msg
}

type msg struct {
	idx   int
	raw   []byte
	key   string // compact text, for equality
	kind  string
	whole bool
	// blocks are the message's parts; a whole message is its own one block.
	blocks []*blk
	op     *msgOp
}

type blk struct {
	m    *msg
	idx  int
	part repair.OutlinePart
	key  string
	// shape is key with the call id taken out, so that a block rewritten only in its id
	// has the shape it had; "" for a block without an id.
	shape  string
	change Change
	peer   *blk // the block on the other side it is the same as, moved or rewritten
	newID  string
	// call is, for a Gemini response without an id, the call of its version it answers
	// (pairIdless); answered marks a call that a response without an id answers.
	call     *blk
	answered bool
}

// readSide reads a version; with dialect set, as that dialect when it can.
func readSide(b []byte, dialect repair.Dialect) (*side, error) {
	o, err := repair.Inspect(b, repair.Options{Dialect: dialect})
	if err != nil && dialect != "" {
		o, err = repair.Inspect(b, repair.Options{})
	}
	if err != nil && len(o.Messages) == 0 {
		return nil, err
	}
	// Mixed dialects: the messages without their parts.
	s := &side{dialect: o.Dialect}
	for i, om := range o.Messages {
		m := &msg{idx: i, raw: om.Raw, key: compact(om.Raw), kind: om.Kind, whole: om.Whole}
		for k, p := range om.Parts {
			x := &blk{m: m, idx: k, part: p, key: compact(p.Raw)}
			if p.Kind != repair.PartOther && len(p.CallIDText) > 0 {
				x.shape = strings.ReplaceAll(x.key, string(p.CallIDText), "\x00")
			}
			m.blocks = append(m.blocks, x)
		}
		s.msgs = append(s.msgs, m)
	}
	s.pairIdless()
	return s, nil
}

// idless reports a Gemini call or response without an id (not one with a blank id).
func (s *side) idless(x *blk) bool {
	return s.dialect == repair.Gemini && x.part.Kind != repair.PartOther && x.part.CallIDText == nil
}

// pairIdless pairs each Gemini response without an id with the call it answers, by
// position and name as the engine does. In the slot of a call turn (the user message
// right after a model message with calls, when it holds a response), the k-th response of
// a name answers the turn's k-th call of that name without an id, or none. Outside any
// slot it answers the one earlier call of its name without an id and without a real
// response yet, a failed turn's only when no other is; none when there are none or
// several (the engine refuses those).
func (s *side) pairIdless() {
	if s.dialect != repair.Gemini {
		return
	}
	realAnswer := map[*blk]bool{} // calls a real response answers
	failed := map[*msg]bool{}     // messages read for a stop reason: whether theirs failed
	for i, m := range s.msgs {
		var turn *msg // the call turn whose slot m is
		if i > 0 && geminiUserRoles[m.kind] && slices.ContainsFunc(m.blocks, isResult) &&
			slices.ContainsFunc(s.msgs[i-1].blocks, isCall) {
			turn = s.msgs[i-1]
		}
		rank := map[string]int{}
		for _, x := range m.blocks {
			if x.part.Kind != repair.PartResult || !s.idless(x) {
				continue
			}
			name := x.part.ToolName
			if turn != nil {
				k := rank[name]
				rank[name]++
				for _, c := range turn.blocks {
					if c.part.Kind == repair.PartCall && s.idless(c) && c.part.ToolName == name {
						if k == 0 {
							x.call = c
							break
						}
						k--
					}
				}
			} else {
				var open [2][]*blk // calls of completed turns, of failed ones
				for _, cm := range s.msgs[:i] {
					for _, c := range cm.blocks {
						if c.part.Kind == repair.PartCall && s.idless(c) && c.part.ToolName == name && !realAnswer[c] {
							f, read := failed[cm]
							if !read {
								f = failedTurn(cm.raw)
								failed[cm] = f
							}
							k := 0
							if f {
								k = 1
							}
							open[k] = append(open[k], c)
						}
					}
				}
				if len(open[0]) == 0 {
					open[0] = open[1]
				}
				if len(open[0]) == 1 {
					x.call = open[0][0]
				}
			}
			if x.call != nil {
				x.call.answered = true
				realAnswer[x.call] = realAnswer[x.call] || !x.part.Synthetic
			}
		}
	}
}

// geminiUserRoles are the roles of Gemini messages that hold responses.
var geminiUserRoles = map[string]bool{"user": true, "function": true, "tool": true}

func isResult(x *blk) bool { return x.part.Kind == repair.PartResult }
func isCall(x *blk) bool   { return x.part.Kind == repair.PartCall }

// failedTurn reports a message whose generation ended in error or was aborted, as the
// engine reads it.
func failedTurn(raw []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, k := range []string{"stopReason", "stop_reason"} {
		var v string
		if json.Unmarshal(m[k], &v) == nil && (v == "error" || v == "aborted") {
			return true
		}
	}
	return false
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

func (s *side) keys() []string {
	out := make([]string, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = m.key
	}
	return out
}

func (m *msg) keys() []string {
	out := make([]string, len(m.blocks))
	for i, x := range m.blocks {
		out[i] = x.key
	}
	return out
}

// weight makes a common subsequence prefer keeping conversation turns in place over
// tool results, so that when either could have moved it is the result: tmend moves
// results, never turns. A message of results only (a Gemini response turn, a user
// message of tool_result blocks) is results too: tmend moves it whole next to its call.
func (m *msg) weight() int32 {
	if len(m.blocks) == 0 {
		return 2
	}
	for _, x := range m.blocks {
		if x.part.Kind != repair.PartResult {
			return 2
		}
	}
	return 1
}

func (b *blk) weight() int32 {
	if b.part.Kind == repair.PartResult {
		return 1
	}
	return 2
}

// msgOp is one row of the message alignment: kind '=' (same), '>' (moved), '~' (changed
// in place), '-' (only before) or '+' (only after).
type msgOp struct {
	kind byte
	i, j int
	// blocks is the block alignment of a '~' pair.
	blocks []blkOp
}

type blkOp struct {
	kind byte // '=', '-' (a block of the earlier message), '+' (of the later one)
	i, j int
}

// maxCells bounds the table of an alignment (4 bytes a cell); past it, lcs walks greedily.
const maxCells = 1 << 22

// lcs aligns two sequences of keys by their heaviest common subsequence and returns '=',
// '-' and '+' steps in order. A common start and end are matched first (a repair changes
// a few messages of many), as the heaviest subsequence would match them: equal elements
// weigh the same. What is left is aligned exactly when its table fits in maxCells, else
// by a greedy walk that finds the common subsequence when few elements changed.
func lcs(a, b []string, weight func(i int) int32) []blkOp {
	n, m := len(a), len(b)
	var out []blkOp
	pre := 0
	for ; pre < n && pre < m && a[pre] == b[pre]; pre++ {
		out = append(out, blkOp{'=', pre, pre})
	}
	suf := 0
	for suf < n-pre && suf < m-pre && a[n-1-suf] == b[m-1-suf] {
		suf++
	}
	if n0, m0 := n-pre-suf, m-pre-suf; n0*m0 <= maxCells {
		out = append(out, table(a[pre:n-suf], b[pre:m-suf], pre, weight)...)
	} else {
		out = append(out, greedy(a[pre:n-suf], b[pre:m-suf], pre)...)
	}
	for k := suf; k > 0; k-- {
		out = append(out, blkOp{'=', n - k, m - k})
	}
	return out
}

// table is the exact alignment of a and b, which start at index off of their sequences.
func table(a, b []string, off int, weight func(i int) int32) []blkOp {
	n, m := len(a), len(b)
	t := make([][]int32, n+1)
	for i := range t {
		t[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + weight(off+i)
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	var out []blkOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j] && t[i][j] == t[i+1][j+1]+weight(off+i):
			out = append(out, blkOp{'=', off + i, off + j})
			i, j = i+1, j+1
		case j < m && (i == n || t[i][j+1] > t[i+1][j]):
			out = append(out, blkOp{'+', -1, off + j})
			j++
		default:
			out = append(out, blkOp{'-', off + i, -1})
			i++
		}
	}
	return out
}

// greedy aligns a and b in one pass: where they differ, b's element is inserted when a
// has no copy of it left, else a's is removed.
func greedy(a, b []string, off int) []blkOp {
	left := map[string]int{}
	for _, k := range a {
		left[k]++
	}
	var out []blkOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, blkOp{'=', off + i, off + j})
			left[a[i]]--
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || left[b[j]] == 0):
			out = append(out, blkOp{'+', -1, off + j})
			j++
		default:
			out = append(out, blkOp{'-', off + i, -1})
			left[a[i]]--
			i++
		}
	}
	return out
}

// alignMessages aligns the messages; a message removed and inserted elsewhere unchanged
// becomes one move, shown where it went.
func alignMessages(a, b *side) []msgOp {
	steps := lcs(a.keys(), b.keys(), func(i int) int32 { return a.msgs[i].weight() })
	ops := make([]msgOp, len(steps))
	for k, s := range steps {
		ops[k] = msgOp{kind: s.kind, i: s.i, j: s.j}
	}
	inserted := map[string][]int{} // key -> ops of insertions, in order
	for y, o := range ops {
		if o.kind == '+' {
			k := b.msgs[o.j].key
			inserted[k] = append(inserted[k], y)
		}
	}
	for x := range ops {
		if ops[x].kind != '-' {
			continue
		}
		k := a.msgs[ops[x].i].key
		if ys := inserted[k]; len(ys) > 0 {
			y := ys[0]
			inserted[k] = ys[1:]
			ops[y] = msgOp{kind: '>', i: ops[x].i, j: ops[y].j}
			ops[x].kind = 0
		}
	}
	return slices.DeleteFunc(ops, func(o msgOp) bool { return o.kind == 0 })
}

// pairMessages turns a removal and an insertion between the same unchanged neighbours
// into one message changed in place: two messages with blocks of the same role, or two
// whole messages that are the same call or result rewritten.
func pairMessages(a, b *side, ops []msgOp) []*msgOp {
	var out []*msgOp
	for x := 0; x < len(ops); {
		if ops[x].kind != '-' && ops[x].kind != '+' {
			out = append(out, &ops[x])
			x++
			continue
		}
		var dels, ins []*msgOp
		for ; x < len(ops) && (ops[x].kind == '-' || ops[x].kind == '+'); x++ {
			if ops[x].kind == '-' {
				dels = append(dels, &ops[x])
			} else {
				ins = append(ins, &ops[x])
			}
		}
		// Pairs keep the order of both sides (a pair never crosses another), and each is
		// shown after the removals and insertions before it on either side, so that both
		// sides stay in order: a merge leaves an insertion between two pairs going back.
		pairedWith := make([]int, len(dels)) // index into ins, or -1
		next := 0
		for x, d := range dels {
			pairedWith[x] = -1
			am := a.msgs[d.i]
			for k := next; k < len(ins); k++ {
				bm := b.msgs[ins[k].j]
				if am.kind != bm.kind || am.whole != bm.whole || am.whole && sameTool(am.blocks[0], bm.blocks[0]) == "" {
					continue
				}
				pairedWith[x], next = k, k+1
				d.kind, d.j = '~', bm.idx
				d.blocks = lcs(am.keys(), bm.keys(), func(i int) int32 { return am.blocks[i].weight() })
				break
			}
		}
		k := 0
		for x, d := range dels {
			if p := pairedWith[x]; p >= 0 {
				out = append(out, ins[k:p]...)
				k = p + 1
			}
			out = append(out, d)
		}
		out = append(out, ins[k:]...)
	}
	for _, o := range out {
		if o.i >= 0 {
			a.msgs[o.i].op = o
		}
		if o.j >= 0 {
			b.msgs[o.j].op = o
		}
	}
	return out
}

// sameTool says how block y is block x changed: ChangeRewrittenID (the same text under
// another id), ChangeRewritten (the same id in another shape), or "" when it is not.
func sameTool(x, y *blk) Change {
	if x.part.Kind != y.part.Kind || x.shape == "" || y.shape == "" {
		return ""
	}
	switch {
	case x.part.CallID != y.part.CallID && x.shape == y.shape:
		return ChangeRewrittenID
	case rewriteKey(x) != "" && rewriteKey(x) == rewriteKey(y):
		return ChangeRewritten
	}
	return ""
}

// rewriteKey is what a call or result keeps when tmend rewrites it in a member other than
// its id (a call's shape, a result's tool name filled in for Gemini): its kind and id, and
// for a result whether it is synthetic. tmend writes no real result, so a real result with
// the id of one gone is that one rewritten, not another; a synthetic result is never a
// real one rewritten. "" for a part without an id.
func rewriteKey(x *blk) string {
	if x.part.Kind == repair.PartOther || strings.TrimSpace(x.part.CallID) == "" {
		return ""
	}
	k := string(x.part.Kind) + "\x00" + x.part.CallID
	if x.part.Kind == repair.PartResult && x.part.Synthetic {
		k += "\x00synthetic"
	}
	return k
}

// matchBlocks classifies every block of the messages that changed: unchanged within a
// message changed in place, moved, rewritten, else inserted (synthesized) or removed
// (a dropped orphan or duplicate).
func matchBlocks(a, b *side, ops []*msgOp) {
	var left, right []*blk // blocks not matched yet
	for _, o := range ops {
		switch o.kind {
		case '-':
			left = append(left, a.msgs[o.i].blocks...)
		case '+':
			right = append(right, b.msgs[o.j].blocks...)
		case '~':
			am, bm := a.msgs[o.i], b.msgs[o.j]
			for _, s := range o.blocks {
				switch s.kind {
				case '=':
					am.blocks[s.i].change, bm.blocks[s.j].change = ChangeUnchanged, ChangeUnchanged
					am.blocks[s.i].peer, bm.blocks[s.j].peer = bm.blocks[s.j], am.blocks[s.i]
				case '-':
					left = append(left, am.blocks[s.i])
				case '+':
					right = append(right, bm.blocks[s.j])
				}
			}
		}
	}
	// Each pass pairs what is left by a key, first within a message changed in place,
	// then anywhere.
	passes := []struct {
		change Change
		key    func(*blk) string // "" for a block the pass does not pair
	}{
		{ChangeMoved, func(x *blk) string { return string(x.part.Kind) + "\x00" + x.key }},
		{ChangeRewrittenID, func(x *blk) string {
			if x.shape == "" {
				return ""
			}
			return string(x.part.Kind) + "\x00" + x.shape
		}},
		{ChangeRewritten, rewriteKey},
	}
	for _, pass := range passes {
		index := map[string][]*blk{}
		for _, y := range right {
			if k := pass.key(y); k != "" && y.peer == nil {
				index[k] = append(index[k], y)
			}
		}
		for _, local := range []bool{true, false} {
			for _, x := range left {
				k := pass.key(x)
				if x.peer != nil || k == "" {
					continue
				}
				for _, y := range index[k] {
					if y.peer != nil || local && x.m.op != y.m.op || x.m.whole != y.m.whole ||
						pass.change == ChangeRewrittenID && x.part.CallID == y.part.CallID {
						continue
					}
					x.change, y.change, x.peer, y.peer = pass.change, pass.change, y, x
					if pass.change == ChangeRewrittenID {
						x.newID, y.newID = y.part.CallID, y.part.CallID
					}
					break
				}
			}
		}
	}
	results := map[string]bool{} // call ids with a result in the later version
	calls := map[string]bool{}
	for _, m := range b.msgs {
		for _, y := range m.blocks {
			if b.idless(y) {
				continue // paired by position and name, not by id
			}
			id := strings.TrimSpace(y.part.CallID)
			switch y.part.Kind {
			case repair.PartResult:
				results[id] = true
			case repair.PartCall:
				calls[id] = true
			}
		}
	}
	for _, y := range right {
		if y.peer == nil {
			y.change = ChangeInserted
			if y.part.Kind == repair.PartResult && y.part.Synthetic {
				y.change = ChangeSynthesized
			}
		}
	}
	for _, x := range left {
		if x.peer != nil {
			continue
		}
		id := strings.TrimSpace(x.part.CallID)
		switch {
		case x.part.Kind == repair.PartResult && a.idless(x):
			// Its call is the one it answers by position and name.
			switch c := across(b, x.call, true); {
			case c == nil:
				x.change = ChangeDroppedOrphan
			case c.answered:
				x.change = ChangeDroppedDuplicate
			default:
				x.change = ChangeRemoved
			}
		case x.part.Kind == repair.PartCall && a.dialect.InPlace() && calls[id]:
			// A part holding a call and its result, repeated: the other copy stays.
			x.change = ChangeDroppedDuplicate
		case x.part.Kind != repair.PartResult:
			x.change = ChangeRemoved
		case results[id]:
			x.change = ChangeDroppedDuplicate
		case !calls[id]:
			x.change = ChangeDroppedOrphan
		default:
			x.change = ChangeRemoved
		}
	}
}

// across is block x in the other version, other: the later one when toLater, else the
// earlier one; nil when it is not there.
func across(other *side, x *blk, toLater bool) *blk {
	switch {
	case x == nil:
		return nil
	case x.peer != nil:
		return x.peer
	case x.m.op != nil && (x.m.op.kind == '=' || x.m.op.kind == '>'):
		k := x.m.op.i
		if toLater {
			k = x.m.op.j
		}
		return other.msgs[k].blocks[x.idx]
	}
	return nil
}

func (b *blk) tool() Tool {
	return Tool{Kind: b.part.Kind, CallID: b.part.CallID, NewCallID: b.newID, ToolName: b.part.ToolName}
}

func raw(b []byte) json.RawMessage { return json.RawMessage(b) }

// messageDiff renders one alignment row.
func messageDiff(a, b *side, o *msgOp) MessageDiff {
	md := MessageDiff{Before: o.i, After: o.j}
	var am, bm *msg
	if o.i >= 0 {
		am = a.msgs[o.i]
		md.Kind = am.kind
	}
	if o.j >= 0 {
		bm = b.msgs[o.j]
		md.Kind = bm.kind
	}
	switch o.kind {
	case '=', '>':
		md.Change, md.Content = ChangeUnchanged, raw(bm.raw)
		if o.kind == '>' {
			md.Change = ChangeMoved
		}
		if bm.whole {
			t := bm.blocks[0].tool()
			md.Tool = &t
		}
		return md
	}
	if am != nil {
		md.BeforeContent = raw(am.raw)
	}
	if bm != nil {
		md.AfterContent = raw(bm.raw)
	}
	switch {
	case (am == nil || am.whole) && (bm == nil || bm.whole):
		// A whole message is its own block: the message shows that block's change.
		// A rewritten one is shown as it is now, as a rewritten block is (a rewritten id
		// shows as its old id and the new one).
		var blk *blk
		if am != nil && (bm == nil || am.blocks[0].change != ChangeRewritten) {
			blk = am.blocks[0]
		} else {
			blk = bm.blocks[0]
		}
		md.Change = blk.change
		t := blk.tool()
		md.Tool = &t
		return md
	case o.kind == '-':
		md.Change = ChangeRemoved
		for _, x := range am.blocks {
			md.Blocks = append(md.Blocks, removedBlock(x))
		}
	case o.kind == '+':
		md.Change = ChangeInserted
		for _, y := range bm.blocks {
			md.Blocks = append(md.Blocks, insertedBlock(a, y))
		}
	default:
		md.Change = ChangeChanged
		for _, s := range o.blocks {
			switch s.kind {
			case '=':
				md.Blocks = append(md.Blocks, BlockDiff{Change: ChangeUnchanged, Tool: bm.blocks[s.j].tool(), Before: s.i, After: s.j,
					Content: raw(bm.blocks[s.j].part.Raw)})
			case '-':
				x := am.blocks[s.i]
				if x.peer != nil && x.peer.m == bm {
					continue // shown where it is in the later message
				}
				md.Blocks = append(md.Blocks, removedBlock(x))
			case '+':
				md.Blocks = append(md.Blocks, insertedBlock(a, bm.blocks[s.j]))
			}
		}
	}
	return md
}

// removedBlock is a block of the earlier version that is not where it was.
func removedBlock(x *blk) BlockDiff {
	bd := BlockDiff{Change: x.change, Tool: x.tool(), Before: x.idx, After: -1, BeforeContent: raw(x.part.Raw)}
	if x.peer != nil {
		bd.MovedTo = &Position{x.peer.m.idx, x.peer.idx}
	}
	return bd
}

// insertedBlock is a block of the later version that was not there before; a is the
// earlier version.
func insertedBlock(a *side, y *blk) BlockDiff {
	bd := BlockDiff{Change: y.change, Tool: y.tool(), Before: -1, After: y.idx, AfterContent: raw(y.part.Raw)}
	if c := across(a, y.call, false); c != nil {
		bd.callAt = &Position{c.m.idx, c.idx}
	}
	if x := y.peer; x != nil {
		if x.change == ChangeRewrittenID {
			bd.Tool = x.tool()
		}
		if op := x.m.op; op.kind != '~' || op.j != y.m.idx {
			bd.MovedFrom = &Position{x.m.idx, x.idx}
		} else {
			bd.Before = x.idx
		}
		if y.change == ChangeMoved {
			bd.Content, bd.AfterContent = bd.AfterContent, nil
		} else {
			bd.BeforeContent = raw(x.part.Raw)
		}
	}
	return bd
}

// asStored is an id as an action stored as JSON holds it: the engine keeps a lone
// surrogate apart from U+FFFD in the bytes it decodes, and JSON encoding turns each of
// those bytes into U+FFFD.
func asStored(id string) string {
	if utf8.ValidString(id) {
		return id
	}
	var b strings.Builder
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(id[i : i+size])
		}
		i += size
	}
	return b.String()
}

func countChanges(counts map[Change]int, md *MessageDiff) {
	if len(md.Blocks) == 0 {
		if md.Change != ChangeUnchanged {
			counts[md.Change]++
		}
		return
	}
	for _, bd := range md.Blocks {
		if bd.Change != ChangeUnchanged && bd.MovedTo == nil { // a move counts where it went
			counts[bd.Change]++
		}
	}
}

// linkActions notes beside each message and block the report's actions that explain it.
func linkActions(d *TranscriptDiff) {
	type target struct {
		before  int // message index in the earlier version, -1
		change  Change
		tool    *Tool
		actions *[]int
		callAt  *Position // BlockDiff.callAt
	}
	var targets []target
	var messages []target
	for i := range d.Messages {
		md := &d.Messages[i]
		messages = append(messages, target{md.Before, md.Change, md.Tool, &md.Actions, nil})
		if md.Tool != nil {
			targets = append(targets, messages[len(messages)-1])
		}
		for k := range md.Blocks {
			bd := &md.Blocks[k]
			before := -1
			switch {
			case bd.MovedFrom != nil:
				before = bd.MovedFrom.Message
			case bd.Before >= 0:
				before = md.Before
			}
			targets = append(targets, target{before, bd.Change, &bd.Tool, &bd.Actions, bd.callAt})
		}
	}
	// isTool: the action is about the tool part t, by its id; without one (a Gemini
	// part), by its name too, as Gemini pairs them.
	isTool := func(t *Tool, a repair.Action) bool {
		id := asStored(strings.TrimSpace(a.CallID))
		if id == "" && t.ToolName != "" && a.ToolName != "" && t.ToolName != a.ToolName {
			return false
		}
		return asStored(strings.TrimSpace(t.CallID)) == id || t.NewCallID != "" && asStored(strings.TrimSpace(t.NewCallID)) == id
	}
	for ai, a := range d.Actions {
		var fits func(t target) bool
		switch a.Action {
		case repair.ActionDrop:
			fits = func(t target) bool {
				return t.before == a.MessageIndex && isTool(t.tool, a) &&
					(t.change == ChangeRemoved || t.change == ChangeDroppedOrphan || t.change == ChangeDroppedDuplicate)
			}
		case repair.ActionMove:
			fits = func(t target) bool {
				return t.change == ChangeMoved && t.before == a.MessageIndex && isTool(t.tool, a)
			}
		case repair.ActionInsert:
			// The action names the message of the call answered: that places a response
			// without an id.
			fits = func(t target) bool {
				return (t.change == ChangeSynthesized || t.change == ChangeInserted) && isTool(t.tool, a) &&
					(t.callAt == nil || t.callAt.Message == a.MessageIndex)
			}
		case repair.ActionRewrite:
			fits = func(t target) bool {
				return (t.change == ChangeRewrittenID || t.change == ChangeRewritten) && t.before == a.MessageIndex && isTool(t.tool, a)
			}
		}
		linked := false
		for _, t := range targets {
			if fits != nil && fits(t) {
				*t.actions = append(*t.actions, ai)
				linked = true
			}
		}
		if linked {
			continue
		}
		// Actions on a message as a whole (a merge, a dropped reasoning item), or whose
		// effect shows on no block: a result "moved" next to its call by dropping what
		// stood between them is unchanged in place.
		for _, t := range messages {
			if t.before == a.MessageIndex {
				*t.actions = append(*t.actions, ai)
				break
			}
		}
	}
}
