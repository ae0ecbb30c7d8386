package gen

import (
	"encoding/json"
	"hash/fnv"
)

// ModelMessages carry no stop reason (failed_turn does not apply) and have no streaming
// leftover shape: a call cut off before its input is written without input.
var aiSDKModel = dialect{render: renderAISDKModel, noTurnEnd: true}

func renderAISDKModel(e event, _ int, _ int64) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"role", "user"}, {"content", []obj{{{"type", "text"}, {"text", e.text}}}}})}
	case evAssistant:
		var parts []obj
		if e.text != "" {
			parts = append(parts, obj{{"type", "text"}, {"text", e.text}})
		}
		for _, c := range e.calls {
			if c.malformed == "partial" {
				c.malformed = "no_args"
			}
			parts = append(parts, append(obj{{"type", "tool-call"}}, callFields(c, "toolCallId", "toolName", "input", false)...))
		}
		if len(parts) == 0 {
			parts = append(parts, obj{{"type", "text"}, {"text", "ok"}})
		}
		return []json.RawMessage{must(obj{{"role", "assistant"}, {"content", parts}})}
	}
	var parts []obj
	for _, r := range e.results {
		parts = append(parts, obj{{"type", "tool-result"}, {"toolCallId", r.id}, {"toolName", r.name},
			{"output", aiSDKOutput(r)}})
	}
	if len(parts) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "tool"}, {"content", parts}})}
}

// aiSDKOutput writes a result's output as a tool's toModelOutput would: text for most,
// json for some (picked from the id, so the rest of the session does not move), and
// error-text for a result another repairer made up.
func aiSDKOutput(r gresult) obj {
	if r.synthetic || r.failed {
		return obj{{"type", "error-text"}, {"value", r.text}}
	}
	h := fnv.New32a()
	h.Write([]byte(r.id))
	if h.Sum32()%3 == 0 {
		return obj{{"type", "json"}, {"value", obj{{"ok", true}, {"stdout", r.text}, {"bytes", 1.25e3}}}}
	}
	return obj{{"type", "text"}, {"value", r.text}}
}
