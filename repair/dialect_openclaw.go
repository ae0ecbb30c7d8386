package repair

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// OpenClaw is OpenClaw's (pi-agent's) session format: assistant blocks {type:"toolCall",
// id, name, arguments}, answered by {role:"toolResult", toolCallId, toolName, isError}
// messages. Its runtime also accepts toolUse and functionCall blocks (arguments in
// arguments or input) and, from older sessions, snake_case tool_use, tool_call and
// function_call blocks, which tmend rewrites to toolCall.
const OpenClaw Dialect = "openclaw"

var openClawSpec = &spec{
	name:  OpenClaw,
	parse: parseOpenClaw,
	messageSignal: func(f *msgFacts) bool {
		return string(f.role) == "toolResult"
	},
	blockSignal: func(o obj, typ []byte) bool {
		return isString(typ, "toolCall") || isString(typ, "toolUse") || isString(typ, "functionCall")
	},
	synth: func(c *part, id []byte, text string) []byte {
		return objectBuilder(nil).str("role", "toolResult").raw("toolCallId", id).str("toolName", c.name()).
			raw("content", textBlocks(true, text)).raw("isError", []byte("true")).done()
	},

	resultName: keyToolName,
	follower:   openClawFollower,
}

var pathToolCallIDCamel = []keyCode{keyToolCallIDCamel}

// Where legacy snake_case blocks keep their id, in the order OpenClaw looks.
var (
	legacyIDPaths = [][]keyCode{pathID, pathToolCallID, pathCallID}
	legacyArgKeys = []keyCode{keyInput, keyArguments}
)

// openClawRoles are the roles of pi's AgentMessage: the model's three, and the app's own
// messages (shell runs, summaries, extensions' custom ones) that carry no tool calls.
var openClawRoles = words("user", "assistant", "toolResult", "system",
	"bashExecution", "custom", "branchSummary", "compactionSummary")

func parseOpenClaw(m *message, ps *parser) error {
	role := m.word(keyRole)
	m.known = openClawRoles.has(role)
	switch string(role) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m.raw(), m.ms())
		// pi-ai sends a Responses reasoning item kept as a thinking block (its signature the
		// item's JSON) unless the turn failed: alone in its message (the output limit hit
		// during the reasoning), it is a reasoning item with nothing of its own after it.
		m.reasoning = !m.failed && responsesThinkingOnly(m.get(keyContent))
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			typ := o.get(keyType)
			switch {
			case isString(typ, "toolCall"):
				callShape(p, o, pathID, o, o, keyArguments, false)
			case isString(typ, "toolUse"), isString(typ, "functionCall"):
				callShape(p, o, pathID, o, o, argsKey(o, keyArguments, keyInput), false)
			case isString(typ, "tool_use"), isString(typ, "tool_call"), isString(typ, "function_call"):
				parseLegacyCall(p, o)
			}
		})
	case "toolResult":
		parseResultMessage(m, ps, pathToolCallIDCamel, keyToolName)
	default:
		checkForeignContent(m, ps)
		checkMisplacedCalls(m, ps, role)
	}
	return nil
}

// openClawFollower: after a reasoning-only assistant message, another assistant message is
// the model's output; anything else pi sends as input.
func openClawFollower(m *message) follower {
	if m.kind == msgAssistant {
		return followsModel
	}
	return followsInput
}

// responsesThinkingOnly reports a content array of thinking blocks only, each with a
// thinkingSignature holding an OpenAI Responses reasoning item ({"type":"reasoning",...}).
func responsesThinkingOnly(content []byte) bool {
	if len(content) == 0 || content[0] != '[' {
		return false
	}
	n := 0
	ok := true
	eachElement(content, func(e []byte) bool {
		n++
		ms, err := membersOf(e)
		if err != nil {
			ok = false
			return false
		}
		t, found := findCode(ms, keyType)
		sig, hasSig := findMember(e, ms, "thinkingSignature")
		if ok = found && isString(t.val(e), "thinking") && hasSig; !ok {
			return false
		}
		text, isStr := stringValue(sig.val(e))
		var item struct {
			Type string `json:"type"`
		}
		ok = isStr && json.Unmarshal([]byte(text), &item) == nil && item.Type == "reasoning"
		return ok
	})
	return ok && n > 0
}

// openClawCallTypes are the block types parseOpenClaw reads as calls in an assistant
// message.
var openClawCallTypes = words("toolCall", "toolUse", "functionCall", "tool_use", "tool_call", "function_call")

// checkMisplacedCalls refuses a call block in a user (or other non-assistant, non-result)
// message: pi keeps calls only in the assistant's, so such a block is not read as a call,
// and never clean.
func checkMisplacedCalls(m *message, ps *parser, role []byte) {
	for _, blk := range m.contentBlocks() {
		if blk.raw()[0] != '{' {
			continue
		}
		if typ := wordOf(obj{blk.raw(), blk.members(), ps}.get(keyType)); openClawCallTypes.has(typ) {
			ps.doubtful(fmt.Sprintf("a %q block is in a message of role %q", typ, role))
			return
		}
	}
}

// argsKey returns the first of keys that o has, else the first key.
func argsKey(o obj, keys ...keyCode) keyCode {
	for _, k := range keys {
		if o.has(k) {
			return k
		}
	}
	return keys[0]
}

// parseLegacyCall reads a snake_case call block and, when it is well formed, prepares its
// canonical toolCall form: arguments kept exactly, or parsed from a JSON string only
// when the string holds valid JSON (otherwise the call is malformed). A block that says
// two different things (two ids, input and arguments that differ) is doubtful.
func parseLegacyCall(p *part, o obj) {
	p.kind = partCall // a call, even when doubtful: not another dialect's block
	idPath := legacyIDPaths[0]
	found := ""
	for _, path := range legacyIDPaths {
		v := o.get(path[0])
		if v == nil || string(v) == "null" || v[0] == '"' && isBlank(string(wordOf(v))) {
			continue // absent, or nothing in it: the id is in another key
		}
		if v[0] != '"' {
			o.ps.doubtful("a legacy call block's id is a JSON " + kindOf(v[0]) + ", not a string")
			return
		}
		if found != "" && string(wordOf(v)) != found {
			o.ps.doubtful("a legacy call block has two different ids")
			return
		}
		if found == "" {
			idPath, found = path, string(wordOf(v))
		}
	}
	if in, args := o.get(keyInput), o.get(keyArguments); in != nil && args != nil && !bytes.Equal(in, args) {
		o.ps.doubtful("a legacy call block has both input and arguments, and they differ")
		return
	}
	ak := argsKey(o, legacyArgKeys...)
	callShape(p, o, idPath, o, o, ak, false)
	if p.malformed != wellFormed {
		return
	}
	args := o.get(ak)
	if args[0] == '"' {
		s, _ := idString(args) // lone surrogates kept apart, for the check below
		switch {
		case !utf8.ValidString(s):
			o.ps.doubtful("a legacy call's string arguments hold a lone surrogate, which has no exact JSON text")
			return
		case !json.Valid([]byte(s)):
			p.malformed = malArgsNotJSON
			return
		case depthOf([]byte(s)) > legacyArgsDepth:
			o.ps.doubtful(fmt.Sprintf("a legacy call's string arguments nest deeper than %d levels", legacyArgsDepth))
			return
		}
		args = []byte(s)
	}
	var b objectBuilder
	b = b.str("type", "toolCall").raw("id", o.ps.idText(p)).raw("name", o.get(keyName)).raw("arguments", args)
	for im := range o.ms {
		m := &o.ms[im]
		switch m.code() {
		case keyType, keyID, keyName, keyInput, keyArguments, idPath[0]:
			continue // in the canonical members (an empty id or a second copy of the arguments)
		}
		b = b.member(m.key(o.raw), m.val(o.raw))
	}
	o.ps.canonicals = append(o.ps.canonicals, canonicalForm{o.ps.partIndex(p), b.done()})
	p.set(partCanonical, true)
}

// legacyArgsDepth bounds the nesting of arguments parsed out of a string, so that the
// block they go into, inside its message and array (and envelope), stays within MaxDepth.
const legacyArgsDepth = MaxDepth - 8

// depthOf is the nesting depth of the valid JSON value v.
func depthOf(v []byte) int {
	depth, most := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			i = skipString(v, i) - 1
		case '{', '[':
			if depth++; depth > most {
				most = depth
			}
		case '}', ']':
			depth--
		}
	}
	return most
}
