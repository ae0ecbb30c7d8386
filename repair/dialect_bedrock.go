package repair

// Bedrock is the Amazon Bedrock Converse API: assistant blocks {toolUse:{toolUseId, name,
// input}}, answered by {toolResult:{toolUseId, status}} blocks in the next user message;
// user and assistant turns must alternate strictly.
const Bedrock Dialect = "bedrock"

var bedrockSpec = &spec{
	name:        Bedrock,
	parse:       parseBedrock,
	block:       true,
	anyUserSlot: true,
	blockSignal: func(o obj, typ []byte) bool {
		return typ == nil && (o.has(keyToolUse) || o.has(keyToolResult))
	},
	// "A conversation must alternate between user and assistant roles".
	mergeAfterRemoval: func(prev, cur *outMsg, _ Target) bool { return sameRole(prev, cur) },
	// Two messages of one role in the input are one turn to the provider's clients:
	// LangChain's ChatBedrockConverse (merge_message_runs) and the AI SDK's bedrock
	// provider (groupIntoBlocks) merge them before sending; tmend merges them as stored.
	mergeAdjacent: sameRole,
	synth: func(c *part, id []byte, text string) []byte {
		tr := objectBuilder(nil).raw("toolUseId", id).raw("content", textBlocks(false, text)).
			str("status", "error").done()
		return objectBuilder(nil).raw("toolResult", tr).done()
	},
	wrap:  func(p [][]byte) []byte { return wrapUser(keyContent, p) },
	order: bedrockOrder,
}

// bedrockOrder finds a message whose place Converse rejects ("A conversation must start
// with a user message") that no stage changes: an assistant message first (unless only
// malformed calls, which go, make it a call turn). Drop it, or add a user turn before it?
// tmend does not decide. (Two messages of one role in a row are merged: mergeAdjacent.)
func bedrockOrder(msgs []message, _ *parser) (int, string) {
	if len(msgs) > 0 {
		if m := &msgs[0]; m.kind == msgAssistant && (wellFormedCalls(m) || !toolParts(m)) {
			return 0, "the conversation starts with an assistant message, which Converse rejects; whether to drop it or add a user turn before it is not tmend's to decide"
		}
	}
	return 0, ""
}

// bedrockText reports a user or assistant message whose content array holds a text block
// without a type ({"text":...}): Converse's, and no other dialect's (Anthropic's, OpenAI's
// and the AI SDK's blocks are typed; Gemini's untyped ones are parts). It names the dialect
// of a transcript with no tool shapes, so that Converse's order rules apply to it too,
// typed text blocks beside it included: @aws-sdk/client-bedrock-runtime sends a
// {"type":"text","text"} block as {"text"}. A transcript of typed blocks only may be
// Anthropic's, which merges turns, and stays clean.
func bedrockText(m *message) bool {
	if role := m.word(keyRole); string(role) != "user" && string(role) != "assistant" {
		return false
	}
	blks, _ := m.blocks(keyContent)
	for _, blk := range blks {
		if blk.ms == nil {
			continue
		}
		_, typed := findCode(blk.members(), keyType)
		if _, text := findCode(blk.members(), keyText); text && !typed {
			return true
		}
	}
	return false
}

var (
	pathToolUseToolUseID    = []keyCode{keyToolUse, keyToolUseIDCamel}
	pathToolResultToolUseID = []keyCode{keyToolResult, keyToolUseIDCamel}
)

func parseBedrock(m *message, ps *parser) error {
	role := m.word(keyRole)
	m.known = anthropicRoles.has(role)
	switch string(role) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m.raw(), m.ms())
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			switch {
			case o.has(keyToolUse):
				tu := o.sub(keyToolUse)
				callShape(p, tu, pathToolUseToolUseID, tu, tu, keyInput, false)
			case o.has(keyToolResult):
				ps.doubtful("a toolResult block is in an assistant message")
			}
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			switch {
			case o.has(keyToolResult):
				tr := o.sub(keyToolResult)
				resultShape(p, tr, pathToolResultToolUseID)
				p.set(partSynthetic, isSyntheticText(tr.get(keyContent), nil))
			case o.has(keyToolUse):
				// Converse takes a call only from the assistant: not read as one, never clean.
				ps.doubtful("a toolUse block is in a user message")
			}
		})
	}
	return nil
}
