// Command tmend repairs LLM-agent conversation transcripts whose tool calls and tool
// results are out of step, in files and pipes or where they are stored in Postgres.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, documented in --help and README.md.
const (
	exitOK       = 0
	exitRuntime  = 1
	exitUsage    = 2
	exitProblems = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// env is what commands may use of their process: the standard streams and the
// environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// printf and eprintf write the command's own messages to stdout and stderr. They drop
// the write error because the stream keeps it: run wraps both in an outputStream and
// exits non-zero after the command if a write failed.
func (e *env) printf(format string, args ...any)  { _, _ = fmt.Fprintf(e.stdout, format, args...) }
func (e *env) eprintf(format string, args ...any) { _, _ = fmt.Fprintf(e.stderr, format, args...) }

// exitError carries an exit code other than 1 out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// errProblems ends a command that ran fine but found problems (exit 3); the command has
// already printed them.
var errProblems = &exitError{code: exitProblems, err: errors.New("problems found")}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	out, errOut := &outputStream{w: stdout}, &outputStream{w: stderr}
	code := runCommand(ctx, args, stdin, out, errOut, getenv)
	if code != exitOK && code != exitProblems {
		return code
	}
	// Output that did not get written is a failure, however well the command went.
	if err := out.Err(); err != nil {
		_, _ = fmt.Fprintf(errOut, "tmend: write standard output: %v\n", err) // the exit code says it too
		return exitRuntime
	}
	if errOut.Err() != nil {
		return exitRuntime
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

func runCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRootCmd(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitRuntime
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case strings.HasPrefix(err.Error(), "unknown command"),
		strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"):
		code = exitUsage
	}
	if code == exitProblems {
		return code
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted; the run's open transactions were rolled back")
	}
	if jsonOutput(root, args) {
		// fix writes transcripts to stdout; its JSON report and errors go to stderr.
		to := stdout
		if cmd, _, err := root.Find(args); err == nil && cmd.Name() == "fix" {
			to = stderr
		}
		_ = json.NewEncoder(to).Encode(struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{err.Error(), code})
	}
	// Best effort, like the JSON above: the exit code already reports the failure.
	_, _ = fmt.Fprintf(stderr, "tmend: %s\n", report.Escape(err.Error()))
	if code == exitUsage {
		_, _ = fmt.Fprintln(stderr, "Run 'tmend --help' or 'tmend COMMAND --help' for usage.")
	}
	return code
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
  1  runtime error
  2  usage or configuration error
  3  problems found (check, scan --dry-run)

Database settings: --database-url, else TMEND_DATABASE_URL, else DATABASE_URL, else
database_url in the config file (--config or TMEND_CONFIG), else the standard PG* variables
(PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, ...).`

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "tmend",
		Short: "Repair tool-call/tool-result pairing in stored LLM transcripts",
		Long:  rootLong,
		Example: `  tmend check session.json
  tmend fix --json < broken.jsonl > fixed.jsonl
  tmend migrate up --database-url postgres://tmend@db/app`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetVersionTemplate("tmend {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(
		newCheckCmd(e),
		newFixCmd(e),
		newGenCmd(e),
		newScanCmd(e),
		newRepairCmd(e),
		newServeCmd(e),
		newReportCmd(e),
		newRollbackCmd(e),
		newPruneCmd(e),
		newImportCmd(e),
		newMigrateCmd(e),
		newVersionCmd(e),
	)
	return root
}

// versionOptions: version has none.
type versionOptions struct{}

func (*versionOptions) load(*settings, []string) error { return nil }
func (*versionOptions) Validate() error                { return nil }

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print tmend's version",
		Example: "  tmend version",
		Args:    noArgs,
		RunE: runE(e, &versionOptions{}, func(_ context.Context, e *env, _ *versionOptions) error {
			e.printf("tmend %s\n", version)
			return nil
		}),
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
