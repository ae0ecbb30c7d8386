package files

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

var updateSessionFiles = flag.Bool("update", false, "rewrite testdata/sessionfile/*.want.jsonl from the .in.jsonl inputs")

// sfNow is the repair's clock in the golden files: the new entries' timestamp.
var sfNow = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)

// TestSessionFileGolden repairs each testdata/sessionfile/NAME.in.jsonl (written as pi's
// SessionManager writes them) and compares with NAME.want.jsonl (absent: left unchanged).
// Every repaired file must hold a valid tree whose context validates, and repairing it
// again must change nothing.
func TestSessionFileGolden(t *testing.T) {
	t.Parallel()
	ins, err := filepath.Glob("testdata/sessionfile/*.in.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, ins)
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(in)
			require.NoError(t, err)
			out, s, _ := sessionFile(data, repair.Options{Now: sfNow}, true)
			wantPath := strings.TrimSuffix(in, ".in.jsonl") + ".want.jsonl"
			if *updateSessionFiles {
				if out == nil {
					_ = os.Remove(wantPath)
				} else {
					require.NoError(t, os.WriteFile(wantPath, out, 0o644))
				}
			}
			want, err := os.ReadFile(wantPath)
			if os.IsNotExist(err) {
				require.Nil(t, out, "repaired, but there is no %s", wantPath)
				return
			}
			require.NoError(t, err)
			require.Equal(t, string(want), string(out))
			require.Equal(t, model.StatusRepaired, s.Status)

			checkTree(t, out)
			again, s2, _ := sessionFile(out, repair.Options{Now: sfNow}, true)
			require.Nil(t, again, "a second repair changed the file")
			require.Equal(t, model.StatusClean, s2.Status)
			keptLines(t, data, out)
		})
	}
}

// checkTree asserts one root, no dangling parentId, unique ids.
func checkTree(t *testing.T, file []byte) {
	t.Helper()
	ids, roots := map[string]bool{}, 0
	var parents []string
	lines := bytes.SplitAfter(file, []byte("\n"))
	if last := lines[len(lines)-1]; len(last) > 0 && !json.Valid(last) {
		lines = lines[:len(lines)-1] // a line cut off mid-write, which pi skips
	}
	for _, l := range lines[1:] {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var e struct {
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
		}
		require.NoError(t, json.Unmarshal(l, &e))
		require.False(t, ids[e.ID], "id %q twice", e.ID)
		ids[e.ID] = true
		if e.ParentID == nil {
			roots++
		} else {
			parents = append(parents, *e.ParentID)
		}
	}
	require.Equal(t, 1, roots, "roots")
	for _, p := range parents {
		require.True(t, ids[p], "dangling parentId %q", p)
	}
}

// keptLines asserts that every input line that holds no tool call or result and whose
// parent survives is in the output byte for byte (the header and other entries).
func keptLines(t *testing.T, in, out []byte) {
	t.Helper()
	outLines := map[string]bool{}
	for _, l := range bytes.SplitAfter(out, []byte("\n")) {
		outLines[string(l)] = true
	}
	for _, l := range bytes.SplitAfter(in, []byte("\n")) {
		if len(l) == 0 || bytes.Contains(l, []byte(`"type":"message"`)) {
			continue
		}
		if bytes.Contains(l, []byte(`"type":"compaction"`)) {
			continue // its firstKeptEntryId may follow a dropped entry
		}
		require.True(t, outLines[string(l)], "line changed or lost: %s", l)
	}
}

// A crash mid-write leaves a last line without its end: skipped as pi skips it, kept
// last, byte for byte, with the repair's new entries before it.
func TestSessionFileCutOffLineStaysLast(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/sessionfile/cut_off_last_line.in.jsonl")
	require.NoError(t, err)
	cut := data[bytes.LastIndexByte(data, '\n')+1:]
	out, s, info := sessionFile(data, repair.Options{Now: sfNow}, true)
	require.Equal(t, model.StatusRepaired, s.Status)
	require.True(t, info.CutOff)
	require.True(t, bytes.HasSuffix(out, append([]byte("}\n"), cut...)), "the cut-off line is not last after a whole line")
}

func TestSessionFileCheck(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/sessionfile/missing_result_mid.in.jsonl")
	require.NoError(t, err)
	out, s, _ := sessionFile(data, repair.Options{Now: sfNow}, false)
	require.Nil(t, out)
	require.Equal(t, model.StatusBroken, s.Status)
	require.Equal(t, repair.IssueCallWithoutResult, s.Issues[0].Code)
}

func TestSessionFileBranches(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/sessionfile/branch.in.jsonl")
	require.NoError(t, err)
	_, s, info := sessionFile(data, repair.Options{Now: sfNow}, false)
	require.Equal(t, SessionFileInfo{Entries: 9, OffPath: 2, Branches: 1}, info)
	// The broken call off the path (toolu_02) is not the model's: only toolu_03 is reported.
	require.Len(t, s.Issues, 1)
	require.Equal(t, "toolu_03", s.Issues[0].CallID)
}

func TestSessionFileRefused(t *testing.T) {
	t.Parallel()
	const header = `{"type":"session","version":3,"id":"s1","timestamp":"2026-01-10T09:00:00.000Z","cwd":"/p"}` + "\n"
	for name, tc := range map[string]struct {
		file   string
		status model.SessionStatus
		reason string
	}{
		"NotJSON":        {header + `{"type":"message","id":"a"` + "\n", model.StatusUnparseable, "line 2"},
		"DanglingParent": {header + `{"type":"message","id":"a","parentId":"zz","timestamp":"t","message":{"role":"user","content":"hi"}}` + "\n", model.StatusUnsupported, `parent "zz"`},
		"DuplicateID":    {header + `{"type":"label","id":"a","parentId":null,"timestamp":"t"}` + "\n" + `{"type":"label","id":"a","parentId":null,"timestamp":"t"}` + "\n", model.StatusUnsupported, "same id"},
		"Newer":          {strings.Replace(header, `"version":3`, `"version":9`, 1), model.StatusUnsupported, "newer"},
		"V4Reset":        {strings.Replace(header, `"version":3`, `"version":4`, 1) + `{"type":"reset","id":"a","parentId":null,"timestamp":"t"}` + "\n", model.StatusUnsupported, "version 4 entry"},
		"V4SideAppend":   {strings.Replace(header, `"version":3`, `"version":4`, 1) + `{"type":"label","id":"a","parentId":null,"appendMode":"side","timestamp":"t"}` + "\n", model.StatusUnsupported, "side append"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, s, _ := sessionFile([]byte(tc.file), repair.Options{Now: sfNow}, true)
			require.Nil(t, out)
			require.Equal(t, tc.status, s.Status)
			require.Contains(t, s.Reason, tc.reason)
		})
	}
}
