package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanCompact: scan --compact compacts stored sessions after their repair, a dry run
// reports the saving without writing it, report --cleared shows what the stubs replaced,
// and a layout that cannot undo a compaction yet is refused up front.
func TestScanCompact(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	data := genJSONL(t, "--dialect", "anthropic", "--sessions", "4", "--messages", "600", "--workload", "coding", "--fault-rate", "0.5")
	r := runCLI(t, data, b.env, "import", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	type run struct {
		Summary struct {
			Compaction struct {
				Compacted  int   `json:"compacted"`
				Rejected   int   `json:"rejected"`
				SavedBytes int64 `json:"saved_bytes"`
			} `json:"compaction"`
		} `json:"summary"`
	}
	size := func() int { return b.count(t, `SELECT sum(octet_length(messages::text))::int FROM sessions`) }
	before := size()

	r = runCLI(t, "", b.env, "scan", "--full", "--compact=aggressive", "--dry-run", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr) // some sessions would be repaired
	requireShape(t, "Run", r.stdout)
	var dry run
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry), r.stdout)
	require.Positive(t, dry.Summary.Compaction.Compacted)
	require.Positive(t, dry.Summary.Compaction.SavedBytes)
	require.Equal(t, before, size(), "a dry run wrote")

	r = runCLI(t, "", b.env, "scan", "--full", "--compact=aggressive")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`\n  compacted +%d \(%d bytes`, dry.Summary.Compaction.Compacted, dry.Summary.Compaction.SavedBytes), r.stdout)
	require.Less(t, size(), before)
	runID := regexp.MustCompile(`run +(\d+) `).FindStringSubmatch(r.stdout)
	require.NotNil(t, runID, r.stdout)
	r = runCLI(t, "", b.env, "report", "--run", runID[1])
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`\ncompacted +%d \(%d bytes saved, about \d+ tokens\), compact_rejected 0\n`,
		dry.Summary.Compaction.Compacted, dry.Summary.Compaction.SavedBytes), r.stdout)

	var id string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT session_id FROM session_compactions LIMIT 1`).Scan(&id))
	r = runCLI(t, "", b.env, "repair", "--session", id, "--compact=aggressive", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	requireShape(t, "Run", r.stdout)
	// Compacting twice changes nothing: the session is clean, with nothing to compact.
	require.Contains(t, r.stdout, `"by_status":{"clean":1}`)
	require.NotContains(t, r.stdout, `"compaction"`)
	r = runCLI(t, "", b.env, "report", "--session", id, "--cleared")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "  was: ")
	require.Contains(t, r.stdout, "compact_")
	r = runCLI(t, "", b.env, "report", "--session", id, "--cleared", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	rows := jsonLines(t, r.stdout)
	require.Equal(t, b.count(t, `SELECT jsonb_array_length(report->'actions') FROM session_compactions WHERE session_id = $1`, id), len(rows))

	for _, args := range [][]string{
		{"scan", "--compact=tiny"},
		{"repair", "--session", id, "--compact", "--layout", "messages", "--table", "msgs", "--session-column", "s",
			"--order-column", "o", "--message-column", "m"},
	} {
		r = runCLI(t, "", b.env, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
	}
	require.Contains(t, r.stderr, "one row per session")
}

// A dry run with --compact that finds sessions to compact and none to repair exits 3,
// as it does for sessions to repair; with nothing to do, 0.
func TestDryRunExitsThreeForCompactionAlone(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	data := genJSONL(t, "--dialect", "anthropic", "--sessions", "2", "--messages", "600", "--workload", "coding", "--fault-rate", "0")
	r := runCLI(t, data, b.env, "import", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)

	r = runCLI(t, "", b.env, "scan", "--full", "--dry-run")
	require.Equal(t, ExitOK, r.code, "nothing to repair: %s", r.stdout)
	r = runCLI(t, "", b.env, "scan", "--full", "--compact=aggressive", "--dry-run", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	var dry struct {
		Counts  map[string]int `json:"counts"`
		Summary struct {
			ByStatus map[string]int `json:"by_status"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry), r.stdout)
	require.Zero(t, dry.Counts["would_repair"])
	require.Equal(t, 2, dry.Summary.ByStatus["would_compact"])

	var id string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT id FROM sessions LIMIT 1`).Scan(&id))
	r = runCLI(t, "", b.env, "repair", "--session", id, "--compact=aggressive", "--dry-run")
	require.Equal(t, ExitProblems, r.code, r.stderr)

	r = runCLI(t, "", b.env, "scan", "--full", "--compact=aggressive")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "", b.env, "scan", "--full", "--compact=aggressive", "--dry-run")
	require.Equal(t, ExitOK, r.code, "compacted already: %s", r.stdout)
}
