package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// openStore connects and opens the source, for commands that need no scanner.
func openStore(ctx context.Context, e *env, cmd *cobra.Command, readOnly bool) (*store.Store, *settings, zerolog.Logger, func(), error) {
	s, err := loadSettings(e, cmd)
	if err != nil {
		return nil, nil, zerolog.Nop(), nil, err
	}
	log, err := s.logger()
	if err != nil {
		return nil, nil, log, nil, err
	}
	pool, _, err := s.openDB(ctx, log)
	if err != nil {
		return nil, nil, log, nil, err
	}
	st, err := store.Open(ctx, pool, s.source(), readOnly)
	if err != nil {
		pool.Close()
		if errors.Is(err, store.ErrSource) {
			return nil, nil, log, nil, &exitError{code: exitUsage, err: err}
		}
		return nil, nil, log, nil, err
	}
	return st, s, log, pool.Close, nil
}

func newReportCmd(e *env) *cobra.Command {
	var f model.ReportFilter
	var since, until, status, runStatus string
	var runID int64
	var session string
	var diff, asJSON bool
	var version int
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Show what tmend did: runs, a run's totals, a session's history and diffs, audit rows",
		Long: `Answer audit questions from tmend's tables.

  tmend report                          recent runs (newest first)
  tmend report --run ID                 one run: counts by status, stage, dialect, issue code
  tmend report --session ID             everything tmend did to a session: reports and versions
  tmend report --session ID --diff      what a repair (or rollback) changed, message by message
  tmend report --status repaired --issue misplaced_tool_result --since 24h
                                        audit rows matching filters (also with --run)

Lists are newest first, --limit rows at a time; pass the last row's id as --cursor for
the next page. --json writes JSON Lines (one object per row) with the same fields as the
tables. Colour only on a terminal.

` + configHelp,
		Example: `  tmend report
  tmend report --run 42 --json
  tmend report --session 7f3e2a --diff --version 4
  tmend report --stage drop_orphan_results --dialect anthropic --since 7d --limit 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			var err error
			if f.Since, err = model.ParseSince(since, now); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if f.Until, err = model.ParseSince(until, now); err != nil {
				return usageErrorf("--until: %v", err)
			}
			if status != "" {
				if f.Status, err = model.ParseSessionStatus(status); err != nil {
					return usageErrorf("--status: %v", err)
				}
			}
			var runSt model.RunStatus
			if runStatus != "" {
				if runSt, err = model.ParseRunStatus(runStatus); err != nil {
					return usageErrorf("--run-status: %v", err)
				}
			}
			if diff && session == "" {
				return usageErrorf("--diff needs --session")
			}
			if version != 0 && !diff {
				return usageErrorf("--version goes with --diff")
			}
			if version != 0 && version < 2 {
				return usageErrorf("version %d has no earlier version to compare with", version)
			}
			st, _, _, closeDB, err := openStore(cmd.Context(), e, cmd, true)
			if err != nil {
				return err
			}
			defer closeDB()
			ctx := cmd.Context()
			filtered := f.Status != "" || f.Stage != "" || f.Issue != "" || f.Dialect != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.Cursor > 0
			switch {
			case session != "" && diff:
				before, after, err := st.VersionPair(ctx, session, version)
				if err != nil {
					return err
				}
				return report.VersionDiff(e.stdout, session, before, after, isTerminal(e.stdout))
			case session != "":
				reports, versions, err := st.History(ctx, session)
				if err != nil {
					return err
				}
				if asJSON {
					return report.JSONLines(e.stdout, []any{map[string]any{"session_id": session, "reports": reports, "versions": versions}})
				}
				return report.HistoryText(e.stdout, session, reports, versions)
			case runID > 0 && !filtered:
				run, err := st.Run(ctx, runID)
				if err != nil {
					return err
				}
				if asJSON {
					return report.JSONLines(e.stdout, []model.RunRow{run})
				}
				return report.RunSummaryText(e.stdout, run)
			case runID > 0 || filtered:
				f.RunID = runID
				rows, err := st.ListReports(ctx, f)
				if err != nil {
					return err
				}
				if asJSON {
					return report.JSONLines(e.stdout, rows)
				}
				if err := report.ReportsText(e.stdout, rows); err != nil {
					return err
				}
				if len(rows) == max(f.Limit, 1) {
					e.eprintf("more: --cursor %d\n", rows[len(rows)-1].ID)
				}
				return nil
			default:
				runs, err := st.ListRuns(ctx, model.RunFilter{Since: f.Since, Until: f.Until, Status: runSt, Cursor: f.Cursor, Limit: f.Limit})
				if err != nil {
					return err
				}
				if asJSON {
					return report.JSONLines(e.stdout, runs)
				}
				return report.RunsText(e.stdout, runs)
			}
		},
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	registerSourceFlags(fl)
	fl.Int64Var(&runID, "run", 0, "one run's totals; with filters, its audit rows")
	fl.StringVar(&session, "session", "", "one session's history")
	fl.BoolVar(&diff, "diff", false, "with --session: what a repair or rollback changed, message by message")
	fl.IntVar(&version, "version", 0, "with --diff: the version to compare with the one before it (default: the latest tmend wrote)")
	fl.StringVar(&since, "since", "", "only rows at or after this time (RFC 3339, or a duration back like 24h, 7d)")
	fl.StringVar(&until, "until", "", "only rows before this time (same forms as --since)")
	fl.StringVar(&status, "status", "", "audit rows with this status (repaired, would_repair, conflict, failed, ...)")
	fl.StringVar(&runStatus, "run-status", "", "runs with this status (running, completed, failed, cancelled)")
	fl.StringVar(&f.Stage, "stage", "", "audit rows where this stage acted (e.g. move_results)")
	fl.StringVar(&f.Issue, "issue", "", "audit rows with this issue code (e.g. tool_call_without_result)")
	fl.StringVar(&f.Dialect, "dialect", "", "audit rows of this dialect")
	fl.IntVar(&f.Limit, "limit", 50, "rows per page")
	fl.Int64Var(&f.Cursor, "cursor", 0, "continue after this row id (the last id of the previous page)")
	fl.BoolVar(&asJSON, "json", false, "JSON Lines instead of a table")
	return cmd
}

func newRollbackCmd(e *env) *cobra.Command {
	var session string
	var runID int64
	var to int
	var force, dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "rollback (--session ID [--to-version N] | --run RUN_ID)",
		Short: "Restore what a repair replaced, safely",
		Long: `Restore a session's saved version, by default the content tmend's latest write replaced;
--run restores every session a run repaired. A session is restored only while it still
holds exactly what tmend wrote; otherwise it is refused, and the reason printed, unless
--force, which first keeps the current content as a new version. Each session is
restored atomically, saved as a new version and recorded as a report (rolled_back or
rollback_refused); rolling back a rollback restores the repair.

A rolled-back session is left alone by scheduled and full runs until its content changes
again; 'tmend repair --session ID' repairs it on demand.

Exit codes: 0 all restored, 1 some refused or failed, 2 usage.

` + configHelp,
		Example: `  tmend rollback --session 7f3e2a
  tmend rollback --session 7f3e2a --to-version 1 --dry-run
  tmend rollback --run 42`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case (session == "") == (runID == 0):
				return usageErrorf("give --session or --run (one of them)")
			case to != 0 && runID != 0:
				return usageErrorf("--to-version goes with --session")
			case to < 0:
				return usageErrorf("--to-version must be positive")
			}
			st, _, log, closeDB, err := openStore(cmd.Context(), e, cmd, dryRun)
			if err != nil {
				return err
			}
			defer closeDB()
			return rollback(cmd.Context(), e, st, log, session, runID, to, force, dryRun, asJSON, model.TriggerCLI)
		},
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	registerSourceFlags(fl)
	fl.StringVar(&session, "session", "", "the session to restore")
	fl.Int64Var(&runID, "run", 0, "restore every session this run repaired")
	fl.IntVar(&to, "to-version", 0, "the version to restore (default: the one tmend's latest write replaced)")
	fl.BoolVar(&force, "force", false, "restore sessions changed since tmend wrote them, keeping their current content as a version first")
	fl.BoolVar(&dryRun, "dry-run", false, "say what would be restored or refused; change nothing")
	fl.BoolVar(&asJSON, "json", false, "JSON Lines, one object per session")
	return cmd
}

func rollback(ctx context.Context, e *env, st *store.Store, log zerolog.Logger, session string, runID int64, to int, force, dryRun, asJSON bool, trigger model.Trigger) error {
	sc := scanner.New(st, log, scanner.Config{Source: st.Source().Name()})
	out, err := sc.Rollback(ctx, model.RollbackOptions{SessionID: session, To: to, RunID: runID,
		Force: force, DryRun: dryRun, Trigger: trigger})
	if err != nil {
		return err
	}
	if runID != 0 && len(out.Sessions) == 0 {
		e.printf("run %d repaired no sessions; nothing to roll back\n", runID)
		return nil
	}
	if asJSON {
		err = report.JSONLines(e.stdout, out.Sessions)
	} else {
		err = report.RollbackText(e.stdout, out, dryRun)
	}
	if err != nil {
		return err
	}
	if n := out.Refused + out.Failed; n > 0 {
		return fmt.Errorf("%d of %d sessions were not restored", n, len(out.Sessions))
	}
	return nil
}

func newPruneCmd(e *env) *cobra.Command {
	var olderThan string
	var dryRun, all bool
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Delete old versions and audit rows, keeping what undoing the latest repairs needs",
		Long: `Delete saved versions and report rows older than --older-than. For every session the
version tmend last wrote and the one before it are kept, so its latest repair can still
be rolled back, unless --all. Runs are kept. 'tmend serve --prune-schedule' runs this on
its own schedule.

` + configHelp,
		Example: `  tmend prune --older-than 90d --dry-run
  tmend prune --older-than 30d`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := model.ParseDuration(olderThan)
			if err != nil || d <= 0 {
				return usageErrorf("--older-than must be a duration like 30d or 720h, got %q", olderThan)
			}
			st, _, _, closeDB, err := openStore(cmd.Context(), e, cmd, true)
			if err != nil {
				return err
			}
			defer closeDB()
			versions, reports, err := st.Prune(cmd.Context(), time.Now().Add(-d), all, dryRun)
			if err != nil {
				return err
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			e.printf("%s %d versions and %d reports older than %s\n", verb, versions, reports, olderThan)
			return nil
		},
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	registerSourceFlags(fl)
	fl.StringVar(&olderThan, "older-than", "", "age of what to delete (30d, 720h, ...)")
	fl.BoolVar(&dryRun, "dry-run", false, "count what would be deleted; delete nothing")
	fl.BoolVar(&all, "all", false, "also delete the versions that rolling back the latest repairs needs")
	return cmd
}
