package repair

// AISDKUI is the Vercel AI SDK's UIMessage, as chat apps store it (ai 5 to 7: {id, role,
// parts}; a tool part {type:"tool-<name>"|"dynamic-tool", toolCallId, state, input,
// output|errorText}), and ai 4's ({role, content, parts} with {type:"tool-invocation",
// toolInvocation:{state, toolCallId, toolName, args, result}} parts, or only a
// toolInvocations array). A call and its result are one part: see inplace.go.
const AISDKUI Dialect = "ai-sdk-ui"

var aiSDKUISpec = &spec{
	name:    AISDKUI,
	parse:   parseAISDKUI,
	inPlace: true,
	messageSignal: func(f *msgFacts) bool {
		return (f.hasParts || f.hasToolInvocations) && uiRoles.has(f.role) &&
			(f.hasToolInvocations || partsTyped(f.parts) == allTyped)
	},
}

// uiRoles are UIMessage roles ("data" only in ai 4).
var uiRoles = words("user", "assistant", "system", "data")

func parseAISDKUI(m *message, ps *parser) error {
	role := m.word(keyRole)
	m.known = uiRoles.has(role)
	if string(role) == "assistant" {
		m.kind = msgAssistant
	}
	m.otherContent = !isEmptyValue(m.get(keyContent)) // ai 4's text beside its parts
	o := obj{m.raw(), m.ms(), ps}
	if blks, ok := m.blocks(keyParts); ok {
		parseInPlaceParts(m, ps, keyOther, keyParts, blks, o)
	} else if v := m.get(keyToolInvocations); len(v) > 0 && v[0] == '[' {
		parseInPlaceParts(m, ps, keyOther, keyToolInvocations, parseBlockList(v), o)
	} else {
		// An ai 4 text message: its content is a string (content parts, such as a
		// ModelMessage's tool-call, are no UIMessage's).
		c := m.get(keyContent)
		m.known = m.known && !m.has(keyParts) && !m.has(keyToolInvocations) && (c == nil || c[0] == '"')
	}
	return nil
}
