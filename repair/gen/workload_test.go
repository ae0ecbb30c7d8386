package gen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// TestCodingWorkload: the coding workload keeps the conversation's shape and faults
// (the same call ids), is deterministic, and carries what compaction is measured on:
// large results, the same file read twice unchanged, writes with contents, failures.
func TestCodingWorkload(t *testing.T) {
	cfg := Config{Seed: 9, Dialect: repair.Anthropic, Sessions: 3, Messages: 200, FaultRate: 0.5}
	plain := generate(t, cfg)
	cfg.Workload = WorkloadCoding
	coding, again := generate(t, cfg), generate(t, cfg)
	var a, b, p bytes.Buffer
	for i := range coding {
		WriteJSONL(&p, cfg.Dialect, plain[i])
		WriteJSONL(&a, cfg.Dialect, coding[i])
		WriteJSONL(&b, cfg.Dialect, again[i])
		require.Equal(t, plain[i].Faults, coding[i].Faults)
		require.Equal(t, len(plain[i].Messages), len(coding[i].Messages))
	}
	require.Equal(t, a.String(), b.String())
	out := a.String()
	require.Greater(t, len(out), 10*p.Len(), "results of kilobytes, not a sentence")
	require.Contains(t, out, `"is_error":true`)
	require.Contains(t, out, `"name":"write_file","input":{"path":`)
	require.Contains(t, out, `"content":"// /src/`)
	reads := strings.Count(out, "(revision 0)")
	require.Greater(t, reads, len(codingFiles), "files are read more than once")
	idsPlain, idsCoding := callIDs(plain), callIDs(coding)
	require.Equal(t, idsPlain, idsCoding)
}

func callIDs(ss []Session) []string {
	var ids []string
	for _, s := range ss {
		for _, m := range s.Messages {
			for _, f := range strings.Split(string(m), `"id":"`)[1:] {
				ids = append(ids, f[:strings.IndexByte(f, '"')])
			}
		}
	}
	return ids
}
