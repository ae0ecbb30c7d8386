package gen

import "encoding/json"

var openClaw = dialect{envelope: "messages", render: renderOpenClaw}

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
			b := append(obj{{"type", "toolCall"}}, callFields(c, "id", "name", "arguments", false)...)
			if c.malformed == "partial" {
				b = append(b, kv{"partialArgs", `{"path":"/sr`})
			}
			blocks = append(blocks, b)
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
			{"content", []obj{{{"type", "text"}, {"text", r.text}}}}, {"isError", r.synthetic}, {"timestamp", ts}}))
	}
	return out
}
