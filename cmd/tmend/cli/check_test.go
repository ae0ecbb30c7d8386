package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// genJSONL runs `tmend gen` and returns its output.
func genJSONL(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, "", nil, append([]string{"gen"}, args...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	return r.stdout
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

func TestGenIsDeterministic(t *testing.T) {
	t.Parallel()
	a := genJSONL(t, "--sessions", "20", "--seed", "7", "--dialect", "anthropic")
	b := genJSONL(t, "--sessions", "20", "--seed", "7", "--dialect", "anthropic")
	c := genJSONL(t, "--sessions", "20", "--seed", "8", "--dialect", "anthropic")
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
	require.Len(t, jsonLines(t, a), 20)

	// --json sums up on stderr; stdout is the sessions, the same bytes.
	r := runCLI(t, "", nil, "gen", "--sessions", "20", "--seed", "7", "--dialect", "anthropic", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, a, r.stdout)
	var sum struct {
		Sessions, Broken int
		ByFault          map[string]int `json:"by_fault"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &sum), r.stderr)
	require.Equal(t, 20, sum.Sessions)
	require.Positive(t, sum.Broken)
	require.Less(t, sum.Broken, 20)
	require.NotEmpty(t, sum.ByFault)

	r = runCLI(t, "", nil, "gen", "--dialect", "anthropic", "--faults", "invalid_call", "--fault-rate", "1")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--faults invalid_call: none of them occurs in dialect anthropic")

	r = runCLI(t, "", nil, "gen", "--faults", "nope")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `unknown fault "nope"`)
	// The faults are listed as the dialects are, not as a Go slice.
	require.Contains(t, r.stderr, "some of missing_result, interrupted, ")
	r = runCLI(t, "", nil, "gen", "--help")
	require.Equal(t, ExitOK, r.code)
	require.Contains(t, r.stdout, "Faults (--faults): missing_result, interrupted, ")
}

func TestCheckExitCodes(t *testing.T) {
	t.Parallel()
	clean := `[{"role":"user","content":"hi"}]`
	broken := `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	r := runCLI(t, clean, nil, "check")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, broken, nil, "check")
	require.Equal(t, ExitProblems, r.code)
	require.Contains(t, r.stdout, "tool_call_without_result")
	r = runCLI(t, broken, nil, "fix")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "{\"id\":\"x\",\"messages\":[\n{\"id\":\"y\",\"messages\":"+broken+"}\n", nil, "fix")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "1 of 2 sessions could not be processed (see the report)")
}

func TestQuietPeriodFlags(t *testing.T) {
	t.Parallel()
	line := `{"id":"s1","updated_at":"2026-11-21T10:00:00Z","messages":[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}` + "\n"
	r := runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:05:00Z")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, line, r.stdout, "the call may still be running")
	require.Contains(t, r.stderr, "pending")

	r = runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:05:00Z", "--force")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, repair.SyntheticResultText)

	r = runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:20:00Z")
	require.Contains(t, r.stdout, repair.SyntheticResultText)

	r = runCLI(t, line, nil, "fix", "--now", "yesterday")
	require.Equal(t, ExitUsage, r.code)
}

// TestCheckAndFixReadTheEnvironment: check and fix take TMEND_<OPTION> like every other
// command, and a flag still beats it.
func TestCheckAndFixReadTheEnvironment(t *testing.T) {
	t.Parallel()
	line := `{"id":"s1","updated_at":"2026-11-21T10:00:00Z","messages":[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}` + "\n"
	at := "2026-11-21T10:05:00Z" // 5 minutes after: pending under the default quiet period

	r := runCLI(t, line, map[string]string{"TMEND_QUIET_PERIOD": "1m"}, "fix", "--now", at)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, repair.SyntheticResultText)
	r = runCLI(t, line, map[string]string{"TMEND_QUIET_PERIOD": "1m"}, "fix", "--now", at, "--quiet-period", "10m")
	require.Equal(t, line, r.stdout, "the flag beats the environment")

	r = runCLI(t, line, map[string]string{"TMEND_MAX_BYTES": "10"}, "check", "--json")
	require.Equal(t, "too_large", jsonLines(t, r.stdout)[0]["status"], r.stdout)

	for k, v := range map[string]string{"TMEND_DIALECT": "klingon", "TMEND_WORKERS": "0", "TMEND_FAILED_TURNS": "drop", "TMEND_MAX_BYTES": "big"} {
		r = runCLI(t, line, map[string]string{k: v}, "check")
		require.Equal(t, ExitUsage, r.code, "%s=%s: %s", k, v, r.stderr)
	}
}

func TestOutputAndReportFilesAreAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	rep := filepath.Join(dir, "report.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(genJSONL(t, "--sessions", "10", "--fault-rate", "1")), 0o644))

	r := runCLI(t, "", nil, "fix", in, "-o", out, "--report", rep)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Empty(t, r.stdout)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Len(t, jsonLines(t, string(b)), 10)
	b, err = os.ReadFile(rep)
	require.NoError(t, err)
	require.Len(t, jsonLines(t, string(b)), 11)
	fi, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	// A run that fails after writing part of its output into the temp file leaves the
	// destination as it was and removes the temp file.
	before, err := os.ReadFile(out)
	require.NoError(t, err)
	input := &failingInput{dir: dir, base: "out.jsonl", lines: []byte(genJSONL(t, "--sessions", "50", "--fault-rate", "1"))}
	var stderr strings.Builder
	code := Run(context.Background(), []string{"fix", "-o", out}, Env{Stdin: input, Stdout: io.Discard, Stderr: &stderr, Getenv: noEnv})
	require.Equal(t, ExitRuntime, code, stderr.String())
	require.Contains(t, stderr.String(), "input device failed")
	require.True(t, input.sawTemp, "the input failed before any output reached the temp file")
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a failed run replaced the destination (%d bytes, now %d)", len(before), len(after))
	requireOnly(t, dir, "in.jsonl", "out.jsonl", "report.jsonl")
}

// failingInput yields its JSON Lines over and over until dir holds a temp file of base
// with bytes in it (fix has written part of its output); its next read then fails.
type failingInput struct {
	dir, base string
	lines     []byte
	pos       int
	total     int
	sawTemp   bool
}

func (f *failingInput) Read(p []byte) (int, error) {
	temps, _ := filepath.Glob(filepath.Join(f.dir, "."+f.base+".tmp-*"))
	for _, name := range temps {
		if fi, err := os.Stat(name); err == nil && fi.Size() > 0 {
			f.sawTemp = true
		}
	}
	if f.sawTemp || f.total > 1<<30 {
		return 0, errors.New("input device failed")
	}
	n := copy(p, f.lines[f.pos:])
	f.pos = (f.pos + n) % len(f.lines)
	f.total += n
	return n, nil
}

func TestUsageErrorsAsJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "check", "--json", "--dialect", "klingon", "x.json")
	require.Equal(t, ExitUsage, r.code)
	requireShape(t, "Error", r.stdout)
	var e struct {
		Error string `json:"error"`
		Code  int    `json:"code"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e))
	require.Equal(t, ExitUsage, e.Code)
	require.Contains(t, e.Error, `unknown dialect "klingon"`)

}

// TestEmptyInputIsZeroSessions: a query that returned no rows is zero sessions, not a
// usage error; only white space or a byte order mark counts as nothing, and fix writes it
// through. What is not JSON stays unparseable.
func TestEmptyInputIsZeroSessions(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "\n \r\n", "\ufeff", "\ufeff\n"} {
		r := runCLI(t, in, nil, "check", "-")
		require.Equal(t, ExitOK, r.code, "%q: %s", in, r.stderr)
		require.Equal(t, "sessions  0\n", r.stdout)
		r = runCLI(t, in, nil, "check", "--json", "-")
		require.Equal(t, ExitOK, r.code, "%q: %s", in, r.stderr)
		require.JSONEq(t, `{"type":"summary","sessions":0,"by_status":{}}`, r.stdout)
		r = runCLI(t, in, nil, "fix", "-")
		require.Equal(t, ExitOK, r.code, "%q: %s", in, r.stderr)
		require.Equal(t, in, r.stdout)
		r = runCLI(t, in, nil, "compact", "-")
		require.Equal(t, ExitOK, r.code, "%q: %s", in, r.stderr)
		require.Equal(t, in, r.stdout)
	}
	for _, in := range []string{"x", "\ufeff\x00", "{"} {
		r := runCLI(t, in, nil, "check", "-")
		require.Equal(t, ExitRuntime, r.code, "%q: %s", in, r.stdout)
		require.Contains(t, r.stdout, "unparseable")
	}
}

// TestTextReportsEscapeTranscriptStrings: ids and tool names from the input cannot forge
// report lines or reach the terminal as escape sequences; JSON keeps them exact.
func TestTextReportsEscapeTranscriptStrings(t *testing.T) {
	t.Parallel()
	const id = `s1\nforged  repaired\u001b[2J\u0085\u202e`
	line := `{"id":"` + id + `","messages":[{"role":"user","content":"ls"},{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"c\u001b]0;pwned\u0007","type":"function","function":{"name":"ls\r\nforged","arguments":"{}"}}]}]}` + "\n"
	for _, args := range [][]string{{"check", "-v"}, {"fix", "-v"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, line, nil, args...)
			text := r.stdout
			if args[0] == "fix" {
				require.Equal(t, ExitOK, r.code, r.stderr)
				text = r.stderr
			} else {
				require.Equal(t, ExitProblems, r.code, r.stderr)
			}
			require.Contains(t, text, `s1\nforged  repaired\x1b[2J\u0085\u202e`)
			require.Contains(t, text, `c\x1b]0;pwned\x07`)
			require.NotContains(t, text, "\x1b")
			require.NotContains(t, text, "\r")
			require.NotContains(t, text, "\u0085")
			for _, l := range strings.Split(text, "\n") {
				require.False(t, strings.HasPrefix(strings.TrimSpace(l), "forged"), "forged line in %q", text)
			}
		})
	}
	r := runCLI(t, line, nil, "check", "--json")
	require.Equal(t, ExitProblems, r.code)
	require.Equal(t, "s1\nforged  repaired\x1b[2J\u0085\u202e", jsonLines(t, r.stdout)[0]["session_id"])
}
