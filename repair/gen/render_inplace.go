package gen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dialects that keep a call and its result in one part: the AI SDK's UIMessage (ai 5+
// parts) and Mastra's format 2 (ai 4 tool invocations). Each call's part takes the first
// result with its id anywhere in the conversation; a call without one stays open
// (input-available, or call), and a streaming leftover is input-streaming (partial-call).

var (
	aiSDKUI = dialect{renderAll: func(evs []event, t0 int64) []json.RawMessage {
		return renderInPlace(evs, t0, uiMessage, toolPart)
	}}
	mastra = dialect{renderAll: func(evs []event, t0 int64) []json.RawMessage {
		return renderInPlace(evs, t0, mastraMessage, invocationPart)
	}}
)

// inPlaceMessage writes one message from its role, its parts and its index.
type inPlaceMessage func(role string, parts []obj, i int, ts int64) json.RawMessage

// callPart writes a call's part, with its result when answered.
type callPart func(c gcall, r gresult, answered bool) obj

func renderInPlace(evs []event, t0 int64, msg inPlaceMessage, call callPart) []json.RawMessage {
	// The n-th result with an id answers the n-th call with it (duplicate_call_id).
	results := map[string][]gresult{}
	for _, e := range evs {
		for _, r := range e.results {
			results[r.id] = append(results[r.id], r)
		}
	}
	var out []json.RawMessage
	ts := t0
	for i, e := range evs {
		ts += 1000
		switch e.kind {
		case evUser:
			out = append(out, msg("user", []obj{{{"type", "text"}, {"text", e.text}}}, i, ts))
		case evAssistant:
			parts := []obj{{{"type", "step-start"}}}
			if e.text != "" {
				parts = append(parts, obj{{"type", "text"}, {"text", e.text}})
			}
			for _, c := range e.calls {
				var r gresult
				rs := results[c.id]
				if answered := len(rs) > 0; answered {
					r, results[c.id] = rs[0], rs[1:]
					parts = append(parts, call(c, r, true))
				} else {
					parts = append(parts, call(c, r, false))
				}
			}
			out = append(out, msg("assistant", parts, i, ts))
		}
	}
	return out
}

// toolPart is an ai 5+ tool part: most typed by name, some dynamic-tool.
func toolPart(c gcall, r gresult, answered bool) obj {
	p := obj{{"type", "tool-" + c.name}}
	if strings.HasSuffix(c.id, "7") { // a deterministic few, without moving the rest
		p = obj{{"type", "dynamic-tool"}, {"toolName", c.name}}
	}
	if c.malformed == "no_name" {
		p = obj{{"type", "dynamic-tool"}, {"toolName", ""}}
	}
	id := c.id
	if c.malformed == "blank_id" {
		id = ""
	}
	p = append(p, kv{"toolCallId", id})
	switch {
	case c.malformed == "partial":
		return append(p, kv{"state", "input-streaming"}, kv{"input", json.RawMessage(`{"path":"/sr"}`)})
	case !answered:
		p = append(p, kv{"state", "input-available"})
	default:
		p = append(p, kv{"state", "output-available"})
	}
	if c.malformed != "no_args" {
		p = append(p, kv{"input", json.RawMessage(c.args)})
	}
	if answered {
		p = append(p, kv{"output", r.text})
	}
	return p
}

// invocationPart is an ai 4 / Mastra tool-invocation part.
func invocationPart(c gcall, r gresult, answered bool) obj {
	id, name := c.id, c.name
	if c.malformed == "blank_id" {
		id = ""
	}
	if c.malformed == "no_name" {
		name = ""
	}
	inv := obj{{"state", "call"}, {"toolCallId", id}, {"toolName", name}}
	switch {
	case c.malformed == "partial":
		inv[0].v = "partial-call"
	case answered:
		inv[0].v = "result"
	}
	if c.malformed != "no_args" {
		inv = append(inv, kv{"args", json.RawMessage(c.args)})
	}
	if answered && c.malformed != "partial" {
		inv = append(inv, kv{"result", r.text})
	}
	return obj{{"type", "tool-invocation"}, {"toolInvocation", inv}}
}

func uiMessage(role string, parts []obj, i int, _ int64) json.RawMessage {
	return must(obj{{"id", msgID(i)}, {"role", role}, {"parts", parts}})
}

func mastraMessage(role string, parts []obj, i int, ts int64) json.RawMessage {
	return must(obj{{"id", msgID(i)}, {"role", role}, {"content", obj{{"format", 2}, {"parts", parts}}},
		{"type", "v2"}, {"createdAt", ts}, {"threadId", "thread-1"}, {"resourceId", "user-1"}})
}

func msgID(i int) string { return fmt.Sprintf("msg-%04d", i) }
