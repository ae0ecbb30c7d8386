package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// A session file is pi's (and OpenClaw's) JSON Lines transcript: a header line
// {"type":"session","version":3,"id",...}, then one entry per line, each with an id and
// the parentId of the entry before it. The model's context is the parentId path from the
// leaf (pi: the last entry of the file) to the root, shortened by the last compaction
// entry on it (pi's buildSessionContext). tmend repairs the messages of that context and
// writes the tree back: unchanged lines byte for byte, inserted results as new entries on
// the path, dropped entries unlinked, branches off the path left alone.

// Session file versions tmend reads: 2 and 3 are pi's (2 differs only by a role name of
// an app message); 4 is OpenClaw's, read when it holds only version 3's entries
// (v3EntryTypes). Version 1 has no entry ids; pi gives them random ones when it opens the
// file.
const (
	minSessionVersion = 2
	maxSessionVersion = 4
)

// sfEntry is one line of a session file, parsed as far as the tree needs.
type sfEntry struct {
	raw   []byte // the line with its newline, if it had one
	blank bool   // a blank line, which pi skips and tmend keeps

	Type      string          `json:"type"`
	ID        *string         `json:"id"`
	ParentID  *string         `json:"parentId"`
	Timestamp string          `json:"timestamp"`
	Message   json.RawMessage `json:"message"`
	FirstKept string          `json:"firstKeptEntryId"`
	Summary   string          `json:"summary"`
	Version   *int            `json:"version"`
	// OpenClaw's version 4: a side append does not move the leaf.
	AppendMode *string `json:"appendMode"`
}

// v3EntryTypes are the entry types of pi's version 3 files. OpenClaw's version 4 adds
// reset entries, leaf controls and side appends, which move the leaf and cut the context
// in ways tmend does not follow yet: a version 4 file is read only when it has none.
var v3EntryTypes = map[string]bool{"message": true, "thinking_level_change": true, "model_change": true, "compaction": true,
	"branch_summary": true, "custom": true, "custom_message": true, "label": true, "session_info": true}

func (e *sfEntry) id() string {
	if e.ID == nil {
		return ""
	}
	return *e.ID
}

func (e *sfEntry) parent() string {
	if e.ParentID == nil {
		return ""
	}
	return *e.ParentID
}

// contextMessage reports whether buildSessionContext makes a message of e: message
// entries hold one, custom_message and branch_summary entries become app messages.
func (e *sfEntry) contextMessage() bool {
	switch e.Type {
	case "message", "custom_message":
		return true
	case "branch_summary":
		return e.Summary != ""
	}
	return false
}

// IsSessionHeader reports whether line is the header of a pi or OpenClaw session file
// ({"type":"session",...}).
func IsSessionHeader(line []byte) bool {
	var h struct {
		Type string `json:"type"`
	}
	line = bytes.TrimSpace(line)
	return len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &h) == nil && h.Type == "session"
}

// SessionFileInfo is what a session file's tree looked like, for the report.
type SessionFileInfo struct {
	// Entries counts the entries (the header and blank lines not included); OffPath those
	// not on the leaf's path, in Branches subtrees hanging off it.
	Entries, OffPath, Branches int
	// CutOff is set when the file ends in a line cut off mid-write, kept as it is.
	CutOff bool
}

// sessionFile checks or (fix) repairs a session file. out is the repaired file, nil when
// nothing changed or the file is left alone (its report says why).
func sessionFile(data []byte, opts repair.Options, fix bool) (out []byte, s *report.Session, info SessionFileInfo) {
	s = &report.Session{Line: 1, BytesIn: len(data), BytesOut: len(data), Dialect: repair.OpenClaw}
	refuse := func(st model.SessionStatus, format string, args ...any) ([]byte, *report.Session, SessionFileInfo) {
		s.Status, s.Reason = st, fmt.Sprintf(format, args...)+"; left unchanged"
		return nil, s, info
	}
	t, err := parseSessionFile(data)
	if err != nil {
		return refuse(model.StatusUnparseable, "%v", err)
	}
	s.Session = t.header.id()
	if v := t.header.Version; v == nil || *v < minSessionVersion || *v > maxSessionVersion {
		if v == nil || *v < minSessionVersion {
			return refuse(model.StatusUnsupported, "session file version 1 has entries without ids (pi gives them ids when it opens the file: open the session in pi once, then run tmend again)")
		}
		return refuse(model.StatusUnsupported, "session file version %d is newer than tmend knows (%d to %d)", *v, minSessionVersion, maxSessionVersion)
	}
	if err := t.index(); err != nil {
		return refuse(model.StatusUnsupported, "%v", err)
	}
	info = t.info()
	if len(t.path) == 0 {
		s.Status = model.StatusClean
		return nil, s, info
	}

	// The transcript: the messages of the context region, in path order.
	var msgs [][]byte
	var from []int // transcript index → entry index
	for _, ei := range t.region {
		e := &t.entries[ei]
		if !e.contextMessage() {
			continue
		}
		m := []byte(e.Message)
		if t.standIn(e) {
			m = []byte(`{"role":"custom"}`) // an app message: no tool calls, never changed
		}
		msgs, from = append(msgs, m), append(from, ei)
	}
	arr := append(append([]byte{'['}, bytes.Join(msgs, []byte{','})...), ']')
	opts.Dialect = repair.OpenClaw
	if ts, err := time.Parse(time.RFC3339Nano, t.entries[t.path[len(t.path)-1]].Timestamp); err == nil && opts.UpdatedAt.IsZero() {
		opts.UpdatedAt = ts
	}

	var rep repair.Report
	var origins []repair.Origin
	var res repair.Result
	if fix {
		res, origins, _ = repair.RepairWithOrigins(arr, opts)
		rep = res.Report
	} else {
		rep, _ = repair.Validate(arr, opts)
	}
	s.Status, s.Reason = model.EngineStatus(rep.Status), rep.Reason
	s.MessagesIn, s.MessagesOut, s.PendingCalls = rep.MessagesIn, rep.MessagesOut, rep.PendingCalls
	s.StageCounts, s.Issues, s.Actions = rep.StageCounts, rep.Issues, rep.Actions
	if !fix || rep.Status != repair.StatusRepaired {
		return nil, s, info
	}
	out, err = t.rewrite(origins, from, opts.Now)
	if err != nil {
		return refuse(model.StatusUnsupported, "%v", err)
	}
	s.BytesOut = len(out)
	return out, s, info
}

// standIn reports whether the transcript holds e as an app message with no tool calls:
// an entry that buildSessionContext turns into one, and in a version 2 file a message of
// the role hookMessage, which pi renames to custom when it opens the file (tmend leaves
// the renaming to pi).
func (t *sessionTree) standIn(e *sfEntry) bool {
	if e.Type != "message" {
		return true
	}
	if *t.header.Version >= 3 {
		return false
	}
	var m struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(e.Message, &m) == nil && m.Role == "hookMessage"
}

// sessionTree is a parsed session file.
type sessionTree struct {
	header  *sfEntry
	entries []sfEntry // every line, the header first
	byID    map[string]int
	// path is the leaf's parentId path, root first; region is its tail that the model
	// sees (from the last compaction's first kept entry, else the whole path).
	path, region []int
	compaction   int // the last compaction entry on the path, -1 when none
	regionParent string
	cutOff       bool // the last line is a write cut off mid-line (see parseSessionFile)
}

func parseSessionFile(data []byte) (*sessionTree, error) {
	t := &sessionTree{compaction: -1}
	hdr := -1
	for n := 1; len(data) > 0; n++ {
		end := bytes.IndexByte(data, '\n') + 1
		if end == 0 {
			end = len(data)
		}
		e := sfEntry{raw: data[:end]}
		data = data[end:]
		if len(bytes.TrimSpace(e.raw)) == 0 {
			e.blank = true
		} else if err := json.Unmarshal(e.raw, &e); err != nil && len(data) == 0 && e.raw[len(e.raw)-1] != '\n' {
			// The last write was cut off (a crash mid-line): pi skips the line, and so does
			// tmend, keeping its bytes.
			e.blank, t.cutOff = true, true
		} else if err != nil {
			return nil, fmt.Errorf("line %d of the session file is not a JSON entry (%v): pi skips such a line, tmend does not guess; remove or mend it by hand", n, err)
		}
		if hdr < 0 && !e.blank {
			if e.Type != "session" {
				return nil, fmt.Errorf("line %d is not a session header", n)
			}
			hdr = n - 1
		}
		t.entries = append(t.entries, e)
	}
	if hdr < 0 {
		return nil, fmt.Errorf("session file has no header")
	}
	t.header = &t.entries[hdr]
	return t, nil
}

// index finds every entry by id, the leaf's path and the region the model sees. An entry
// without an id, a repeated id or a parentId naming no entry is refused: tmend would
// have to guess how pi reads the tree.
func (t *sessionTree) index() error {
	t.byID = map[string]int{}
	leaf := -1
	for i := range t.entries {
		e := &t.entries[i]
		if e.blank || e == t.header {
			continue
		}
		if e.Type == "session" {
			return fmt.Errorf("line %d is a second session header", i+1)
		}
		if *t.header.Version >= 4 && (!v3EntryTypes[e.Type] || e.AppendMode != nil) {
			return fmt.Errorf("line %d holds an OpenClaw version 4 entry (type %q, a reset, leaf control or side append) that tmend does not read yet", i+1, e.Type)
		}
		if e.ID == nil || *e.ID == "" {
			return fmt.Errorf("the %s entry on line %d has no id", e.Type, i+1)
		}
		if j, dup := t.byID[*e.ID]; dup {
			return fmt.Errorf("entries on lines %d and %d have the same id %q", j+1, i+1, *e.ID)
		}
		t.byID[*e.ID] = i
		leaf = i
	}
	for i := range t.entries {
		e := &t.entries[i]
		if p := e.parent(); p != "" && e != t.header && !e.blank {
			if _, ok := t.byID[p]; !ok {
				return fmt.Errorf("the entry %q on line %d names a parent %q that is not in the file", e.id(), i+1, p)
			}
		}
	}
	if leaf < 0 {
		return nil
	}
	seen := map[int]bool{}
	for i := leaf; ; {
		if seen[i] {
			return fmt.Errorf("the parentId chain from the leaf %q loops at %q", t.entries[leaf].id(), t.entries[i].id())
		}
		seen[i] = true
		t.path = append(t.path, i)
		p := t.entries[i].parent()
		if p == "" {
			break
		}
		i = t.byID[p]
	}
	for l, r := 0, len(t.path)-1; l < r; l, r = l+1, r-1 {
		t.path[l], t.path[r] = t.path[r], t.path[l]
	}
	// buildSessionContext: the last compaction on the path; before it, only the entries
	// from its firstKeptEntryId on (none when that is not on the path before it).
	at := -1
	for k, i := range t.path {
		if t.entries[i].Type == "compaction" {
			t.compaction, at = i, k
		}
	}
	start := 0
	if at >= 0 {
		start = at // the compaction itself: it stays where it is
		for k := range at {
			if t.entries[t.path[k]].id() == t.entries[t.compaction].FirstKept {
				start = k
				break
			}
		}
	}
	t.region = t.path[start:]
	if start > 0 {
		t.regionParent = t.entries[t.path[start-1]].id()
	}
	return nil
}

func (t *sessionTree) info() SessionFileInfo {
	in := SessionFileInfo{CutOff: t.cutOff}
	onPath := map[int]bool{}
	for _, i := range t.path {
		onPath[i] = true
	}
	for i := range t.entries {
		e := &t.entries[i]
		if e.blank || e == t.header {
			continue
		}
		in.Entries++
		if onPath[i] {
			continue
		}
		in.OffPath++
		if p := e.parent(); p != "" && onPath[t.byID[p]] {
			in.Branches++
		}
	}
	return in
}

// rewrite writes the file with the repaired transcript: origins are its messages and
// where each came from, from the entry of each input message.
func (t *sessionTree) rewrite(origins []repair.Origin, from []int, now time.Time) ([]byte, error) {
	entryOf := map[int]int{} // entry index → transcript index
	for k, ei := range from {
		entryOf[ei] = k
	}
	// Entries of the region that are no message stay after the message before them.
	anchored := map[int][]int{} // transcript index (-1: before all) → entries
	last := -1
	survives := make([]bool, len(from))
	for _, o := range origins {
		if o.Input >= 0 {
			survives[o.Input] = true
		}
	}
	for _, ei := range t.region {
		if k, ok := entryOf[ei]; ok {
			if t.standIn(&t.entries[ei]) && !survives[k] {
				return nil, fmt.Errorf("the repair would drop the %s entry %q, which holds no tool call", t.entries[ei].Type, t.entries[ei].id())
			}
			if survives[k] {
				last = k
			}
			continue
		}
		anchored[last] = append(anchored[last], ei)
	}

	// The region in its new order: existing entries by index, new ones as negative
	// numbers -(n+1) into news.
	type added struct {
		id, parent string
		msg        []byte
	}
	var news []added
	var order []int
	changed := map[int][]byte{}
	order = append(order, anchored[-1]...)
	ids := func(id string) bool { _, ok := t.byID[id]; return ok }
	for _, o := range origins {
		msg := o.Msg
		if o.Input < 0 {
			news = append(news, added{id: t.newID(ids, len(news)), msg: msg})
			t.byID[news[len(news)-1].id] = -1
			order = append(order, -len(news))
			continue
		}
		ei := from[o.Input]
		if o.Changed {
			if t.standIn(&t.entries[ei]) {
				return nil, fmt.Errorf("the repair would change the %s entry %q, which holds no tool call", t.entries[ei].Type, t.entries[ei].id())
			}
			changed[ei] = msg
		}
		order = append(order, ei)
		order = append(order, anchored[int(o.Input)]...)
	}

	idOf := func(x int) string {
		if x < 0 {
			return news[-x-1].id
		}
		return t.entries[x].id()
	}
	// New parents along the new order; the first keeps the region's parent.
	parentOf := map[int]string{}
	prev := t.regionParent
	for _, x := range order {
		if x < 0 {
			news[-x-1].parent = prev
		} else {
			parentOf[x] = prev
		}
		prev = idOf(x)
	}
	// A dropped entry's children off the path go to the nearest entry before it that is
	// kept; the compaction's first kept entry becomes the region's new first.
	kept := map[int]bool{}
	for _, x := range order {
		if x >= 0 {
			kept[x] = true
		}
	}
	heir := map[string]string{}
	h := t.regionParent
	for _, ei := range t.region {
		if kept[ei] {
			h = t.entries[ei].id()
		} else {
			heir[t.entries[ei].id()] = h
		}
	}
	newFirstKept := ""
	if t.compaction >= 0 && len(t.region) > 0 && t.region[0] != t.compaction && len(order) > 0 {
		newFirstKept = idOf(order[0])
	}

	// Write the lines in file order, new entries right after their parent's line.
	after := map[string][]int{}
	for n := range news {
		after[news[n].parent] = append(after[news[n].parent], n)
	}
	inRegion := map[int]bool{}
	for _, ei := range t.region {
		inRegion[ei] = true
	}
	ts := now.UTC().Format("2006-01-02T15:04:05.000Z")
	type line struct {
		id string
		b  []byte
	}
	var lines []line
	var emitNew func(parent string)
	emitNew = func(parent string) {
		for _, n := range after[parent] {
			a := news[n]
			b := fmt.Appendf(nil, `{"type":"message","id":%s,"parentId":%s,"timestamp":"%s","message":`, jsonString(a.id), jsonString(a.parent), ts)
			lines = append(lines, line{a.id, append(append(b, a.msg...), "}\n"...)})
			emitNew(a.id)
		}
	}
	for i := range t.entries {
		e := &t.entries[i]
		if e.blank || e == t.header {
			lines = append(lines, line{b: e.raw})
			continue
		}
		if inRegion[i] && !kept[i] {
			continue // dropped
		}
		b := e.raw
		var err error
		if m, ok := changed[i]; ok {
			if b, err = setMember(b, "message", m); err != nil {
				return nil, err
			}
		}
		newParent, ok := parentOf[i]
		if !ok {
			newParent = e.parent()
			if hp, dropped := heir[newParent]; dropped {
				newParent = hp
			}
		}
		if newParent != e.parent() {
			if b, err = setMember(b, "parentId", jsonString(newParent)); err != nil {
				return nil, err
			}
		}
		if i == t.compaction && newFirstKept != "" && newFirstKept != e.FirstKept {
			if b, err = setMember(b, "firstKeptEntryId", jsonString(newFirstKept)); err != nil {
				return nil, err
			}
		}
		if b[len(b)-1] != '\n' {
			b = append(b[:len(b):len(b)], '\n')
		}
		lines = append(lines, line{e.id(), b})
		emitNew(e.id())
	}
	// pi's leaf is the file's last entry: the path's new end goes last, before only a
	// line cut off mid-write, which has no newline to end it.
	var cut []byte
	if t.cutOff {
		cut, lines = lines[len(lines)-1].b, lines[:len(lines)-1]
	}
	leaf := idOf(order[len(order)-1])
	var out []byte
	var leafLine []byte
	for _, l := range lines {
		if l.id == leaf {
			leafLine = l.b
			continue
		}
		out = append(out, l.b...)
	}
	return append(append(out, leafLine...), cut...), nil
}

// newID makes the id of the n-th new entry in pi's format (eight hex digits, unique in
// the file), derived from the session's id so the same repair gives the same file.
func (t *sessionTree) newID(taken func(string) bool, n int) string {
	for salt := 0; ; salt++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "tmend\x00%s\x00%d\x00%d", t.header.id(), n, salt))
		if id := hex.EncodeToString(sum[:4]); !taken(id) {
			return id
		}
	}
}

// jsonString is s as a JSON string, or null when empty (a root's parentId).
func jsonString(s string) []byte {
	if s == "" {
		return []byte("null")
	}
	b, _ := json.Marshal(s)
	return b
}

// setMember replaces the value of the top-level member key of the JSON object obj,
// keeping every other byte.
func setMember(obj []byte, key string, val []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("entry is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if tok == key {
			end := int(dec.InputOffset())
			start := end - len(v)
			out := append(append(append([]byte{}, obj[:start]...), val...), obj[end:]...)
			return out, nil
		}
	}
	return nil, fmt.Errorf("entry has no %q member", key)
}
