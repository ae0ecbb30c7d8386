package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store"
)

// importOptions are the options of import.
type importOptions struct {
	db    dbOptions
	input string // a FILE; stdin when empty or -
	json  bool
}

func (o *importOptions) load(s *settings, args []string) error {
	if len(args) == 1 {
		o.input = args[0]
	}
	return o.db.load(s)
}

func (o *importOptions) Validate() error { return o.db.Validate() }

func newImportCmd(e *Env) *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Load JSON Lines sessions into tmend's own sessions table (for trials and demos)",
		Long: `Load sessions, one JSON object per line with "id", "updated_at" (optional) and
"messages" ("input", "contents"), into tmend's own sessions table, replacing sessions
with the same id. Output of 'tmend gen' fits. A user's own table is never written here.

A session's "updated_at" is kept as given (tmend gen writes dates in January 2026), else
it is the time of the import. Incremental scans read the sessions changed since the last
run by that column, so sessions imported with an older date wait for 'tmend scan --full'.

The import is all or nothing: a line that is not a session object (a JSON array of
sessions included: convert it with jq -c '.[]'), an id given on two lines, a line that
is not UTF-8, or a message holding the escape \u0000 (Postgres jsonb cannot store a NUL
character) is an error naming the lines, and nothing is imported. Blank lines are skipped.`,
		Example: `  tmend gen --dialect anthropic --sessions 5000 --fault-rate 0.1 | tmend import -
  jq -c '.[]' sessions.json | tmend import -`,
		Args: maxArgs(1),
		RunE: runE(e, o, runImport),
	}
	registerDBFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.json, "json", false, `print {"imported": N} as JSON`)
	return cmd
}

func runImport(ctx context.Context, e *Env, o *importOptions) error {
	in, closeIn, err := openInput(e, o.input)
	if err != nil {
		return err
	}
	defer closeIn()
	log, tp := progressLogger(e, o.db.logLevel)
	pool, err := connect(ctx, log, o.db.connOptions)
	if err != nil {
		return err
	}
	defer pool.Close()
	if tp != nil {
		// Bytes read, of the file's size when it is one: the sessions are not counted
		// before they are read.
		tp.start("importing", inputSize(in), false, "")
		in = &countingReader{r: in, seen: tp.set}
	}
	total, err := store.ImportJSONLines(ctx, pool, in)
	if tp != nil {
		tp.stop()
	}
	if err != nil {
		return fmt.Errorf("%w; nothing was imported", err)
	}
	if o.json {
		return report.JSONLines(e.Stdout, []map[string]int{{"imported": total}})
	}
	e.printf("imported %d sessions\n", total)
	return nil
}
