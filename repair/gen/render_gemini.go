package gen

import "encoding/json"

var gemini = dialect{render: renderGemini, argsOptional: true, idsOptional: true}

func renderGemini(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"parts", []obj{{{"text", e.text}}}}})}
	case evAssistant:
		var parts []obj
		if e.text != "" {
			parts = append(parts, obj{{"text", e.text}})
		}
		for _, c := range e.calls {
			parts = append(parts, obj{{"functionCall", callFields(c, "id", "name", "args", false)}})
		}
		if len(parts) == 0 {
			parts = append(parts, obj{{"text", "ok"}})
		}
		return []json.RawMessage{must(stopKey(e, "stop_reason", obj{{"role", "model"}, {"parts", parts}}))}
	}
	var parts []obj
	for _, r := range e.results {
		var fr obj
		if r.id != "" { // "" only under Config.OmitIDs
			fr = obj{{"id", r.id}}
		}
		fr = append(fr, kv{"name", r.name}, kv{"response", obj{{"output", r.text}}})
		parts = append(parts, obj{{"functionResponse", fr}})
	}
	if len(parts) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "user"}, {"parts", parts}})}
}
