package compact_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/golden (only on purpose)")

// anth builds an Anthropic transcript: each turn is a user text and tool uses, each
// {name, input, result, isError}.
type tu struct {
	name, input, result string
	isError             bool
}

func anth(turns ...[]tu) []byte {
	var msgs []any
	n := 0
	for ti, turn := range turns {
		msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "turn " + string(rune('A'+ti))}}})
		for _, u := range turn {
			n++
			id := "toolu_" + string(rune('a'+n))
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "tool_use", "id": id, "name": u.name, "input": json.RawMessage(u.input)}}})
			res := map[string]any{"type": "tool_result", "tool_use_id": id, "content": u.result}
			if u.isError {
				res["is_error"] = true
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": []any{res}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "done"}}})
	}
	b, _ := json.Marshal(msgs)
	return b
}

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(prefix)
		b.WriteString(" line of text\n")
	}
	return b.String()
}

func goldenOptions(t *testing.T, rules ...compact.Rule) compact.Options {
	o := eager(t, compact.Standard)
	o.KeepToolUses, o.KeepTurns, o.BatchTurns = 0, 1, 1
	o.SoftTrimMax, o.SoftTrimHead, o.SoftTrimTail, o.ClearInputsOver, o.ErrorTurns = 300, 60, 60, 300, 1
	o.Rules = map[compact.Rule]bool{}
	for _, r := range rules {
		o.Rules[r] = true
	}
	return o
}

func TestGoldenRules(t *testing.T) {
	first := []tu{{"read_file", `{"path":"/README.md"}`, lines("readme", 30), false}}
	last := []tu{{"bash", `{"command":"ls"}`, "a\nb", false}}
	big := `{"path":"/src/a.go","content":` + string(mustJSON(lines("package a", 40))) + `}`
	cases := []struct {
		name  string
		in    []byte
		rules []compact.Rule
		want  compact.Rule // the rule every action must name
	}{
		{"dedupe", anth(first,
			[]tu{{"bash", `{"command":"make"}`, lines("build", 30), false}, {"bash", `{"command":"make"}`, lines("build", 30), false}},
			last), []compact.Rule{compact.RuleDedupe}, compact.RuleDedupe},
		{"supersede_writes", anth(first,
			[]tu{{"write_file", big, "wrote /src/a.go", false}, {"read_file", `{"path":"/src/a.go"}`, "short", false}},
			last), []compact.Rule{compact.RuleSupersedeWrites}, compact.RuleSupersedeWrites},
		{"purge_errors", anth(first,
			[]tu{{"run_tests", `{"suite":"all","script":` + string(mustJSON(lines("step", 30))) + `}`, "error: suite failed\nexit 1", true}},
			[]tu{{"bash", `{"command":"true"}`, "ok", false}},
			last), []compact.Rule{compact.RulePurgeErrors}, compact.RulePurgeErrors},
		{"clear_old", anth(first,
			[]tu{{"read_file", `{"path":"/src/b.go"}`, lines("b", 40), false}, {"grep", `{"pattern":"TODO","path":"/src"}`, lines("/src/x.go:1: TODO", 20), false}},
			last), []compact.Rule{compact.RuleClearOld}, compact.RuleClearOld},
		{"soft_trim", anth(first,
			[]tu{{"describe_table", `{"table":"users"}`, lines("column", 60), false}},
			last), []compact.Rule{compact.RuleSoftTrim}, compact.RuleSoftTrim},
		{"clear_inputs", anth(first,
			[]tu{{"send_email", `{"to":"a@example.com","body":` + string(mustJSON(lines("hello", 40))) + `}`, "sent", false}},
			last), []compact.Rule{compact.RuleClearInputs}, compact.RuleClearInputs},
		{"protected_tools_and_turns", anth(first,
			[]tu{{"todo_write", `{"todos":` + string(mustJSON(lines("todo", 40))) + `}`, lines("todo", 40), false}},
			[]tu{{"read_file", `{"path":"/src/c.go"}`, lines("c", 40), false}}), compact.Rules(), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := goldenOptions(t, c.rules...)
			r := checkInvariants(t, c.name, c.in, opts)
			res := compact.Compact(c.in, opts)
			for _, a := range r.Actions {
				require.Equal(t, c.want, a.Rule, "%+v", a)
			}
			if c.want != "" {
				require.Equal(t, compact.StatusCompacted, r.Status, r.Reason)
			} else {
				require.Equal(t, compact.StatusSkipped, r.Status)
			}
			var pretty any
			require.NoError(t, json.Unmarshal(res.Messages, &pretty))
			got, _ := json.MarshalIndent(map[string]any{"actions": r.Actions, "output": pretty}, "", "  ")
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./compact -run TestGoldenRules -update to create it")
			require.Equal(t, string(want), string(got)+"\n")
		})
	}
}

func mustJSON(s string) []byte { b, _ := json.Marshal(s); return b }
