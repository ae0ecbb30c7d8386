package repair_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

type goldenCase struct {
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	Report repair.Report   `json:"report"`
}

// goldenInputs is one small session per fault kind, and one with several faults, for a
// dialect. The generator is deterministic, so the inputs are stable.
func goldenInputs(t *testing.T, d repair.Dialect) []goldenCase {
	var cases []goldenCase
	add := func(name string, cfg gen.Config) {
		require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
			cases = append(cases, goldenCase{Name: name, Input: arrayOf(s.Messages)})
			return nil
		}))
	}
	add("clean", gen.Config{Seed: 1, Dialect: d, Sessions: 1, Messages: 8})
	for _, f := range gen.Faults() {
		add(string(f), gen.Config{Seed: 2, Dialect: d, Sessions: 1, Messages: 8, FaultRate: 1, MaxFaults: 1, Faults: []gen.Fault{f}})
	}
	add("combined", gen.Config{Seed: 3, Dialect: d, Sessions: 1, Messages: 14, FaultRate: 1, MaxFaults: 4})
	return cases
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "golden", string(d)+".jsonl")
			var got bytes.Buffer
			for _, c := range goldenInputs(t, d) {
				res, err := repair.Repair(c.Input, repair.Options{})
				require.NoError(t, err)
				c.Output, c.Report = res.Messages, res.Report
				line, err := json.Marshal(c)
				require.NoError(t, err)
				got.Write(line)
				got.WriteByte('\n')
			}
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./repair -update to create the golden files")
			ws, gs := bufio.NewScanner(bytes.NewReader(want)), bufio.NewScanner(&got)
			ws.Buffer(nil, 1<<24)
			gs.Buffer(nil, 1<<24)
			for ws.Scan() {
				require.True(t, gs.Scan(), "fewer cases than the golden file")
				var w, g goldenCase
				require.NoError(t, json.Unmarshal(ws.Bytes(), &w))
				require.NoError(t, json.Unmarshal(gs.Bytes(), &g))
				require.Equal(t, w.Name, g.Name)
				require.JSONEq(t, string(w.Output), string(g.Output), "%s/%s output", d, w.Name)
				require.Equal(t, w.Report, g.Report, "%s/%s report", d, w.Name)
			}
			require.False(t, gs.Scan(), "more cases than the golden file")
		})
	}
}
