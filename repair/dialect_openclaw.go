package repair

import "encoding/json"

// OpenClaw is OpenClaw's (pi-agent's) session format: assistant blocks {type:"toolCall",
// id, name, arguments}, answered by {role:"toolResult", toolCallId, toolName, isError}
// messages. Its runtime also accepts toolUse and functionCall blocks (arguments in
// arguments or input) and, from older sessions, snake_case tool_use, tool_call and
// function_call blocks, which tmend rewrites to toolCall.
const OpenClaw Dialect = "openclaw"

var openClawSpec = &spec{
	name:  OpenClaw,
	parse: parseOpenClaw,
	messageSignal: func(f msgFacts) bool {
		return string(f.role) == "toolResult"
	},
	blockSignal: func(o obj, typ []byte) bool {
		return isString(typ, "toolCall") || isString(typ, "toolUse") || isString(typ, "functionCall")
	},
	synth: func(c *part, text string) []byte {
		return objectBuilder(nil).str("role", "toolResult").raw("toolCallId", c.idRaw).str("toolName", c.name).
			raw("content", textBlocks(true, text)).raw("isError", []byte("true")).done()
	},
}

var pathToolCallIDCamel = []keyCode{keyToolCallIDCamel}

// Where legacy snake_case blocks keep their id, in the order OpenClaw looks.
var (
	legacyIDPaths = [][]keyCode{pathID, pathToolCallID, pathCallID}
	legacyArgKeys = []keyCode{keyInput, keyArguments}
)

func parseOpenClaw(m *message, ps *parser) error {
	switch string(m.word(keyRole)) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
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
	}
	return nil
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
// when the string holds valid JSON (otherwise the call is malformed).
func parseLegacyCall(p *part, o obj) {
	idPath := legacyIDPaths[0]
	for _, path := range legacyIDPaths {
		if o.has(path[0]) {
			idPath = path
			break
		}
	}
	ak := argsKey(o, legacyArgKeys...)
	callShape(p, o, idPath, o, o, ak, false)
	if p.malformed != "" {
		return
	}
	args := o.get(ak)
	if args[0] == '"' {
		s, _ := stringValue(args)
		if !json.Valid([]byte(s)) {
			p.malformed = "arguments are a string that is not JSON"
			return
		}
		args = []byte(s)
	}
	var b objectBuilder
	b = b.str("type", "toolCall").raw("id", p.idRaw).raw("name", o.get(keyName)).raw("arguments", args)
	for _, m := range o.ms {
		if m.code == keyType || m.code == idPath[0] || m.code == keyName || m.code == ak {
			continue
		}
		b = b.member(m.key(o.raw), m.val(o.raw))
	}
	p.canonical = b.done()
}
