package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// repairFlags are the engine options shared by check, fix, repair and scan.
type repairFlags struct {
	dialect     string
	target      string
	failedTurns string
	now         string
	quietPeriod time.Duration
	force       bool
}

func (f *repairFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.dialect, "dialect", "", "force a dialect instead of detecting it: "+dialectNames())
	fs.StringVar(&f.target, "target", "", "rewrite call ids the provider rejects: anthropic, openai, openai-responses, gemini, bedrock, mistral")
	fs.StringVar(&f.failedTurns, "failed-turns", "keep", "calls of failed or aborted turns that have results: keep, or strip them too")
	fs.DurationVar(&f.quietPeriod, "quiet-period", repair.DefaultQuietPeriod, "calls of a session's last turn changed this recently may still be running and are left alone")
	fs.BoolVar(&f.force, "force", false, "repair pending calls within the quiet period too")
}

func (f *repairFlags) registerNow(fs *pflag.FlagSet) {
	fs.StringVar(&f.now, "now", "", "the time the quiet period is measured to (RFC 3339; default: the current time)")
}

func dialectNames() string {
	var b bytes.Buffer
	for i, d := range repair.Dialects() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(d))
	}
	return b.String()
}

// options validates the flags into engine options (exit 2 on a bad value).
func (f *repairFlags) options() (repair.Options, error) {
	var o repair.Options
	var err error
	if f.dialect != "" {
		if o.Dialect, err = repair.ParseDialect(f.dialect); err != nil {
			return o, usageErrorf("--dialect: %v", err)
		}
	}
	if f.target != "" {
		if o.Target, err = repair.ParseTarget(f.target); err != nil {
			return o, usageErrorf("--target: %v", err)
		}
	}
	switch repair.FailedTurnPolicy(f.failedTurns) {
	case repair.FailedTurnsKeep, repair.FailedTurnsStrip:
		o.FailedTurns = repair.FailedTurnPolicy(f.failedTurns)
	default:
		return o, usageErrorf("--failed-turns must be keep or strip, got %q", f.failedTurns)
	}
	o.Now = time.Now()
	if f.now != "" {
		if o.Now, err = time.Parse(time.RFC3339Nano, f.now); err != nil {
			return o, usageErrorf("--now must be an RFC 3339 time like 2026-11-21T03:00:00Z, got %q", f.now)
		}
	}
	o.QuietPeriod = f.quietPeriod
	if f.quietPeriod == 0 {
		o.QuietPeriod = -1 // zero on the command line means none
	}
	o.Force = f.force
	return o, nil
}

// fileOpts are the flags of check and fix.
type fileOpts struct {
	repairFlags
	json     bool
	verbose  bool
	report   string
	output   string
	maxBytes int64
	workers  int
}

func (o *fileOpts) register(cmd *cobra.Command, fix bool) {
	fs := cmd.Flags()
	o.repairFlags.register(fs)
	o.registerNow(fs)
	fs.BoolVar(&o.json, "json", false, "write the report as JSON Lines (one object per session, then a summary)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "list every session that is not clean, with every action, in the text report")
	fs.StringVar(&o.report, "report", "", "also write the JSON Lines report to this file")
	fs.Int64Var(&o.maxBytes, "max-bytes", 64<<20, "largest session to process; larger ones are reported and passed through unchanged")
	fs.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "sessions repaired in parallel")
	if fix {
		fs.StringVarP(&o.output, "output", "o", "", "write the repaired transcripts to this file instead of stdout (a regular file is replaced atomically, through a symlink; a device or FIFO is written to)")
	}
}

func (o *fileOpts) Validate(args []string) error {
	if len(args) > 1 {
		return usageErrorf("give at most one input FILE (or - for stdin), got %d", len(args))
	}
	if o.maxBytes < 1 {
		return usageErrorf("--max-bytes must be positive")
	}
	if o.workers < 1 {
		return usageErrorf("--workers must be at least 1")
	}
	if o.output != "" && o.report != "" && sameOutput(o.output, o.report) {
		return usageErrorf("-o %s and --report %s are the same file; give each its own", o.output, o.report)
	}
	return nil
}

const inputHelp = `Input (a FILE, or stdin when FILE is - or missing) is one of:
  - a JSON array of messages;
  - an object holding it under "messages" ("input" for OpenAI Responses, "contents" for
    Gemini), other members kept as they are;
  - JSON Lines, one session per line: {"id": ..., "messages"|"input"|"contents": [...]},
    streamed, never loaded whole. One bad line (the first one included) does not stop
    the rest; blank lines are kept as they are.
A UTF-8 byte order mark is skipped (fix keeps it). An "updated_at" member (RFC 3339)
starts the session's quiet period.

Output (-o, --report): a regular file is replaced atomically (through a symlink, its
target); a device, FIFO or terminal is written to as it is. -o and --report must name
different files. A failed write to a file, stdout or stderr exits 1.`

func newCheckCmd(e *env) *cobra.Command {
	var o fileOpts
	cmd := &cobra.Command{
		Use:   "check [FILE|-]",
		Short: "Validate transcripts without changing them (exit 3 when problems are found)",
		Long: "Report every structural fault of tool calls and results, with stable issue codes.\n\n" +
			inputHelp + "\n\nExit codes: 0 no problems, 1 some input could not be read or parsed, or the report\n" +
			"could not be written, 2 usage, 3 problems found.\n\n" +
			"Issue codes:\n" + issueCodeHelp(),
		Example: `  tmend check session.json
  tmend check --json sessions.jsonl | jq 'select(.status == "broken")'
  pg_dump ... | tmend check --dialect anthropic -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(args); err != nil {
				return err
			}
			return runFiles(cmd.Context(), e, &o, args, false)
		},
	}
	o.register(cmd, false)
	return cmd
}

func newFixCmd(e *env) *cobra.Command {
	var o fileOpts
	cmd := &cobra.Command{
		Use:   "fix [FILE|-]",
		Short: "Repair transcripts in a file or pipe",
		Long: "Repair transcripts and write them to stdout (or -o FILE) in the same shape they came in,\n" +
			"byte for byte where nothing changed. The report goes to stderr: a short summary, or JSON\n" +
			"Lines with --json; --report FILE writes the JSON report to a file as well.\n\n" +
			inputHelp + "\n\nExit codes: 0 ok, 1 some input could not be read or parsed (it is passed through unchanged)\n" +
			"or the output or report could not be written, 2 usage.",
		Example: `  tmend fix broken.json > fixed.json
  tmend fix -o fixed.jsonl --report report.jsonl sessions.jsonl
  cat session.json | tmend fix --target anthropic --force - | jq .`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(args); err != nil {
				return err
			}
			return runFiles(cmd.Context(), e, &o, args, true)
		},
	}
	o.register(cmd, true)
	return cmd
}

func issueCodeHelp() string {
	var b bytes.Buffer
	for _, c := range repair.IssueCodes() {
		fmt.Fprintf(&b, "  %-26s %s\n", c.Code, c.Meaning)
	}
	return b.String()
}

// runFiles is check (fix=false) and fix (fix=true).
func runFiles(ctx context.Context, e *env, o *fileOpts, args []string, fix bool) (err error) {
	ropts, err := o.options()
	if err != nil {
		return err
	}
	// The pipeline's live heap is a few batches; collecting at 3× it instead of 2× saves
	// about 5% of the CPU (BENCHMARKS.md) for a few tens of megabytes.
	defer debug.SetGCPercent(debug.SetGCPercent(200))
	in, closeIn, err := openInput(e, args)
	if err != nil {
		return err
	}
	defer closeIn()

	var out io.Writer
	var commit func() error
	if fix {
		bw := bufio.NewWriterSize(e.stdout, 1<<20)
		out = bw
		commit = bw.Flush
		if o.output != "" {
			af, err := createOutput(o.output)
			if err != nil {
				return err
			}
			defer af.abort()
			bw.Reset(af.f)
			commit = func() error {
				if err := bw.Flush(); err != nil {
					return err
				}
				return af.commit()
			}
		}
	}

	// Reports: text or JSON to stdout (check) or stderr (fix), plus an optional file.
	reportTo := e.stdout
	if fix {
		reportTo = e.stderr
	}
	rbuf := bufio.NewWriter(reportTo)
	defer func() {
		if ferr := rbuf.Flush(); ferr != nil && (err == nil || err == errProblems) {
			err = fmt.Errorf("write report: %w", ferr)
		}
	}()
	var handlers []report.Handler
	if o.json {
		handlers = append(handlers, report.NewJSON(rbuf))
	} else {
		// check lists each problem; fix, whose output is the transcripts, sums up unless -v.
		detail := report.ProblemLines
		switch {
		case o.verbose:
			detail = report.EveryAction
		case fix:
			detail = report.SummaryOnly
		}
		handlers = append(handlers, report.NewText(rbuf, detail))
	}
	var reportFile *outputFile
	var reportBuf *bufio.Writer
	if o.report != "" {
		if reportFile, err = createOutput(o.report); err != nil {
			return err
		}
		defer reportFile.abort()
		reportBuf = bufio.NewWriter(reportFile.f)
		handlers = append(handlers, report.NewJSON(reportBuf))
	}

	var sum report.Summary
	failed, problems := 0, 0
	emit := func(it *item) error {
		if it.line < 0 {
			return nil
		}
		s, _ := it.outcome.(*report.Session)
		if it.tooLarge {
			s = &report.Session{Line: it.line, Status: model.StatusTooLarge, BytesIn: int(it.size), BytesOut: int(it.size),
				Reason: fmt.Sprintf("session is %d bytes, over --max-bytes %d; passed through unchanged", it.size, o.maxBytes)}
		}
		switch s.Status {
		case model.StatusClean, model.StatusRepaired, model.StatusPending:
		case model.StatusBroken:
			problems++
		default:
			failed++
		}
		sum.Add(s)
		for _, h := range handlers {
			if err := h.Session(s); err != nil {
				return fmt.Errorf("write report: %w", err)
			}
		}
		return nil
	}
	process := func(it *item, out []byte) []byte {
		out, it.outcome = processRecord(out, it.data, it.line, ropts, fix)
		return out
	}

	br := bufio.NewReaderSize(in, 256<<10)
	if err := dispatch(ctx, br, out, o, process, emit); err != nil {
		return err
	}
	for _, h := range handlers {
		if err := h.Summary(&sum); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if commit != nil {
		if err := commit(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if reportFile != nil {
		if err := reportBuf.Flush(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		if err := reportFile.commit(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("%d of %d sessions could not be processed (see the report)", failed, sum.Sessions)
	case problems > 0:
		return errProblems
	}
	return nil
}

// utf8BOM is the byte order mark some Windows tools put before UTF-8 text.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// dispatch sends a single document (an array, or a multi-line object) through process
// directly, and JSON Lines through the parallel stream. A byte order mark is skipped,
// and kept in the output.
func dispatch(ctx context.Context, br *bufio.Reader, out io.Writer, o *fileOpts, process func(*item, []byte) []byte, emit func(*item) error) error {
	if b, _ := br.Peek(len(utf8BOM)); bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM))
		if out != nil {
			if _, err := out.Write(utf8BOM); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
	_, err := peekNonSpace(br)
	if err == io.EOF {
		return usageErrorf("input is empty")
	}
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	if looksLikeJSONLines(br) {
		return runStream(ctx, streamConfig{in: br, out: out, maxBytes: o.maxBytes, workers: o.workers, process: process, emit: emit})
	}
	data, err := io.ReadAll(io.LimitReader(br, o.maxBytes+1))
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	it := &item{data: data}
	if int64(len(data)) > o.maxBytes {
		it.tooLarge, it.size = true, int64(len(data))
		if out != nil {
			if _, err := out.Write(data); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if _, err := io.Copy(out, br); err != nil {
				return fmt.Errorf("copy input: %w", err)
			}
		}
		return emit(it)
	}
	res := process(it, nil)
	if out != nil {
		if _, err := out.Write(res); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return emit(it)
}

// looksLikeJSONLines decides from the start of the input, peeking as far as it needs (at
// most the read buffer), whether it is JSON Lines or one document.
func looksLikeJSONLines(br *bufio.Reader) bool {
	for n := max(br.Buffered(), 4096); ; n = min(n*2, br.Size()) {
		b, err := br.Peek(n)
		eof, full := err != nil, n == br.Size()
		if jsonLines, decided := sniffJSONLines(b, eof, full); decided || eof || full {
			return jsonLines
		}
	}
}

// sniffJSONLines looks at the start of the input (all of it when eof; as much as fits in
// the read buffer when full):
//   - its first JSON value parses and ends on the line it started on: JSON Lines (a single
//     line holding an array is a document, unless more follows);
//   - the first value spans lines: a pretty-printed document;
//   - the first value is broken (a truncated or malformed first line), and some later
//     line is a whole JSON object: JSON Lines whose first record is bad, which the stream
//     reports on its own while it goes on with the rest;
//   - a first line longer than the read buffer: JSON Lines too, the stream handles long
//     lines and a pretty-printed document never starts with one.
//
// decided is false while more input could change the answer.
func sniffJSONLines(b []byte, eof, full bool) (jsonLines, decided bool) {
	start := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
	b = b[start:]
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	err := dec.Decode(&v)
	switch {
	case err == nil:
		if bytes.IndexByte(v, '\n') >= 0 {
			return false, true
		}
		more := len(bytes.TrimSpace(b[dec.InputOffset():])) > 0
		if v[0] == '{' || more {
			return true, true
		}
		return false, eof
	case errors.Is(err, io.ErrUnexpectedEOF) && !eof:
		// A valid start of a value that goes on beyond what is buffered.
		if full {
			return bytes.IndexByte(b, '\n') < 0, true
		}
		return false, false
	}
	// The first value is broken: JSON Lines if a later line is a record.
	lines := bytes.Split(b, []byte("\n"))
	if !eof {
		lines = lines[:len(lines)-1] // the last one may be incomplete
	}
	for _, l := range lines[min(1, len(lines)):] {
		if l = bytes.TrimSpace(l); len(l) > 0 && l[0] == '{' && json.Valid(l) {
			return true, true
		}
	}
	if len(lines) <= 1 && full {
		return true, true // a long first line
	}
	return false, eof || full
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return 0, err
		}
		if c := b[n-1]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
		if n >= br.Size() {
			return 0, errors.New("input starts with a buffer full of whitespace")
		}
	}
}

// processRecord checks or repairs one document and reports on it. fix appends the output
// to out: the input itself unless a repair changed it.
func processRecord(out, data []byte, line int, opts repair.Options, fix bool) ([]byte, *report.Session) {
	s := &report.Session{Line: line, BytesIn: len(data), BytesOut: len(data)}
	var doc repair.Document
	var rep repair.Report
	if fix {
		var res repair.DocumentResult
		out, res, _ = repair.AppendDocument(out, data, opts)
		doc, rep, s.BytesOut = res.Document, res.Report, len(res.Output)
	} else {
		doc, rep, _ = repair.ValidateDocument(data, opts)
	}
	s.Session = doc.ID
	s.Status, s.Reason, s.Dialect = model.EngineStatus(rep.Status), rep.Reason, rep.Dialect
	s.MessagesIn, s.MessagesOut, s.PendingCalls = rep.MessagesIn, rep.MessagesOut, rep.PendingCalls
	s.StageCounts, s.Issues, s.Actions = rep.StageCounts, rep.Issues, rep.Actions
	return out, s
}

// openInput opens the FILE argument, or stdin for none or "-".
func openInput(e *env, args []string) (io.Reader, func(), error) {
	if len(args) == 0 || args[0] == "-" {
		return e.stdin, func() {}, nil
	}
	f, err := os.Open(args[0])
	if err != nil {
		return nil, nil, fmt.Errorf("open input: %w", err)
	}
	return f, func() { _ = f.Close() }, nil // read only: closing loses nothing
}

// outputFile is where -o and --report write. A regular file (or a new one) is written
// beside itself and renamed over it on commit, so readers never see half of it. A
// symlink is followed: its target is replaced and the link kept. Anything else (a
// device such as /dev/null, a FIFO, a terminal) is written to directly, never replaced.
type outputFile struct {
	f    *os.File
	dest string // what commit renames the temp file over; empty when writing through
	done bool
}

func createOutput(path string) (*outputFile, error) {
	target, fi, err := resolveOutput(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	switch {
	case fi != nil && fi.IsDir():
		return nil, fmt.Errorf("create %s: is a directory", path)
	case fi != nil && !fi.Mode().IsRegular():
		f, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return &outputFile{f: f}, nil
	}
	perm := os.FileMode(0o644) // not CreateTemp's 0600, which is for secrets; a replaced file keeps its own
	if fi != nil {
		perm = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close() // best effort: the Chmod error is the one to report
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &outputFile{f: f, dest: target}, nil
}

// resolveOutput follows symlinks from path to where they end, which need not exist yet,
// and returns that path with its file info (nil when it does not exist).
func resolveOutput(path string) (string, os.FileInfo, error) {
	for range 40 {
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return path, nil, nil
		case err != nil:
			return "", nil, err
		case fi.Mode()&fs.ModeSymlink == 0:
			return path, fi, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(link) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", nil, err
			}
			link = filepath.Join(dir, link)
		}
		path = link
	}
	return "", nil, errors.New("too many levels of symbolic links")
}

// sameOutput reports whether two output paths end at the same file.
func sameOutput(a, b string) bool {
	ra, fa, errA := resolveOutput(a)
	rb, fb, errB := resolveOutput(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	if fa != nil && fb != nil {
		return os.SameFile(fa, fb)
	}
	ra, errA = filepath.Abs(ra)
	rb, errB = filepath.Abs(rb)
	return errA == nil && errB == nil && ra == rb
}

// commit makes the output visible: the temp file is synced and renamed over the
// destination (and removed if that fails); a file written through is closed.
func (o *outputFile) commit() error {
	o.done = true
	if o.dest == "" {
		return o.f.Close()
	}
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.dest)
	}
	if err != nil {
		_ = os.Remove(o.f.Name()) // best effort: err says what failed
	}
	return err
}

// abort drops the output of a failed run: the temp file is removed and the destination
// left as it was.
func (o *outputFile) abort() {
	if o.done {
		return
	}
	o.done = true
	// Best effort: the run has failed already, and its error is the one to report.
	_ = o.f.Close()
	if o.dest != "" {
		_ = os.Remove(o.f.Name())
	}
}
