package repair

// LangChain is LangChain's flat message serialization: {type:"ai", tool_calls:[{id, name,
// args}]}, answered by {type:"tool", tool_call_id}.
const LangChain Dialect = "langchain"

var langChainSpec = &spec{
	name:  LangChain,
	parse: parseLangChain,
	messageSignal: func(f msgFacts) bool {
		switch string(f.typ) {
		case "ai", "human", "tool", "system", "AIMessageChunk":
			return !f.hasRole
		}
		return false
	},
	synth: func(c *part, text string) []byte {
		return objectBuilder(nil).str("type", "tool").str("content", text).raw("tool_call_id", c.idRaw).
			str("name", c.name).str("status", "error").done()
	},
}

// langChainTypes are the message types LangChain serialises (BaseMessage._getType()).
var langChainTypes = words("ai", "AIMessageChunk", "human", "system", "tool", "function", "chat", "developer", "generic")

func parseLangChain(m *message, ps *parser) error {
	typ := m.word(keyType)
	m.known = langChainTypes.has(typ)
	switch string(typ) {
	case "ai", "AIMessageChunk":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		m.otherContent = !isEmptyValue(m.get(keyContent))
		checkForeignContent(m, ps)
		return parseBlocks(m, ps, keyToolCalls, func(p *part, o obj) {
			callShape(p, o, pathID, o, o, keyArgs, false)
		})
	case "tool":
		parseResultMessage(m, ps, pathToolCallID, keyName)
	default:
		checkForeignContent(m, ps)
	}
	return nil
}
