package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// genCoding runs tmend gen for long coding sessions.
func genCoding(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, "", nil, append([]string{"gen", "--workload", "coding", "--messages", "300", "--sessions", "3"}, args...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	return r.stdout
}

func TestCompactJSONLines(t *testing.T) {
	in := "\n" + strings.Replace(genCoding(t, "--fault-rate", "1"), "\n", "\r\n\n", 1) // blank lines, a CRLF
	r := runCLI(t, in, nil, "compact", "--json", "--min-tokens", "0", "--clear-at-least", "0", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Less(t, len(r.stdout), len(in))
	require.True(t, strings.HasPrefix(r.stdout, "\n{"), "a leading blank line kept")
	require.Equal(t, strings.Count(in, "\n"), strings.Count(r.stdout, "\n"), "one line per session, blank lines kept")
	require.Equal(t, 1, strings.Count(r.stdout, "\r\n\n"), "line ends kept")
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	require.Len(t, lines, 4)
	for _, l := range lines[:3] {
		require.Equal(t, "compacted", l["status"], l)
		require.Equal(t, "repaired", l["repair_status"], "broken sessions are repaired first")
		require.Positive(t, l["saved_bytes"])
		require.NotEmpty(t, l["by_rule"])
		require.NotEmpty(t, l["by_tool"])
	}
	sum := lines[3]["summary"].(map[string]any)
	require.EqualValues(t, 3, sum["compacted"])

	// The output checks clean, and compacting it again changes nothing.
	c := runCLI(t, r.stdout, nil, "check", "-")
	require.Equal(t, ExitOK, c.code, c.stdout)
	again := runCLI(t, r.stdout, nil, "compact", "--min-tokens", "0", "--clear-at-least", "0", "-")
	require.Equal(t, ExitOK, again.code, again.stderr)
	require.True(t, r.stdout == again.stdout, "a second run changed the output")
	require.Contains(t, again.stderr, "compacted 0")
}

func TestCompactDryRunAndGates(t *testing.T) {
	in := genCoding(t, "--fault-rate", "0")
	r := runCLI(t, in, nil, "compact", "--dry-run", "--min-tokens", "0", "--clear-at-least", "0", "-")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	require.Empty(t, r.stdout, "a dry run writes no transcripts")
	require.Contains(t, r.stderr, "would compact 3")
	require.Contains(t, r.stderr, "clear_old")
	require.Contains(t, r.stderr, "tool read_file")

	// gen's sessions were last updated at 2026-01-01: a --now within the idle time skips them.
	r = runCLI(t, in, nil, "compact", "--now", "2026-01-01T00:30:00Z", "--min-tokens", "0", "--clear-at-least", "0", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.True(t, in == r.stdout, "a session active within --idle-for is left alone")
	require.Contains(t, r.stderr, "recently_active")

	r = runCLI(t, in, nil, "compact", "--clear-at-least", "100000000", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.True(t, in == r.stdout, "a saving below --clear-at-least writes nothing")
	require.Contains(t, r.stderr, "below_clear_at_least")
}

// TestCompactSaysWhyInWords: a session without tool calls is skipped as no_tool_calls
// (there is no dialect to detect, not an unsupported one), each reason in the text report
// has its meaning beside it, and one session is "1 session".
func TestCompactSaysWhyInWords(t *testing.T) {
	t.Parallel()
	in := `{"id":"a","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}` + "\n"
	r := runCLI(t, in, nil, "compact", "-v", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, in, r.stdout)
	require.Contains(t, r.stderr, "a: compact_skipped (no_tool_calls: no tool calls, so nothing to compact)")
	require.Contains(t, r.stderr, "1 session: compacted 0, skipped 1")
	require.Regexp(t, `skipped no_tool_calls +1  \(no tool calls, so nothing to compact\)`, r.stderr)
	r = runCLI(t, in, nil, "compact", "--json", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `"reason":"no_tool_calls"`)
	require.Contains(t, r.stderr, `"skipped":{"no_tool_calls":1}`)

	r = runCLI(t, in+in, nil, "compact", "-")
	require.Contains(t, r.stderr, "2 sessions: compacted 0, skipped 2")
}

func TestCompactDocumentAndFiles(t *testing.T) {
	line := strings.SplitN(genCoding(t, "--dialect", "openai-chat"), "\n", 2)[0]
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(line), &doc))
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, []byte(line), "", "  "))
	dir := t.TempDir()
	in, out, rep := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json"), filepath.Join(dir, "report.jsonl")
	require.NoError(t, os.WriteFile(in, append([]byte("\xef\xbb\xbf"), pretty.Bytes()...), 0o644))
	r := runCLI(t, "", nil, "compact", "-o", out, "--report", rep, "--min-tokens", "0", "--clear-at-least", "0",
		"--category", "other=read_file", "--protect-tools", "grep", in)
	require.Equal(t, ExitOK, r.code, r.stderr)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(got, []byte("\xef\xbb\xbf{\n  \"id\"")), "BOM and layout kept")
	report, err := os.ReadFile(rep)
	require.NoError(t, err)
	require.Contains(t, string(report), `"status":"compacted"`)
	require.NotContains(t, string(report), `"tool":"grep"`, "--protect-tools")
	require.NotContains(t, string(report), `"tool":"read_file","category":"read"`, "--category moved read_file")
	require.Contains(t, string(report), `"tool":"read_file","category":"other"`)
	require.Contains(t, string(got), "[tmend ")
}

func TestCompactUsage(t *testing.T) {
	for _, args := range [][]string{
		{"compact", "--profile", "huge"},
		{"compact", "--category", "reads=x"},
		{"compact", "--category", "read"},
		{"compact", "--keep-turns", "0"},
		{"compact", "--dry-run", "-o", "x"},
		{"compact", "a", "b"},
	} {
		r := runCLI(t, "[]", nil, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
	}
	r := runCLI(t, `{"type":"session","version":3,"id":"s"}`+"\n"+`{"type":"message","id":"a"}`+"\n", nil, "compact", "-")
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, "session file")
	require.Empty(t, r.stdout)
	r = runCLI(t, "not json\n", nil, "compact", "-")
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Equal(t, "not json\n", r.stdout, "unreadable input is passed through")
	require.Contains(t, r.stderr, "input: compact_skipped", "one document is named as fix and check name it")
	require.NotContains(t, r.stderr, "line 0")
	// JSON Lines whose first line is bad, as fix reads them: that line is one bad record,
	// the others are still read.
	in := "not json\n" + `{"id":"a","messages":[{"role":"user","content":"hi"}]}` + "\n"
	r = runCLI(t, in, nil, "compact", "--json", "-")
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Equal(t, in, r.stdout)
	require.Contains(t, r.stderr, `"sessions":2`)
}
