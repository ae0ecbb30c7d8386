package repair

import "fmt"

// OpenAIChat is OpenAI Chat Completions: assistant tool_calls[] {id, type, function:{name,
// arguments}}, answered by {role:"tool", tool_call_id} messages.
const OpenAIChat Dialect = "openai-chat"

var openAIChatSpec = &spec{
	name:  OpenAIChat,
	parse: parseOpenAIChat,
	messageSignal: func(f *msgFacts) bool {
		return string(f.role) == "tool" && f.hasToolCallID || string(f.role) == "assistant" && f.hasToolCalls
	},
	argsPath: []keyCode{keyFunction, keyArguments},
	synth: func(c *part, id []byte, text string) []byte {
		return objectBuilder(nil).str("role", "tool").raw("tool_call_id", id).str("content", text).done()
	},
}

var openAIChatRoles = words("system", "developer", "user", "assistant", "tool", "function")

func parseOpenAIChat(m *message, ps *parser) error {
	role := m.word(keyRole)
	// A legacy function_call (answered by a role "function" message, by name) is a call
	// tmend does not pair: not read as clean.
	m.known = openAIChatRoles.has(role)
	if string(role) == "assistant" {
		// (The SDK's own dump writes "function_call": null when there is none.)
		fc, legacy := findMember(m.raw(), m.ms(), "function_call")
		m.known = !legacy || string(fc.val(m.raw())) == "null"
	}
	switch string(role) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m.raw(), m.ms())
		m.otherContent = !isEmptyValue(m.get(keyContent))
		checkForeignContent(m, ps)
		return parseBlocks(m, ps, keyToolCalls, func(p *part, o obj) {
			if typ := o.get(keyType); typ != nil && !isString(typ, "function") {
				// A custom tool call, or a shape to come: a call the provider needs answered
				// that tmend cannot pair, so never clean.
				ps.doubtful(fmt.Sprintf("a tool_calls entry of type %s is not one tmend reads", typ))
				return
			}
			fn := o.sub(keyFunction)
			callShape(p, o, pathID, fn, fn, keyArguments, false)
			stringArgs(p, fn, keyArguments, "a tool call's function.arguments")
			if !o.has(keyFunction) {
				p.malformed = malNoFunction
			}
		})
	case "tool":
		parseResultMessage(m, ps, pathToolCallID, keyName)
		if v := m.get(keyContent); v == nil || string(v) == "null" {
			// The API requires content ("Missing required parameter"); an empty text or
			// an error text would each say something the tool never did.
			ps.doubtful("a tool message has no content")
		}
	default:
		checkForeignContent(m, ps)
	}
	return nil
}
