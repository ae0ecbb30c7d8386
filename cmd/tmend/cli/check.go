package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/files"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
)

// fileOptions are the options of check and fix.
type fileOptions struct {
	engine  engineOptions
	json    bool
	verbose bool
	report  string
	output  string
	inPlace bool
	inputs  []string
	input   string // a FILE; stdin when empty or -
	files   files.Options
}

func (o *fileOptions) register(cmd *cobra.Command, fix bool) {
	fs := cmd.Flags()
	o.engine.register(fs)
	o.engine.registerForce(fs)
	o.engine.registerNow(fs)
	fs.BoolVar(&o.json, "json", false, "write the report as JSON Lines (one object per session, then a summary)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "list every session that is not clean, with every action, in the text report")
	fs.StringVar(&o.report, "report", "", "also write the JSON Lines report to this file")
	fs.Int64Var(&o.files.MaxBytes, "max-bytes", 64<<20, fmt.Sprintf("largest session to process (at most %d, the engine's limit); larger ones, and those whose repair would take over 16 MiB + 8 x this in memory, are reported and passed through unchanged", repair.MaxSize))
	fs.IntVar(&o.files.Workers, "workers", runtime.GOMAXPROCS(0), "sessions repaired in parallel")
	if fix {
		fs.StringVarP(&o.output, "output", "o", "", "write the repaired transcripts to this file instead of stdout (a regular file is replaced atomically, through a symlink; a device or FIFO is written to)")
		fs.BoolVar(&o.inPlace, "in-place", false, "repair FILE, or every *.jsonl file under a directory, in place: a changed file is replaced atomically and the prior one kept beside it as NAME.tmend-<UTC time>.bak")
	}
	o.files.Fix = fix
}

// load takes each option from its flag, else TMEND_<OPTION>, as every command does
// (check and fix read no config file).
func (o *fileOptions) load(s *settings, args []string) error {
	o.inputs = args
	if len(args) == 1 {
		o.input = args[0]
	}
	if err := o.engine.loadSettings(s); err != nil {
		return err
	}
	maxBytes, err := s.int("max-bytes")
	if err != nil {
		return err
	}
	o.files.MaxBytes = int64(maxBytes)
	if o.files.Workers, err = s.int("workers"); err != nil {
		return err
	}
	if err := o.engine.load(); err != nil {
		return err
	}
	o.files.Repair = o.engine.repair
	return nil
}

func (o *fileOptions) Validate() error {
	if len(o.inputs) > 1 {
		return fmt.Errorf("give at most one input FILE (or - for stdin), got %d", len(o.inputs))
	}
	if o.files.MaxBytes < 1 || o.files.MaxBytes > repair.MaxSize {
		return fmt.Errorf("--max-bytes must be between 1 and %d (the engine's limit)", repair.MaxSize)
	}
	if o.files.Workers < 1 {
		return errors.New("--workers must be at least 1")
	}
	if o.inPlace && (o.input == "" || o.input == "-") {
		return errors.New("--in-place needs a FILE or a directory, not stdin")
	}
	if o.inPlace && o.output != "" {
		return errors.New("--in-place writes each file where it is; leave out -o")
	}
	if o.output != "" && o.report != "" && sameOutput(o.output, o.report) {
		return fmt.Errorf("-o %s and --report %s are the same file; give each its own", o.output, o.report)
	}
	if namesInput(o.input, o.report) {
		return fmt.Errorf("--report %s is an input file, which the report would replace; give the report a file of its own", o.report)
	}
	if namesInput(o.input, o.output) {
		return fmt.Errorf("-o %s is the input file, which would be replaced with no copy kept; use --in-place, which keeps the prior file beside it", o.output)
	}
	return nil
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

const inputHelp = `Input (a FILE, or stdin when FILE is - or missing) is one of:
  - a pi or OpenClaw session file (a {"type":"session",...} header line, then one entry
    a line): the messages on the leaf's parentId path are the transcript (openclaw
    dialect); the tree is written back with unchanged lines byte for byte, inserted
    results as new entries on the path, and branches off the path left alone;
  - a JSON array of messages;
  - an object holding it under "messages" ("input" for OpenAI Responses, "contents" for
    Gemini; two of them: unparseable), other members kept as they are;
  - JSON Lines, one session per line: {"id": ..., "messages"|"input"|"contents": [...]},
    streamed, never loaded whole. One bad line (the first one included) does not stop
    the rest; blank lines are kept as they are.
A UTF-8 byte order mark is skipped (fix keeps it). An "updated_at" member (RFC 3339)
starts the session's quiet period.

A DIR (check, fix --in-place) is walked for *.jsonl files, --workers at a time; symlinks
are skipped, and a DIR with files but none named *.jsonl is a usage error (exit 2). fix --in-place FILE|DIR replaces each file that changed (temp file, fsync,
rename) and keeps the prior one beside it as NAME.tmend-<UTC time>.bak.

Output (-o, --report): a regular file is replaced atomically (through a symlink, its
target); a device, FIFO or terminal is written to as it is, and so is a descriptor named
as a path (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), pipe or not. -o and
--report must name different files, and neither the input (fix --in-place replaces it,
keeping a backup). A failed write to a file, stdout or stderr exits 1,
and so does a result bound for a standard output that was closed (>&-).

Options also come from the environment as TMEND_<OPTION> (TMEND_MAX_BYTES, TMEND_DIALECT,
TMEND_QUIET_PERIOD, ...); a flag beats it.`

func newCheckCmd(e *Env) *cobra.Command {
	o := &fileOptions{}
	cmd := &cobra.Command{
		Use:   "check [FILE|DIR|-]",
		Short: "Validate transcripts without changing them (exit 3 when problems are found)",
		Long: "Report every structural fault of tool calls and results, with stable issue codes.\n\n" +
			inputHelp + "\n\nExit codes: 0 no problems, 1 some input could not be read or parsed, or the report\n" +
			"could not be written, 2 usage, 3 problems found. An empty input (or only white space) is\n" +
			"zero sessions: exit 0.\n\n" +
			"Issue codes:\n" + issueCodeHelp() + "\nStages of fix, in order:\n" + stageHelp(),
		Example: `  tmend check session.json
  tmend check ~/.pi/agent/sessions
  tmend check --json sessions.jsonl | jq 'select(.status == "broken")'
  psql "$DATABASE_URL" -AtXc "SELECT jsonb_build_object('id', id, 'updated_at', updated_at, 'messages', messages) FROM sessions" | tmend check -`,
		RunE: runE(e, o, runFiles),
	}
	o.register(cmd, false)
	return cmd
}

func newFixCmd(e *Env) *cobra.Command {
	o := &fileOptions{}
	cmd := &cobra.Command{
		Use:   "fix [FILE|-] | fix --in-place FILE|DIR",
		Short: "Repair transcripts in a file or pipe",
		Long: "Repair transcripts and write them to stdout (or -o FILE) in the same shape they came in,\n" +
			"byte for byte where nothing changed. The report goes to stderr: a short summary, or JSON\n" +
			"Lines with --json; --report FILE writes the JSON report to a file as well.\n\n" +
			inputHelp + "\n\nExit codes: 0 ok, 1 some input could not be read or parsed (it is passed through unchanged)\n" +
			"or the output or report could not be written, 2 usage. An empty input (or only white space)\n" +
			"is zero sessions, written through as it is: exit 0.",
		Example: `  tmend fix broken.json > fixed.json
  tmend fix -o fixed.jsonl --report report.jsonl sessions.jsonl
  cat session.json | tmend fix --target anthropic --force - | jq .
  tmend fix --in-place ~/.pi/agent/sessions
  tmend fix --in-place --force ~/.pi/agent/sessions/--home-dev-proj--/2026-01-10T09-00-00-000Z_0199a1b2.jsonl`,
		RunE: runE(e, o, runFiles),
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

func stageHelp() string {
	var b bytes.Buffer
	for _, st := range repair.Stages() {
		fmt.Fprintf(&b, "  %-29s %s\n", st, st.Meaning())
	}
	return b.String()
}

// runFiles is check and fix.
func runFiles(ctx context.Context, e *Env, o *fileOptions) (err error) {
	fix := o.files.Fix
	if o.inPlace || isDir(o.input) {
		if fix && !o.inPlace {
			return &exitError{code: ExitUsage, err: fmt.Errorf("%s is a directory: fix repairs a directory only with --in-place", o.input)}
		}
		return runTree(ctx, e, o)
	}
	// The pipeline's live heap is small (records are read in place, and only what repairs
	// make is held), so at the default 2× it collects every few megabytes; at 5× it saves
	// about 5% of the CPU (BENCHMARKS.md) for a few tens of megabytes.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	in, closeIn, err := openInput(e, o.input)
	if err != nil {
		return err
	}
	defer closeIn()

	// check's report and fix's transcripts (without -o) are the command's result.
	if !fix || o.output == "" {
		if err := e.checkStdout(); err != nil {
			return err
		}
	}
	out := e.Stdout
	var outFile *outputFile
	if fix && o.output != "" {
		if outFile, err = createOutput(o.output); err != nil {
			return err
		}
		defer outFile.abort()
		out = outFile.f
	}

	// Reports: text or JSON to stdout (check) or stderr (fix), plus an optional file.
	reportTo := e.Stdout
	if fix {
		reportTo = e.Stderr
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

	res, err := files.Run(ctx, in, out, o.files, handlers...)
	if err != nil {
		return err
	}
	if err := commitOutputs(outFile, reportFile, reportBuf); err != nil {
		return err
	}
	switch {
	case res.Failed > 0:
		return fmt.Errorf("%d of %d sessions could not be processed (see the report)", res.Failed, res.Summary.Sessions)
	case res.Broken > 0:
		return errProblems
	}
	return nil
}
