// Package cli is tmend's command line: the cobra command tree, the settings (flags,
// TMEND_* environment, config file), one options struct per command, exit codes, and
// the handlers that call the packages doing the work.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store"
)

// Exit codes, documented in --help and README.md.
const (
	ExitOK       = 0
	ExitRuntime  = 1
	ExitUsage    = 2
	ExitProblems = 3
	// ExitFailed: a scan, repair or rollback ran to its end but failed some sessions
	// (status failed: an error while handling them, such as a constraint or trigger of
	// the table that refused the write); the others were handled.
	ExitFailed = 4
)

// Env is what commands may use of their process: the standard streams and the
// environment.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// StdoutClosed says that the process started with its standard output closed
	// (OSEnv): check, fix and gen, whose result goes there, refuse to run (exit 1).
	StdoutClosed bool
}

// printf and eprintf write the command's own messages to stdout and stderr. They drop
// the write error because the stream keeps it: Run wraps both in an outputStream and
// exits non-zero after the command if a write failed.
func (e *Env) printf(format string, args ...any)  { _, _ = fmt.Fprintf(e.Stdout, format, args...) }
func (e *Env) eprintf(format string, args ...any) { _, _ = fmt.Fprintf(e.Stderr, format, args...) }

// exitError carries an exit code other than 1 out of a command, or says that the
// command's printed result already shows the failure.
type exitError struct {
	code int
	err  error
	// shown: the result printed shows this failure (a run that failed, sessions a
	// rollback refused), so --json prints no error object after it: stdout holds
	// one documented object. The message still goes to stderr.
	shown bool
	// setup: a usage error of the database rather than of the command line (a missing
	// table, column or GRANT), whose message says what to change; the line pointing to
	// --help is left out, as --help would not say it.
	setup bool
}

// shown marks err as one the command's printed result already shows; it keeps its exit
// code (1 unless it carries another).
func shown(err error) error {
	code := ExitRuntime
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		code = ee.code
	}
	return &exitError{code: code, err: err, shown: true}
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// errProblems ends a command that ran fine but found problems (exit 3); the command has
// already printed them.
var errProblems = &exitError{code: ExitProblems, err: errors.New("problems found")}

// failedSessions ends a command whose printed result shows that n of total sessions
// failed (exit 4).
func failedSessions(n, total int, how string) error {
	return &exitError{code: ExitFailed, shown: true, err: fmt.Errorf("%d of %d sessions failed%s", n, total, how)}
}

// Run runs tmend with the command line args (without the program's name) and returns
// the exit code.
func Run(ctx context.Context, args []string, e Env) int {
	out, errOut := &outputStream{w: e.Stdout}, &outputStream{w: e.Stderr}
	e.Stdout, e.Stderr = out, errOut
	code := runCommand(ctx, args, &e)
	if code != ExitOK && code != ExitProblems {
		return code
	}
	// Output that did not get written is a failure, however well the command went.
	if err := out.Err(); err != nil {
		_, _ = fmt.Fprintf(errOut, "tmend: write standard output: %v\n", err) // the exit code says it too
		return ExitRuntime
	}
	if errOut.Err() != nil {
		return ExitRuntime
	}
	return code
}

// outputStream remembers the first error writing to stdout or stderr.
type outputStream struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *outputStream) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

func (o *outputStream) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func runCommand(ctx context.Context, args []string, e *Env) int {
	root := NewRootCommand(e)
	root.SetArgs(args)
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitRuntime
	var ee *exitError
	printed, setup := false, false
	switch {
	case errors.As(err, &ee):
		code, printed, setup = ee.code, ee.shown, ee.setup
	case strings.HasPrefix(err.Error(), "unknown command"):
		code, err = ExitUsage, errors.New(suggestion(err.Error()))
	case strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"):
		code = ExitUsage
	}
	if code == ExitProblems {
		return code
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted; the run's open transactions were rolled back")
	}
	if jsonOutput(root, args) && !printed {
		// fix and compact write transcripts to stdout; their JSON reports and errors go to stderr.
		to := e.Stdout
		if cmd, _, err := root.Find(args); err == nil && (cmd.Name() == "fix" || cmd.Name() == "compact") {
			to = e.Stderr
		}
		_ = json.NewEncoder(to).Encode(struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{err.Error(), code})
	}
	// Best effort, like the JSON above: the exit code already reports the failure.
	for _, m := range messages(err) {
		_, _ = fmt.Fprintf(e.Stderr, "tmend: %s\n", m)
	}
	if code == ExitUsage && !setup {
		_, _ = fmt.Fprintln(e.Stderr, "Run 'tmend --help' or 'tmend COMMAND --help' for usage.")
	}
	return code
}

// suggestion puts cobra's unknown-command error on one line: it lists the commands it
// suggests on lines of their own, which escaping would show as \n and \t.
func suggestion(msg string) string {
	head, rest, ok := strings.Cut(msg, "\n\nDid you mean this?\n")
	if !ok {
		return strings.TrimSpace(msg)
	}
	return head + "; did you mean " + strings.Join(strings.Fields(rest), " or ") + "?"
}

// messages are err's lines for stderr, each escaped: the errors of a join (options that
// failed to validate) each on a line of its own, where escaping would show "\n".
func messages(err error) []string {
	if ee, ok := err.(*exitError); ok {
		err = ee.err
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{report.Escape(err.Error())}
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, messages(e)...)
	}
	return out
}

// jsonOutput reports whether the command line asked for JSON output, so errors are
// printed as JSON on stdout too.
func jsonOutput(root *cobra.Command, args []string) bool {
	cmd, _, err := root.Find(args)
	if err == nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
			return true
		}
	}
	for _, a := range args {
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

const rootLong = `tmend repairs LLM-agent conversation transcripts whose tool calls and tool results
are out of step (the cause of provider 400s such as "tool_use ids were found without
tool_result blocks immediately after"), in files and pipes or in Postgres, with an audit
trail and an undo.

Exit codes:
  0  ok
  1  runtime error (also: rollback refused some session)
  2  usage or configuration error
  3  problems found (check, scan --dry-run, repair --dry-run); sessions to compact (compact --dry-run,
     scan and repair --compact --dry-run)
  4  sessions failed (scan, repair, rollback: the others were handled)

Database settings: --database-url, else TMEND_DATABASE_URL, else DATABASE_URL, else
database_url in the config file (--config or TMEND_CONFIG), else the standard PG* variables
(PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, ...).`

// NewRootCommand returns tmend's command tree, writing to e's streams.
func NewRootCommand(e *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "tmend",
		Short: "Repair tool-call/tool-result pairing in stored LLM transcripts",
		Long:  rootLong,
		Example: `  tmend check session.json
  tmend fix --json < broken.jsonl > fixed.jsonl
  tmend migrate up --database-url postgres://tmend@db/app`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().String(),
	}
	root.SetVersionTemplate("tmend {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: err}
	})
	root.AddCommand(
		newCheckCmd(e),
		newFixCmd(e),
		newCompactCmd(e),
		newGenCmd(e),
		newScanCmd(e),
		newRepairCmd(e),
		newServeCmd(e),
		newWorkerCmd(e),
		newReportCmd(e),
		newRollbackCmd(e),
		newPruneCmd(e),
		newImportCmd(e),
		newMigrateCmd(e),
		newVersionCmd(e),
	)
	return root
}

// versionOptions are the options of version.
type versionOptions struct{ json bool }

func (*versionOptions) load(*settings, []string) error { return nil }
func (*versionOptions) Validate() error                { return nil }

// versionInfo is what 'tmend version --json' prints: the build, and the schema versions
// this binary migrates to (tmend's and River's), which no database is needed to know.
type versionInfo struct {
	buildinfo.Info
	SchemaVersion      uint `json:"schema_version"`
	RiverSchemaVersion int  `json:"river_schema_version"`
}

func newVersionCmd(e *Env) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print tmend's version, commit, build date, Go version and schema versions",
		Long: `Print which build of tmend this is: its version, commit and commit date (stamped by
release builds, else what the Go toolchain recorded), the Go version that built it, and
the versions of tmend's and River's schemas that 'tmend migrate up' brings a database to.
'tmend --version' prints the first line.`,
		Example: `  tmend version
  tmend version --json`,
		Args: noArgs,
		RunE: runE(e, o, func(_ context.Context, e *Env, o *versionOptions) error {
			v := versionInfo{Info: buildinfo.Get(), SchemaVersion: migrations.Latest(), RiverSchemaVersion: migrations.RiverLatest()}
			if o.json {
				return report.JSONLines(e.Stdout, []versionInfo{v})
			}
			e.printf("tmend %s\nschema version %d, River schema version %d\n", v.Info, v.SchemaVersion, v.RiverSchemaVersion)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON object")
	return cmd
}

// maxArgs is cobra.MaximumNArgs with exit code 2.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usageErrorf("%s takes at most %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// noArgs is cobra.NoArgs with exit code 2.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		shown := make([]string, len(args))
		for i, a := range args {
			shown[i] = store.Redact(a) // a database URL given without --database-url
		}
		return usageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), shown)
	}
	return nil
}
