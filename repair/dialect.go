package repair

import (
	"bytes"
	"fmt"
	"strings"
)

// Dialect names a transcript shape: where tool calls and tool results live.
type Dialect string

// The dialects tmend understands. The strings appear in reports and flags and never change.
const (
	OpenAIChat      Dialect = "openai-chat"
	Anthropic       Dialect = "anthropic"
	OpenAIResponses Dialect = "openai-responses"
	OpenClaw        Dialect = "openclaw"
	Gemini          Dialect = "gemini"
	Bedrock         Dialect = "bedrock"
	LangChain       Dialect = "langchain"
)

// Dialects lists every dialect in a stable order.
func Dialects() []Dialect {
	return []Dialect{OpenAIChat, Anthropic, OpenAIResponses, OpenClaw, Gemini, Bedrock, LangChain}
}

// ParseDialect accepts a dialect name as printed by Dialects.
func ParseDialect(s string) (Dialect, error) {
	for _, d := range Dialects() {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown dialect %q (want one of %s)", s, joinDialects())
}

func joinDialects() string {
	var names []string
	for _, d := range Dialects() {
		names = append(names, string(d))
	}
	return strings.Join(names, ", ")
}

type msgKind uint8

const (
	msgOther     msgKind = iota
	msgAssistant         // may hold call parts
	msgUser              // may hold result parts (block dialects)
	msgResult            // the whole message is one result
	msgCall              // the whole message is one call (Responses items)
)

type partKind uint8

const (
	partOther partKind = iota
	partCall
	partResult
)

// part is one tool call, tool result or other piece of a message: a content block, a
// tool_calls element, a Gemini part, or for whole-message dialects the message itself.
type part struct {
	kind      partKind
	raw       []byte
	id        string
	hasID     bool
	name      string
	callType  string // Responses item type of a call, for the matching output type
	malformed string // why a call can never be valid; "" when it is well formed
	synthetic bool   // a result inserted by tmend or another repairer
}

// message is one transcript element with what tmend found in it.
type message struct {
	raw      []byte
	ms       []member
	arrays   [len(blockArrays)][]block // the blocks of content, tool_calls and parts
	kind     msgKind
	partsKey string // member holding the parts; "" for whole messages
	parts    []part
	// otherContent: the message has content outside its parts (OpenAI chat and LangChain
	// assistant text beside tool_calls), so it survives losing every part.
	otherContent bool
	failed       bool // the turn ended in error or was aborted
	reasoning    bool // a Responses reasoning item
}

func (m *message) whole() bool { return m.kind == msgResult || m.kind == msgCall }

// spec is what the engine needs to know about a dialect.
type spec struct {
	parse func(m *message, ps *parser) error
	// block dialects put results as parts of a user message; whole dialects give each
	// result a message of its own.
	block bool
	// resultsFirst: result parts must precede other parts of their user message.
	resultsFirst bool
	// anyUserSlot: the user message right after a call turn takes the results even when it
	// holds none yet (Bedrock's strict alternation); otherwise a new message is inserted.
	anyUserSlot  bool
	synth        func(c *part, text string) []byte
	wrap         func(parts [][]byte) []byte
	callIDPath   []string
	resultIDPath []string
}

var specs = map[Dialect]*spec{
	OpenAIChat: {
		parse:        parseOpenAIChat,
		synth:        synthOpenAIChat,
		callIDPath:   []string{"id"},
		resultIDPath: []string{"tool_call_id"},
	},
	LangChain: {
		parse:        parseLangChain,
		synth:        synthLangChain,
		callIDPath:   []string{"id"},
		resultIDPath: []string{"tool_call_id"},
	},
	OpenClaw: {
		parse:        parseOpenClaw,
		synth:        synthOpenClaw,
		callIDPath:   []string{"id"},
		resultIDPath: []string{"toolCallId"},
	},
	OpenAIResponses: {
		parse:        parseResponses,
		synth:        synthResponses,
		callIDPath:   []string{"call_id"},
		resultIDPath: []string{"call_id"},
	},
	Anthropic: {
		parse:        parseAnthropic,
		block:        true,
		resultsFirst: true,
		synth:        synthAnthropic,
		wrap:         func(p [][]byte) []byte { return wrapUser("content", p) },
		callIDPath:   []string{"id"},
		resultIDPath: []string{"tool_use_id"},
	},
	Bedrock: {
		parse:        parseBedrock,
		block:        true,
		anyUserSlot:  true,
		synth:        synthBedrock,
		wrap:         func(p [][]byte) []byte { return wrapUser("content", p) },
		callIDPath:   []string{"toolUse", "toolUseId"},
		resultIDPath: []string{"toolResult", "toolUseId"},
	},
	Gemini: {
		parse:        parseGemini,
		block:        true,
		synth:        synthGemini,
		wrap:         func(p [][]byte) []byte { return wrapUser("parts", p) },
		callIDPath:   []string{"functionCall", "id"},
		resultIDPath: []string{"functionResponse", "id"},
	},
}

func wrapUser(key string, parts [][]byte) []byte {
	out := []byte(`{"role":"user","` + key + `":`)
	out = append(out, joinArray(parts)...)
	return append(out, '}')
}

// --- helpers shared by the parsers ---

func (m *message) get(key string) []byte {
	if mb, ok := findMember(m.raw, m.ms, key); ok {
		return mb.val(m.raw)
	}
	return nil
}

// one returns a message's only part, kept with the others rather than allocated alone.
func (ps *parser) one(p part) []part {
	ps.parts = append(ps.parts, p)
	n := len(ps.parts)
	return ps.parts[n-1 : n : n]
}

// word returns a string member's text without allocating when it has no escapes, for
// comparisons like switch string(m.word("role")); nil when it is not a string.
func (m *message) word(key string) []byte { return wordOf(m.get(key)) }

// wordOf is word for a member's value v.
func wordOf(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	s, _ := stringValue(v)
	return []byte(s)
}

// parser holds scratch space for the members of blocks and sub-objects, which are only
// needed while their message is parsed; it saves an allocation per block.
type parser struct {
	scratch []member
	parts   []part // every message's parts, in one allocation
	// detected is the dialect found by detection (not forced); a block of another
	// dialect's shape then makes the transcript mixed, recorded in foreign.
	detected   Dialect
	foreign    Dialect
	foreignMsg int
	msg        int
}

// obj is a parsed sub-object (a block or a call object).
type obj struct {
	raw []byte
	ms  []member
	ps  *parser
}

func (ps *parser) obj(raw []byte) (obj, bool, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, false, nil
	}
	ms, err := members(raw, &ps.scratch)
	return obj{raw, ms, ps}, err == nil, err
}

func (o obj) get(key string) []byte {
	if mb, ok := findMember(o.raw, o.ms, key); ok {
		return mb.val(o.raw)
	}
	return nil
}

func (o obj) has(key string) bool { _, ok := findMember(o.raw, o.ms, key); return ok }

func (o obj) lookup(key string) ([]byte, bool) {
	m, ok := findMember(o.raw, o.ms, key)
	if !ok {
		return nil, false
	}
	return m.val(o.raw), true
}

func (o obj) sub(key string) obj {
	sub, _, _ := o.ps.obj(o.get(key))
	return sub
}

// failedTurn reports a message whose generation ended in error or was aborted.
func failedTurn(m *message) bool {
	for _, mb := range m.ms { // one pass for both spellings: this runs for every assistant message
		if mb.is(m.raw, "stopReason") || mb.is(m.raw, "stop_reason") {
			switch string(wordOf(mb.val(m.raw))) {
			case "error", "aborted":
				return true
			}
		}
	}
	return false
}

// callShape fills a call part's id and name and says why it is malformed, if it is.
// The id, the partial markers and status are members of o; the name is in nameObj and
// the arguments member argsKey in args (either may be o itself).
func callShape(p *part, o obj, idKey string, nameObj obj, args obj, argsKey string, idOptional bool) {
	p.kind = partCall
	partial, incomplete, hasArgs := false, false, argsKey == ""
	for _, m := range o.ms {
		v := m.val(o.raw)
		switch key := o.raw[m.keyStart+1 : m.keyEnd-1]; string(key) {
		case idKey:
			if string(v) != "null" {
				p.id, _ = inputString(v)
				p.hasID = true
			}
		case "partialJson", "partialArgs":
			partial = true
		case "partial", "incomplete":
			partial = partial || isTrue(v)
		case "status":
			incomplete = isString(v, "incomplete")
		}
	}
	if nv, ok := nameObj.lookup("name"); ok {
		p.name, _ = inputString(nv)
	}
	if !hasArgs {
		_, hasArgs = args.lookup(argsKey)
	}
	switch {
	case partial:
		p.malformed = "streaming leftover (partial)"
	case incomplete:
		p.malformed = "streaming leftover (status incomplete)"
	case !idOptional && isBlank(p.id):
		p.malformed = "missing or blank id"
	case idOptional && p.hasID && isBlank(p.id):
		p.malformed = "blank id"
	case isBlank(p.name):
		p.malformed = "missing or blank name"
	case !hasArgs:
		p.malformed = "arguments missing"
	}
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

func resultShape(p *part, o obj, idKey string) {
	p.kind = partResult
	if idv, ok := o.lookup(idKey); ok && string(idv) != "null" {
		p.id, _ = inputString(idv)
		p.hasID = true
	}
}

// blocks returns the blocks of the array member key (one of blockArrays), or nil when
// the member is not an array.
func (m *message) blocks(key string) ([]block, bool) {
	for k, name := range blockArrays {
		if name == key {
			v := m.get(key)
			return m.arrays[k], len(v) > 0 && v[0] == '['
		}
	}
	return nil, false
}

func (m *message) contentBlocks() []block { b, _ := m.blocks("content"); return b }

// parseBlocks makes a part of each element of the array member key, classifying object
// elements with fn.
func parseBlocks(m *message, ps *parser, key string, fn func(p *part, o obj)) error {
	blks, ok := m.blocks(key)
	if !ok {
		return nil
	}
	m.partsKey = key
	start := len(ps.parts)
	for _, blk := range blks {
		// Filled in place (a part handed to fn by address would otherwise be allocated), so
		// fn must not add parts itself.
		ps.parts = append(ps.parts, part{raw: blk.raw})
		if blk.raw[0] == '{' {
			p := &ps.parts[len(ps.parts)-1]
			mark := len(ps.scratch)
			o := obj{blk.raw, blk.ms, ps}
			fn(p, o)
			if ps.detected != "" && ps.foreign == "" {
				if d := blockSignal(o); d != "" && d != ps.detected {
					ps.foreign, ps.foreignMsg = d, ps.msg
				}
			}
			ps.scratch = ps.scratch[:mark]
		}
	}
	m.parts = ps.parts[start:len(ps.parts):len(ps.parts)]
	return nil
}

// --- dialects ---

func parseOpenAIChat(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		m.otherContent = !isEmptyValue(m.get("content"))
		return parseBlocks(m, ps, "tool_calls", func(p *part, o obj) {
			fn := o.sub("function")
			callShape(p, o, "id", fn, fn, "arguments", false)
			if !o.has("function") {
				p.malformed = "function missing"
			}
		})
	case "tool":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms, ps}, "tool_call_id")
		p.name, _ = inputString(m.get("name"))
		p.synthetic = isSyntheticText(m.get("content"), m.contentBlocks())
		m.parts = ps.one(p)
	}
	return nil
}

func parseLangChain(m *message, ps *parser) error {
	switch string(m.word("type")) {
	case "ai", "AIMessageChunk":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		m.otherContent = !isEmptyValue(m.get("content"))
		return parseBlocks(m, ps, "tool_calls", func(p *part, o obj) {
			callShape(p, o, "id", o, o, "args", false)
		})
	case "tool":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms, ps}, "tool_call_id")
		p.name, _ = inputString(m.get("name"))
		p.synthetic = isSyntheticText(m.get("content"), m.contentBlocks())
		m.parts = ps.one(p)
	}
	return nil
}

func parseOpenClaw(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if isString(o.get("type"), "toolCall") {
				callShape(p, o, "id", o, o, "arguments", false)
			}
		})
	case "toolResult":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms, ps}, "toolCallId")
		p.name, _ = inputString(m.get("toolName"))
		p.synthetic = isSyntheticText(m.get("content"), m.contentBlocks())
		m.parts = ps.one(p)
	}
	return nil
}

// responsesCalls maps each Responses call item type to its arguments member and the
// fallback tool name for items that carry none.
var responsesCalls = map[string]struct{ args, name string }{
	"function_call":    {"arguments", ""},
	"custom_tool_call": {"input", ""},
	"local_shell_call": {"action", "local_shell"},
	"computer_call":    {"action", "computer"},
}

var responsesOutputs = map[string]bool{
	"function_call_output":    true,
	"custom_tool_call_output": true,
	"local_shell_call_output": true,
	"computer_call_output":    true,
}

func parseResponses(m *message, ps *parser) error {
	typ := m.word("type")
	o := obj{m.raw, m.ms, ps}
	if c, ok := responsesCalls[string(typ)]; ok {
		m.kind = msgCall
		p := part{raw: m.raw, callType: string(typ)}
		callShape(&p, o, "call_id", o, o, c.args, false)
		if c.name != "" && p.name == "" {
			p.name = c.name
			if p.malformed == "missing or blank name" {
				p.malformed = ""
			}
		}
		m.parts = ps.one(p)
		return nil
	}
	if responsesOutputs[string(typ)] {
		m.kind = msgResult
		p := part{raw: m.raw}
		idKey := "call_id"
		if !o.has("call_id") && string(typ) == "local_shell_call_output" {
			idKey = "id"
		}
		resultShape(&p, o, idKey)
		p.synthetic = isSyntheticText(m.get("output"), nil)
		m.parts = ps.one(p)
		return nil
	}
	m.reasoning = string(typ) == "reasoning"
	return nil
}

func parseAnthropic(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if isString(o.get("type"), "tool_use") {
				callShape(p, o, "id", o, o, "input", false)
			}
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if isString(o.get("type"), "tool_result") {
				resultShape(p, o, "tool_use_id")
				p.synthetic = isSyntheticText(o.get("content"), nil)
			}
		})
	}
	return nil
}

func parseBedrock(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if o.has("toolUse") {
				tu := o.sub("toolUse")
				callShape(p, tu, "toolUseId", tu, tu, "input", false)
			}
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if o.has("toolResult") {
				tr := o.sub("toolResult")
				resultShape(p, tr, "toolUseId")
				p.synthetic = isSyntheticText(tr.get("content"), nil)
			}
		})
	}
	return nil
}

func parseGemini(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "model":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, ps, "parts", func(p *part, o obj) {
			if o.has("functionCall") {
				fc := o.sub("functionCall")
				// Gemini call ids are optional and args may be omitted for no-parameter
				// functions; calls pair with responses by name and order then.
				callShape(p, fc, "id", fc, fc, "", true)
			}
		})
	case "user", "function", "tool":
		m.kind = msgUser
		return parseBlocks(m, ps, "parts", func(p *part, o obj) {
			if o.has("functionResponse") {
				fr := o.sub("functionResponse")
				resultShape(p, fr, "id")
				p.name, _ = inputString(fr.get("name"))
				p.synthetic = isSyntheticText(fr.get("response"), nil)
			}
		})
	}
	return nil
}

// detect names the dialect from shapes that only one dialect uses: first message-level
// ones (roles, item types), else the first block-level one. It returns "" when there is
// no such shape (so no tool calls or results either), and an error when message-level
// shapes of several dialects are mixed. Blocks of a foreign dialect are caught while
// parsing (see parser.foreign).
func detect(msgs []message, ps *parser) (Dialect, error) {
	seen := map[Dialect]int{}
	var order []Dialect
	for i := range msgs {
		if d := messageSignal(&msgs[i]); d != "" {
			if _, ok := seen[d]; !ok {
				seen[d] = i
				order = append(order, d)
			}
		}
	}
	switch len(order) {
	case 0:
		for i := range msgs {
			if d := blocksSignal(&msgs[i], ps); d != "" {
				return d, nil
			}
		}
		return "", nil
	case 1:
		return order[0], nil
	}
	var parts []string
	for _, d := range order {
		parts = append(parts, fmt.Sprintf("%s (message %d)", d, seen[d]))
	}
	return "", fmt.Errorf("shapes of several dialects are mixed: %s", strings.Join(parts, ", "))
}

func messageSignal(m *message) Dialect {
	var role, typ []byte
	var hasParts, hasRole, hasToolCallID, hasToolCalls bool
	for _, mb := range m.ms {
		switch string(m.raw[mb.keyStart+1 : mb.keyEnd-1]) {
		case "role":
			hasRole = true
			role = wordOf(mb.val(m.raw))
		case "type":
			typ = wordOf(mb.val(m.raw))
		case "parts":
			hasParts = true
		case "tool_call_id":
			hasToolCallID = true
		case "tool_calls":
			hasToolCalls = true
		}
	}
	switch {
	case hasParts || string(role) == "model":
		return Gemini
	case string(role) == "toolResult":
		return OpenClaw
	case string(role) == "tool" && hasToolCallID, string(role) == "assistant" && hasToolCalls:
		return OpenAIChat
	}
	if len(typ) > 0 {
		if _, ok := responsesCalls[string(typ)]; ok || responsesOutputs[string(typ)] || string(typ) == "reasoning" {
			return OpenAIResponses
		}
		if !hasRole {
			switch string(typ) {
			case "ai", "human", "tool", "system", "AIMessageChunk":
				return LangChain
			}
		}
	}
	return ""
}

func blocksSignal(m *message, ps *parser) Dialect {
	blks, _ := m.blocks("content")
	for _, blk := range blks {
		if blk.raw[0] == '{' {
			if d := blockSignal(obj{blk.raw, blk.ms, ps}); d != "" {
				return d
			}
		}
	}
	return ""
}

// blockSignal names the dialect a content block's shape belongs to, if only one uses it.
func blockSignal(o obj) Dialect {
	typ := o.get("type")
	switch {
	case typ == nil && (o.has("toolUse") || o.has("toolResult")):
		return Bedrock
	case isString(typ, "toolCall"):
		return OpenClaw
	case isString(typ, "tool_use"), isString(typ, "tool_result"),
		isString(typ, "server_tool_use"), isString(typ, "redacted_thinking"):
		return Anthropic
	}
	return ""
}
