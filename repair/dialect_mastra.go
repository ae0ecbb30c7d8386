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
	messageSignal: func(f msgFacts) bool {
		return len(f.content) > 0 && f.content[0] == '{' && uiRoles.has(f.role) && isMastraContent(f.content)
	},
}

// isMastraContent reports a content object of format 2.
func isMastraContent(v []byte) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	ms, err := membersOf(v)
	if err != nil {
		return false
	}
	f, ok := findCode(ms, keyFormat)
	return ok && string(f.val(v)) == "2"
}

func parseMastra(m *message, ps *parser) error {
	role := m.word(keyRole)
	v := m.get(keyContent)
	m.known = uiRoles.has(role) && isMastraContent(v)
	if !m.known {
		return nil
	}
	if string(role) == "assistant" {
		m.kind = msgAssistant
	}
	holder := obj{raw: v, ps: ps}
	holder.ms, _ = membersOf(v) // kept apart from the scratch space the parts use
	m.otherContent = !isEmptyValue(holder.get(keyContent))
	if pv := holder.get(keyParts); len(pv) > 0 && pv[0] == '[' {
		parseInPlaceParts(m, ps, keyContent, keyParts, parseBlockList(pv), holder)
	} else if tv := holder.get(keyToolInvocations); len(tv) > 0 && tv[0] == '[' {
		parseInPlaceParts(m, ps, keyContent, keyToolInvocations, parseBlockList(tv), holder)
	}
	return nil
}
