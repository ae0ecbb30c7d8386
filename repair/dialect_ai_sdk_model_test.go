package repair_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// TestAISDKModelRulesKeepInvariants runs the invariants on every hand-written AI SDK
// ModelMessage case that repairs something (TestGolden compares their outputs).
func TestAISDKModelRulesKeepInvariants(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(rulesDir, "ai-sdk-model-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		c := readRule(t, path)
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			opts := c.options(t)
			res, err := repair.Repair(c.input(t), opts)
			require.NoError(t, err)
			require.Equal(t, repair.AISDKModel, res.Report.Dialect)
			if res.Changed() {
				checkInvariants(t, c.input(t), opts)
			}
		})
	}
}

func TestAISDKModelDetection(t *testing.T) {
	t.Parallel()
	const (
		call   = `{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"ls","input":{}}]}`
		result = `{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"ls","output":{"type":"text","value":"a"}}]}`
	)
	tests := []struct {
		name, in string
		dialect  repair.Dialect
		status   repair.Status
	}{
		{"CallAndResult", `[` + call + `,` + result + `]`, repair.AISDKModel, repair.StatusClean},
		{"ResultAlone", `[{"role":"user","content":"hi"},` + result + `]`, repair.AISDKModel, repair.StatusRepaired},
		// A call whose toolName is missing is still this dialect's (and malformed).
		{"CallWithoutToolName", `[{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","input":{}}]}]`,
			repair.AISDKModel, repair.StatusRepaired},
		// OpenAI chat's tool message has tool_call_id; the AI SDK's has tool-result parts.
		{"OpenAIChatToolMessage", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a"}]`,
			repair.OpenAIChat, repair.StatusClean},
		// Either dialect's call beside the other's result: never read as one dialect.
		{"MixedWithOpenAIChat", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` + result + `]`,
			"", repair.StatusUnknownDialect},
		// An OpenAI chat tool message with parts in its content is still OpenAI chat's.
		{"OpenAIChatToolMessageOfParts", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"a"}]}]`,
			repair.OpenAIChat, repair.StatusClean},
		// An empty tool message is this dialect's evidence too: what a repair may leave.
		{"EmptyToolMessage", `[{"role":"user","content":"hi"},{"role":"tool","content":[]}]`, repair.AISDKModel, repair.StatusClean},
		{"MixedWithAnthropic", `[` + call + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"a"}]}]`,
			"", repair.StatusUnknownDialect},
		// A type alone, without toolCallId, is no evidence of the dialect; nor is the
		// transcript clean: a block whose type names a tool call is not a plain one.
		{"TypeAlone", `[{"role":"assistant","content":[{"type":"tool-call","id":"c1"}]}]`, "", repair.StatusUnknownDialect},
		// What a repair leaves of a turn whose only call was malformed is still read.
		{"ApprovalPartsAlone", `[{"role":"assistant","content":[{"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1"}]},{"role":"tool","content":[{"type":"tool-approval-response","approvalId":"a1","approved":true}]}]`,
			repair.AISDKModel, repair.StatusClean},
		// Messages tmend cannot read with certainty in this dialect: never clean, never
		// repaired.
		{"ToolMessageOfText", `[` + call + `,` + result + `,{"role":"tool","content":"a"}]`, "", repair.StatusUnknownDialect},
		{"UnknownToolPart", `[` + call + `,` + result + `,{"role":"assistant","content":[{"type":"tool-error","toolCallId":"c2","error":"boom"}]}]`,
			"", repair.StatusUnknownDialect},
		{"ResultInUserMessage", `[` + call + `,{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","toolName":"ls","output":{"type":"text","value":"a"}}]}]`,
			"", repair.StatusUnknownDialect},
		// A provider's call or result, or an approval part, without the id that ties it to
		// the rest: which call it is cannot be told.
		{"ProviderResultWithoutID", `[` + call + `,` + result + `,{"role":"assistant","content":[{"type":"tool-result","toolName":"web_search","output":{"type":"json","value":[]}}]}]`,
			"", repair.StatusUnknownDialect},
		{"ProviderCallWithoutID", `[` + call + `,` + result + `,{"role":"assistant","content":[{"type":"tool-call","toolName":"web_search","input":{},"providerExecuted":true}]}]`,
			"", repair.StatusUnknownDialect},
		{"ApprovalWithoutApprovalID", `[` + call + `,` + result + `,{"role":"tool","content":[{"type":"tool-approval-response","approved":true}]}]`,
			"", repair.StatusUnknownDialect},
		{"ContentObject", `[` + call + `,` + result + `,{"role":"assistant","content":{"text":"a"}}]`, "", repair.StatusUnknownDialect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, _ := repair.Repair([]byte(tt.in), repair.Options{})
			require.Equal(t, tt.status, res.Report.Status, "%+v", res.Report)
			require.Equal(t, tt.dialect, res.Report.Dialect)
			if tt.status != repair.StatusRepaired {
				require.Equal(t, tt.in, string(res.Messages))
			}
		})
	}
}

// TestAISDKModelApprovalRespondedIsStillRunning: once the user answered the approval
// request, the SDK runs the tool; within the quiet period the call is pending, after it
// the call is answered in the tool message that holds the approval response.
func TestAISDKModelApprovalRespondedIsStillRunning(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":"rm it"},` +
		`{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"rm","input":{}},{"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1"}]},` +
		`{"role":"tool","content":[{"type":"tool-approval-response","approvalId":"a1","approved":true}]}]`)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	recent, err := repair.Repair(in, repair.Options{Now: now, UpdatedAt: now.Add(-time.Minute)})
	require.NoError(t, err)
	require.Equal(t, repair.StatusPending, recent.Report.Status)
	require.Equal(t, 1, recent.Report.PendingCalls)

	old := checkInvariants(t, in, repair.Options{Now: now, UpdatedAt: now.Add(-time.Hour)})
	require.Equal(t, `[{"role":"user","content":"rm it"},`+
		`{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"rm","input":{}},{"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1"}]},`+
		`{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"rm","output":{"type":"error-text","value":`+
		`"`+repair.SyntheticResultText+`"}},{"type":"tool-approval-response","approvalId":"a1","approved":true}]}]`, string(old.Messages))
}

// TestAISDKModelAutomaticApprovalIsNotAwaited: an approval the agent's own rule decided
// (isAutomatic) waits for nobody, so the call at the end is answered as any other.
func TestAISDKModelAutomaticApprovalIsNotAwaited(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":"rm it"},` +
		`{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"rm","input":{}},{"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1","isAutomatic":true}]}]`)
	res := checkInvariants(t, in, repair.Options{})
	require.Equal(t, map[repair.Stage]int{repair.StageSynthesizeMissingResults: 1}, res.Report.StageCounts)
	require.True(t, strings.HasSuffix(string(res.Messages), `{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"rm","output":{"type":"error-text","value":"`+repair.SyntheticResultText+`"}}]}]`))
}

// TestAISDKModelRandomShapes runs the invariants on transcripts built at random from
// every part shape the dialect knows (ai 4 and 5+ calls, provider-run calls and their
// results, approval requests and responses, runs of tool messages, stray, duplicate and
// synthetic results, malformed calls): whatever is repaired keeps them, and nothing is
// refused.
func TestAISDKModelRandomShapes(t *testing.T) {
	t.Parallel()
	for seed := range uint64(1500) {
		in := randomAISDKModel(rand.New(rand.NewPCG(seed, 7)))
		res, err := repair.Repair(in, repair.Options{})
		require.NoError(t, err, "seed %d\n%s", seed, in)
		if res.Report.Dialect == "" {
			require.Equal(t, repair.StatusClean, res.Report.Status, "seed %d: no tool part at all", seed)
			continue
		}
		require.Equal(t, repair.AISDKModel, res.Report.Dialect, "seed %d", seed)
		if res.Changed() {
			checkInvariants(t, in, repair.Options{})
		}
	}
}

func randomAISDKModel(rng *rand.Rand) []byte {
	var msgs []string
	var ids []string // client calls so far
	n := 0
	id := func() string { n++; return fmt.Sprintf("call_%d", n) }
	result := func(id string) string {
		switch rng.IntN(6) {
		case 0:
			return fmt.Sprintf(`{"type":"tool-result","toolCallId":%q,"toolName":"f","result":{"n":%d}}`, id, rng.IntN(9))
		case 1:
			return fmt.Sprintf(`{"type":"tool-result","toolCallId":%q,"toolName":"f","output":{"type":"error-text","value":"No result provided"}}`, id)
		}
		return fmt.Sprintf(`{"type":"tool-result","toolCallId":%q,"toolName":"f","output":{"type":"text","value":"r%d"}}`, id, rng.IntN(9))
	}
	for range 2 + rng.IntN(6) {
		switch rng.IntN(4) {
		case 0:
			msgs = append(msgs, `{"role":"user","content":[{"type":"text","text":"go"}]}`)
		default:
			var parts, results []string
			for range rng.IntN(4) {
				c := id()
				switch rng.IntN(8) {
				case 0: // provider-run, answered here or not at all
					parts = append(parts, fmt.Sprintf(`{"type":"tool-call","toolCallId":%q,"toolName":"web_search","input":{},"providerExecuted":true}`, c))
					if rng.IntN(2) == 0 {
						parts = append(parts, fmt.Sprintf(`{"type":"tool-result","toolCallId":%q,"toolName":"web_search","output":{"type":"json","value":[]}}`, c))
					}
					continue
				case 1:
					parts = append(parts, fmt.Sprintf(`{"type":"tool-call","toolCallId":%q,"toolName":"f","args":{"a":1.50}}`, c))
				case 2: // malformed
					parts = append(parts, []string{
						`{"type":"tool-call","toolCallId":" ","toolName":"f","input":{}}`,
						fmt.Sprintf(`{"type":"tool-call","toolCallId":%q,"toolName":"","input":{}}`, c),
						fmt.Sprintf(`{"type":"tool-call","toolCallId":%q,"toolName":"f"}`, c)}[rng.IntN(3)])
				default:
					parts = append(parts, fmt.Sprintf(`{"type":"tool-call","toolCallId":%q,"toolName":"f","input":{}}`, c))
				}
				if rng.IntN(3) == 0 {
					parts = append(parts, fmt.Sprintf(`{"type":"tool-approval-request","approvalId":"a%s","toolCallId":%q}`, c, c))
					results = append(results, fmt.Sprintf(`{"type":"tool-approval-response","approvalId":"a%s","approved":true}`, c))
				}
				ids = append(ids, c)
				if rng.IntN(4) > 0 {
					results = append(results, result(c))
				}
			}
			if rng.IntN(3) == 0 {
				parts = append(parts, `{"type":"text","text":"ok"}`)
			}
			msgs = append(msgs, `{"role":"assistant","content":[`+strings.Join(parts, ",")+`]}`)
			// The results in one tool message, or split over a run of them.
			for len(results) > 0 {
				k := 1 + rng.IntN(len(results))
				msgs = append(msgs, `{"role":"tool","content":[`+strings.Join(results[:k], ",")+`]}`)
				results = results[k:]
			}
		}
		if rng.IntN(4) == 0 && len(ids) > 0 { // a stray, late or repeated result
			c := ids[rng.IntN(len(ids))]
			if rng.IntN(3) == 0 {
				c = "call_orphan"
			}
			msgs = append(msgs, `{"role":"tool","content":[`+result(c)+`]}`)
		}
	}
	return []byte(`[` + strings.Join(msgs, ",") + `]`)
}

// TestAISDKModelTargets: the invariants hold when ids are rewritten for each target.
func TestAISDKModelTargets(t *testing.T) {
	t.Parallel()
	for _, tg := range repair.Targets() {
		t.Run(string(tg), func(t *testing.T) {
			t.Parallel()
			cfg := gen.Config{Seed: 5, Dialect: repair.AISDKModel, Sessions: 20, Messages: 30, FaultRate: 0.5}
			require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
				checkInvariants(t, arrayOf(s.Messages), repair.Options{Target: tg})
				return nil
			}))
		})
	}
}
