package repair_test

import (
	"testing"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// A clean transcript's dry run allocates per transcript, not per message: its records
// are in the pooled plan's slabs, and detection and the parsers keep what they read of a
// message in place (an allocation per message was a tenth of the engine's time in a
// message table's dry run).
func TestDryRunAllocatesPerTranscript(t *testing.T) {
	for _, v := range []string{"flat", "data", "lc"} {
		allocs := func(messages int) float64 {
			cfg := gen.Config{Seed: 42, Dialect: repair.LangChain, Variant: v, Sessions: 1, Messages: messages}
			var in []byte
			if err := gen.Generate(cfg, func(s gen.Session) error { in = arrayOf(s.Messages); return nil }); err != nil {
				t.Fatal(err)
			}
			return testing.AllocsPerRun(20, func() {
				if r, _, err := repair.RepairedSize(in, repair.Options{}); err != nil || r.Status != repair.StatusClean {
					t.Fatalf("%s: %v, %v", v, r.Status, err)
				}
			})
		}
		// An allocation a message is 190 more for 200 messages than for 10. The bound leaves
		// room for the race detector, under which sync.Pool drops pooled plans at random:
		// a fresh plan grows its slabs, a few allocations more (per doubling, not per message).
		if few, many := allocs(10), allocs(200); many-few > 190/4 {
			t.Errorf("%s: %.0f allocations for 10 messages, %.0f for 200", v, few, many)
		}
	}
}
