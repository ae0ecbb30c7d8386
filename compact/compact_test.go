package compact_test

import (
	"encoding/json"
	"testing"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// sessions generates coding sessions of dialect d as bare message arrays.
func sessions(t testing.TB, d repair.Dialect, n, msgs int, seed uint64) [][]byte {
	t.Helper()
	var out [][]byte
	err := gen.Generate(gen.Config{Seed: seed, Dialect: d, Sessions: n, Messages: msgs, Workload: gen.WorkloadCoding},
		func(s gen.Session) error {
			b, err := json.Marshal(s.Messages)
			out = append(out, b)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eager is the standard profile with the gates off, so that small sessions compact.
func eager(t testing.TB, p compact.Profile) compact.Options {
	t.Helper()
	o, err := compact.ForProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	o.MinTokens, o.ClearAtLeast, o.IdleFor = 0, 0, 0
	return o
}

func TestSmoke(t *testing.T) {
	for _, d := range repair.Dialects() {
		for _, in := range sessions(t, d, 3, 200, 1) {
			res := compact.Compact(in, eager(t, compact.Standard))
			r := res.Report
			t.Logf("%s %s %s %d -> %d boundary %d tiers %+v", d, r.Status, r.Reason, r.BytesBefore, r.BytesAfter, r.Boundary, r.Tiers)
		}
	}
}
