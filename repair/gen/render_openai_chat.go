package gen

import "encoding/json"

var openAIChat = dialect{render: renderOpenAIChat}

func renderOpenAIChat(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"content", e.text}})}
	case evAssistant:
		o := obj{{"role", "assistant"}, {"content", nullIfEmpty(e.text)}}
		if len(e.calls) > 0 {
			var tc []obj
			for _, c := range e.calls {
				f := callFields(c, "id", "name", "arguments", true)
				call := obj{f[0], {"type", "function"}, {"function", obj(f[1:])}}
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
		out = append(out, must(obj{{"role", "tool"}, {"tool_call_id", r.id}, {"content", r.text}}))
	}
	return out
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
