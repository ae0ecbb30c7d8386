package repair

import (
	"bytes"
	"fmt"
	"strings"
)

// LangChain is a list of LangChain messages as the libraries store them, in one of three
// forms:
//   - flat, {type:"ai", content, tool_calls, ...}: JS PostgresChatMessageHistory, which
//     stores a message's fields beside its type;
//   - {type:"ai", data:{content, tool_calls, ...}}: Python message_to_dict, JS
//     mapChatMessagesToStoredMessages;
//   - {lc:1, type:"constructor", id:[..., "AIMessage"], kwargs:{...}}: Python dumpd, JS
//     JSON.stringify, LangGraph's checkpoint serializer.
//
// A store writes one form, and a library reads back only its own, so a transcript
// mixing them is refused (unknown_dialect). An AI message's calls are its tool_calls
// [{id, name, args}] and its invalid_tool_calls [{id, name, args:"<string>", error}]
// (arguments that did not parse; langchain-openai still sends them to the provider), each
// answered by a tool message {type:"tool", tool_call_id}. The provider's own copies of a
// call in the same message (langchain_mirrors.go) are the same call: they are kept in
// step with it, and one that copies no call is refused.
const LangChain Dialect = "langchain"

var langChainSpec = &spec{
	name:  LangChain,
	parse: parseLangChain,
	messageSignal: func(f *msgFacts) bool {
		return !f.hasRole && (string(f.typ) == "constructor" || lcTypeKind(f.typ) != lcNone)
	},
	synth: func(c *part, id []byte, text string) []byte { return lcSynth(lcView{form: lcFlat}, c, id, text) },
	synthFor: func(m *message, c *part, id []byte, text string) []byte {
		var v lcView
		lcRead(m, &parser{}, &v)
		return lcSynth(v, c, id, text)
	},
	rebuild:      rebuildLangChain,
	providerRuns: langChainProviderRuns,
	// After a reasoning-only AI message, another AI message is the model's output; a
	// human, system or tool message is input (ChatOpenAI sends each as a Responses item).
	follower: func(m *message) follower {
		if m.kind == msgAssistant {
			return followsModel
		}
		return followsInput
	},
}

// lcForm is a stored form of LangChain messages.
type lcForm uint8

const (
	lcFlat lcForm = iota + 1
	lcData
	lcConstructor
)

func (f lcForm) String() string {
	switch f {
	case lcFlat:
		return "the flat form {type, ...fields}"
	case lcData:
		return "the {type, data} form"
	}
	return "the constructor form {lc, type, id, kwargs}"
}

type lcKind uint8

const (
	lcNone lcKind = iota // not a LangChain message
	lcAI
	lcTool
	lcOther // human, system, chat, function, remove
)

// langChainTypes are the message types LangChain serialises (BaseMessage._getType()), for
// telling a transcript without any dialect's calls clean (plainMessage).
var langChainTypes = words("ai", "AIMessageChunk", "human", "system", "tool", "function", "chat", "developer", "generic")

// lcTypeKind reads the type of the flat and {type, data} forms: Python's type field
// (chunks have their class name) and JS's _getType().
func lcTypeKind(typ []byte) lcKind {
	switch string(typ) {
	case "ai", "AIMessageChunk":
		return lcAI
	case "tool", "ToolMessageChunk":
		return lcTool
	case "human", "system", "generic", "chat", "function", "remove", "developer",
		"HumanMessageChunk", "SystemMessageChunk", "ChatMessageChunk", "FunctionMessageChunk":
		return lcOther
	}
	return lcNone
}

// lcClassKind reads the class name that ends the constructor form's id.
func lcClassKind(class []byte) lcKind {
	switch string(class) {
	case "AIMessage", "AIMessageChunk":
		return lcAI
	case "ToolMessage", "ToolMessageChunk":
		return lcTool
	case "HumanMessage", "HumanMessageChunk", "SystemMessage", "SystemMessageChunk", "ChatMessage",
		"ChatMessageChunk", "FunctionMessage", "FunctionMessageChunk", "RemoveMessage":
		return lcOther
	}
	return lcNone
}

// lcView is a LangChain message as its form keeps it: the object holding its fields
// (the message itself, data or kwargs) and what kind of message it is.
type lcView struct {
	form  lcForm // 0: not a LangChain message
	kind  lcKind
	inner obj
	outer keyCode // the member inner is: keyOther (flat), keyData or keyKwargs
	id    []byte  // the constructor form's id array
	// arrays are inner's block arrays as the scanner collected them; nil when it did not
	// (a message read again after parsing).
	arrays *arrayBlocks
}

// blocks returns the scanned blocks of inner's array member key, and whether there are
// any to go by (else the member is read from its bytes).
func (v *lcView) blocks(key keyCode) ([]block, bool) {
	if v.arrays == nil {
		return nil, false
	}
	for k, c := range blockArrays {
		if c == key {
			return v.arrays.of(k), true
		}
	}
	return nil, false
}

// fieldsOf returns m's fields object under key as the scanner collected it: its members
// and block arrays, without reading it again.
func (v *lcView) fieldsOf(m *message, ps *parser, key keyCode) obj {
	if m.fieldsAt > 0 && int(m.fieldsAt) <= len(ps.fields) {
		if f := &ps.fields[m.fieldsAt-1]; f.key == key {
			mb, _ := findCode(m.ms(), key)
			v.arrays = &f.arrays
			return obj{mb.val(m.raw()), f.ms, ps}
		}
	}
	return obj{m.raw(), m.ms(), ps}.sub(key)
}

// lcRead finds m's form and fields, into v (filled in place: it is read for every
// message). Their members are in ps's scratch space until the caller resets it.
func lcRead(m *message, ps *parser, v *lcView) {
	var typ, idv []byte
	nested := keyOther
	ms := m.ms()
	for imb := range ms {
		mb := &ms[imb]
		switch mb.code() {
		case keyType:
			typ = wordOf(mb.val(m.raw()))
		case keyID:
			idv = mb.val(m.raw())
		case keyData, keyKwargs:
			if mb.valStart() < mb.valEnd() && m.raw()[mb.valStart()] == '{' {
				nested = mb.code()
			}
		}
	}
	self := obj{m.raw(), m.ms(), ps}
	v.inner, v.form, v.outer, v.arrays = self, 0, keyOther, nil
	switch {
	case nested == keyKwargs && string(typ) == "constructor" && len(idv) > 0 && idv[0] == '[' && self.hasName("lc"):
		if v.kind = lcClassKind(lastWord(idv)); v.kind != lcNone {
			v.form, v.inner, v.outer, v.id = lcConstructor, v.fieldsOf(m, ps, keyKwargs), keyKwargs, idv
		}
	case nested == keyData:
		if v.kind = lcTypeKind(typ); v.kind != lcNone {
			v.form, v.inner, v.outer = lcData, v.fieldsOf(m, ps, keyData), keyData
		}
	default:
		if v.kind = lcTypeKind(typ); v.kind != lcNone {
			v.form, v.arrays = lcFlat, m.arrays
			if v.arrays == nil {
				v.arrays = &noArrays // scanned, and none
			}
		}
	}
}

// hasName reports whether o has a member named name (one without a key code).
func (o obj) hasName(name string) bool { _, ok := findMember(o.raw, o.ms, name); return ok }

// lastWord is the last element of the array v when it is a string without escapes.
func lastWord(v []byte) []byte {
	var last []byte
	eachElement(v, func(e []byte) bool { last = e; return true })
	return wordOf(last)
}

func parseLangChain(m *message, ps *parser) error {
	mark := len(ps.scratch)
	defer func() { ps.scratch = ps.scratch[:mark] }()
	var v lcView
	lcRead(m, ps, &v)
	m.known = v.form != 0
	if v.form != 0 {
		switch {
		case ps.form == 0:
			ps.form, ps.formMsg = uint8(v.form), ps.msg
		case lcForm(ps.form) != v.form && ps.unknown == "":
			ps.unknown, ps.unknownMsg = fmt.Sprintf("a LangChain message in %s, where message %d is in %s; "+
				"a store writes one form, and a library reads back only its own", v.form, ps.formMsg, lcForm(ps.form)), ps.msg
		}
	}
	switch v.kind {
	case lcAI:
		parseLangChainAI(m, ps, &v)
	case lcTool:
		m.kind = msgResult
		p := rawPart(m.raw())
		idPath := pathToolCallID
		switch v.outer {
		case keyData:
			idPath = pathDataToolCallID
		case keyKwargs:
			idPath = pathKwargsToolCallID
		}
		resultShape(&p, v.inner, idPath)
		name, _ := inputString(v.inner.get(keyName))
		p.setName(name)
		blks, _ := v.blocks(keyContent)
		p.set(partSynthetic, isSyntheticText(v.inner.get(keyContent), blks))
		m.setParts(ps.one(p))
	default:
		if v.form == lcFlat || v.form == 0 {
			checkForeignContent(m, ps)
		} else if ps.detected != "" && ps.foreign == "" {
			blks, have := v.blocks(keyContent)
			ps.eachBlock(v.inner.get(keyContent), blks, have, func(_ []byte, o obj) { ps.checkForeign(o) })
		}
		// A ChatMessage of role tool (or another message) that keeps a tool_call_id or
		// tool_calls in its fields: not read as a result or call, so not a message tmend
		// knows (plan.unreadCallMember does this for the flat form's members).
		if v.form == lcData || v.form == lcConstructor {
			for _, mb := range v.inner.ms {
				if callKey(mb, v.inner.raw) && !isEmptyValue(mb.val(v.inner.raw)) {
					m.known = false
				}
			}
		}
	}
	return nil
}

// Paths from a tool message to its tool_call_id in the nested forms.
var (
	pathDataToolCallID   = []keyCode{keyData, keyToolCallID}
	pathKwargsToolCallID = []keyCode{keyKwargs, keyToolCallID}
)

// parseLangChainAI reads an AI message: its calls (tool_calls, then invalid_tool_calls,
// one part per element of each) and the provider copies of them.
func parseLangChainAI(m *message, ps *parser, v *lcView) {
	m.kind = msgAssistant
	m.failed = failedTurn(m.raw(), m.ms()) || v.form != lcFlat && failedTurn(v.inner.raw, v.inner.ms)
	m.partsKey = keyToolCalls
	start := len(ps.parts)
	flat := v.form == lcFlat
	tcBlocks, have := v.blocks(keyToolCalls)
	ps.eachElem(v.inner.get(keyToolCalls), tcBlocks, have, func(raw []byte, o obj, isObj bool) {
		ps.parts = append(ps.parts, rawPart(raw))
		if isObj {
			callShape(&ps.parts[len(ps.parts)-1], o, pathID, o, o, keyArgs, false)
		}
	})
	var f lcFields
	readLCFields(v.inner, &f)
	ps.eachElem(f.invalid, nil, false, func(raw []byte, o obj, isObj bool) {
		ps.parts = append(ps.parts, rawPart(raw))
		// One without an id is a call too: langchain-openai sends it with "id": null,
		// which OpenAI rejects; nothing can answer it, so it goes (strip_malformed_calls).
		if isObj {
			pt := &ps.parts[len(ps.parts)-1]
			callShape(pt, o, pathID, o, o, keyArgs, false)
			pt.set(partInvalid, true)
		}
	})
	calls := len(ps.parts) - start
	lcContentParts(ps, v)
	m.setParts(ps.parts[start:len(ps.parts):len(ps.parts)])
	knownFrom := len(ps.knownValues)
	own := 0 // a flat message's own tool_calls blocks, which the search knows already
	if flat {
		own = len(tcBlocks)
	}
	for pi := own; pi < calls; pi++ {
		if pt := &m.parts()[pi]; pt.kind == partCall && !shapeless(ps, pt) {
			ps.knownValues = append(ps.knownValues, pt.raw())
		}
	}
	m.otherContent = lcMirrors(m, ps, v, &f, calls)
	m.knownFrom, m.knownTo = int32(knownFrom), int32(len(ps.knownValues))
	// ChatOpenAI (Responses API) keeps a reasoning item in additional_kwargs.reasoning and
	// sends it before the message's own items: with no content and no call (a stream cut
	// right after the reasoning item began), the message is that reasoning item alone.
	m.reasoning = len(m.parts()) == 0 && !m.otherContent && lcHasReasoning(ps, f.kwargs)
}

// langChainProviderRuns: ChatOpenAI (chat completions, @langchain/openai 1.6) sends an AI
// message's content blocks other than text, tool_use, tool_call, functionCall, reasoning
// and thinking as they are, so the Anthropic server-tool and MCP blocks ChatAnthropic
// keeps there, and its redacted_thinking blocks, reach OpenAI as assistant content parts,
// which may only be text or refusal. Its Responses converter and ChatAnthropic leave them
// out or take them as their own.
func langChainProviderRuns(t Target) providerRunRule {
	if t == TargetOpenAI {
		return providerBlocksAsContent
	}
	return providerRunsTaken
}

// lcContentParts adds to ps.parts, after the message's calls, one part for each block of
// its content that a provider ran (lcServerBlock) or that is reasoning a provider
// encrypted for itself (a redacted_thinking block), in order. A block a provider ran is
// a call with its id and name, or a result with its call's id and the name of the call
// before it in the message; a redacted_thinking block has neither. An output_version "v1"
// message keeps them as standard blocks (server_tool_call, non_standard), which ChatOpenAI
// does not send.
func lcContentParts(ps *parser, v *lcView) {
	content := v.inner.get(keyContent)
	if len(content) == 0 || content[0] != '[' || !lcMayHoldParts(content) {
		return
	}
	start := len(ps.parts)
	blks, have := v.blocks(keyContent)
	ps.eachBlock(content, blks, have, func(raw []byte, o obj) {
		idv, call := lcServerBlock(o)
		if idv == nil {
			if string(wordOf(o.get(keyType))) == "redacted_thinking" {
				ps.parts = append(ps.parts, rawPart(raw))
				ps.redacted = true
			}
			return
		}
		p := rawPart(raw)
		ps.setID(&p, idv)
		p.hasID = true
		if call {
			name, _ := inputString(o.get(keyName))
			p.setName(name)
		} else {
			for i := len(ps.parts) - 1; i >= start; i-- {
				if ps.parts[i].hasID && ps.id(&ps.parts[i]) == ps.id(&p) {
					p.setName(ps.parts[i].name())
					break
				}
			}
		}
		ps.markProviderRun(&p)
		ps.parts = append(ps.parts, p)
	})
}

// lcMayHoldParts reports whether content holds "_tool_" or "redacted_thinking", as every
// block lcContentParts reads does: one pass over it, for the "_t" both have.
func lcMayHoldParts(content []byte) bool {
	for i := 0; ; i += 2 {
		j := bytes.Index(content[i:], []byte("_t"))
		if j < 0 {
			return false
		}
		i += j
		if rest := content[i:]; bytes.HasPrefix(rest, []byte("_tool_")) ||
			bytes.HasPrefix(rest, []byte("_thinking")) && bytes.HasSuffix(content[:i], []byte("redacted")) {
			return true
		}
	}
}

// lcRedacted reports whether raw, a part of an AI message, is a redacted_thinking block
// (lcContentParts).
func lcRedacted(raw []byte) bool {
	return string(wordOf(valueAt(raw, []keyCode{keyType}))) == "redacted_thinking"
}

// lcServerBlock returns the id of an Anthropic block of a tool the provider runs (its
// server_tool_use or mcp_tool_use call, a *_tool_result or mcp_tool_result answering one)
// and whether it is the call; nil when o is no such block or its id is not a string.
func lcServerBlock(o obj) (id []byte, call bool) {
	typ := wordOf(o.get(keyType))
	switch {
	case string(typ) == "server_tool_use" || string(typ) == "mcp_tool_use":
		id, call = o.get(keyID), true
	case string(typ) == "mcp_tool_result" || bytes.HasSuffix(typ, []byte("_tool_result")) && string(typ) != "tool_result":
		id = o.get(keyToolUseID)
	}
	if len(id) == 0 || id[0] != '"' {
		return nil, false
	}
	return id, call
}

// lcHasReasoning reports an additional_kwargs object kwargs with a reasoning object.
func lcHasReasoning(ps *parser, kwargs []byte) bool {
	if len(kwargs) == 0 || kwargs[0] != '{' || !mayHold(kwargs, `"reasoning"`, `"reasoning"`) {
		return false
	}
	kw, ok, _ := ps.obj(kwargs)
	if !ok {
		return false
	}
	mb, ok := findMember(kw.raw, kw.ms, "reasoning")
	return ok && mb.val(kw.raw)[0] == '{'
}

// eachElem calls fn with each element of the array v and, for an object, its members
// (in the parser's scratch space until fn returns). have says blks are v's elements
// already scanned (a flat message's own block arrays).
func (ps *parser) eachElem(v []byte, blks []block, have bool, fn func(raw []byte, o obj, isObj bool)) {
	if have && blks != nil {
		for _, b := range blks {
			fn(b.raw(), obj{b.raw(), b.members(), ps}, b.ms != nil || b.raw()[0] == '{')
		}
		return
	}
	if len(v) == 0 || v[0] != '[' {
		return
	}
	eachElement(v, func(e []byte) bool {
		mark := len(ps.scratch)
		o, ok, err := ps.obj(e)
		if err != nil && ps.err == nil {
			ps.err, ps.errMsg = err, ps.msg
		}
		fn(e, o, ok)
		ps.scratch = ps.scratch[:mark]
		return true
	})
}

// eachBlock is eachElem for the object elements only.
func (ps *parser) eachBlock(v []byte, blks []block, have bool, fn func(raw []byte, o obj)) {
	ps.eachElem(v, blks, have, func(raw []byte, o obj, isObj bool) {
		if isObj {
			fn(raw, o)
		}
	})
}

// lcSynth is the synthetic ToolMessage for call c, in the form of the call's message v:
// the flat form's fields beside its type, the data form's in data (with the type inside
// too where the call's message has it, as Python's model_dump writes), the constructor
// form's in kwargs under the call's own namespace.
func lcSynth(v lcView, c *part, id []byte, text string) []byte {
	var f objectBuilder
	innerType := v.form == lcData && v.inner.has(keyType)
	if v.form == lcFlat || innerType {
		f = f.str("type", "tool")
	}
	f = f.str("content", text).raw("tool_call_id", id).str("name", c.name()).str("status", "error")
	switch v.form {
	case lcData:
		return objectBuilder(nil).str("type", "tool").raw("data", f.done()).done()
	case lcConstructor:
		return objectBuilder(nil).raw("lc", []byte("1")).str("type", "constructor").
			raw("id", lcClassID(v.id, "ToolMessage")).raw("kwargs", f.done()).done()
	}
	return f.done()
}

// lcClassID is the constructor id array id with its class name replaced by class: the
// namespace (["langchain_core","messages"] from JS, ["langchain","schema","messages"]
// from Python) kept as written.
func lcClassID(id []byte, class string) []byte {
	var elems [][]byte
	eachElement(id, func(e []byte) bool { elems = append(elems, e); return true })
	if len(elems) == 0 {
		return joinArray([][]byte{jsonString("langchain_core"), jsonString("messages"), jsonString(class)})
	}
	elems[len(elems)-1] = jsonString(class)
	return joinArray(elems)
}

// lcKey is a call's key for matching its copies: its id without surrounding white space.
func lcKey(ps *parser, pt *part) (string, bool) {
	if pt.kind != partCall || !pt.hasID {
		return "", false
	}
	return strings.TrimSpace(ps.id(pt)), true
}
