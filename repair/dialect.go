package repair

import (
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
	parse func(m *message) error
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

func (m *message) has(key string) bool { _, ok := findMember(m.raw, m.ms, key); return ok }

func (m *message) str(key string) string {
	s, _ := stringValue(m.get(key))
	return s
}

// obj is a parsed sub-object (a block or a call object).
type obj struct {
	raw []byte
	ms  []member
}

func parseObj(raw []byte) (obj, bool, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, false, nil
	}
	ms, err := members(raw, nil)
	return obj{raw, ms}, err == nil, err
}

func (o obj) get(key string) []byte {
	if mb, ok := findMember(o.raw, o.ms, key); ok {
		return mb.val(o.raw)
	}
	return nil
}

func (o obj) has(key string) bool { _, ok := findMember(o.raw, o.ms, key); return ok }

func (o obj) str(key string) string {
	s, _ := stringValue(o.get(key))
	return s
}

func (o obj) sub(key string) obj {
	sub, _, _ := parseObj(o.get(key))
	return sub
}

// failedTurn reports a message whose generation ended in error or was aborted.
func failedTurn(m *message) bool {
	for _, k := range []string{"stopReason", "stop_reason"} {
		switch m.str(k) {
		case "error", "aborted":
			return true
		}
	}
	return false
}

// callShape fills a call part's id and name and says why it is malformed, if it is.
// argsKey names the arguments member (checked on args, which may be a sub-object).
func callShape(p *part, o obj, idKey string, nameObj obj, args obj, argsKey string, idOptional bool) {
	p.kind = partCall
	idv := o.get(idKey)
	if idv != nil && string(idv) != "null" {
		p.id, _ = stringValue(idv)
		p.hasID = true
	}
	p.name = nameObj.str("name")
	switch {
	case o.has("partialJson") || o.has("partialArgs") || isTrue(o.get("partial")) || isTrue(o.get("incomplete")):
		p.malformed = "streaming leftover (partial)"
	case isString(o.get("status"), "incomplete"):
		p.malformed = "streaming leftover (status incomplete)"
	case !idOptional && strings.TrimSpace(p.id) == "":
		p.malformed = "missing or blank id"
	case idOptional && p.hasID && strings.TrimSpace(p.id) == "":
		p.malformed = "blank id"
	case strings.TrimSpace(p.name) == "":
		p.malformed = "missing or blank name"
	case argsKey != "" && !args.has(argsKey):
		p.malformed = "arguments missing"
	}
}

func resultShape(p *part, o obj, idKey string) {
	p.kind = partResult
	idv := o.get(idKey)
	if idv != nil && string(idv) != "null" {
		p.id, _ = stringValue(idv)
		p.hasID = true
	}
}

// parseBlocks splits the array member key into parts, classifying each with fn.
func parseBlocks(m *message, key string, fn func(p *part, o obj) error) error {
	v := m.get(key)
	if len(v) == 0 || v[0] != '[' {
		return nil
	}
	m.partsKey = key
	for _, e := range elements(v) {
		p := part{raw: e}
		o, ok, err := parseObj(e)
		if err != nil {
			return err
		}
		if ok {
			if err := fn(&p, o); err != nil {
				return err
			}
		}
		m.parts = append(m.parts, p)
	}
	return nil
}

// --- dialects ---

func parseOpenAIChat(m *message) error {
	switch m.str("role") {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		m.otherContent = !isEmptyValue(m.get("content"))
		return parseBlocks(m, "tool_calls", func(p *part, o obj) error {
			fn := o.sub("function")
			callShape(p, o, "id", fn, fn, "arguments", false)
			if !o.has("function") {
				p.malformed = "function missing"
			}
			return nil
		})
	case "tool":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms}, "tool_call_id")
		p.name = m.str("name")
		p.synthetic = isSyntheticText(m.get("content"))
		m.parts = []part{p}
	}
	return nil
}

func parseLangChain(m *message) error {
	switch m.str("type") {
	case "ai", "AIMessageChunk":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		m.otherContent = !isEmptyValue(m.get("content"))
		return parseBlocks(m, "tool_calls", func(p *part, o obj) error {
			callShape(p, o, "id", o, o, "args", false)
			return nil
		})
	case "tool":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms}, "tool_call_id")
		p.name = m.str("name")
		p.synthetic = isSyntheticText(m.get("content"))
		m.parts = []part{p}
	}
	return nil
}

func parseOpenClaw(m *message) error {
	switch m.str("role") {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, "content", func(p *part, o obj) error {
			if isString(o.get("type"), "toolCall") {
				callShape(p, o, "id", o, o, "arguments", false)
			}
			return nil
		})
	case "toolResult":
		m.kind = msgResult
		p := part{raw: m.raw}
		resultShape(&p, obj{m.raw, m.ms}, "toolCallId")
		p.name = m.str("toolName")
		p.synthetic = isSyntheticText(m.get("content"))
		m.parts = []part{p}
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

func parseResponses(m *message) error {
	typ := m.str("type")
	o := obj{m.raw, m.ms}
	if c, ok := responsesCalls[typ]; ok {
		m.kind = msgCall
		p := part{raw: m.raw, callType: typ}
		callShape(&p, o, "call_id", o, o, c.args, false)
		if c.name != "" && p.name == "" {
			p.name = c.name
			if p.malformed == "missing or blank name" {
				p.malformed = ""
			}
		}
		m.parts = []part{p}
		return nil
	}
	if responsesOutputs[typ] {
		m.kind = msgResult
		p := part{raw: m.raw}
		idKey := "call_id"
		if !o.has("call_id") && typ == "local_shell_call_output" {
			idKey = "id"
		}
		resultShape(&p, o, idKey)
		p.synthetic = isSyntheticText(m.get("output"))
		m.parts = []part{p}
		return nil
	}
	m.reasoning = typ == "reasoning"
	return nil
}

func parseAnthropic(m *message) error {
	switch m.str("role") {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, "content", func(p *part, o obj) error {
			if isString(o.get("type"), "tool_use") {
				callShape(p, o, "id", o, o, "input", false)
			}
			return nil
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, "content", func(p *part, o obj) error {
			if isString(o.get("type"), "tool_result") {
				resultShape(p, o, "tool_use_id")
				p.synthetic = isSyntheticText(o.get("content"))
			}
			return nil
		})
	}
	return nil
}

func parseBedrock(m *message) error {
	switch m.str("role") {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, "content", func(p *part, o obj) error {
			if o.has("toolUse") {
				tu := o.sub("toolUse")
				callShape(p, tu, "toolUseId", tu, tu, "input", false)
			}
			return nil
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, "content", func(p *part, o obj) error {
			if o.has("toolResult") {
				tr := o.sub("toolResult")
				resultShape(p, tr, "toolUseId")
				p.synthetic = isSyntheticText(tr.get("content"))
			}
			return nil
		})
	}
	return nil
}

func parseGemini(m *message) error {
	switch m.str("role") {
	case "model":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, "parts", func(p *part, o obj) error {
			if o.has("functionCall") {
				fc := o.sub("functionCall")
				// Gemini call ids are optional and args may be omitted for no-parameter
				// functions; calls pair with responses by name and order then.
				callShape(p, fc, "id", fc, fc, "", true)
			}
			return nil
		})
	case "user", "function", "tool":
		m.kind = msgUser
		return parseBlocks(m, "parts", func(p *part, o obj) error {
			if o.has("functionResponse") {
				fr := o.sub("functionResponse")
				resultShape(p, fr, "id")
				p.name = fr.str("name")
				p.synthetic = isSyntheticText(fr.get("response"))
			}
			return nil
		})
	}
	return nil
}

// detect names the dialect from shapes that only one dialect uses. It returns "" when
// the transcript has no such shape (so no tool calls or results either), and an error
// when shapes of several dialects are mixed.
func detect(msgs []message) (Dialect, error) {
	seen := map[Dialect]int{}
	for i := range msgs {
		if d := signal(&msgs[i]); d != "" {
			if _, ok := seen[d]; !ok {
				seen[d] = i
			}
		}
	}
	switch len(seen) {
	case 0:
		return "", nil
	case 1:
		for d := range seen {
			return d, nil
		}
	}
	var parts []string
	for _, d := range Dialects() {
		if i, ok := seen[d]; ok {
			parts = append(parts, fmt.Sprintf("%s (message %d)", d, i))
		}
	}
	return "", fmt.Errorf("shapes of several dialects are mixed: %s", strings.Join(parts, ", "))
}

func signal(m *message) Dialect {
	role := m.str("role")
	switch {
	case m.has("parts") || role == "model":
		return Gemini
	case role == "toolResult":
		return OpenClaw
	case role == "tool" && m.has("tool_call_id"):
		return OpenAIChat
	case role == "assistant" && m.has("tool_calls"):
		return OpenAIChat
	}
	if typ := m.str("type"); typ != "" {
		if _, ok := responsesCalls[typ]; ok || responsesOutputs[typ] || typ == "reasoning" {
			return OpenAIResponses
		}
		if role == "" {
			switch typ {
			case "ai", "human", "tool", "system", "AIMessageChunk":
				return LangChain
			}
		}
	}
	content := m.get("content")
	if len(content) == 0 || content[0] != '[' {
		return ""
	}
	for _, e := range elements(content) {
		o, ok, _ := parseObj(e)
		if !ok {
			continue
		}
		switch {
		case o.has("toolUse") || o.has("toolResult"):
			return Bedrock
		case isString(o.get("type"), "toolCall"):
			return OpenClaw
		case isString(o.get("type"), "tool_use"), isString(o.get("type"), "tool_result"),
			isString(o.get("type"), "server_tool_use"), isString(o.get("type"), "redacted_thinking"):
			return Anthropic
		}
	}
	return ""
}
