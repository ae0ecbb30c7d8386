package repair

import "fmt"

// Anthropic is the Anthropic Messages API: assistant blocks {type:"tool_use", id, name,
// input}, answered by {type:"tool_result", tool_use_id} blocks that lead the next user
// message.
const Anthropic Dialect = "anthropic"

var anthropicSpec = &spec{
	name:         Anthropic,
	parse:        parseAnthropic,
	block:        true,
	resultsFirst: true,
	blockSignal: func(o obj, typ []byte) bool {
		return isString(typ, "tool_use") || isString(typ, "tool_result") ||
			isString(typ, "server_tool_use") || isString(typ, "mcp_tool_use") || isString(typ, "redacted_thinking")
	},
	// The API folds consecutive same-role turns into one; with an Anthropic target tmend
	// does so itself where a removal made them adjacent, so results stay in the turn right
	// after their call.
	mergeAfterRemoval: func(prev, cur *outMsg, target Target) bool {
		return target == TargetAnthropic && sameRole(prev, cur)
	},
	synth: func(c *part, id []byte, text string) []byte {
		return objectBuilder(nil).str("type", "tool_result").raw("tool_use_id", id).str("content", text).
			raw("is_error", []byte("true")).done()
	},
	wrap:     func(p [][]byte) []byte { return wrapUser(keyContent, p) },
	order:    serverCallsUnanswered,
	argsPath: []keyCode{keyInput},
}

// serverCallsUnanswered finds an assistant message with a server_tool_use or mcp_tool_use
// block that no block of the message answers, where the API takes none: a call the server
// has yet to run stays open only beside a client tool_use (run with its tool_result) or in
// the last message (a pause_turn to continue). tmend cannot write a server tool's result,
// and whether the call ran is unknown, so the transcript is refused.
func serverCallsUnanswered(msgs []message, _ *parser) (int, string) {
	for j := range msgs {
		m := &msgs[j]
		if m.kind != msgAssistant || j == len(msgs)-1 || wellFormedCalls(m) {
			continue
		}
		blks := m.contentBlocks()
		for _, b := range blks {
			o := obj{raw: b.raw(), ms: b.members()}
			typ := o.get(keyType)
			if !isString(typ, "server_tool_use") && !isString(typ, "mcp_tool_use") {
				continue
			}
			id := o.get(keyID)
			answered := false
			for _, r := range blks {
				ro := obj{raw: r.raw(), ms: r.members()}
				answered = answered || id != nil && string(ro.get(keyToolUseID)) == string(id)
			}
			if !answered {
				return j, fmt.Sprintf("a %s block with id %s has no result block in its message, nor a client tool_use beside it, so the API would have to run it; tmend cannot write a server tool's result, nor tell whether it ran", wordOf(typ), id)
			}
		}
	}
	return 0, ""
}

var pathToolUseID = []keyCode{keyToolUseID}

var anthropicRoles = words("user", "assistant", "system")

func parseAnthropic(m *message, ps *parser) error {
	role := m.word(keyRole)
	m.known = anthropicRoles.has(role)
	switch string(role) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m.raw(), m.ms())
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			switch typ := o.get(keyType); {
			case isString(typ, "tool_use"):
				callShape(p, o, pathID, o, o, keyInput, false)
				objectArgs(p, o, keyInput, "a tool_use block's input")
			case isString(typ, "tool_result"):
				ps.doubtful("a tool_result block is in an assistant message")
			case !isString(typ, "server_tool_use") && !isString(typ, "mcp_tool_use") && !toolish(wordOf(typ)):
				// A block of a type tmend does not read that carries an id: a call (left
				// unanswered, or answered by a result tmend would drop), or a block of the
				// app's own that it strips before sending? tmend cannot tell.
				if id, ok := inputString(o.get(keyID)); ok && id != "" {
					ps.doubtful(fmt.Sprintf("a block of type %s carries the id %q", typ, id))
				}
			}
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			switch typ := o.get(keyType); {
			case isString(typ, "tool_result"):
				resultShape(p, o, pathToolUseID)
				p.set(partSynthetic, isSyntheticText(o.get(keyContent), nil))
			case isString(typ, "tool_use"):
				// The API takes a call only from the assistant: not read as one, never clean.
				ps.doubtful("a tool_use block is in a user message")
			}
		})
	}
	return nil
}

func sameRole(prev, cur *outMsg) bool {
	return len(prev.role) > 0 && string(prev.role) == string(cur.role)
}
