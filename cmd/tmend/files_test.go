package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
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
	require.Equal(t, exitOK, r.code, r.stderr)
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

	r := runCLI(t, "", nil, "gen", "--faults", "nope")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `unknown fault "nope"`)
}

func TestCheckAndFixRoundTrip(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			in := genJSONL(t, "--sessions", "40", "--dialect", string(d), "--fault-rate", "0.5", "--seed", "3")

			r := runCLI(t, in, nil, "check", "--json")
			require.Equal(t, exitProblems, r.code, r.stderr)
			lines := jsonLines(t, r.stdout)
			require.Len(t, lines, 41, "one line per session and a summary")
			sum := lines[40]
			require.Equal(t, "summary", sum["type"])
			broken := sum["by_status"].(map[string]any)["broken"].(float64)
			require.Positive(t, broken)

			fixed := runCLI(t, in, nil, "fix", "--json")
			require.Equal(t, exitOK, fixed.code, fixed.stderr)
			fixReport := jsonLines(t, fixed.stderr)

			// Clean sessions come out byte for byte; the whole output now checks clean.
			inLines, outLines := strings.Split(in, "\n"), strings.Split(fixed.stdout, "\n")
			require.Equal(t, len(inLines), len(outLines))
			for i, l := range lines[:40] {
				if l["status"] == "clean" {
					require.Equal(t, inLines[i], outLines[i])
				} else {
					require.NotEqual(t, inLines[i], outLines[i])
					require.Equal(t, "repaired", fixReport[i]["status"])
				}
				require.EqualValues(t, len(inLines[i]), fixReport[i]["bytes_in"])
				require.EqualValues(t, len(outLines[i]), fixReport[i]["bytes_out"])
			}
			again := runCLI(t, fixed.stdout, nil, "check")
			require.Equal(t, exitOK, again.code, again.stdout)
		})
	}
}

func TestSingleDocuments(t *testing.T) {
	t.Parallel()
	broken := `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	t.Run("Array", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, broken, nil, "fix", "-")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `"role":"tool","tool_call_id":"c1"`)
		require.True(t, json.Valid([]byte(r.stdout)))
	})
	t.Run("PrettyEnvelope", func(t *testing.T) {
		t.Parallel()
		doc := "{\n  \"model\": \"gpt-4.1\",\n  \"temperature\": 0.70,\n  \"messages\": " + broken + ",\n  \"id\": 42\n}\n"
		r := runCLI(t, doc, nil, "fix", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "{\n  \"model\": \"gpt-4.1\",\n  \"temperature\": 0.70,\n  \"messages\": ["))
		require.True(t, strings.HasSuffix(r.stdout, "],\n  \"id\": 42\n}\n"))
		rep := jsonLines(t, r.stderr)
		require.Equal(t, "42", rep[0]["session"])
		require.Equal(t, "repaired", rep[0]["status"])
	})
	t.Run("CheckExitCode", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, broken, nil, "check")
		require.Equal(t, exitProblems, r.code)
		require.Contains(t, r.stdout, "tool_call_without_result")
	})
}

func TestQuietPeriodFlags(t *testing.T) {
	t.Parallel()
	line := `{"id":"s1","updated_at":"2026-11-21T10:00:00Z","messages":[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}` + "\n"
	r := runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:05:00Z")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, line, r.stdout, "the call may still be running")
	require.Contains(t, r.stderr, "pending")

	r = runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:05:00Z", "--force")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, repair.SyntheticResultText)

	r = runCLI(t, line, nil, "fix", "--now", "2026-11-21T10:20:00Z")
	require.Contains(t, r.stdout, repair.SyntheticResultText)

	r = runCLI(t, line, nil, "fix", "--now", "yesterday")
	require.Equal(t, exitUsage, r.code)
}

func TestBadLinesDoNotStopTheRest(t *testing.T) {
	t.Parallel()
	good := strings.TrimSpace(genJSONL(t, "--sessions", "1", "--dialect", "openai-chat", "--fault-rate", "1", "--seed", "9"))
	bad := []struct{ line, reason string }{
		{`{"id":"trunc","messages":[{"role":"user"`, "unterminated"},
		{`not json at all`, "invalid JSON"},
		{`{"id":"utf8","messages":[{"role":"user","content":"` + "\xff\xfe" + `"}]}`, "invalid UTF-8"},
		{`{"id":"dup","messages":[{"role":"user","role":"assistant"}]}`, "duplicate key"},
		{`{"id":"deep","messages":[` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `]}`, "nesting deeper"},
		{`{"id":"obj","messages":{"role":"user"}}`, "not an array"},
		{`["x"]`, "not an object"},
		{`{"id":"mixed","messages":[{"role":"assistant","content":[{"type":"toolCall","id":"a","name":"f","arguments":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "mixed"},
		{`{"id":"unknowncall","messages":[{"role":"assistant","content":[{"type":"tool_invocation","id":"c9"}]},{"role":"toolResult","toolCallId":"c9","content":"real output"}]}`, "does not know"},
	}
	var in strings.Builder
	for _, b := range bad {
		in.WriteString(good + "\n" + b.line + "\n")
	}
	in.WriteString(good + "\n")

	r := runCLI(t, in.String(), nil, "fix", "--json")
	require.Equal(t, exitRuntime, r.code)
	require.Contains(t, r.stderr, "9 of 19 sessions could not be processed")
	out := strings.Split(r.stdout, "\n")
	rep := jsonLines(t, r.stderr[:strings.Index(r.stderr, "{\"type\":\"summary\"")])
	for i, b := range bad {
		lineNo := 2*i + 2
		require.Equal(t, b.line, out[lineNo-1], "bad line %d must pass through unchanged", lineNo)
		require.EqualValues(t, lineNo, rep[lineNo-1]["line"])
		require.Contains(t, rep[lineNo-1]["reason"], b.reason)
		require.Equal(t, "repaired", rep[lineNo-2]["status"], "the good line before it is still repaired")
	}
}

// patternReader yields n bytes of 'a' without holding them.
type patternReader struct{ n int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	k := int64(len(b))
	if k > p.n {
		k = p.n
	}
	for i := range b[:k] {
		b[i] = 'a'
	}
	p.n -= k
	return int(k), nil
}

func TestHugeLineIsPassedThroughUnread(t *testing.T) {
	t.Parallel()
	const huge = 100 << 20
	head := `{"id":"big","messages":[{"role":"user","content":"`
	tail := `"}]}` + "\n"
	next := `{"id":"after","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}` + "\n"
	in := io.MultiReader(strings.NewReader(head), &patternReader{n: huge}, strings.NewReader(tail+next))

	want := sha256.New()
	_, err := io.Copy(want, io.MultiReader(strings.NewReader(head), &patternReader{n: huge}, strings.NewReader(tail)))
	require.NoError(t, err)
	got := sha256.New()
	var rest bytes.Buffer
	// Everything up to the first newline goes to the hash, the rest to a buffer.
	w := writerFunc(func(b []byte) (int, error) {
		if rest.Len() == 0 {
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				got.Write(b[:i+1])
				rest.Write(b[i+1:])
				return len(b), nil
			}
			got.Write(b)
			return len(b), nil
		}
		return rest.Write(b)
	})
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"fix", "--json"}, in, w, &stderr, func(string) string { return "" })
	require.Equal(t, exitRuntime, code, stderr.String())
	require.Equal(t, want.Sum(nil), got.Sum(nil), "the huge line must come out unchanged")
	require.Contains(t, rest.String(), repair.SyntheticResultText, "the line after it is still repaired")
	require.Contains(t, stderr.String(), `"status":"too_large"`)
	require.Contains(t, stderr.String(), "over --max-bytes")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestOutputAndReportFilesAreAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	rep := filepath.Join(dir, "report.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(genJSONL(t, "--sessions", "10", "--fault-rate", "1")), 0o644))

	r := runCLI(t, "", nil, "fix", in, "-o", out, "--report", rep)
	require.Equal(t, exitOK, r.code, r.stderr)
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
	code := run(context.Background(), []string{"fix", "-o", out}, input, io.Discard, &stderr, func(string) string { return "" })
	require.Equal(t, exitRuntime, code, stderr.String())
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
	require.Equal(t, exitUsage, r.code)
	var e struct {
		Error string `json:"error"`
		Code  int    `json:"code"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e))
	require.Equal(t, exitUsage, e.Code)
	require.Contains(t, e.Error, `unknown dialect "klingon"`)

	r = runCLI(t, "", nil, "fix")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "input is empty")
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
				require.Equal(t, exitOK, r.code, r.stderr)
				text = r.stderr
			} else {
				require.Equal(t, exitProblems, r.code, r.stderr)
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
	require.Equal(t, exitProblems, r.code)
	require.Equal(t, "s1\nforged  repaired\x1b[2J\u0085\u202e", jsonLines(t, r.stdout)[0]["session"])
}

// TestJSONLinesWithABadStart: a malformed, blank or BOM-prefixed first line does not turn
// JSON Lines into one unparseable document: every session is still checked and repaired.
func TestJSONLinesWithABadStart(t *testing.T) {
	t.Parallel()
	sessions := genJSONL(t, "--sessions", "50", "--dialect", "openai-chat", "--fault-rate", "1", "--seed", "5")
	fixed := runCLI(t, sessions, nil, "fix")
	require.Equal(t, exitOK, fixed.code, fixed.stderr)
	tests := []struct {
		name, head string
		failed     int
	}{
		{"Truncated", `{"id":"trunc","messages":[{"role":"us` + "\n", 1},
		{"UnterminatedObject", `{"id":"open","messages":[` + "\n", 1},
		{"Garbage", "garbage\n", 1},
		{"ClosingBracket", "]\n", 1},
		{"BlankLine", "\n", 0},
		{"BlankLines", " \r\n\t\n", 0},
		{"BOM", "\ufeff", 0},
		{"BOMAndBlankLine", "\ufeff\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tt.head + sessions
			r := runCLI(t, in, nil, "check", "--json")
			byType := map[any]int{}
			var sum map[string]any
			for _, l := range jsonLines(t, r.stdout) {
				byType[l["type"]]++
				if l["type"] == "summary" {
					sum = l["by_status"].(map[string]any)
				}
			}
			require.Equal(t, 50+tt.failed, byType["session"], "every session is listed")
			require.NotNil(t, sum)
			require.EqualValues(t, 50, sum["broken"])

			r = runCLI(t, in, nil, "fix", "--json")
			require.True(t, tt.head+fixed.stdout == r.stdout, "bad lines pass through, the rest is repaired")
			if tt.failed > 0 {
				require.Equal(t, exitRuntime, r.code)
			} else {
				require.Equal(t, exitOK, r.code, r.stderr)
			}
		})
	}
	t.Run("BOMSingleDocument", func(t *testing.T) {
		t.Parallel()
		doc := "\ufeff[{\"role\":\"user\",\"content\":\"ls\"},\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}]\n"
		r := runCLI(t, doc, nil, "fix")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "\ufeff[{"), r.stdout)
		require.Contains(t, r.stdout, repair.SyntheticResultText)
	})
	t.Run("PrettyDocumentsStayDocuments", func(t *testing.T) {
		t.Parallel()
		// One message per line, the last of them a whole object: still one document.
		doc := "[\n{\"role\":\"user\",\"content\":\"ls\"},\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}\n]\n"
		r := runCLI(t, doc, nil, "check", "--json")
		require.Equal(t, exitProblems, r.code, r.stderr)
		require.Len(t, jsonLines(t, r.stdout), 2)
		// A document larger than the read buffer, one message per line.
		var big strings.Builder
		big.WriteString("{\"messages\": [\n")
		for range 20000 {
			big.WriteString("  {\"role\":\"user\",\"content\":\"hello there\"},\n")
		}
		big.WriteString("  {\"role\":\"user\",\"content\":\"bye\"}\n]}\n")
		r = runCLI(t, big.String(), nil, "check", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Len(t, jsonLines(t, r.stdout), 2)
	})
}
