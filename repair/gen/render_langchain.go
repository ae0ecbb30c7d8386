package gen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// LangChain messages in the three forms the libraries store them in (see repair's
// dialect_langchain.go): flat (JS PostgresChatMessageHistory), data (Python
// message_to_dict, whose data also holds the type and every default field) and lc (the
// JS constructor serialization LangGraph checkpoints hold). Each form is written plain
// (tool_calls only) or as a chat model leaves it, with its own copy of each call:
// -anthropic (tool_use content blocks), -openai (additional_kwargs.tool_calls),
// -responses (response_metadata.output items and __openai_function_call_ids__).
var langChain = dialect{render: renderLangChain("flat", ""), invalidCalls: true,
	variants: langChainVariants(), variant: langChainVariant}

var (
	lcForms     = []string{"flat", "data", "lc"}
	lcProviders = []string{"", "anthropic", "openai", "responses"}
)

func langChainVariants() []string {
	var out []string
	for _, f := range lcForms {
		for _, p := range lcProviders {
			if p == "" {
				out = append(out, f)
			} else {
				out = append(out, f+"-"+p)
			}
		}
	}
	return out
}

func langChainVariant(name string) func(e event, i int, ts int64) []json.RawMessage {
	form, provider, _ := strings.Cut(name, "-")
	return renderLangChain(form, provider)
}

func renderLangChain(form, provider string) func(e event, i int, ts int64) []json.RawMessage {
	plain := form == "flat" && provider == ""
	// message wraps a message's fields in its form; class is its constructor class name.
	message := func(typ, class string, fields obj) json.RawMessage {
		switch form {
		case "data":
			return must(obj{{"type", typ}, {"data", fields}})
		case "lc":
			return must(obj{{"lc", 1}, {"type", "constructor"},
				{"id", []string{"langchain_core", "messages", class}}, {"kwargs", fields}})
		}
		return must(append(obj{{"type", typ}}, fields...))
	}
	// defaults are the fields every message has beyond its content in each form: Python's
	// model_dump writes them all (and the type again), JS its two dicts.
	defaults := func(typ string, fields obj) obj {
		switch form {
		case "data":
			return append(fields, kv{"additional_kwargs", obj{}}, kv{"response_metadata", obj{}}, kv{"type", typ},
				kv{"name", nil}, kv{"id", nil})
		case "lc":
			return append(fields, kv{"additional_kwargs", obj{}}, kv{"response_metadata", obj{}})
		}
		if plain {
			return fields
		}
		return append(fields, kv{"additional_kwargs", obj{}}, kv{"response_metadata", obj{}})
	}
	return func(e event, i int, _ int64) []json.RawMessage {
		switch e.kind {
		case evUser:
			return []json.RawMessage{message("human", "HumanMessage", defaults("human", obj{{"content", e.text}}))}
		case evAssistant:
			return []json.RawMessage{message("ai", "AIMessage", lcAIFields(e, i, form, provider))}
		}
		var out []json.RawMessage
		for _, r := range e.results {
			f := obj{{"content", r.text}, {"tool_call_id", r.id}, {"name", r.name}}
			switch form {
			case "data":
				f = obj{{"content", r.text}, {"additional_kwargs", obj{}}, {"response_metadata", obj{}}, {"type", "tool"},
					{"name", r.name}, {"id", nil}, {"tool_call_id", r.id}, {"artifact", nil}, {"status", "success"}}
			case "lc":
				f = append(f, kv{"additional_kwargs", obj{}}, kv{"response_metadata", obj{}})
			}
			out = append(out, message("tool", "ToolMessage", f))
		}
		return out
	}
}

// lcAIFields are an AI message's fields: its calls, and the chat model's copies of them.
func lcAIFields(e event, i int, form, provider string) obj {
	var calls, invalid []obj
	for _, c := range e.calls {
		if c.invalid {
			invalid = append(invalid, obj{{"name", c.name}, {"args", c.args}, {"id", c.id},
				{"error", "Malformed args."}, {"type", "invalid_tool_call"}})
			continue
		}
		call := append(callFields(c, "id", "name", "args", false), kv{"type", "tool_call"})
		if c.malformed == "partial" {
			call = append(call, kv{"partial", true})
		}
		calls = append(calls, call)
	}
	// The copy's id is the call's as the provider wrote it (blank or padded alike).
	id := func(c gcall) string {
		if c.malformed == "blank_id" {
			return ""
		}
		return c.id
	}
	var content any = e.text
	kwargs, meta := obj{}, obj{}
	switch provider {
	case "anthropic":
		var blocks []obj
		if e.text != "" {
			blocks = append(blocks, obj{{"type", "text"}, {"text", e.text}})
		}
		for _, c := range e.calls {
			var input any = json.RawMessage(c.args)
			if c.invalid {
				input = c.args // a cut stream leaves the partial JSON text
			}
			blocks = append(blocks, obj{{"type", "tool_use"}, {"id", id(c)}, {"name", c.name}, {"input", input}})
		}
		content = blocks
		if blocks == nil {
			content = []obj{}
		}
		stop := "end_turn"
		if len(e.calls) > 0 {
			stop = "tool_use"
		}
		kwargs = obj{{"id", fmt.Sprintf("msg_%04d", i)}, {"model", "claude-sonnet-4-5"}, {"stop_reason", stop}}
		meta = obj{{"model_provider", "anthropic"}, {"model_name", "claude-sonnet-4-5"}, {"stop_reason", stop}}
	case "openai":
		var raw []obj
		for _, c := range e.calls {
			raw = append(raw, obj{{"id", id(c)}, {"type", "function"},
				{"function", obj{{"name", c.name}, {"arguments", c.args}}}})
		}
		if raw != nil {
			kwargs = obj{{"tool_calls", raw}}
		}
		finish := "stop"
		if len(e.calls) > 0 {
			finish = "tool_calls"
		}
		meta = obj{{"model_provider", "openai"}, {"model_name", "gpt-4.1"}, {"finish_reason", finish}}
	case "responses":
		var output []obj
		var blocks []obj
		if e.text != "" {
			blocks = append(blocks, obj{{"type", "text"}, {"text", e.text}, {"annotations", []obj{}}})
			output = append(output, obj{{"type", "message"}, {"id", fmt.Sprintf("msg_%04d", i)}, {"role", "assistant"},
				{"status", "completed"}, {"content", []obj{{{"type", "output_text"}, {"text", e.text}, {"annotations", []obj{}}}}}})
		}
		ids := obj{}
		for j, c := range e.calls {
			item := fmt.Sprintf("fc_%04d_%d", i, j)
			output = append(output, obj{{"type", "function_call"}, {"id", item}, {"call_id", id(c)}, {"name", c.name},
				{"arguments", c.args}, {"status", "completed"}})
			ids = append(ids, kv{id(c), item})
		}
		content = blocks
		if blocks == nil {
			content = []obj{}
		}
		if len(ids) > 0 {
			kwargs = obj{{"__openai_function_call_ids__", ids}}
		}
		meta = obj{{"model_provider", "openai"}, {"id", fmt.Sprintf("resp_%04d", i)}, {"model", "gpt-5"},
			{"output", output}, {"status", "completed"}}
	}
	f := obj{{"content", content}}
	if calls != nil || form != "flat" || provider != "" {
		if calls == nil {
			calls = []obj{}
		}
		f = append(f, kv{"tool_calls", calls})
	}
	if invalid != nil || form != "flat" || provider != "" {
		if invalid == nil {
			invalid = []obj{}
		}
		f = append(f, kv{"invalid_tool_calls", invalid})
	}
	if form != "flat" || provider != "" {
		f = append(f, kv{"additional_kwargs", kwargs}, kv{"response_metadata", meta})
	}
	switch form {
	case "data":
		f = append(f, kv{"type", "ai"}, kv{"name", nil}, kv{"id", fmt.Sprintf("run-%04d", i)})
	case "lc":
		f = append(f, kv{"id", fmt.Sprintf("run-%04d", i)})
	}
	return stopKey(e, "stop_reason", f)
}
