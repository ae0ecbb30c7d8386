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
		return typ == nil && (o.has("toolUse") || o.has("toolResult"))
	},
	// "A conversation must alternate between user and assistant roles".
	mergeAfterRemoval: func(prev, cur *outMsg, _ Target) bool { return sameRole(prev, cur) },
	synth: func(c *part, text string) []byte {
		tr := objectBuilder(nil).raw("toolUseId", c.idRaw).raw("content", textBlocks(false, text)).
			str("status", "error").done()
		return objectBuilder(nil).raw("toolResult", tr).done()
	},
	wrap: func(p [][]byte) []byte { return wrapUser("content", p) },
}

var (
	pathToolUseToolUseID    = []string{"toolUse", "toolUseId"}
	pathToolResultToolUseID = []string{"toolResult", "toolUseId"}
)

func parseBedrock(m *message, ps *parser) error {
	switch string(m.word("role")) {
	case "assistant":
		m.kind = msgAssistant
		m.failed = failedTurn(m)
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if o.has("toolUse") {
				tu := o.sub("toolUse")
				callShape(p, tu, pathToolUseToolUseID, tu, tu, "input", false)
			}
		})
	case "user":
		m.kind = msgUser
		return parseBlocks(m, ps, "content", func(p *part, o obj) {
			if o.has("toolResult") {
				tr := o.sub("toolResult")
				resultShape(p, tr, pathToolResultToolUseID)
				p.synthetic = isSyntheticText(tr.get("content"), nil)
			}
		})
	}
	return nil
}
