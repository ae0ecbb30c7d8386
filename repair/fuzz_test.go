package repair_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tmend/tmend/repair"
)

// FuzzRepair checks DESIGN.md's invariants 1-5 on arbitrary input: no panic, untouchable
// input comes back as is, and repaired output is deterministic, idempotent, valid and
// conserving. The corpus is seeded from the golden files.
func FuzzRepair(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.jsonl"))
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var c goldenCase
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				f.Fatal(err)
			}
			f.Add([]byte(c.Input))
		}
		fh.Close()
	}
	f.Add([]byte(`[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
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
