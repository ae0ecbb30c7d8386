package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/files"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
)

// compactOptions are the options of compact: fix's, and the compaction's.
type compactOptions struct {
	engine     engineOptions
	json       bool
	verbose    bool
	dryRun     bool
	report     string
	output     string
	inputs     []string
	input      string
	maxBytes   int64
	profile    string
	categories []string
	protect    []string
	compact    compact.Options
}

func (o *compactOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.engine.register(fs)
	o.engine.registerForce(fs)
	o.engine.registerNow(fs)
	fs.BoolVar(&o.json, "json", false, "write the report as JSON Lines (one object per session, then a summary)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "list every session and every content replaced in the text report")
	fs.BoolVar(&o.dryRun, "dry-run", false, "write no transcripts, only report what would be saved (exit 3 when some session would be compacted)")
	fs.StringVar(&o.report, "report", "", "also write the JSON Lines report to this file")
	fs.StringVarP(&o.output, "output", "o", "", "write the compacted transcripts to this file instead of stdout (replaced atomically)")
	fs.Int64Var(&o.maxBytes, "max-bytes", 64<<20, "largest session to process; larger ones are reported and passed through unchanged")
	fs.StringVar(&o.profile, "profile", string(compact.Standard), "preset: conservative (dedupe and old reads/searches only, keep 20 tool uses), standard, or aggressive (keep 5 tool uses and 1 turn)")
	fs.Int("keep-tool-uses", 0, "the last tool uses kept whole (default: the profile's, 10 for standard)")
	fs.Int("keep-turns", 0, "the last user turns kept whole (default: the profile's, 2 for standard)")
	fs.Int("batch-turns", 0, "the boundary of what may change moves in steps of this many user turns (default: the profile's, 8 for standard)")
	fs.Int("min-tokens", 0, "leave sessions smaller than this many estimated tokens (bytes/4) alone (default: the profile's, 50000)")
	fs.Int("clear-at-least", 0, "write nothing unless this many estimated tokens are saved (default: the profile's, 10000 for standard)")
	durationFlag(fs, new(time.Duration), "idle-for", 0, "leave sessions whose updated_at is more recent than this alone, so the rewrite lands after the provider's prompt cache expired (default 1h; 0 compacts active sessions too)")
	fs.Bool("protect-first-turn", true, "keep the first user turn (the task and its first reads) whole")
	fs.StringArrayVar(&o.categories, "category", nil, "put tools in a category: CATEGORY=NAME[,NAME...] with read, query, write, exec or other; names are globs, any case (repeatable)")
	fs.StringSliceVar(&o.protect, "protect-tools", compact.DefaultProtectTools, "tool-name globs never compacted")
}

func (o *compactOptions) load(s *settings, args []string) error {
	o.inputs = args
	if len(args) == 1 {
		o.input = args[0]
	}
	if err := o.engine.loadSettings(s); err != nil {
		return err
	}
	if err := o.engine.load(); err != nil {
		return err
	}
	var err error
	if o.compact, err = compact.ForProfile(compact.Profile(o.profile)); err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	c := &o.compact
	for name, dst := range map[string]*int{"keep-tool-uses": &c.KeepToolUses, "keep-turns": &c.KeepTurns,
		"batch-turns": &c.BatchTurns, "min-tokens": &c.MinTokens, "clear-at-least": &c.ClearAtLeast} {
		if s.isSet(name) {
			if *dst, err = s.int(name); err != nil {
				return err
			}
		}
	}
	if s.isSet("idle-for") {
		if c.IdleFor, err = s.duration("idle-for"); err != nil {
			return err
		}
	}
	if c.ProtectFirstTurn, err = s.bool("protect-first-turn"); err != nil {
		return err
	}
	for _, spec := range o.categories {
		cat, names, ok := strings.Cut(spec, "=")
		if !ok || names == "" {
			return fmt.Errorf("--category %q: want CATEGORY=NAME[,NAME...], like read=open_file,view", spec)
		}
		category, err := compact.ParseCategory(cat)
		if err != nil {
			return fmt.Errorf("--category: %w", err)
		}
		for _, n := range strings.Split(names, ",") {
			c.Overrides = append(c.Overrides, compact.Override{Glob: strings.TrimSpace(n), Category: category})
		}
	}
	c.ProtectTools = o.protect
	c.Dialect, c.Now = o.engine.repair.Dialect, o.engine.repair.Now
	return nil
}

func (o *compactOptions) Validate() error {
	c := o.compact
	switch {
	case len(o.inputs) > 1:
		return fmt.Errorf("give at most one input FILE (or - for stdin), got %d", len(o.inputs))
	case o.maxBytes < 1 || o.maxBytes > repair.MaxSize:
		return fmt.Errorf("--max-bytes must be between 1 and %d (the engine's limit)", repair.MaxSize)
	case c.KeepToolUses < 0 || c.KeepTurns < 1 || c.BatchTurns < 1:
		return errors.New("--keep-tool-uses must not be negative, --keep-turns and --batch-turns must be at least 1")
	case c.MinTokens < 0 || c.ClearAtLeast < 0 || c.IdleFor < 0:
		return errors.New("--min-tokens, --clear-at-least and --idle-for must not be negative")
	case o.output != "" && o.dryRun:
		return errors.New("--dry-run writes no transcripts: drop -o")
	case o.output != "" && o.report != "" && sameOutput(o.output, o.report):
		return fmt.Errorf("-o %s and --report %s are the same file; give each its own", o.output, o.report)
	case namesInput(o.input, o.report):
		return fmt.Errorf("--report %s is an input file, which the report would replace; give the report a file of its own", o.report)
	case namesInput(o.input, o.output):
		return fmt.Errorf("-o %s is the input file, which would be replaced with no copy kept; write the compacted transcripts to another file", o.output)
	}
	return nil
}

func newCompactCmd(e *Env) *cobra.Command {
	o := &compactOptions{}
	cmd := &cobra.Command{
		Use:   "compact [FILE|-]",
		Short: "Repair, then shrink old tool results and inputs of transcripts in a file or pipe",
		Long: "Repair transcripts as fix does, then compact them: old tool results are replaced by a short\n" +
			"stub that keeps what a model needs to call again (tool, path/command/query, size, lines,\n" +
			"sha256), repeated identical reads are deduplicated, large old results keep their head and\n" +
			"tail, and large old inputs (file contents of superseded writes, inputs of failed calls) are\n" +
			"clipped. No call, result or message is added, removed or moved: ids, names, roles, order and\n" +
			"error flags stay, so every pair stays valid. The system prompt, the first user turn, the last\n" +
			"--keep-turns user turns and --keep-tool-uses tool uses, the current turn, unanswered calls,\n" +
			"user and assistant text, reasoning, images and --protect-tools are never touched. Before\n" +
			"each write the result is checked (same calls, results and positions, no new check issue,\n" +
			"every byte from the boundary on unchanged, smaller); a session that fails is kept unchanged\n" +
			"and reported compact_rejected. Compacting twice changes nothing.\n\n" +
			"What changes is what the platform shows and sends next time: cleared results read as\n" +
			"\"[tmend cleared: ...]\" in the history. Keep the input (or run with --dry-run first).\n\n" +
			compactInputHelp + "\n\nExit codes: 0 ok, 1 some input could not be read or parsed (passed through unchanged), a\n" +
			"session was rejected by the checks, or the output or report could not be written, 2 usage,\n" +
			"3 with --dry-run when some session would be compacted. An empty input (or only white\n" +
			"space) is zero sessions, written through as it is: exit 0.",
		Example: `  tmend compact --dry-run sessions.jsonl
  tmend compact -o small.jsonl --report compact.jsonl sessions.jsonl
  tmend compact --profile conservative --idle-for 0 session.json > small.json
  tmend compact --category read=open_file,view --category exec=run_tests --protect-tools 'todo*,notes' big.json`,
		RunE: runE(e, o, runCompact),
	}
	o.register(cmd)
	return cmd
}

// compactInputHelp is fix's input help without what compact does not take yet (pi and
// OpenClaw session files, directories).
const compactInputHelp = `Input (a FILE, or stdin when FILE is - or missing) is one of:
  - a JSON array of messages;
  - an object holding it under "messages" ("input" for OpenAI Responses, "contents" for
    Gemini), other members kept as they are;
  - JSON Lines, one session per line: {"id": ..., "messages"|"input"|"contents": [...]},
    streamed, a line at a time. One bad line (the first one included) does not stop
    the rest; blank lines and line ends are kept as they are.
A pi or OpenClaw session file (a {"type":"session",...} header line) is refused: compact
does not take session files yet (tmend fix does). A UTF-8 byte order mark is kept. An
"updated_at" member (RFC 3339) starts the session's quiet period and is what --idle-for
measures.

Output (-o, --report): a regular file is replaced atomically (through a symlink, its
target); a device, FIFO or terminal is written to as it is. -o and --report must name
different files, and neither the input. A failed write exits 1.

Options also come from the environment as TMEND_<OPTION> (TMEND_MAX_BYTES, TMEND_DIALECT,
TMEND_QUIET_PERIOD, TMEND_IDLE_FOR, ...); a flag beats it.`

// compactSession is one session's line in the report.
type compactSession struct {
	Line         int                            `json:"line,omitempty"`
	Session      string                         `json:"session,omitempty"`
	RepairStatus repair.Status                  `json:"repair_status"`
	RepairReason string                         `json:"repair_reason,omitempty"`
	Repairs      int                            `json:"repair_actions,omitempty"`
	Status       compact.Status                 `json:"status"`
	Reason       string                         `json:"reason,omitempty"`
	Dialect      repair.Dialect                 `json:"dialect,omitempty"`
	BytesBefore  int                            `json:"bytes_before"`
	BytesAfter   int                            `json:"bytes_after"`
	SavedBytes   int                            `json:"saved_bytes"`
	SavedTokens  int                            `json:"saved_tokens_est"`
	IdleSeconds  *int64                         `json:"idle_seconds,omitempty"`
	Boundary     int                            `json:"boundary"`
	Tiers        compact.Tiers                  `json:"tiers"`
	ByRule       map[compact.Rule]compact.Count `json:"by_rule,omitempty"`
	ByTool       map[string]compact.Count       `json:"by_tool,omitempty"`
	Actions      []compact.Action               `json:"actions,omitempty"`
	failed       bool
}

// compactSummary sums up a run.
type compactSummary struct {
	Sessions    int                            `json:"sessions"`
	Compacted   int                            `json:"compacted"`
	Skipped     map[string]int                 `json:"skipped,omitempty"`
	Rejected    int                            `json:"rejected"`
	Failed      int                            `json:"failed"`
	BytesBefore int                            `json:"bytes_before"`
	BytesAfter  int                            `json:"bytes_after"`
	SavedBytes  int                            `json:"saved_bytes"`
	SavedTokens int                            `json:"saved_tokens_est"`
	ByRule      map[compact.Rule]compact.Count `json:"by_rule,omitempty"`
	ByTool      map[string]compact.Count       `json:"by_tool,omitempty"`
	DryRun      bool                           `json:"dry_run,omitempty"`
}

func runCompact(ctx context.Context, e *Env, o *compactOptions) (err error) {
	in, closeIn, err := openInput(e, o.input)
	if err != nil {
		return err
	}
	defer closeIn()
	if !o.dryRun && o.output == "" {
		if err := e.checkStdout(); err != nil {
			return err
		}
	}
	var out io.Writer = io.Discard
	var outFile *outputFile
	switch {
	case o.dryRun:
	case o.output != "":
		if outFile, err = createOutput(o.output); err != nil {
			return err
		}
		defer outFile.abort()
		out = outFile.f
	default:
		out = e.Stdout
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	reports := []func(s *compactSession, sum *compactSummary) error{}
	rbuf := bufio.NewWriter(e.Stderr)
	defer func() {
		if ferr := rbuf.Flush(); ferr != nil && err == nil {
			err = fmt.Errorf("write report: %w", ferr)
		}
	}()
	if o.json {
		reports = append(reports, jsonReport(rbuf))
	} else {
		reports = append(reports, textReport(rbuf, o.verbose))
	}
	var reportFile *outputFile
	var reportBuf *bufio.Writer
	if o.report != "" {
		if reportFile, err = createOutput(o.report); err != nil {
			return err
		}
		defer reportFile.abort()
		reportBuf = bufio.NewWriter(reportFile.f)
		reports = append(reports, jsonReport(reportBuf))
	}

	sum := &compactSummary{Skipped: map[string]int{}, ByRule: map[compact.Rule]compact.Count{},
		ByTool: map[string]compact.Count{}, DryRun: o.dryRun}
	emit := func(s *compactSession) error {
		sum.add(s)
		for _, r := range reports {
			if err := r(s, nil); err != nil {
				return err
			}
		}
		return nil
	}
	var reportErr error
	err = eachRecord(ctx, in, bw, func(rec []byte, line int) []byte {
		s, out := o.compactRecord(rec, line)
		if rerr := emit(s); rerr != nil && reportErr == nil {
			reportErr = fmt.Errorf("write report: %w", rerr)
		}
		return out
	})
	switch {
	case err != nil:
		return err
	case reportErr != nil:
		return reportErr
	}
	for _, r := range reports {
		if err := r(nil, sum); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if err := commitOutputs(outFile, reportFile, reportBuf); err != nil {
		return err
	}
	switch {
	case sum.Failed > 0:
		return fmt.Errorf("%d of %d sessions could not be processed (see the report)", sum.Failed, sum.Sessions)
	case sum.Rejected > 0:
		return fmt.Errorf("%d of %d sessions failed compaction's checks and were kept unchanged; please report this", sum.Rejected, sum.Sessions)
	case o.dryRun && sum.Compacted > 0:
		return errProblems
	}
	return nil
}

// compactRecord repairs and compacts one document, returning its report line and the
// document to write (the input when nothing changed or it could not be processed).
func (o *compactOptions) compactRecord(b []byte, line int) (*compactSession, []byte) {
	s := &compactSession{Line: line, BytesBefore: len(b), BytesAfter: len(b)}
	if len(b) > int(o.maxBytes) {
		s.RepairStatus, s.Status, s.Reason, s.failed = "too_large", compact.StatusSkipped, "too_large", true
		return s, b
	}
	rd, err := repair.RepairDocument(b, o.engine.repair)
	s.Session, s.RepairStatus, s.RepairReason = rd.ID, rd.Report.Status, rd.Report.Reason
	s.Repairs, s.Dialect = len(rd.Report.Actions), rd.Report.Dialect
	if err != nil {
		var ue *repair.UnrepairableError
		s.failed = !errors.As(err, &ue) || ue.Status == repair.StatusUnparseable
		s.Status, s.Reason = compact.StatusSkipped, "not_repairable"
		return s, b
	}
	doc := rd.Output
	res := compact.Document(doc, o.compact)
	r := res.Report
	s.Status, s.Reason, s.Boundary, s.Tiers = r.Status, r.Reason, r.Boundary, r.Tiers
	s.ByRule, s.ByTool, s.Actions = r.ByRule, r.ByTool, r.Actions
	if r.Dialect != "" {
		s.Dialect = r.Dialect
	}
	if parsed, err := repair.ParseDocument(doc); err == nil && !parsed.UpdatedAt.IsZero() {
		idle := int64(o.compact.Now.Sub(parsed.UpdatedAt) / time.Second)
		s.IdleSeconds = &idle
	}
	if r.Status == compact.StatusCompacted || r.Reason == compact.SkipClearAtLeast || r.Reason == compact.SkipRecent {
		s.SavedBytes = r.SavedBytes() // what it saves, or would save but for the gate
	}
	s.SavedTokens = compact.EstTokens(s.SavedBytes)
	s.BytesAfter = len(res.Messages)
	return s, res.Messages
}

func (sum *compactSummary) add(s *compactSession) {
	sum.Sessions++
	sum.BytesBefore += s.BytesBefore
	sum.BytesAfter += s.BytesAfter
	switch {
	case s.failed:
		sum.Failed++
	case s.Status == compact.StatusCompacted:
		sum.Compacted++
		sum.SavedBytes += s.SavedBytes
		for r, c := range s.ByRule {
			sum.ByRule[r] = addCount(sum.ByRule[r], c)
		}
		for tool, c := range s.ByTool {
			sum.ByTool[tool] = addCount(sum.ByTool[tool], c)
		}
	case s.Status == compact.StatusRejected:
		sum.Rejected++
	default:
		sum.Skipped[s.Reason]++
	}
	sum.SavedTokens = compact.EstTokens(sum.SavedBytes)
}

func addCount(a, b compact.Count) compact.Count {
	return compact.Count{Count: a.Count + b.Count, BytesBefore: a.BytesBefore + b.BytesBefore, BytesAfter: a.BytesAfter + b.BytesAfter}
}

// jsonReport writes a line per session, then {"summary": ...}.
func jsonReport(w io.Writer) func(*compactSession, *compactSummary) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return func(s *compactSession, sum *compactSummary) error {
		if s != nil {
			return enc.Encode(s)
		}
		return enc.Encode(struct {
			Summary *compactSummary `json:"summary"`
		}{sum})
	}
}

// textReport sums up the run for a person; verbose lists each session and content.
func textReport(w io.Writer, verbose bool) func(*compactSession, *compactSummary) error {
	return func(s *compactSession, sum *compactSummary) error {
		var err error
		p := func(format string, args ...any) {
			if err == nil {
				_, err = fmt.Fprintf(w, format, args...)
			}
		}
		switch {
		case s != nil && (verbose || s.Status == compact.StatusRejected || s.failed):
			name := s.Session
			switch {
			case name == "" && s.Line > 0:
				name = fmt.Sprintf("line %d", s.Line)
			case name == "":
				name = "input" // one document, as fix and check name it
			}
			p("%s: %s", report.Escape(name), s.Status)
			if s.Reason != "" {
				p(" (%s)", withMeaning(s.Reason))
			}
			p(", %d → %d bytes, saved %d (~%d tokens)\n", s.BytesBefore, s.BytesAfter, s.SavedBytes, s.SavedTokens)
			if verbose {
				for _, a := range s.Actions {
					p("  %s %s of %s %s (message %d): %d → %d bytes\n", a.Rule, a.Target, report.Escape(a.Tool), report.Escape(a.CallID),
						a.MessageIndex, a.BytesBefore, a.BytesAfter)
				}
			}
		case sum != nil:
			verb := "compacted"
			if sum.DryRun {
				verb = "would compact"
			}
			p("%s: %s %d, skipped %d, rejected %d, failed %d\n", plural(sum.Sessions, "session"), verb, sum.Compacted,
				sum.Sessions-sum.Compacted-sum.Rejected-sum.Failed, sum.Rejected, sum.Failed)
			pct := 0.0
			if sum.BytesBefore > 0 {
				pct = 100 * float64(sum.SavedBytes) / float64(sum.BytesBefore)
			}
			p("saved %d of %d bytes (%.1f%%), ~%d tokens (bytes/4)\n", sum.SavedBytes, sum.BytesBefore, pct, sum.SavedTokens)
			for _, r := range compact.Rules() {
				if c, ok := sum.ByRule[r]; ok {
					p("  %-17s %6d contents %12d → %d bytes\n", r, c.Count, c.BytesBefore, c.BytesAfter)
				}
			}
			// The ten tools that saved most, then by name.
			tools := make([]string, 0, len(sum.ByTool))
			for tool := range sum.ByTool {
				tools = append(tools, tool)
			}
			saved := func(tool string) int { c := sum.ByTool[tool]; return c.BytesBefore - c.BytesAfter }
			sort.Slice(tools, func(i, j int) bool {
				if si, sj := saved(tools[i]), saved(tools[j]); si != sj {
					return si > sj
				}
				return tools[i] < tools[j]
			})
			for _, tool := range tools[:min(len(tools), 10)] {
				c := sum.ByTool[tool]
				p("  tool %-12s %6d contents %12d → %d bytes\n", report.Escape(tool), c.Count, c.BytesBefore, c.BytesAfter)
			}
			reasons := make([]string, 0, len(sum.Skipped))
			for r := range sum.Skipped {
				reasons = append(reasons, r)
			}
			sort.Strings(reasons)
			for _, r := range reasons {
				p("  skipped %-24s %d", r, sum.Skipped[r])
				if m := skipMeanings[r]; m != "" {
					p("  (%s)", m)
				}
				p("\n")
			}
		}
		return err
	}
}

// skipMeanings say in words why compact left a session alone; the reasons themselves
// are the JSON report's stable codes.
var skipMeanings = map[string]string{
	compact.SkipUnreadable:   "not a transcript compaction can read",
	compact.SkipHasIssues:    "tool-call problems left after repair",
	compact.SkipNoDialect:    "its dialect is one compaction does not handle",
	compact.SkipNoToolCalls:  "no tool calls, so nothing to compact",
	compact.SkipTooSmall:     "smaller than --min-tokens",
	compact.SkipRecent:       "active more recently than --idle-for",
	compact.SkipNothing:      "nothing old enough to clear",
	compact.SkipClearAtLeast: "would save less than --clear-at-least",
	"too_large":              "larger than --max-bytes",
	"not_repairable":         "tmend could not repair it (see repair_status)",
}

// withMeaning is a skip reason with its meaning beside it, or a rejection's reason as it is.
func withMeaning(reason string) string {
	if m := skipMeanings[reason]; m != "" {
		return reason + ": " + m
	}
	return reason
}

// plural is "1 session", "2 sessions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// eachRecord reads a document or JSON Lines from in and writes each record's
// replacement (by compact) to w, with every byte between records as it was: a byte order
// mark, blank lines, line ends. JSON Lines are streamed; whether the input is JSON Lines
// or one document (pretty-printed, say), read whole, is decided as fix decides it, so a
// bad first line is one bad record.
func eachRecord(ctx context.Context, in io.Reader, w io.Writer, compact func(rec []byte, line int) []byte) error {
	br := bufio.NewReaderSize(in, 1<<20)
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	if b, _ := br.Peek(3); string(b) == "\xef\xbb\xbf" {
		_, _ = br.Discard(3)
		if err := write(b); err != nil {
			return err
		}
	}
	lines, empty := files.LooksLikeJSONLines(br), true
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("read input: %w", rerr)
		}
		rec := bytes.TrimRight(line, "\r\n")
		switch {
		case len(bytes.TrimSpace(rec)) == 0:
			if err := write(line); err != nil {
				return err
			}
		case empty && files.IsSessionHeader(rec):
			return errors.New("input is a pi or OpenClaw session file, which compact does not take yet " +
				"(nothing was written); tmend fix repairs it")
		case !lines:
			rest, err := io.ReadAll(br)
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			return write(compact(append(line, rest...), 0))
		default:
			empty = false
			if err := write(compact(rec, n)); err != nil {
				return err
			}
			if err := write(line[len(rec):]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
	}
}
