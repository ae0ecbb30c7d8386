package compact

import (
	"encoding/json"
	"strings"

	"github.com/tmend/tmend/repair"
)

// use is one tool call with its result, as compaction sees them.
type use struct {
	id, tool  string
	category  Category
	callMsg   int
	callPart  int
	resultMsg int // -1: unanswered
	resPart   int
	input     slot
	result    slot
	isError   bool
	turn      int    // index of the user turn the call is in
	canonical string // tool + sorted arguments, for dedupe
	path      string // the file the call names, if any
}

// transcript is a parsed transcript with its tiers.
type transcript struct {
	msgs     []byte
	d        repair.Dialect
	opts     *Options
	uses     []*use
	turns    []int // message index of each user turn's first message
	boundary int   // the first message kept byte for byte
	from     int   // the first message that may change (after the protected first turn)
	calls    int
	results  int
	tiers    Tiers
}

func newTranscript(msgs []byte, ol repair.Outline, opts *Options) *transcript {
	t := &transcript{msgs: msgs, d: ol.Dialect, opts: opts}
	byID := map[string]*use{}
	var idless []*use // calls without an id, paired by name in order
	for mi, m := range ol.Messages {
		if userTurn(m) {
			t.turns = append(t.turns, mi)
		}
		for pi, p := range m.Parts {
			base, ok := offsetIn(msgs, p.Raw)
			switch p.Kind {
			case repair.PartCall:
				t.calls++
				u := &use{id: p.CallID, tool: p.ToolName, callMsg: mi, callPart: pi, resultMsg: -1,
					turn: len(t.turns) - 1}
				u.category = opts.categoryOf(u.tool)
				if ok {
					u.input = inputSlot(t.d, p.Raw, base)
				}
				if _, in := inPlace[t.d]; in && ok {
					// The part answers itself: the result is the part's output.
					if res, input, answered := inPlaceSlots(t.d, m.Raw, p.Raw, base); answered {
						u.result, u.input, u.resultMsg, u.resPart = res, input, mi, pi
						t.results++
					}
				}
				t.uses = append(t.uses, u)
				if p.CallID == "" {
					idless = append(idless, u)
				} else if byID[p.CallID] == nil {
					byID[p.CallID] = u
				}
			case repair.PartResult:
				t.results++
				u := byID[p.CallID]
				if p.CallID == "" {
					for i, c := range idless {
						if c.tool == p.ToolName || p.ToolName == "" {
							u, idless = c, append(idless[:i:i], idless[i+1:]...)
							break
						}
					}
				}
				if u == nil || u.resultMsg >= 0 {
					continue
				}
				u.resultMsg, u.resPart = mi, pi
				// A synthetic result (tmend's or another repairer's) is known by its text:
				// it stays as it is, so that it is still known as one.
				if ok && !p.Synthetic {
					u.result = resultSlot(t.d, p.Raw, base)
					u.isError = resultIsError(t.d, p.Raw)
				}
			}
		}
	}
	t.tier()
	// Only what lies before the boundary is read further (the rules look no later).
	for _, u := range t.uses {
		if u.callMsg >= t.boundary {
			break
		}
		u.canonical, u.path = describeArgs(u)
		if u.resultMsg >= 0 && u.resultMsg < t.boundary {
			u.result.readText(msgs)
			u.isError = u.isError || u.category == CategoryExec && looksFailed(u.result.text)
		}
	}
	return t
}

// looksFailed finds a command's failure in its output (a line starting with error,
// fatal, panic or fail, or a non-zero exit status), for the dialects that keep no error
// flag (OpenAI, Gemini, most LangChain stores): its error text is what a model learns
// from, so it is kept like a flagged error's.
func looksFailed(text string) bool {
	for _, ex := range []string{"exit status ", "exit code "} {
		for rest := text; ; {
			i := strings.Index(rest, ex)
			if i < 0 {
				break
			}
			rest = rest[i+len(ex):]
			if rest != "" && rest[0] >= '1' && rest[0] <= '9' {
				return true
			}
		}
	}
	for line := range strings.Lines(text) {
		for _, w := range []string{"error", "fatal", "panic", "fail"} {
			if len(line) >= len(w) && strings.EqualFold(line[:len(w)], w) {
				return true
			}
		}
	}
	return false
}

// userTurn reports a message a person wrote: a user message that carries no tool
// result (block dialects put results in user messages).
func userTurn(m repair.OutlineMessage) bool {
	kind := m.Kind
	if kind == "constructor" { // LangChain's lc form: the class names the message
		var id []string
		if json.Unmarshal(value(m.Raw, "id"), &id) == nil && len(id) > 0 && id[len(id)-1] == "HumanMessage" {
			kind = "human"
		}
	}
	if kind != "user" && kind != "human" {
		return false
	}
	for _, p := range m.Parts {
		if p.Kind == repair.PartResult {
			return false
		}
	}
	return true
}

// tier sets the boundary and counts the tool uses of each tier. Messages before from
// (system, first turn) and from the boundary on are never touched; the boundary is a
// user turn's start, at or before both the KeepTurns-th last turn and the turn of the
// KeepToolUses-th last call, and moves in steps of BatchTurns turns.
func (t *transcript) tier() {
	o := t.opts
	n := len(t.turns)
	t.boundary, t.from = 0, 0
	if n == 0 {
		t.count()
		return
	}
	t.from = t.turns[0]
	if o.ProtectFirstTurn {
		t.from = len(t.msgs) // no second turn: all protected
		if n > 1 {
			t.from = t.turns[1]
		}
	}
	k := n - 1 // the last (current) turn is never touched
	if kt := n - max(o.KeepTurns, 1); kt < k {
		k = kt
	}
	if o.KeepToolUses > 0 && len(t.uses) > 0 {
		i := len(t.uses) - o.KeepToolUses
		if i < 0 {
			i = 0
		}
		if ct := t.uses[i].turn; ct < k {
			k = ct
		}
	}
	if k < 0 {
		k = 0
	}
	if b := max(o.BatchTurns, 1); k > 0 {
		k = k / b * b
	}
	t.boundary = t.turns[k]
	if t.from > t.boundary {
		t.from = t.boundary
	}
	t.count()
}

func (t *transcript) count() {
	last := len(t.msgs)
	if len(t.turns) > 0 {
		last = t.turns[len(t.turns)-1]
	}
	for _, u := range t.uses {
		switch {
		case u.resultMsg < 0 || u.callMsg >= last:
			t.tiers.Current++
		case u.callMsg < t.from:
			t.tiers.Protected++
		case u.resultMsg >= t.boundary:
			t.tiers.Recent++
		default:
			t.tiers.History++
		}
	}
}

// history reports a use compaction may change: answered, wholly between the protected
// first turn and the boundary, of a tool not protected.
func (t *transcript) history(u *use) bool {
	return u.resultMsg >= 0 && u.callMsg >= t.from && u.resultMsg < t.boundary && !t.opts.protected(u.tool)
}

// describeArgs returns the call's canonical form (tool and arguments with sorted keys)
// and the file path it names.
func describeArgs(u *use) (canonical, path string) {
	if !u.input.ok {
		return "", ""
	}
	var args map[string]any
	if json.Unmarshal([]byte(u.input.text), &args) != nil {
		return "", ""
	}
	b, _ := json.Marshal(args) // map keys come out sorted
	for _, k := range pathKeys {
		if s, ok := args[k].(string); ok && s != "" {
			path = s
			break
		}
	}
	return u.tool + " " + string(b), path
}

var pathKeys = []string{"path", "file_path", "filePath", "file", "filename", "notebook_path"}

// identifyingKeys are the arguments a stub keeps, so a model can make the call again.
var identifyingKeys = map[string]bool{"path": true, "file_path": true, "filePath": true, "file": true,
	"filename": true, "notebook_path": true, "pattern": true, "query": true, "q": true, "url": true,
	"command": true, "cmd": true, "glob": true, "dir": true, "directory": true, "offset": true,
	"limit": true, "line": true, "start_line": true, "end_line": true}

// identifying returns the call's identifying arguments as compact JSON in their order,
// each string cut to 200 characters; "" when it has none.
func identifying(u *use) string {
	if !u.input.ok {
		return ""
	}
	ms, ok := members([]byte(u.input.text))
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, m := range ms {
		if !identifyingKeys[m.key] {
			continue
		}
		v := []byte(u.input.text[m.start:m.end])
		if s, ok := str(v); ok {
			v = quote(cut(s, 200))
		} else if v[0] == '{' || v[0] == '[' {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.Write(quote(m.key))
		b.WriteByte(':')
		b.Write(v)
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteByte('}')
	return b.String()
}
