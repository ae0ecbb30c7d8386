package repair_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

var update = flag.Bool("update", false, "rewrite the expected side of the golden files in testdata/golden (and the generated inputs)")

const updateHint = "if the new behaviour is right: go test ./repair -run TestGolden -update, then review git diff testdata/golden"

// The golden files, in testdata/golden (see its README.md):
//   - <dialect>.jsonl: generated cases, one JSON object a line. Their inputs come from gen;
//     only -update regenerates them.
//   - rules/<name>.json: hand-written cases, one a file. -update keeps their input (and
//     note and options) byte for byte and rewrites only output and report.
//
// Without -update the test repairs each stored input and compares with the stored output
// and report; it never calls gen.
var (
	goldenDir = filepath.Join("testdata", "golden")
	rulesDir  = filepath.Join(goldenDir, "rules")
)

// goldenCase is one stored input with its expected output and report.
type goldenCase struct {
	// Name names a generated case; a hand-written one is named by its file.
	Name string `json:"name,omitempty"`
	// Note says, for the reviewer, what the case is about and what must happen.
	Note string `json:"note,omitempty"`
	// Options is a goldenOptions object; absent means repair.Options{}.
	Options json.RawMessage `json:"options,omitempty"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output,omitempty"`
	Report  json.RawMessage `json:"report,omitempty"`
}

// goldenOptions are the repair options a case can set.
type goldenOptions struct {
	Dialect     string `json:"dialect,omitempty"`
	Target      string `json:"target,omitempty"`
	FailedTurns string `json:"failed_turns,omitempty"`
	Force       bool   `json:"force,omitempty"`
	// Recent: the session changed just now, so the quiet period applies to its last turn.
	Recent bool `json:"recent,omitempty"`
}

// goldenNow is the fixed clock of cases with "recent": true.
var goldenNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func (c *goldenCase) options(t testing.TB) repair.Options {
	t.Helper()
	var o repair.Options
	if len(c.Options) == 0 {
		return o
	}
	var g goldenOptions
	dec := json.NewDecoder(bytes.NewReader(c.Options))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&g), "%s: options", c.Name)
	var err error
	if g.Dialect != "" {
		o.Dialect, err = repair.ParseDialect(g.Dialect)
		require.NoError(t, err, "%s: options", c.Name)
	}
	if g.Target != "" {
		o.Target, err = repair.ParseTarget(g.Target)
		require.NoError(t, err, "%s: options", c.Name)
	}
	switch p := repair.FailedTurnPolicy(g.FailedTurns); p {
	case "", repair.FailedTurnsKeep, repair.FailedTurnsStrip:
		o.FailedTurns = p
	default:
		t.Fatalf("%s: options: unknown failed_turns %q", c.Name, g.FailedTurns)
	}
	o.Force = g.Force
	if g.Recent {
		o.Now, o.UpdatedAt = goldenNow, goldenNow
	}
	return o
}

// input is the case's input as the engine gets it: compact JSON (escapes and number
// text as stored).
func (c *goldenCase) input(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, c.Input), "%s: input", c.Name)
	return b.Bytes()
}

// run repairs the case's input and returns the output and report as they are stored.
func (c *goldenCase) run(t testing.TB) (output, report []byte) {
	t.Helper()
	res, err := repair.Repair(c.input(t), c.options(t))
	var ue *repair.UnrepairableError
	if err != nil && !errors.As(err, &ue) {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return res.Messages, marshal(t, res.Report)
}

// marshal is json.Marshal without HTML escaping, so reports read as they are.
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func compact(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// lines writes a JSON array one compact element a line, at indent; anything else compact.
func lines(b []byte, indent string) string {
	var elems []json.RawMessage
	if json.Unmarshal(b, &elems) != nil {
		return compact(b)
	}
	if len(elems) == 0 {
		return "[]"
	}
	var s strings.Builder
	s.WriteString("[\n")
	for i, e := range elems {
		s.WriteString(indent + "  " + compact(e))
		if i < len(elems)-1 {
			s.WriteByte(',')
		}
		s.WriteByte('\n')
	}
	s.WriteString(indent + "]")
	return s.String()
}

func indented(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

func missing(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }

// check compares the repair of c with its stored expectations.
func (c *goldenCase) check(t *testing.T, file string) {
	t.Helper()
	if missing(c.Output) || missing(c.Report) {
		t.Fatalf("%s (%s): no expected output or report stored; run go test ./repair -run TestGolden -update and review the result", c.Name, file)
	}
	out, rep := c.run(t)
	if compact(c.Output) != compact(out) {
		t.Errorf("%s (%s): output differs (-want +got), one message a line:\n%s\n%s", c.Name, file,
			cmp.Diff(lines(c.Output, ""), lines(out, "")), updateHint)
	}
	if compact(c.Report) != compact(rep) {
		t.Errorf("%s (%s): report differs (-want +got):\n%s\n%s", c.Name, file,
			cmp.Diff(indented(c.Report), indented(rep)), updateHint)
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	t.Run("Generated", func(t *testing.T) {
		t.Parallel()
		for _, d := range repair.Dialects() {
			t.Run(string(d), func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(goldenDir, string(d)+".jsonl")
				if *update {
					writeGenerated(t, path, generatedCases(t, d))
					return
				}
				cases := readJSONL(t, path)
				require.NotEmpty(t, cases, "%s has no cases; run go test ./repair -run TestGolden -update", path)
				for _, c := range cases {
					t.Run(c.Name, func(t *testing.T) {
						t.Parallel()
						c.check(t, path)
					})
				}
			})
		}
	})
	t.Run("Rules", func(t *testing.T) {
		t.Parallel()
		files := ruleFiles(t)
		require.NotEmpty(t, files)
		for _, path := range files {
			c := readRule(t, path)
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				if *update {
					writeRule(t, path, c)
					return
				}
				c.check(t, path)
			})
		}
	})
}

// generatedCases is one small session per fault kind that applies to d, one clean one, and
// one with several faults. gen is deterministic, so the inputs are stable as long as gen
// is; they change only under -update.
func generatedCases(t *testing.T, d repair.Dialect) []goldenCase {
	var cases []goldenCase
	add := func(name string, cfg gen.Config) {
		require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
			in, err := json.Marshal(s.Messages)
			cases = append(cases, goldenCase{Name: name, Input: in})
			return err
		}))
	}
	add("clean", gen.Config{Seed: 1, Dialect: d, Sessions: 1, Messages: 8})
	for _, f := range gen.Faults() {
		if gen.Applies(f, d) {
			add(string(f), gen.Config{Seed: 2, Dialect: d, Sessions: 1, Messages: 8, FaultRate: 1, MaxFaults: 1, Faults: []gen.Fault{f}})
		}
	}
	add("combined", gen.Config{Seed: 3, Dialect: d, Sessions: 1, Messages: 14, FaultRate: 1, MaxFaults: 4})
	// A dialect stored in several shapes: the same broken session in each of them.
	for _, v := range gen.Variants(d) {
		add("combined-"+v, gen.Config{Seed: 68, Dialect: d, Variant: v, Sessions: 1, Messages: 14, FaultRate: 1, MaxFaults: 4})
	}
	return cases
}

func writeGenerated(t *testing.T, path string, cases []goldenCase) {
	var b bytes.Buffer
	for _, c := range cases {
		c.Output, c.Report = c.run(t)
		b.Write(marshal(t, c))
		b.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

func readJSONL(t testing.TB, path string) []goldenCase {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err, "run go test ./repair -run TestGolden -update to create the golden files")
	defer func() { _ = fh.Close() }() // read only
	var cases []goldenCase
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var c goldenCase
		require.NoError(t, strictUnmarshal(sc.Bytes(), &c), "%s:%d", path, n)
		require.NotEmpty(t, c.Name, "%s:%d: a generated case needs a name", path, n)
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err(), path)
	return cases
}

func ruleFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(rulesDir, "*.json"))
	require.NoError(t, err)
	return files
}

func readRule(t testing.TB, path string) goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var c goldenCase
	require.NoError(t, strictUnmarshal(b, &c), path)
	require.Empty(t, c.Name, "%s: a hand-written case is named by its file, not by a name member", path)
	require.False(t, missing(c.Input), "%s: no input", path)
	c.Name = strings.TrimSuffix(filepath.Base(path), ".json")
	return c
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the case")
	}
	return nil
}

// writeRule rewrites a hand-written case's output and report; its note, options and input
// stay byte for byte as they were written.
func writeRule(t *testing.T, path string, c goldenCase) {
	out, rep := c.run(t)
	var b strings.Builder
	b.WriteString("{\n")
	if c.Note != "" {
		fmt.Fprintf(&b, "  \"note\": %s,\n", marshal(t, c.Note))
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "  \"options\": %s,\n", c.Options)
	}
	fmt.Fprintf(&b, "  \"input\": %s,\n", c.Input)
	fmt.Fprintf(&b, "  \"output\": %s,\n", lines(out, "  "))
	var r bytes.Buffer
	require.NoError(t, json.Indent(&r, rep, "  ", "  "))
	fmt.Fprintf(&b, "  \"report\": %s\n}\n", r.String())
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
}

// goldenInputs returns every stored golden input, generated and hand-written, as the
// engine gets it (FuzzRepair's seed corpus).
func goldenInputs(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.jsonl"))
	require.NoError(t, err)
	for _, path := range files {
		for _, c := range readJSONL(t, path) {
			out = append(out, c.input(t))
		}
	}
	for _, path := range ruleFiles(t) {
		c := readRule(t, path)
		out = append(out, c.input(t))
	}
	return out
}
