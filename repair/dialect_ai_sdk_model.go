package repair

import "strings"

// AISDKModel is the Vercel AI SDK's ModelMessage arrays (what response.messages returns
// in ai 5 to 7; ai 4's CoreMessage too): assistant content parts {type:"tool-call",
// toolCallId, toolName, input} (ai 4: args), answered by {type:"tool-result", toolCallId,
// toolName, output:{type, value}} (ai 4: result) parts of the role:"tool" messages right
// after the turn, which the SDK joins into one. A call the provider runs itself
// (providerExecuted: true) is answered by the provider, in assistant content, and is no
// client call; approval requests (assistant) and approval responses (tool) name a call
// without being one or answering it.
const AISDKModel Dialect = "ai-sdk-model"

var aiSDKModelSpec = &spec{
	name:  AISDKModel,
	parse: parseAISDKModel,
	block: true,
	// The tool message right after a turn takes its results even when it holds only
	// approval responses so far, and a result may be in any tool message of the run.
	anyUserSlot: true,
	slotRun:     true,
	// A tool message whose content is an array and that has no tool_call_id (OpenAI chat's
	// tool message has one): a repair may leave one holding nothing else of the dialect.
	messageSignal: func(f *msgFacts) bool {
		return string(f.role) == "tool" && !f.hasToolCallID && len(f.content) > 0 && f.content[0] == '['
	},
	// A content part's type together with its toolCallId member: a role:"tool" message
	// alone is OpenAI chat's shape too. (A UI message's part for a tool named "call" has
	// the type tool-call as well, but lives in parts, where detection does not look.)
	// Approval parts, with their approvalId, are evidence too: what a repair leaves of a
	// turn whose only call was malformed.
	blockSignal: func(o obj, typ []byte) bool {
		switch {
		case isString(typ, "tool-call"), isString(typ, "tool-result"):
			return o.has(keyToolCallIDCamel)
		case isString(typ, "tool-approval-request"), isString(typ, "tool-approval-response"):
			_, ok := findMember(o.raw, o.ms, "approvalId")
			return ok
		}
		return false
	},
	synth: func(c *part, id []byte, text string) []byte {
		b := objectBuilder(nil).str("type", "tool-result").raw("toolCallId", id).str("toolName", c.name())
		if c.callType == callAISDK4 {
			return b.str("result", text).raw("isError", []byte("true")).done()
		}
		return b.raw("output", objectBuilder(nil).str("type", "error-text").str("value", text).done()).done()
	},
	wrap: func(p [][]byte) []byte {
		out := append([]byte(`{"role":"tool","content":`), joinArray(p)...)
		return append(out, '}')
	},
}

// aiSDKModelRoles are ModelMessage roles.
var aiSDKModelRoles = words("system", "user", "assistant", "tool")

func parseAISDKModel(m *message, ps *parser) error {
	role := m.word(keyRole)
	// Content is text (never for a tool message) or parts; a part whose type names a tool
	// and that tmend does not read (a tool-result in a user message, a part type of a
	// later SDK, a provider's result without its id) makes the message unknown.
	v := m.get(keyContent)
	m.known = aiSDKModelRoles.has(role) && len(v) > 0 && (v[0] == '[' || v[0] == '"' && string(role) != "tool")
	switch string(role) {
	case "assistant":
		m.kind = msgAssistant
		if err := parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			if !aiSDKAssistantPart(p, o) {
				m.known = false
			}
		}); err != nil {
			return err
		}
		markAwaiting(m, ps)
	case "tool":
		m.kind = msgUser
		return parseBlocks(m, ps, keyContent, func(p *part, o obj) {
			if !aiSDKToolPart(p, o) {
				m.known = false
			}
		})
	default:
		for _, blk := range m.contentBlocks() {
			if blk.ms != nil && !aiSDKPlainPart(obj{blk.raw(), blk.members(), ps}.get(keyType)) {
				m.known = false
			}
		}
		checkForeignContent(m, ps)
	}
	return nil
}

// aiSDKPlainPart reports a part type (or none) that names no tool, call or function.
func aiSDKPlainPart(typ []byte) bool {
	return typ == nil || aiSDKPlainParts.has(wordOf(typ)) || !toolish(wordOf(typ))
}

// aiSDKPlainParts are the ModelMessage part types that hold no tool call or result
// (ai 4 to 7), spared the toolish test.
var aiSDKPlainParts = words("text", "reasoning", "file", "image", "reasoning-file", "redacted-reasoning", "custom")

// aiSDKToolPart reads one part of a tool message's content, and reports whether it is
// one tmend reads.
func aiSDKToolPart(p *part, o obj) bool {
	typ := o.get(keyType)
	switch {
	case isString(typ, "tool-result"):
		id, _ := idString(o.get(keyToolCallIDCamel))
		if o.ps.providerCalls[strings.TrimSpace(id)] {
			providerRunShape(p, o, o.get(keyToolCallIDCamel))
			return true // the provider's result (a denied provider-run tool), not a client's
		}
		resultShape(p, o, pathToolCallIDCamel)
		name, _ := inputString(o.get(keyToolName))
		p.setName(name)
		p.set(partSynthetic, aiSDKSynthetic(o))
	case isString(typ, "tool-approval-response"):
		p.kind = partRef
		return hasApprovalID(o)
	default:
		return aiSDKPlainPart(typ)
	}
	return true
}

// providerRunShape marks p, a call the provider ran or the provider's result for one, with
// its id v and tool name: neither a call nor a result to pair (its kind stays partOther),
// but what a target that takes every tool-call part for a client call must not receive.
func providerRunShape(p *part, o obj, v []byte) {
	if v[0] != '"' {
		return
	}
	o.ps.setID(p, v)
	p.hasID = true
	name, _ := inputString(o.get(keyToolName))
	p.setName(name)
	o.ps.markProviderRun(p)
}

// hasApprovalID: an approval part without its approvalId is no evidence of the dialect
// (the spec's blockSignal), so what a repair leaves would not be read again.
func hasApprovalID(o obj) bool { _, ok := findMember(o.raw, o.ms, "approvalId"); return ok }

// aiSDKAssistantPart reads one part of an assistant message's content, and reports
// whether it is one tmend reads. A provider's call or result must carry its toolCallId,
// which makes it evidence of the dialect (the spec's blockSignal): without it, what a
// repair leaves would not be read again. A client's call without one is malformed.
func aiSDKAssistantPart(p *part, o obj) bool {
	typ := o.get(keyType)
	switch {
	case isString(typ, "tool-call"):
		if pe, ok := findMember(o.raw, o.ms, "providerExecuted"); ok && isTrue(pe.val(o.raw)) {
			// Run and answered by the provider (in this content or a later assistant
			// message): no client call, left as it is but for a target that would take it
			// for one (dropProviderRuns).
			v := o.get(keyToolCallIDCamel)
			if id, ok := idString(v); ok {
				if o.ps.providerCalls == nil {
					o.ps.providerCalls = map[string]bool{}
				}
				o.ps.providerCalls[strings.TrimSpace(id)] = true
				providerRunShape(p, o, v)
			}
			return v != nil
		}
		aiSDKCallShape(p, o)
	case isString(typ, "tool-result"):
		// A provider-run tool's result: not a client result.
		if v := o.get(keyToolCallIDCamel); v != nil {
			providerRunShape(p, o, v)
			return true
		}
		return false
	case isString(typ, "tool-approval-request"):
		p.kind = partRef
		if auto, ok := findMember(o.raw, o.ms, "isAutomatic"); ok && isTrue(auto.val(o.raw)) {
			return hasApprovalID(o) // decided by the agent's own rule: nobody is asked
		}
		// The id of the call that waits for a person (markAwaiting).
		if v := o.get(keyToolCallIDCamel); v != nil && v[0] == '"' {
			o.ps.setID(p, v)
			p.hasID = true
		}
		return hasApprovalID(o)
	default:
		return aiSDKPlainPart(typ)
	}
	return true
}

// aiSDKCallShape is callShape for a tool-call part, whose name is in toolName and whose
// arguments are in input (ai 4: args).
func aiSDKCallShape(p *part, o obj) {
	args := keyInput
	if !o.has(keyInput) && o.has(keyArgs) {
		args = keyArgs
		p.callType = callAISDK4 // its synthetic result is written as ai 4 reads it (result, not output)
	}
	callShape(p, o, pathToolCallIDCamel, o, o, args, false)
	name, _ := inputString(o.get(keyToolName))
	p.setName(name)
	// callShape judged the name by a name member, which these parts do not have; judge it
	// by toolName instead, in the same order (a name before the arguments).
	switch p.malformed {
	case wellFormed, malNoName, malNoArgs:
		switch {
		case isBlank(p.name()):
			p.malformed = malNoName
		case !o.has(args):
			p.malformed = malNoArgs
		default:
			p.malformed = wellFormed
		}
	}
}

// markAwaiting marks each call of m that an approval request of m names as waiting for a
// person's approval.
func markAwaiting(m *message, ps *parser) {
	parts := m.parts()
	for i := range parts {
		r := &parts[i]
		if r.kind != partRef || !r.hasID {
			continue
		}
		for j := range parts {
			if c := &parts[j]; c.kind == partCall && c.hasID && ps.id(c) == ps.id(r) {
				c.set(partAwaiting, true)
			}
		}
	}
}

// aiSDKSynthetic reports a tool-result part whose output (ai 4: result) is a known
// inserted text: output {type:"error-text" or "text", value}, {type:"content", value:
// [{type:"text", text}]} or {type:"error-json", value:{error}}.
func aiSDKSynthetic(o obj) bool {
	out := o.get(keyOutput)
	if out == nil {
		if r, ok := findMember(o.raw, o.ms, "result"); ok {
			return isSyntheticText(r.val(o.raw), nil)
		}
		return false
	}
	// Every known text is short: a long output is never one (and is not scanned twice).
	if len(out) > 4096 || out[0] != '{' {
		return false
	}
	sub, ok, _ := o.ps.obj(out) // in the scratch space, which parseBlocks resets
	if !ok {
		return false // a key repeated: which text it holds is unclear
	}
	v, ok := findMember(out, sub.ms, "value")
	if !ok {
		return false
	}
	// A text, or content parts; an object only as error-json's value ({"error": text}),
	// which spares reading every json result's object.
	if val := v.val(out); val[0] != '{' || isString(sub.get(keyType), "error-json") {
		return isSyntheticText(val, nil)
	}
	return false
}
