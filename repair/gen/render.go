package gen

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tmend/tmend/repair"
)

// obj is an ordered JSON object, so rendered messages look like real ones.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(e.k)
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func must(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own fixed shapes are marshalled
	}
	return b
}

// callObj renders a call's common fields; idKey/nameKey/argsKey differ per dialect and
// args is either the JSON text (a string) or the parsed object.
func callFields(c gcall, idKey, nameKey, argsKey string, argsAsString bool) obj {
	var o obj
	if c.malformed != "blank_id" {
		o = append(o, kv{idKey, c.id})
	} else {
		o = append(o, kv{idKey, ""})
	}
	if c.malformed != "no_name" {
		o = append(o, kv{nameKey, c.name})
	}
	if c.malformed != "no_args" {
		if argsAsString {
			o = append(o, kv{argsKey, c.args})
		} else {
			o = append(o, kv{argsKey, json.RawMessage(c.args)})
		}
	}
	return o
}

func render(d repair.Dialect, evs []event, t0 time.Time) []json.RawMessage {
	var out []json.RawMessage
	ts := t0.UnixMilli()
	for i, e := range evs {
		ts += 1000
		switch d {
		case repair.OpenAIChat:
			out = append(out, renderOpenAIChat(e)...)
		case repair.Anthropic:
			out = append(out, renderAnthropic(e)...)
		case repair.OpenAIResponses:
			out = append(out, renderResponses(e, i)...)
		case repair.OpenClaw:
			out = append(out, renderOpenClaw(e, ts)...)
		case repair.Gemini:
			out = append(out, renderGemini(e)...)
		case repair.Bedrock:
			out = append(out, renderBedrock(e)...)
		case repair.LangChain:
			out = append(out, renderLangChain(e)...)
		default:
			panic(fmt.Sprintf("gen: unknown dialect %q", d))
		}
	}
	return out
}

func stopKey(e event, key string, o obj) obj {
	if e.failed {
		return append(o, kv{key, "error"})
	}
	return o
}

func renderOpenAIChat(e event) []json.RawMessage {
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

func renderAnthropic(e event) []json.RawMessage {
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
		if r.synthetic {
			b = append(b, kv{"is_error", true})
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "user"}, {"content", blocks}})}
}

func renderResponses(e event, i int) []json.RawMessage {
	switch e.kind {
	case evUser:
		return []json.RawMessage{must(obj{{"type", "message"}, {"role", "user"},
			{"content", []obj{{{"type", "input_text"}, {"text", e.text}}}}})}
	case evAssistant:
		var out []json.RawMessage
		if len(e.calls) > 0 {
			out = append(out, must(obj{{"type", "reasoning"}, {"id", fmt.Sprintf("rs_%d", i)}, {"summary", []obj{}}}))
		}
		if e.text != "" && len(e.calls) == 0 {
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

func renderOpenClaw(e event, ts int64) []json.RawMessage {
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

func renderGemini(e event) []json.RawMessage {
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
		parts = append(parts, obj{{"functionResponse", obj{{"id", r.id}, {"name", r.name},
			{"response", obj{{"output", r.text}}}}}})
	}
	if len(parts) == 0 {
		return nil
	}
	return []json.RawMessage{must(obj{{"role", "user"}, {"parts", parts}})}
}

func renderBedrock(e event) []json.RawMessage {
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
		if r.synthetic {
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

func renderLangChain(e event) []json.RawMessage {
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
