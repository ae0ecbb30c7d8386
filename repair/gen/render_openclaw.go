package gen

import (
	"encoding/json"
	"hash/fnv"
)

var openClaw = dialect{render: renderOpenClaw, legacyBlocks: true}

func renderOpenClaw(e event, _ int, ts int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"content", []obj{{{"type", "text"}, {"text", e.text}}}}, {"timestamp", ts}})}
	case evAssistant:
		var blocks []obj
		if e.text != "" {
			blocks = append(blocks, obj{{"type", "text"}, {"text", e.text}})
		}
		for _, c := range e.calls {
			blocks = append(blocks, openClawCall(c))
		}
		if len(blocks) == 0 {
			blocks = append(blocks, obj{{"type", "text"}, {"text", "ok"}})
		}
		stop := "stop"
		if len(e.calls) > 0 {
			stop = "toolUse"
		}
		if e.failed {
			stop = "error"
		}
		return []json.RawMessage{must(obj{{"role", "assistant"}, {"content", blocks}, {"api", "anthropic-messages"},
			{"provider", "anthropic"}, {"model", "claude-sonnet-4-5"},
			{"usage", obj{{"input", 1200}, {"output", 85}, {"cacheRead", 0}, {"cacheWrite", 0}, {"totalTokens", 1285}}},
			{"stopReason", stop}, {"timestamp", ts}})}
	}
	var out []json.RawMessage
	for _, r := range e.results {
		out = append(out, must(obj{{"role", "toolResult"}, {"toolCallId", r.id}, {"toolName", r.name},
			{"content", []obj{{{"type", "text"}, {"text", r.text}}}}, {"isError", r.synthetic || r.failed}, {"timestamp", ts}}))
	}
	return out
}

// openClawCall writes a call as one of the blocks OpenClaw's runtime treats as a call.
// Most are toolCall; some are toolUse or functionCall with the arguments in input or
// arguments (valid, picked from the id so that the rest of the session does not move);
// noncanonical_call makes one a legacy snake_case block.
func openClawCall(c gcall) obj {
	typ, idKey, argsKey, asString := "toolCall", "id", "arguments", false
	if c.legacy != nil {
		typ, idKey, argsKey, asString = c.legacy.typ, c.legacy.idKey, c.legacy.argsKey, c.legacy.argsAsString
	} else {
		h := fnv.New32a()
		h.Write([]byte(c.id))
		switch h.Sum32() % 10 {
		case 0:
			typ, argsKey = "toolUse", "input"
		case 1:
			typ = "toolUse"
		case 2:
			typ = "functionCall"
		case 3:
			typ, argsKey = "functionCall", "input"
		}
	}
	b := append(obj{{"type", typ}}, callFields(c, idKey, "name", argsKey, asString)...)
	if c.malformed == "partial" {
		b = append(b, kv{"partialArgs", `{"path":"/sr`})
	}
	return b
}
