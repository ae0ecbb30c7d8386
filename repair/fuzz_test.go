package repair_test

import (
	"testing"

	"github.com/tmend/tmend/repair"
)

// FuzzRepair checks DESIGN.md's invariants 1-5 on arbitrary input: no panic, untouchable
// input comes back as is, and repaired output is deterministic, idempotent, valid and
// conserving, and the same when written as pieces. The corpus is seeded from the golden inputs, generated and hand-written.
func FuzzRepair(f *testing.F) {
	for _, in := range goldenInputs(f) {
		f.Add(in)
	}
	f.Add([]byte(`[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]`))
	// AI SDK ModelMessages: a provider-run call, an approval, an ai 4 call, a run of tool messages.
	f.Add([]byte(`[{"role":"assistant","content":[{"type":"tool-call","toolCallId":"p","toolName":"s","input":{},"providerExecuted":true},{"type":"tool-call","toolCallId":"a","toolName":"f","input":{}},{"type":"tool-approval-request","approvalId":"r","toolCallId":"a"},{"type":"tool-call","toolCallId":"b","toolName":"f","args":{}}]},{"role":"tool","content":[{"type":"tool-approval-response","approvalId":"r","approved":true}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"a","toolName":"f","output":{"type":"text","value":"x"}}]}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkPieces(t, in, repair.Options{})
		res, err := repair.Repair(in, repair.Options{})
		if err != nil {
			if string(res.Messages) != string(in) {
				t.Fatalf("unrepairable input was changed")
			}
			return
		}
		if !res.Changed() {
			if string(res.Messages) != string(in) || len(res.Report.Actions) > 0 {
				t.Fatalf("unchanged result differs from input")
			}
			return
		}
		checkInvariants(t, in, repair.Options{})
	})
}
