package repair_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// checkOrigins holds RepairWithOrigins to account on one input: the same result as
// Repair, messages that join into Repair's array, unchanged messages that are the
// input's bytes, changed ones that are not, every input message used at most once, and
// an action naming every input message that has no output.
func checkOrigins(t *testing.T, in []byte, opts repair.Options) []repair.Origin {
	t.Helper()
	want, wantErr := repair.Repair(in, opts)
	got, origins, err := repair.RepairWithOrigins(in, opts)
	require.Equal(t, wantErr, err)
	require.Equal(t, want.Report, got.Report)
	if err != nil {
		require.Nil(t, origins)
		return nil
	}
	var inputs []json.RawMessage
	require.NoError(t, json.Unmarshal(in, &inputs))
	require.Len(t, origins, got.Report.MessagesOut)

	if got.Changed() {
		require.Nil(t, got.Messages)
	} else {
		require.Equal(t, string(in), string(got.Messages))
	}
	require.Equal(t, string(want.Messages), string(repair.JoinOrigins(origins)), "the messages join into Repair's array")
	require.Equal(t, len(want.Messages), repair.OriginsLen(origins))
	used := map[int]bool{}
	for k, o := range origins {
		msg, in := o.Msg, int(o.Input)
		if in < 0 {
			require.False(t, o.Changed, "message %d: made by tmend, so not a changed input", k)
			continue
		}
		require.Less(t, in, len(inputs))
		require.False(t, used[in], "input message %d is the origin of two messages", in)
		used[in] = true
		if !o.Changed {
			require.Equal(t, string(inputs[in]), string(msg), "message %d is unchanged input message %d", k, in)
		} else {
			require.NotEqual(t, string(inputs[in]), string(msg), "message %d is changed input message %d", k, in)
		}
	}
	named := map[int]bool{}
	for _, a := range got.Report.Actions {
		named[a.MessageIndex] = true
	}
	for i := range inputs {
		if !used[i] {
			require.True(t, named[i], "input message %d has no output and no action names it", i)
		}
	}
	return origins
}

// Every golden case, generated and hand-written, in every dialect.
func TestRepairWithOriginsOnGoldenCases(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		for _, c := range readJSONL(t, filepath.Join(goldenDir, string(d)+".jsonl")) {
			t.Run(string(d)+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				checkOrigins(t, c.input(t), c.options(t))
			})
		}
	}
	for _, path := range ruleFiles(t) {
		c := readRule(t, path)
		t.Run("rules/"+c.Name, func(t *testing.T) {
			t.Parallel()
			checkOrigins(t, c.input(t), c.options(t))
		})
	}
}

func TestRepairWithOrigins(t *testing.T) {
	t.Parallel()
	o := func(input int32, changed bool) repair.Origin { return repair.Origin{Input: input, Changed: changed} }
	noBytes := func(os []repair.Origin) []repair.Origin {
		out := make([]repair.Origin, len(os))
		for i, x := range os {
			out[i] = repair.Origin{Input: x.Input, Changed: x.Changed}
		}
		return out
	}
	cases := []struct {
		name string
		in   string
		want []repair.Origin
	}{{
		name: "CleanIsTheIdentity",
		in: `[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"ok"}]`,
		want: []repair.Origin{o(0, false), o(1, false), o(2, false)},
	}, {
		// The result of c1 sits after the user's next message: it moves up, unchanged.
		name: "AMovedResultKeepsItsOrigin",
		in: `[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
			`{"role":"user","content":"well?"},{"role":"tool","tool_call_id":"c1","content":"ok"}]`,
		want: []repair.Origin{o(0, false), o(1, false), o(3, false), o(2, false)},
	}, {
		name: "ASyntheticResultIsMadeByTmend",
		in: `[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
			`{"role":"user","content":"well?"}]`,
		want: []repair.Origin{o(0, false), o(1, false), o(-1, false), o(2, false)},
	}, {
		name: "AnOrphanResultIsDropped",
		in:   `[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"zz","content":"ok"},{"role":"assistant","content":"done"}]`,
		want: []repair.Origin{o(0, false), o(2, false)},
	}, {
		// A malformed call goes; its message keeps its text, changed.
		name: "AMessageThatLosesAPartIsChanged",
		in: `[{"role":"user","content":"hi"},{"role":"assistant","content":"let me see","tool_calls":[{"id":"","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
			`{"role":"user","content":"well?"}]`,
		want: []repair.Origin{o(0, false), o(1, true), o(2, false)},
	}, {
		// Anthropic: the result block moves to a user message of its own after its call
		// (equal to the one it left, but made anew: blocks move, not messages).
		name: "MovedBlocksMakeANewMessage",
		in: `[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]},` +
			`{"role":"user","content":[{"type":"text","text":"well?"}]},{"role":"assistant","content":"hm"},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]`,
		want: []repair.Origin{o(0, false), o(1, false), o(-1, false), o(2, false), o(3, false)},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := checkOrigins(t, []byte(c.in), repair.Options{})
			require.Equal(t, c.want, noBytes(got))
		})
	}
}

// The messages a repair made stay as they were when the engine repairs other transcripts
// after it (its plans are pooled and reused).
func TestOriginsOutliveThePlan(t *testing.T) {
	first := []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"let me see","tool_calls":[{"id":"","type":"function","function":{"name":"ls","arguments":"{}"}},` +
		`{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"user","content":"well?"}]`)
	want, err := repair.Repair(first, repair.Options{})
	require.NoError(t, err)
	_, origins, err := repair.RepairWithOrigins(first, repair.Options{})
	require.NoError(t, err)
	other := []byte(`[{"role":"user","content":"yo"},{"role":"assistant","content":"on it","tool_calls":[{"id":"","type":"function","function":{"name":"cat","arguments":"{}"}},` +
		`{"id":"c2","type":"function","function":{"name":"cat","arguments":"{\"path\":\"a\"}"}}]},{"role":"user","content":"and?"}]`)
	for range 100 {
		_, _, err := repair.RepairWithOrigins(other, repair.Options{})
		require.NoError(t, err)
	}
	require.Equal(t, string(want.Messages), string(repair.JoinOrigins(origins)))
}

// An origin is what a writing scan holds per message beside the plan, at the repair's
// peak: a session of half a million tiny rows has as many.
func TestOriginSize(t *testing.T) {
	if n := unsafe.Sizeof(repair.Origin{}); n != 32 {
		t.Fatalf("Origin is %d bytes, want 32", n)
	}
}
