package gen

import "encoding/json"

var langChain = dialect{render: renderLangChain}

func renderLangChain(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"type", "human"}, {"content", e.text}})}
	case evAssistant:
		o := obj{{"type", "ai"}, {"content", e.text}}
		if len(e.calls) > 0 {
			var tc []obj
			for _, c := range e.calls {
				call := append(callFields(c, "id", "name", "args", false), kv{"type", "tool_call"})
				if c.malformed == "partial" {
					call = append(call, kv{"partial", true})
				}
				tc = append(tc, call)
			}
			o = append(o, kv{"tool_calls", tc})
		}
		return []json.RawMessage{must(stopKey(e, "stop_reason", o))}
	}
	var out []json.RawMessage
	for _, r := range e.results {
		out = append(out, must(obj{{"type", "tool"}, {"content", r.text}, {"tool_call_id", r.id}, {"name", r.name}}))
	}
	return out
}
