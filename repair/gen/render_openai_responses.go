package gen

import (
	"encoding/json"
	"fmt"
)

var openAIResponses = dialect{render: renderResponses, reasoning: true}

func renderResponses(e event, i int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"type", "message"}, {"role", "user"},
			{"content", []obj{{{"type", "input_text"}, {"text", e.text}}}}})}
	case evAssistant:
		var out []json.RawMessage
		if len(e.calls) > 0 || e.reasoningOnly {
			out = append(out, must(obj{{"type", "reasoning"}, {"id", fmt.Sprintf("rs_%d", i)}, {"summary", []obj{}}}))
		}
		if e.text != "" && len(e.calls) == 0 && !e.reasoningOnly {
			out = append(out, must(obj{{"type", "message"}, {"role", "assistant"},
				{"content", []obj{{{"type", "output_text"}, {"text", e.text}}}}}))
		}
		for j, c := range e.calls {
			o := append(obj{{"type", "function_call"}, {"id", fmt.Sprintf("fc_%d_%d", i, j)}},
				callFields(c, "call_id", "name", "arguments", true)...)
			if c.malformed == "partial" {
				o = append(o, kv{"status", "incomplete"})
			}
			out = append(out, must(o))
		}
		return out
	}
	var out []json.RawMessage
	for _, r := range e.results {
		out = append(out, must(obj{{"type", "function_call_output"}, {"call_id", r.id}, {"output", r.text}}))
	}
	return out
}
