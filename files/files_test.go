package files_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tmend/tmend/files"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/report"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// genJSONL returns cfg's sessions as JSON Lines, as 'tmend gen' writes them.
func genJSONL(t *testing.T, cfg gen.Config) string {
	t.Helper()
	var b bytes.Buffer
	_, err := gen.WriteJSONLines(t.Context(), &b, cfg)
	require.NoError(t, err)
	return b.String()
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

// filesResult is what a Run call wrote and returned.
type filesResult struct {
	out    string
	report []map[string]any // the JSON Lines report: a line per session, then the summary
	res    files.Result
}

// runFiles runs Run over in (a fix when o.Fix) with a JSON report.
func runFiles(t *testing.T, in io.Reader, o files.Options) filesResult {
	t.Helper()
	var out, rep bytes.Buffer
	res, err := files.Run(t.Context(), in, &out, o, report.NewJSON(&rep))
	require.NoError(t, err)
	if !o.Fix {
		require.Zero(t, out.Len(), "a check writes no output")
	}
	return filesResult{out.String(), jsonLines(t, rep.String()), res}
}

func TestFilesCheckAndFix(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			in := genJSONL(t, gen.Config{Sessions: 40, Dialect: d, Messages: 45, FaultRate: 0.5, Seed: 3})

			check := runFiles(t, strings.NewReader(in), files.Options{})
			require.Len(t, check.report, 41, "one line per session and a summary")
			require.Equal(t, "summary", check.report[40]["type"])
			require.Positive(t, check.res.Broken)
			require.Equal(t, check.res.Broken, check.res.Summary.ByStatus["broken"])
			require.Zero(t, check.res.Failed)

			fix := runFiles(t, strings.NewReader(in), files.Options{Fix: true})
			require.Zero(t, fix.res.Broken+fix.res.Failed)
			// Clean sessions come out byte for byte; the whole output now checks clean.
			inLines, outLines := strings.Split(in, "\n"), strings.Split(fix.out, "\n")
			require.Equal(t, len(inLines), len(outLines))
			for i, l := range check.report[:40] {
				if l["status"] == "clean" {
					require.Equal(t, inLines[i], outLines[i])
				} else {
					require.NotEqual(t, inLines[i], outLines[i])
					require.Equal(t, "repaired", fix.report[i]["status"])
				}
				require.EqualValues(t, len(inLines[i]), fix.report[i]["before_bytes"])
				require.EqualValues(t, len(outLines[i]), fix.report[i]["after_bytes"])
			}
			again := runFiles(t, strings.NewReader(fix.out), files.Options{})
			require.Zero(t, again.res.Broken+again.res.Failed)
		})
	}
}

func TestFilesSingleDocuments(t *testing.T) {
	t.Parallel()
	broken := `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	t.Run("Array", func(t *testing.T) {
		t.Parallel()
		r := runFiles(t, strings.NewReader(broken), files.Options{Fix: true})
		require.Contains(t, r.out, `"role":"tool","tool_call_id":"c1"`)
		require.True(t, json.Valid([]byte(r.out)))
	})
	t.Run("PrettyEnvelope", func(t *testing.T) {
		t.Parallel()
		doc := "{\n  \"model\": \"gpt-4.1\",\n  \"temperature\": 0.70,\n  \"messages\": " + broken + ",\n  \"id\": 42\n}\n"
		r := runFiles(t, strings.NewReader(doc), files.Options{Fix: true})
		require.True(t, strings.HasPrefix(r.out, "{\n  \"model\": \"gpt-4.1\",\n  \"temperature\": 0.70,\n  \"messages\": ["))
		require.True(t, strings.HasSuffix(r.out, "],\n  \"id\": 42\n}\n"))
		require.Equal(t, "42", r.report[0]["session_id"])
		require.Equal(t, "repaired", r.report[0]["status"])
	})
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		// Nothing, white space or a byte order mark alone (more white space than the read
		// buffer too): zero sessions, and fix writes the input through.
		for _, in := range []string{"", " \n", "\ufeff", "\ufeff\r\n\n", strings.Repeat(" \n", 300<<10)} {
			for _, fix := range []bool{false, true} {
				r := runFiles(t, strings.NewReader(in), files.Options{Fix: fix})
				require.Zero(t, r.res.Summary.Sessions, "%q", in[:min(len(in), 8)])
				require.Len(t, r.report, 1, "the summary alone")
				if fix {
					require.Equal(t, in, r.out)
				}
			}
		}
		// A value after more white space than the buffer holds stays an error.
		_, err := files.Run(t.Context(), strings.NewReader(strings.Repeat(" ", 300<<10)+"[]"), io.Discard, files.Options{Fix: true})
		require.ErrorContains(t, err, "white space")
	})
}

func TestBadLinesDoNotStopTheRest(t *testing.T) {
	t.Parallel()
	good := strings.TrimSpace(genJSONL(t, gen.Config{Sessions: 1, Dialect: repair.OpenAIChat, Messages: 45, FaultRate: 1, Seed: 9}))
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

	r := runFiles(t, strings.NewReader(in.String()), files.Options{Fix: true})
	require.Equal(t, 9, r.res.Failed)
	require.Equal(t, 19, r.res.Summary.Sessions)
	out := strings.Split(r.out, "\n")
	for i, b := range bad {
		lineNo := 2*i + 2
		require.Equal(t, b.line, out[lineNo-1], "bad line %d must pass through unchanged", lineNo)
		require.EqualValues(t, lineNo, r.report[lineNo-1]["line"])
		require.Contains(t, r.report[lineNo-1]["reason"], b.reason)
		require.Equal(t, "repaired", r.report[lineNo-2]["status"], "the good line before it is still repaired")
	}
}

// patternReader yields n bytes of 'a' without holding them.
type patternReader struct{ n int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(b)), p.n)
	for i := range b[:k] {
		b[i] = 'a'
	}
	p.n -= k
	return int(k), nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

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
	var rep bytes.Buffer
	res, err := files.Run(t.Context(), in, w, files.Options{Fix: true}, report.NewJSON(&rep))
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed)
	require.Equal(t, want.Sum(nil), got.Sum(nil), "the huge line must come out unchanged")
	require.Contains(t, rest.String(), repair.SyntheticResultText, "the line after it is still repaired")
	require.Contains(t, rep.String(), `"status":"too_large"`)
	require.Contains(t, rep.String(), "-byte limit; passed through unchanged")
}

// TestJSONLinesWithABadStart: a malformed, blank or BOM-prefixed first line does not turn
// JSON Lines into one unparseable document: every session is still checked and repaired.
func TestJSONLinesWithABadStart(t *testing.T) {
	t.Parallel()
	sessions := genJSONL(t, gen.Config{Sessions: 50, Dialect: repair.OpenAIChat, Messages: 45, FaultRate: 1, Seed: 5})
	fixed := runFiles(t, strings.NewReader(sessions), files.Options{Fix: true})
	require.Zero(t, fixed.res.Failed)
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
			r := runFiles(t, strings.NewReader(in), files.Options{})
			byType := map[any]int{}
			for _, l := range r.report {
				byType[l["type"]]++
			}
			require.Equal(t, 50+tt.failed, byType["session"], "every session is listed")
			require.Equal(t, 1, byType["summary"])
			require.Equal(t, 50, r.res.Broken)
			require.Equal(t, tt.failed, r.res.Failed)

			r = runFiles(t, strings.NewReader(in), files.Options{Fix: true})
			require.True(t, tt.head+fixed.out == r.out, "bad lines pass through, the rest is repaired")
			require.Equal(t, tt.failed, r.res.Failed)
		})
	}
	t.Run("BOMSingleDocument", func(t *testing.T) {
		t.Parallel()
		doc := "\ufeff[{\"role\":\"user\",\"content\":\"ls\"},\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}]\n"
		r := runFiles(t, strings.NewReader(doc), files.Options{Fix: true})
		require.Zero(t, r.res.Failed)
		require.True(t, strings.HasPrefix(r.out, "\ufeff[{"), r.out)
		require.Contains(t, r.out, repair.SyntheticResultText)
	})
	t.Run("PrettyDocumentsStayDocuments", func(t *testing.T) {
		t.Parallel()
		// One message per line, the last of them a whole object: still one document.
		doc := "[\n{\"role\":\"user\",\"content\":\"ls\"},\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}\n]\n"
		r := runFiles(t, strings.NewReader(doc), files.Options{})
		require.Equal(t, 1, r.res.Broken)
		require.Len(t, r.report, 2)
		// A document larger than the read buffer, one message per line.
		var big strings.Builder
		big.WriteString("{\"messages\": [\n")
		for range 20000 {
			big.WriteString("  {\"role\":\"user\",\"content\":\"hello there\"},\n")
		}
		big.WriteString("  {\"role\":\"user\",\"content\":\"bye\"}\n]}\n")
		r = runFiles(t, strings.NewReader(big.String()), files.Options{})
		require.Zero(t, r.res.Broken+r.res.Failed)
		require.Len(t, r.report, 2)
	})
}

// Input chunks are reused once the records in them are written; over many chunks, every
// clean record must still come out exactly as it went in.
func TestFixOverManyChunks(t *testing.T) {
	t.Parallel()
	in := genJSONL(t, gen.Config{Sessions: 600, Dialect: repair.OpenClaw, Messages: 45, FaultRate: 0.1, Seed: 5})
	require.Greater(t, len(in), 6<<20, "more than six of the pipeline's 1 MiB chunks")
	r := runFiles(t, strings.NewReader(in), files.Options{Fix: true, Workers: 3})
	require.Zero(t, r.res.Failed)
	inLines, outLines := strings.Split(in, "\n"), strings.Split(r.out, "\n")
	require.Equal(t, len(inLines), len(outLines))
	repaired := 0
	for i, l := range r.report[:600] {
		if l["status"] == "clean" {
			require.Equal(t, inLines[i], outLines[i], "line %d", i+1)
		} else {
			repaired++
			require.EqualValues(t, len(outLines[i]), l["after_bytes"], "line %d", i+1)
		}
	}
	require.Positive(t, repaired)
	again := runFiles(t, strings.NewReader(r.out), files.Options{})
	require.Zero(t, again.res.Broken+again.res.Failed)
}

// A report that cannot be written ends the run with the write error.
func TestFilesReturnReportWriteErrors(t *testing.T) {
	t.Parallel()
	in := genJSONL(t, gen.Config{Sessions: 300, Dialect: repair.Anthropic, Messages: 20, FaultRate: 1, Seed: 2})
	full := writerFunc(func([]byte) (int, error) { return 0, io.ErrShortWrite })
	_, err := files.Run(t.Context(), strings.NewReader(in), io.Discard, files.Options{}, report.NewJSON(full))
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.ErrorContains(t, err, "write report")
	_, err = files.Run(context.Background(), strings.NewReader(in), full, files.Options{Fix: true})
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.ErrorContains(t, err, "write output")
}

// A session within --max-bytes whose repair would take more than the default memory
// bound, 16 MiB + 8 times --max-bytes (tiny blocks: 3 bytes of input, about 150 of
// working set each, so 200,000 of them need more than 16 MiB + 24 bytes a block), is
// refused as too_large and passed through unchanged, while the sessions around it are
// repaired.
func TestDenseSessionOverTheMemoryBudgetIsRefused(t *testing.T) {
	t.Parallel()
	dense := `{"id":"dense","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}` +
		strings.Repeat(`,{}`, 200_000) + `]}]}` + "\n"
	small := `{"id":"small","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}` + "\n"
	r := runFiles(t, strings.NewReader(small+dense+small), files.Options{Fix: true, MaxBytes: int64(len(dense))})

	require.Equal(t, 1, r.res.Failed)
	lines := strings.SplitAfter(r.out, "\n")
	require.Equal(t, dense, lines[1], "the refused session comes out unchanged")
	require.Contains(t, lines[0], repair.SyntheticResultText)
	require.Contains(t, lines[2], repair.SyntheticResultText)
	require.Equal(t, "too_large", r.report[1]["status"])
	require.Contains(t, r.report[1]["reason"], "MiB limit; left unchanged")
}
