package gen

import "encoding/json"

var bedrock = dialect{render: renderBedrock}

func renderBedrock(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"content", []obj{{{"text", e.text}}}}})}
	case evAssistant:
		var blocks []obj
		if e.text != "" {
			blocks = append(blocks, obj{{"text", e.text}})
		}
		for _, c := range e.calls {
			tu := callFields(c, "toolUseId", "name", "input", false)
			if c.malformed == "partial" {
				tu = append(tu, kv{"partial", true})
			}
			blocks = append(blocks, obj{{"toolUse", tu}})
		}
		if len(blocks) == 0 {
			blocks = append(blocks, obj{{"text", "ok"}})
		}
		return []json.RawMessage{must(stopKey(e, "stop_reason", obj{{"role", "assistant"}, {"content", blocks}}))}
	}
	var blocks []obj
	for _, r := range e.results {
		status := "success"
		if r.synthetic || r.failed {
			status = "error"
		}
		blocks = append(blocks, obj{{"toolResult", obj{{"toolUseId", r.id},
			{"content", []obj{{{"text", r.text}}}}, {"status", status}}}})
	}
	if len(blocks) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "user"}, {"content", blocks}})}
}
