package repair_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
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
		// Either dialect's call beside the other's result: never read as one dialect, nor
		// repaired. (OpenAI chat reads the tool message as a result without an id that has
		// an id-like member, and refuses.)
		{"MixedWithOpenAIChat", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` + result + `]`,
			repair.OpenAIChat, repair.StatusUnsupported},
		{"MixedWithAnthropic", `[` + call + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"a"}]}]`,
			"", repair.StatusUnknownDialect},
		// A type alone, without toolCallId, is no evidence of the dialect; nor is the
		// transcript clean: a block whose type names a tool call is not a plain one.
		{"TypeAlone", `[{"role":"assistant","content":[{"type":"tool-call","id":"c1"}]}]`, "", repair.StatusUnknownDialect},
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
