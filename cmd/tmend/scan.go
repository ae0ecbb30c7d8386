package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// runner is a scanner wired to the database from a command's settings.
type runner struct {
	sc     *scanner.Scanner
	store  *store.Store
	log    zerolog.Logger
	schema string
	close  func()
}

func openRunner(ctx context.Context, e *env, cmd *cobra.Command, rf *repairFlags, readOnly bool) (*runner, error) {
	s, err := loadSettings(e, cmd)
	if err != nil {
		return nil, err
	}
	log, err := s.logger()
	if err != nil {
		return nil, err
	}
	src := s.source()
	cfg, err := s.scannerConfig(rf, src)
	if err != nil {
		return nil, err
	}
	pool, schema, err := s.openDB(ctx, log)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, pool, src, readOnly)
	if err != nil {
		pool.Close()
		if errors.Is(err, store.ErrSource) {
			return nil, &exitError{code: exitUsage, err: err}
		}
		return nil, err
	}
	log.Info().Str("source", src.Name()).Int("workers", cfg.Workers).Str("quiet_period", cfg.Repair.QuietPeriod.String()).
		Str("target", string(cfg.Repair.Target)).Msg("configured")
	return &runner{sc: scanner.New(st, log, cfg), store: st, log: log, schema: schema, close: pool.Close}, nil
}

// progress shows a bar on a terminal and a log line every 10s otherwise.
func (r *runner) progress(e *env) (func(scanner.Progress), func()) {
	if isTerminal(e.stderr) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("scanning"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("sessions"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		return func(p scanner.Progress) { _ = bar.Set(p.Counts.Scanned) }, func() { _ = bar.Finish() }
	}
	var last time.Duration
	return func(p scanner.Progress) {
		if p.Elapsed-last >= 10*time.Second {
			last = p.Elapsed
			c := p.Counts
			r.log.Info().Int("num_scanned", c.Scanned).Int("num_repaired", c.Repaired).Int("num_failed", c.Failed).
				Int64("elapsed_ms", p.Elapsed.Milliseconds()).Msg("scan progress")
		}
	}, func() {}
}

func newScanCmd(e *env) *cobra.Command {
	var rf repairFlags
	var full, dryRun, asJSON bool
	var session string
	var limit int
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Repair stored sessions: those changed since the last run, or all with --full",
		Long: `Scan the session table and repair the sessions whose tool calls and results are out of
step. Each repaired session is written in its own transaction, with its prior and new
content kept as versions and a report row in the audit table. Clean sessions are counted
on the run, not written.

By default a run is incremental: the sessions changed since the last completed run, with
a safety overlap. --dry-run writes only reports (status would_repair) and exits 3 when it
finds sessions to repair.

` + configHelp,
		Example: `  tmend scan --dry-run
  tmend scan --full --json
  tmend scan --table public.conversations --id-column conv_id --messages-column payload --updated-at-column modified_at`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode := model.ModeIncremental
			switch {
			case full && session != "":
				return usageErrorf("give --full or --session, not both")
			case full:
				mode = model.ModeFull
			case session != "":
				mode = model.ModeSession
			}
			if limit < 0 {
				return usageErrorf("--limit must not be negative")
			}
			r, err := openRunner(cmd.Context(), e, cmd, &rf, dryRun)
			if err != nil {
				return err
			}
			defer r.close()
			onProgress, done := r.progress(e)
			o := scanner.RunOptions{Trigger: model.TriggerCLI, Mode: mode, SessionID: session,
				DryRun: dryRun, Limit: limit, Force: rf.force, Progress: onProgress, KeepOutcomes: mode == model.ModeSession}
			var res model.RunResult
			if mode == model.ModeSession {
				res, err = r.sc.Run(cmd.Context(), o)
			} else {
				// One run at a time per source, across CLI runs and daemons.
				res, err = r.sc.RunExclusive(cmd.Context(), o)
			}
			done()
			if res.RunID != 0 {
				if werr := printRun(e, &res, asJSON); werr != nil {
					return werr
				}
			}
			switch {
			case err != nil:
				return err
			case dryRun && res.Problems():
				return errProblems
			}
			return nil
		},
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f)
	registerScanFlags(f, &rf)
	f.BoolVar(&full, "full", false, "scan every session, not only those changed since the last run")
	f.StringVar(&session, "session", "", "scan this one session")
	f.BoolVar(&dryRun, "dry-run", false, "report what would change; write no content")
	f.IntVar(&limit, "limit", 0, "stop after this many sessions (the incremental position does not move)")
	f.BoolVar(&asJSON, "json", false, "print the run summary as JSON")
	return cmd
}

func printRun(e *env, res *model.RunResult, asJSON bool) error {
	var err error
	if asJSON {
		err = report.RunJSON(e.stdout, res)
	} else {
		err = report.RunText(e.stdout, res)
	}
	if err != nil {
		return fmt.Errorf("print run: %w", err)
	}
	return nil
}

func newRepairCmd(e *env) *cobra.Command {
	var rf repairFlags
	var dryRun, asJSON bool
	var session string
	cmd := &cobra.Command{
		Use:   "repair --session ID",
		Short: "Repair one stored session now and print exactly what changed",
		Long: `Repair one session now, whatever its age, and print each action with the sizes before
and after. The prior content is kept as a version, so 'tmend rollback --session ID'
undoes it. --dry-run shows the same without writing; --force also answers calls of the
last turn that may still be running (the quiet period).

` + configHelp,
		Example: `  tmend repair --session 7f3e2a
  tmend repair --session 7f3e2a --dry-run --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				return usageErrorf("--session is required")
			}
			r, err := openRunner(cmd.Context(), e, cmd, &rf, dryRun)
			if err != nil {
				return err
			}
			defer r.close()
			res, err := r.sc.Run(cmd.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeSession,
				SessionID: session, DryRun: dryRun, Force: rf.force, KeepOutcomes: true})
			if res.RunID != 0 {
				if werr := printRun(e, &res, asJSON); werr != nil {
					return werr
				}
			}
			if err == nil && res.Counts.Clean == 1 && !asJSON {
				e.printf("\nsession %s is clean; nothing to do\n", report.Escape(session))
			}
			return err
		},
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f)
	registerScanFlags(f, &rf)
	f.StringVar(&session, "session", "", "the session's id")
	f.BoolVar(&dryRun, "dry-run", false, "show what would change; write nothing but the report")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
