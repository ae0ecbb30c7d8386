package repair

// Mastra is Mastra's stored message (format 2): {id, role, content:{format:2, parts,
// content?, toolInvocations?}, ...}, whose parts are ai 4's: {type:"tool-invocation",
// toolInvocation:{state:"partial-call"|"call"|"result", toolCallId, toolName, args,
// result?}}. A call and its result are one part: see inplace.go.
const Mastra Dialect = "mastra"

var mastraSpec = &spec{
	name:    Mastra,
	parse:   parseMastra,
	inPlace: true,
	messageSignal: func(f *msgFacts) bool {
		return f.format2 && uiRoles.has(f.role)
	},
}

// isFormat2 reports a content object of format 2.
func isFormat2(content fieldsView) bool {
	f, ok := findCode(content.ms, keyFormat)
	return ok && string(f.val(content.raw)) == "2"
}

func parseMastra(m *message, ps *parser) error {
	role := m.word(keyRole)
	content, ok := m.fields(ps, keyContent)
	m.known = ok && uiRoles.has(role) && isFormat2(content)
	if !m.known {
		return nil
	}
	if string(role) == "assistant" {
		m.kind = msgAssistant
	}
	m.otherContent = !isEmptyValue(content.get(keyContent))
	if blks, ok := content.blocks(keyParts); ok {
		parseInPlaceParts(m, ps, keyContent, keyParts, blks, content.obj)
	} else if tv := content.get(keyToolInvocations); len(tv) > 0 && tv[0] == '[' {
		parseInPlaceParts(m, ps, keyContent, keyToolInvocations, parseBlockList(tv), content.obj)
	}
	return nil
}
