package compact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
)

// TestInPlaceMirrorsLeftAlone: an AI SDK 4 UIMessage, whose calls are copied in
// toolInvocations, is left alone whole (the copies must agree); an AI SDK 5 one is
// compacted.
func TestInPlaceMirrorsLeftAlone(t *testing.T) {
	big := strings.Repeat("file line\n", 100)
	part := func(id string) map[string]any {
		return map[string]any{"type": "tool-read_file", "toolCallId": id, "state": "output-available",
			"input": map[string]any{"path": "/src/" + id}, "output": big}
	}
	user := func(s string) map[string]any {
		return map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "text": s}}}
	}
	inv := map[string]any{"state": "result", "toolCallId": "b", "toolName": "read_file", "args": map[string]any{"path": "/src/b"}, "result": big}
	mirrored := map[string]any{"role": "assistant", "content": "", "parts": []any{map[string]any{"type": "tool-invocation", "toolInvocation": inv}},
		"toolInvocations": []any{inv}}
	msgs := []any{user("one"), map[string]any{"role": "assistant", "parts": []any{part("a")}},
		user("two"), map[string]any{"role": "assistant", "parts": []any{part("c")}}, mirrored,
		user("three"), map[string]any{"role": "assistant", "parts": []any{part("d")}}}
	in, err := json.Marshal(msgs)
	require.NoError(t, err)
	v, err := repair.Validate(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.AISDKUI, v.Dialect)
	o := eager(t, compact.Standard)
	o.KeepToolUses, o.KeepTurns, o.BatchTurns = 0, 1, 1
	r := checkInvariants(t, "ai-sdk-ui", in, o)
	require.Equal(t, compact.StatusCompacted, r.Status, r.Reason)
	require.Len(t, r.Actions, 1, "only c: a is in the first turn, b has a copy, d is in the current turn")
	require.Equal(t, "c", r.Actions[0].CallID)
}

// TestMastraMirrorsLeftAlone: a Mastra message whose content keeps toolInvocations
// copies of its parts is left alone whole; one without is compacted.
func TestMastraMirrorsLeftAlone(t *testing.T) {
	big := strings.Repeat("file line\n", 100)
	inv := func(id string) map[string]any {
		return map[string]any{"state": "result", "toolCallId": id, "toolName": "read_file",
			"args": map[string]any{"path": "/src/" + id}, "result": big}
	}
	msg := func(role string, parts []any, extra map[string]any) map[string]any {
		content := map[string]any{"format": 2, "parts": parts}
		for k, v := range extra {
			content[k] = v
		}
		return map[string]any{"id": role + "-" + string(rune('0'+len(parts))), "role": role, "content": content, "type": "v2"}
	}
	text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	call := func(id string) []any {
		return []any{map[string]any{"type": "tool-invocation", "toolInvocation": inv(id)}}
	}
	msgs := []any{msg("user", text("one"), nil), msg("assistant", call("a"), nil),
		msg("user", text("two"), nil), msg("assistant", call("c"), nil),
		msg("assistant", call("b"), map[string]any{"toolInvocations": []any{inv("b")}}),
		msg("user", text("three"), nil), msg("assistant", call("d"), nil)}
	in, err := json.Marshal(msgs)
	require.NoError(t, err)
	v, err := repair.Validate(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.Mastra, v.Dialect)
	o := eager(t, compact.Standard)
	o.KeepToolUses, o.KeepTurns, o.BatchTurns = 0, 1, 1
	r := checkInvariants(t, "mastra", in, o)
	require.Equal(t, compact.StatusCompacted, r.Status, r.Reason)
	require.Len(t, r.Actions, 1, "only c: a is in the first turn, b has a copy, d is in the current turn")
	require.Equal(t, "c", r.Actions[0].CallID)
}
