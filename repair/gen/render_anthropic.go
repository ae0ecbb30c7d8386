package gen

import "encoding/json"

var anthropic = dialect{render: renderAnthropic}

func renderAnthropic(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"content", []obj{{{"type", "text"}, {"text", e.text}}}}})}
	case evAssistant:
		var blocks []obj
		if e.text != "" {
			blocks = append(blocks, obj{{"type", "text"}, {"text", e.text}})
		}
		for _, c := range e.calls {
			b := append(obj{{"type", "tool_use"}}, callFields(c, "id", "name", "input", false)...)
			if c.malformed == "partial" {
				b = append(b, kv{"partialJson", `{"path":"/sr`})
			}
			blocks = append(blocks, b)
		}
		if len(blocks) == 0 {
			blocks = append(blocks, obj{{"type", "text"}, {"text", "ok"}})
		}
		return []json.RawMessage{must(stopKey(e, "stop_reason", obj{{"role", "assistant"}, {"content", blocks}}))}
	}
	var blocks []obj
	for _, r := range e.results {
		b := obj{{"type", "tool_result"}, {"tool_use_id", r.id}, {"content", r.text}}
		if r.synthetic || r.failed {
			b = append(b, kv{"is_error", true})
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "user"}, {"content", blocks}})}
}
