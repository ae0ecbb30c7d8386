package repair_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// toolRef is a call or result found by toolRefs.
type toolRef struct {
	id      string
	payload string // the block without its id, for finding it again after an id rewrite
}

// toolRefs finds the tool calls and results of a transcript in any dialect by walking
// every object: an oracle written apart from the engine, for the conservation checks.
// With onlyWhereRead, it looks only where providers read calls: the messages (or items)
// and the elements of the content, tool_calls and parts arrays of assistant and model
// messages.
func toolRefs(t testing.TB, msgs []byte, onlyWhereRead bool) (calls, results []toolRef) {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(msgs))
	d.UseNumber()
	require.NoError(t, d.Decode(&v))
	str := func(o map[string]any, k string) (string, bool) { s, ok := o[k].(string); return s, ok }
	without := func(o map[string]any, k string) string {
		c := map[string]any{}
		for kk, vv := range o {
			if kk != k {
				c[kk] = vv
			}
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	var walk func(v any, inToolCalls bool, depth int) // depth: objects above v
	walk = func(v any, inToolCalls bool, depth int) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, inToolCalls, depth)
			}
		case map[string]any:
			typ, _ := str(x, "type")
			role, _ := str(x, "role")
			addResult := func(o map[string]any, k string) {
				if id, ok := str(o, k); ok {
					results = append(results, toolRef{strings.TrimSpace(id), without(o, k)})
				}
			}
			addCall := func(o map[string]any, ks ...string) {
				for _, k := range ks {
					if id, ok := str(o, k); ok {
						calls = append(calls, toolRef{strings.TrimSpace(id), without(o, k)})
						return
					}
				}
			}
			switch {
			case inToolCalls:
				addCall(x, "id")
			case role == "tool" || typ == "tool":
				addResult(x, "tool_call_id")
			case role == "toolResult":
				addResult(x, "toolCallId")
			case typ == "tool_result":
				addResult(x, "tool_use_id")
			case typ == "tool-call": // AI SDK ModelMessage parts
				addCall(x, "toolCallId")
			case typ == "tool-result":
				addResult(x, "toolCallId")
			case strings.HasSuffix(typ, "_call_output") || typ == "tool_search_output":
				if _, ok := x["call_id"]; ok {
					addResult(x, "call_id")
				} else {
					addResult(x, "id")
				}
			case strings.HasSuffix(typ, "_call") && x["call_id"] != nil:
				addCall(x, "call_id")
			case typ == "tool_use" || typ == "toolCall" || typ == "toolUse" || typ == "functionCall" ||
				typ == "tool_call" || typ == "function_call":
				addCall(x, "id", "tool_call_id", "call_id")
			}
			// A call and its result in one part (AI SDK UIMessage, Mastra): a part with a
			// state, or its toolInvocation.
			inPlace := func(o map[string]any) {
				if _, ok := o["state"]; !ok {
					return
				}
				addCall(o, "toolCallId")
				if s, _ := str(o, "state"); s == "result" || strings.HasPrefix(s, "output-") {
					addResult(o, "toolCallId")
				}
			}
			if typ == "dynamic-tool" || strings.HasPrefix(typ, "tool-") || typ == "" && x["toolCallId"] != nil {
				inPlace(x)
			}
			if o, ok := x["toolInvocation"].(map[string]any); ok {
				inPlace(o)
			}
			if o, ok := x["toolUse"].(map[string]any); ok {
				addCall(o, "toolUseId")
			}
			if o, ok := x["toolResult"].(map[string]any); ok {
				addResult(o, "toolUseId")
			}
			if o, ok := x["functionCall"].(map[string]any); ok {
				addCall(o, "id")
			}
			if o, ok := x["functionResponse"].(map[string]any); ok {
				addResult(o, "id")
			}
			for k, e := range x {
				if onlyWhereRead && (depth > 0 || k != "content" && k != "tool_calls" && k != "parts" ||
					role != "assistant" && role != "model") {
					continue // calls are read only in the model's messages (a role-less one is rejected whole)
				}
				walk(e, k == "tool_calls", depth+1)
			}
		}
	}
	walk(v, false, 0)
	return calls, results
}

var surrogateEscape = regexp.MustCompile(`(?i)\\ud[89a-f]`)

// syntheticMarks are parts of the texts repairers put in the results they insert.
var syntheticMarks = []string{"[tmend]", "[openclaw] missing tool result", "No result provided", `"aborted"`,
	"interrupted and did not return", "Tool execution skipped", "was cancelled - another message",
	`"tools":[]`} // Codex's (and tmend's) stand-in tool_search_output

func isSynthetic(payload string) bool {
	for _, m := range syntheticMarks {
		if strings.Contains(payload, m) {
			return true
		}
	}
	return false
}

// checkConservation asserts DESIGN.md's invariant 8 on a repair of in into out: no real
// result whose call survives is absent from the output (it may only give way to another
// result for the same call that tmend did not make up), and every call id in the output
// is unique where providers read calls.
func checkConservation(t testing.TB, in, out []byte) {
	t.Helper()
	if surrogateEscape.Match(in) {
		return // encoding/json, which the oracle decodes with, conflates lone surrogates
	}
	_, inResults := toolRefs(t, in, false)
	outCalls, outResults := toolRefs(t, out, false)
	readCalls, _ := toolRefs(t, out, true)
	unique := map[string]int{}
	for _, c := range readCalls {
		unique[c.id]++
		require.LessOrEqual(t, unique[c.id], 1, "call id %q is not unique in the output\n%s", c.id, out)
	}
	callIDs := map[string]int{}
	for _, c := range outCalls {
		callIDs[c.id]++
	}
	payloads := map[string]bool{}
	answered := map[string]bool{} // by a result that tmend did not make up
	for _, r := range outResults {
		payloads[r.payload] = true
		if !strings.Contains(r.payload, "[tmend]") && !strings.Contains(r.payload, `"tools":[]`) {
			answered[r.id] = true
		}
	}
	for _, r := range inResults {
		if isSynthetic(r.payload) || payloads[r.payload] || r.id == "" {
			continue
		}
		require.False(t, callIDs[r.id] > 0 && !answered[r.id],
			"the real result %s of call %q was lost while the call survives\nin:  %s\nout: %s", r.payload, r.id, in, out)
	}
}
