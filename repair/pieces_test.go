package repair_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// checkRepairPieces holds RepairPieces to account on one input: Repair's result and error,
// its array joined from the pieces, and the runs it keeps as the input's own bytes.
func checkRepairPieces(t *testing.T, in []byte, opts repair.Options) {
	t.Helper()
	in = bytes.Clone(in) // the pieces' input, apart from Repair's
	want, wantErr := repair.Repair(bytes.Clone(in), opts)
	got, err := repair.RepairPieces(in, opts)
	require.Equal(t, wantErr, err)
	require.Equal(t, want.Report, got.Report)
	if !want.Changed() {
		require.Nil(t, got.Pieces)
		require.Equal(t, string(in), string(got.Messages))
		return
	}
	require.Nil(t, got.Messages)
	require.Equal(t, string(want.Messages), string(bytes.Join(got.Pieces, nil)))
	require.Equal(t, len(got.Pieces), cap(got.Pieces), "room for pieces that never came")
	kept := 0
	for _, p := range got.Pieces {
		if within(p, in) {
			kept += len(p)
		}
	}
	require.Positive(t, kept, "nothing sent from the input")
}

// within reports whether p lies in b's bytes.
func within(p, b []byte) bool {
	if len(p) == 0 || len(b) == 0 {
		return false
	}
	at, start := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&b[0]))
	return at >= start && at+uintptr(len(p)) <= start+uintptr(len(b))
}

func TestRepairPiecesIsRepair(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		for _, c := range readJSONL(t, filepath.Join(goldenDir, string(d)+".jsonl")) {
			t.Run(string(d)+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				checkRepairPieces(t, c.input(t), c.options(t))
			})
		}
		t.Run(string(d)+"/gen", func(t *testing.T) {
			t.Parallel()
			cfg := gen.Config{Seed: 11, Dialect: d, Sessions: 6, Messages: 40, FaultRate: 1, MaxFaults: 4}
			require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
				checkRepairPieces(t, arrayOf(s.Messages), repair.Options{})
				return nil
			}))
		})
	}
	for _, path := range ruleFiles(t) {
		c := readRule(t, path)
		t.Run("rules/"+c.Name, func(t *testing.T) {
			t.Parallel()
			checkRepairPieces(t, c.input(t), c.options(t))
		})
	}
	// Space around the array and its elements is not kept, as Repair keeps none.
	for _, in := range []string{
		` [ {"role":"user","content":"hi"} , {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]} ] `,
		"[{\"role\":\"tool\",\"tool_call_id\":\"x\",\"content\":\"orphan\"},\n{\"role\":\"user\",\"content\":\"hi\"},\n{\"role\":\"user\",\"content\":\"again\"}]\n",
		`not json`,
	} {
		checkRepairPieces(t, []byte(in), repair.Options{})
	}
}
