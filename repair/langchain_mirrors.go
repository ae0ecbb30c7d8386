package repair

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// A LangChain AI message made by a real chat model carries the provider's own copy of
// each call beside tool_calls, under the same id (a mirror). The chat model classes send
// some of these copies to the provider as they are, so they are the same call as the
// tool_calls entry: when tmend removes a call or rewrites its id, it does the same to its
// copies, or the provider would see a call the transcript no longer answers.
//
//   - content blocks: ChatAnthropic's {type:"tool_use", id, name, input} (sent by
//     ChatAnthropic even when tool_calls is empty), LangChain's standard blocks
//     {type:"tool_call"|"tool_call_chunk"|"invalid_tool_call", id} (sent as tool_use by
//     ChatAnthropic for output_version "v1" messages), and the Responses API's
//     {type:"function_call", id:"fc_…", call_id} that Python stores with
//     output_version "responses/v1";
//   - additional_kwargs.tool_calls, ChatOpenAI's raw {id, type:"function", function}
//     (sent by ChatOpenAI, Python and JS, when tool_calls and invalid_tool_calls are
//     empty: all of them, the unparseable ones included);
//   - response_metadata.output, the Responses API's output items ({id:"fc_…",
//     type:"function_call", call_id, ...}), which ChatOpenAI (JS, Responses) sends as the
//     message's input items whenever they are there;
//   - tool_call_chunks, the pieces of an AIMessageChunk;
//   - additional_kwargs.__openai_function_call_ids__ (and __openai_custom_tool_call_ids__),
//     a map {call_id: item_id} ChatOpenAI reads the item ids from: not a call, so a key
//     that names no call is left alone; a removed call's key goes and a rewritten one's is
//     renamed.
//
// The k-th copy with an id in a list is the copy of the k-th call with that id (ids
// compared without surrounding white space). A copy of no call is a call tmend does not
// know: the transcript is refused (unrecognized_tool_call).

// copyList is one of the places a message keeps copies of its calls.
type copyList uint8

const (
	copiesContent copyList = iota
	copiesKwargs           // additional_kwargs.tool_calls
	copiesOutput           // response_metadata.output
	copiesChunks           // tool_call_chunks
)

func (l copyList) String() string {
	switch l {
	case copiesContent:
		return "a content block"
	case copiesKwargs:
		return "an additional_kwargs.tool_calls entry"
	case copiesOutput:
		return "a response_metadata.output item"
	}
	return "a tool_call_chunks entry"
}

// copyIDKey returns the member holding the call id of o, an element of list, when o is
// a copy of a call; keyOther when it is not one.
func copyIDKey(list copyList, o obj) keyCode {
	switch list {
	case copiesContent:
		typ := o.get(keyType)
		switch {
		case isString(typ, "tool_use"), isString(typ, "tool_call"), isString(typ, "tool_call_chunk"),
			isString(typ, "invalid_tool_call"):
			return keyID
		case isString(typ, "function_call"):
			return keyCallID
		}
	case copiesKwargs, copiesChunks:
		return keyID
	case copiesOutput:
		// function_call, custom_tool_call, computer_call, local_shell_call, ...: the
		// client-side calls; server-side ones (web_search_call, mcp_call) have no call_id.
		if o.has(keyCallID) && bytes.HasSuffix(wordOf(o.get(keyType)), []byte("_call")) {
			return keyCallID
		}
	}
	return keyOther
}

// lcFields are the members of an AI message's fields that tmend reads by name (their
// names are too long for a key code), found in one pass.
type lcFields struct {
	invalid, kwargs, meta, chunks []byte
	// LangChain JS 1 serializes an output_version "v1" AI message with its constructor's
	// fields again (lc_kwargs, nested) and its contentBlocks getter (also as
	// content_blocks); loading reads neither (contentBlocks comes from content), so the
	// calls they repeat are not calls.
	lcKwargs, blocksCamel, blocksSnake []byte
}

// readLCFields reads them from o into f (filled, not returned: 168 bytes, copied for
// each AI message).
func readLCFields(o obj, f *lcFields) {
	for imb := range o.ms {
		mb := &o.ms[imb]
		if mb.code() != keyOther {
			continue
		}
		// Only these lengths (or a key spelled with escapes) can be one of the names.
		n := mb.valStart() - mb.keyStart(o.raw)
		if n < 12 {
			continue
		}
		switch {
		case mb.is(o.raw, "lc_kwargs"):
			f.lcKwargs = mb.val(o.raw)
		case mb.is(o.raw, "contentBlocks"):
			f.blocksCamel = mb.val(o.raw)
		case mb.is(o.raw, "content_blocks"):
			f.blocksSnake = mb.val(o.raw)
		case mb.is(o.raw, "invalid_tool_calls"):
			f.invalid = mb.val(o.raw)
		case mb.is(o.raw, "additional_kwargs"):
			f.kwargs = mb.val(o.raw)
		case mb.is(o.raw, "response_metadata"):
			f.meta = mb.val(o.raw)
		case mb.is(o.raw, "tool_call_chunks"):
			f.chunks = mb.val(o.raw)
		}
	}
}

// Names of the maps from call ids to Responses item ids.
var lcIDMaps = []string{"__openai_function_call_ids__", "__openai_custom_tool_call_ids__"}

// copyOf returns the index in parts of the call that a copy with key key, the rank-th
// copy with that key in its list, copies: the rank-th call with that key; -1 when there
// is none. keyOf gives each part's key, ok false for a part that is not a call with an id.
func copyOf(n int, keyOf func(pi int) (string, bool), key string, rank int) int {
	for pi := 0; pi < n; pi++ {
		if k, ok := keyOf(pi); ok && k == key {
			if rank == 0 {
				return pi
			}
			rank--
		}
	}
	return -1
}

// eachCopy calls fn with each copy of a call in list (the array arr, or its blocks blks
// when have), with the member holding its id and the id's key; and nonCopy, when not nil,
// with every other element. A copy whose id is not a string makes the transcript
// doubtful. rank counts the copies before it in the list with the same key.
func (ps *parser) eachCopy(list copyList, arr []byte, blks []block, have bool,
	fn func(raw []byte, o obj, idKey keyCode, id, key string, rank int), nonCopy func(raw []byte, o obj, isObj bool)) {
	var seen []string
	ps.eachElem(arr, blks, have, func(raw []byte, o obj, isObj bool) {
		k := keyOther
		if isObj {
			k = copyIDKey(list, o)
		}
		var idv []byte
		if k != keyOther {
			idv = o.get(k)
		}
		if len(idv) == 0 || string(idv) == "null" {
			if nonCopy != nil {
				nonCopy(raw, o, isObj)
			}
			return
		}
		if idv[0] != '"' {
			ps.doubtful(fmt.Sprintf("%s that copies a call has an id that is a JSON %s, not a string", list, kindOf(idv[0])))
			return
		}
		id, _ := idString(idv)
		key := strings.TrimSpace(id)
		rank := 0
		for _, s := range seen {
			if s == key {
				rank++
			}
		}
		seen = append(seen, key)
		fn(raw, o, k, id, key, rank)
	})
}

// lcMirrors matches the copies of calls in AI message m (fields v, f) with its calls (the
// first calls of its parts), records them as known, and refuses one that copies no call.
// It reports whether the message has content besides the copies and its other parts (so
// that it survives losing every part).
func lcMirrors(m *message, ps *parser, v *lcView, f *lcFields, calls int) (other bool) {
	keyOf := func(pi int) (string, bool) { return lcKey(ps, &m.parts()[pi]) }
	match := func(list copyList) func(raw []byte, o obj, idKey keyCode, id, key string, rank int) {
		return func(raw []byte, _ obj, _ keyCode, id, key string, rank int) {
			if copyOf(len(m.parts()), keyOf, key, rank) < 0 {
				ps.doubtful(fmt.Sprintf("%s copies a call with id %q that neither tool_calls nor invalid_tool_calls has", list, id))
				return
			}
			ps.knownValues = append(ps.knownValues, raw)
		}
	}
	content := v.inner.get(keyContent)
	if len(content) > 0 && content[0] == '[' {
		blks, have := v.blocks(keyContent)
		next := calls // the parts after the calls are content blocks, in order
		ps.eachCopy(copiesContent, content, blks, have, match(copiesContent),
			func(raw []byte, o obj, isObj bool) {
				if next < len(m.parts()) && sameBytes(raw, m.parts()[next].raw()) {
					next++
					return // a part of the message (lcContentParts)
				}
				other = true
				// ChatAnthropic keeps Anthropic's own blocks (server_tool_use,
				// redacted_thinking, ...) in content: only other dialects' shapes are foreign.
				if isObj && ps.detected != "" && ps.foreign == "" {
					if d := blockSignal(o); d != "" && d != ps.detected && d != Anthropic {
						ps.foreign, ps.foreignMsg = d, ps.msg
					}
				}
			})
	} else {
		other = !isEmptyValue(content)
	}
	// Provider metadata can be large (usage, logprobs): it is read only when it may hold
	// a copy (a key spelled with escapes may be any key).
	if len(f.kwargs) > 0 && f.kwargs[0] == '{' && mayHold(f.kwargs, `"tool_calls"`, `"__openai_`) {
		kw, ok, _ := ps.obj(f.kwargs)
		if ok {
			ps.eachCopy(copiesKwargs, kw.get(keyToolCalls), nil, false, match(copiesKwargs), nil)
			for _, name := range lcIDMaps {
				if mb, ok := findMember(kw.raw, kw.ms, name); ok && mb.val(kw.raw)[0] == '{' {
					ps.knownValues = append(ps.knownValues, mb.val(kw.raw))
				}
			}
		}
	}
	if len(f.meta) > 0 && f.meta[0] == '{' && mayHold(f.meta, `"output"`, `"output"`) {
		if meta, ok, _ := ps.obj(f.meta); ok {
			ps.eachCopy(copiesOutput, meta.get(keyOutput), nil, false, match(copiesOutput), nil)
		}
	}
	ps.eachCopy(copiesChunks, f.chunks, nil, false, match(copiesChunks), nil)
	for _, v := range [][]byte{f.lcKwargs, f.blocksCamel, f.blocksSnake} {
		if len(v) > 0 {
			ps.knownValues = append(ps.knownValues, v)
		}
	}
	return other
}

// mayHold reports whether the object v may have a member a or b: their keys are in it
// as written, or some key is spelled with escapes.
func mayHold(v []byte, a, b string) bool {
	return bytes.Contains(v, []byte(a)) || bytes.Contains(v, []byte(b)) || bytes.IndexByte(v, '\\') >= 0
}

// rebuildLangChain writes AI message m without its removed calls, with its calls' current
// ids, and with the copies of each call following it: a removed call's copies go, a
// rewritten call's copies take its new id. An emptied tool_calls, invalid_tool_calls,
// content or output stays as an empty array (as LangChain writes them), but content that
// ChatOpenAI would send as an empty array is "" for --target openai (ids.blankContent,
// blankEmptyContent); an emptied
// additional_kwargs.tool_calls goes, since ChatOpenAI would send it as an empty list,
// which OpenAI rejects.
func rebuildLangChain(m *message, removed []bool, ids *parser) ([]byte, bool) {
	ps := &parser{}
	var v lcView
	lcRead(m, ps, &v)
	var f lcFields
	readLCFields(v.inner, &f)
	// The calls as they were: their ids, index-aligned with m.parts().
	orig := make([]string, len(m.parts()))
	n := 0
	for _, arr := range [][]byte{v.inner.get(keyToolCalls), f.invalid} {
		ps.eachElem(arr, nil, false, func(_ []byte, o obj, _ bool) {
			if n < len(orig) {
				orig[n], _ = idString(o.get(keyID))
			}
			n++
		})
	}
	keyOf := func(pi int) (string, bool) {
		if m.parts()[pi].kind != partCall || !m.parts()[pi].hasID {
			return "", false
		}
		return strings.TrimSpace(orig[pi]), true
	}
	kept := false
	for pi := range m.parts() {
		kept = kept || !removed[pi]
	}
	if !kept && !m.otherContent {
		return nil, false
	}
	// copyEdit is what becomes of a copy: nil to drop it, else its bytes.
	copyEdit := func(raw []byte, o obj, idKey keyCode, id, key string, rank int) []byte {
		pi := copyOf(len(m.parts()), keyOf, key, rank)
		switch {
		case pi < 0:
			return raw // none at parse time either, or it would have been refused
		case removed[pi]:
			return nil
		case ids.id(&m.parts()[pi]) != id:
			return setPath(raw, []keyCode{idKey}, ids.idText(&m.parts()[pi]))
		}
		return raw
	}
	// The content blocks that are parts (lcContentParts) follow the calls in m.parts(), in
	// content order.
	next := n
	// editCopies rewrites the array arr of list, or returns nil when nothing changed. In
	// content, a removed part goes too.
	editCopies := func(list copyList, arr []byte) []byte {
		var out [][]byte
		changed := false
		ps.eachCopy(list, arr, nil, false, func(raw []byte, o obj, idKey keyCode, id, key string, rank int) {
			e := copyEdit(raw, o, idKey, id, key, rank)
			changed = changed || !sameBytes(e, raw)
			if e != nil {
				out = append(out, e)
			}
		}, func(raw []byte, o obj, isObj bool) {
			if list == copiesContent && next < len(m.parts()) && sameBytes(raw, m.parts()[next].raw()) {
				next++
				if removed[next-1] {
					changed = true
					return
				}
			}
			out = append(out, raw)
		})
		if !changed {
			return nil
		}
		return joinArray(out)
	}

	inner := newObjectEdit(v.inner.raw)
	// The calls themselves: tool_calls, then invalid_tool_calls.
	start := 0
	for _, k := range []struct {
		code keyCode
		name string
		arr  []byte
	}{{keyToolCalls, "", v.inner.get(keyToolCalls)}, {keyOther, "invalid_tool_calls", f.invalid}} {
		var elems [][]byte
		ps.eachElem(k.arr, nil, false, func(raw []byte, _ obj, _ bool) { elems = append(elems, raw) })
		var out [][]byte
		changed := false
		for j, e := range elems {
			pi := start + j
			switch {
			case pi >= len(m.parts()):
				out = append(out, e)
			case removed[pi]:
				changed = true
			default:
				out = append(out, m.parts()[pi].raw())
				changed = changed || !sameBytes(m.parts()[pi].raw(), e)
			}
		}
		start += len(elems)
		if changed {
			inner.set(k.code, k.name, joinArray(out))
		}
	}
	if c := v.inner.get(keyContent); len(c) > 0 && c[0] == '[' {
		e := editCopies(copiesContent, c)
		out := c
		if e != nil {
			out = e
		}
		switch {
		case ids.blankContent && emptyForOpenAI(out, false):
			inner.set(keyContent, "", []byte(`""`))
		case e != nil:
			inner.set(keyContent, "", e)
		}
	}
	if len(f.chunks) > 0 && f.chunks[0] == '[' {
		if e := editCopies(copiesChunks, f.chunks); e != nil {
			inner.set(keyOther, "tool_call_chunks", e)
		}
	}
	if len(f.kwargs) > 0 && f.kwargs[0] == '{' {
		kw := newObjectEdit(f.kwargs)
		if tc := kw.get(keyToolCalls); len(tc) > 0 && tc[0] == '[' {
			if e := editCopies(copiesKwargs, tc); e != nil {
				if string(e) == "[]" {
					kw.drop(keyToolCalls, "")
				} else {
					kw.set(keyToolCalls, "", e)
				}
			}
		}
		for _, name := range lcIDMaps {
			if mp := kw.getName(name); len(mp) > 0 && mp[0] == '{' {
				if e := editIDMap(mp, m.parts(), removed, keyOf, ids); e != nil {
					kw.set(keyOther, name, e)
				}
			}
		}
		if out, ok := kw.done(); ok {
			inner.set(keyOther, "additional_kwargs", out)
		}
	}
	if len(f.meta) > 0 && f.meta[0] == '{' {
		meta := newObjectEdit(f.meta)
		if o := meta.get(keyOutput); len(o) > 0 && o[0] == '[' {
			if e := editCopies(copiesOutput, o); e != nil {
				meta.set(keyOutput, "", e)
			}
		}
		if out, ok := meta.done(); ok {
			inner.set(keyOther, "response_metadata", out)
		}
	}
	out, _ := inner.done()
	if v.outer != keyOther {
		mb, _ := findCode(m.ms(), v.outer)
		out = setMember(m.raw(), mb, out)
	}
	return out, true
}

// lcEmptyForOpenAI reports whether the AI message fields inner have a content array that
// ChatOpenAI sends as an empty one once --target openai's drops are made (the blocks a
// provider ran and redacted_thinking: dropProviderRuns): blankEmptyContent. An
// output_version "v1" message goes through another converter, and is left alone.
func lcEmptyForOpenAI(inner obj) bool {
	if !emptyForOpenAI(inner.get(keyContent), true) {
		return false
	}
	var f lcFields
	readLCFields(inner, &f)
	return len(f.meta) == 0 || f.meta[0] != '{' || !isString(newObjectEdit(f.meta).getName("output_version"), "v1")
}

// emptyForOpenAI reports whether the JSON value c is an array that ChatOpenAI's chat
// converter empties: every element a block of a type it leaves out of assistant content,
// or with dropped one that --target openai drops.
func emptyForOpenAI(c []byte, dropped bool) bool {
	if len(c) == 0 || c[0] != '[' {
		return false
	}
	empty := true
	(&parser{}).eachElem(c, nil, false, func(raw []byte, o obj, isObj bool) {
		switch {
		case !isObj:
			empty = false
		case slices.ContainsFunc(openAILeavesOut, func(t string) bool { return isString(o.get(keyType), t) }):
		case dropped && lcRedacted(raw):
		case dropped:
			if id, _ := lcServerBlock(o); id == nil {
				empty = false
			}
		default:
			empty = false
		}
	})
	return empty
}

// openAILeavesOut are the content block types ChatOpenAI (@langchain/openai 1.6,
// convertMessagesToCompletionsMessageParams) leaves out of a message's content.
var openAILeavesOut = []string{"tool_use", "tool_call", "functionCall", "reasoning", "reasoning_content", "thinking"}

// sameBytes reports whether a and b are the very same bytes (not a copy of them).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// editIDMap rewrites a {call_id: item_id} map for the calls' fates: a key whose calls are
// all removed goes; a key no kept call has any more is renamed to the new id of the
// first kept call that had it. nil when nothing changes.
func editIDMap(mp []byte, parts []part, removed []bool, keyOf func(pi int) (string, bool), ids *parser) []byte {
	ms, err := membersOf(mp)
	if err != nil {
		return nil
	}
	var b objectBuilder
	changed := false
	for imb := range ms {
		mb := &ms[imb]
		key := strings.TrimSpace(mb.name(mp))
		name := mb.key(mp)
		found, keep := false, false
		var renamed []byte
		for pi := range parts {
			if k, ok := keyOf(pi); !ok || k != key {
				continue
			}
			found = true
			if removed[pi] {
				continue
			}
			if ids.id(&parts[pi]) == mb.name(mp) {
				keep = true
			} else if renamed == nil {
				renamed = ids.idText(&parts[pi])
			}
		}
		switch {
		case !found || keep:
		case renamed != nil:
			name, changed = renamed, true
		default:
			changed = true
			continue
		}
		b = b.member(name, mb.val(mp))
	}
	if !changed {
		return nil
	}
	if len(b) == 0 {
		return []byte("{}")
	}
	return b.done()
}

// objectEdit collects changes to the members of one object and writes it once.
type objectEdit struct {
	raw   []byte
	ms    []member
	vals  map[int][]byte
	drops map[int]bool
}

func newObjectEdit(raw []byte) *objectEdit {
	ms, _ := membersOf(raw)
	return &objectEdit{raw: raw, ms: ms}
}

// index finds the member with code code, or named name when code is keyOther.
func (e *objectEdit) index(code keyCode, name string) int {
	for i, mb := range e.ms {
		if code != keyOther && mb.code() == code || code == keyOther && mb.code() == keyOther && mb.is(e.raw, name) {
			return i
		}
	}
	return -1
}

func (e *objectEdit) get(code keyCode) []byte {
	if i := e.index(code, ""); i >= 0 {
		return e.ms[i].val(e.raw)
	}
	return nil
}

func (e *objectEdit) getName(name string) []byte {
	if i := e.index(keyOther, name); i >= 0 {
		return e.ms[i].val(e.raw)
	}
	return nil
}

func (e *objectEdit) set(code keyCode, name string, val []byte) {
	if i := e.index(code, name); i >= 0 {
		if e.vals == nil {
			e.vals = map[int][]byte{}
		}
		e.vals[i] = val
	}
}

func (e *objectEdit) drop(code keyCode, name string) {
	if i := e.index(code, name); i >= 0 {
		if e.drops == nil {
			e.drops = map[int]bool{}
		}
		e.drops[i] = true
	}
}

// done returns the object with its changes, and whether there were any. Changed
// members keep their key as written; the members are joined by plain commas.
func (e *objectEdit) done() ([]byte, bool) {
	if len(e.vals) == 0 && len(e.drops) == 0 {
		return e.raw, false
	}
	if len(e.drops) == 0 {
		// Values only: splice them in from the last, keeping every other byte.
		out := e.raw
		for i := len(e.ms) - 1; i >= 0; i-- {
			if v, ok := e.vals[i]; ok {
				out = setMember(out, e.ms[i], v)
			}
		}
		return out, true
	}
	out := []byte{'{'}
	first := true
	for i, mb := range e.ms {
		if e.drops[i] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, e.raw[mb.keyStart(e.raw):mb.valStart()]...)
		if v, ok := e.vals[i]; ok {
			out = append(out, v...)
		} else {
			out = append(out, mb.val(e.raw)...)
		}
	}
	return append(out, '}'), true
}
