package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// reportOptions are the options of report.
type reportOptions struct {
	db                              dbOptions
	filter                          model.ReportFilter
	since, until, status, runStatus string
	runFilter                       model.RunFilter
	runID                           int64
	session                         string
	diff, json, cleared             bool
	version                         int
}

func (o *reportOptions) load(s *settings, _ []string) error {
	if err := o.db.load(s); err != nil {
		return err
	}
	f := &o.filter
	now := time.Now()
	var err error
	if f.Since, err = model.ParseSince(o.since, now); err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	if f.Until, err = model.ParseSince(o.until, now); err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	if o.status != "" {
		if f.Status, err = model.ParseSessionStatus(o.status); err != nil {
			return fmt.Errorf("--status: %w", err)
		}
	}
	o.runFilter = model.RunFilter{Since: f.Since, Until: f.Until, Cursor: f.Cursor, Limit: f.Limit,
		ThisSource: slices.ContainsFunc(sourceOptions, s.isSet)}
	if o.runStatus != "" {
		if o.runFilter.Status, err = model.ParseRunStatus(o.runStatus); err != nil {
			return fmt.Errorf("--run-status: %w", err)
		}
	}
	return nil
}

func (o *reportOptions) Validate() error {
	switch {
	case o.diff && o.session == "":
		return errors.New("--diff needs --session")
	case o.cleared && (o.session == "" || o.diff):
		return errors.New("--cleared needs --session, and goes without --diff")
	case o.version != 0 && !o.diff:
		return errors.New("--version goes with --diff")
	case o.version != 0 && o.version < 2:
		return fmt.Errorf("version %d has no earlier version to compare with", o.version)
	}
	return o.db.Validate()
}

// filtered reports whether report lists audit rows rather than runs or a run's totals.
func (o *reportOptions) filtered() bool {
	f := o.filter
	return f.Status != "" || f.Stage != "" || f.Issue != "" || f.Dialect != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.Cursor > 0
}

func newReportCmd(e *Env) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Show what tmend did: runs, a run's totals, a session's history and diffs, audit rows",
		Long: `Answer audit questions from tmend's tables.

  tmend report                          recent runs (newest first), of every table; with
                                        --preset, --table, ... of that table only
  tmend report --run ID                 one run: counts by status, stage, dialect, issue code
  tmend report --session ID             everything tmend did to a session: reports and versions
  tmend report --session ID --diff      what a repair (or rollback) changed, message by message
  tmend report --session ID --cleared   what each stub of a compaction (--compact) replaced
  tmend report --status repaired --issue misplaced_tool_result --since 24h
                                        audit rows matching filters (also with --run)

Lists are newest first, --limit rows at a time; pass the last row's id as --cursor for
the next page. --json writes JSON Lines (one object per row) with the same fields as the
tables. Colour only on a terminal.

` + configHelp,
		Example: `  tmend report
  tmend report --run 42 --json
  tmend report --session 7f3e2a --diff --version 4
  tmend report --session 7f3e2a --cleared --json
  tmend report --stage drop_orphan_results --dialect anthropic --since 7d --limit 100`,
		Args: noArgs,
		RunE: runE(e, o, runReport),
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	registerSourceFlags(fl, false)
	fl.Int64Var(&o.runID, "run", 0, "one run's totals; with filters, its audit rows")
	fl.StringVar(&o.session, "session", "", "one session's history")
	fl.BoolVar(&o.diff, "diff", false, "with --session: what a repair or rollback changed, message by message")
	fl.BoolVar(&o.cleared, "cleared", false, "with --session: what each stub of its compactions replaced (call, tool, rule, bytes, text), newest first")
	fl.IntVar(&o.version, "version", 0, "with --diff: the version to compare with the one before it (default: the latest tmend wrote)")
	fl.StringVar(&o.since, "since", "", "only rows at or after this time (RFC 3339, or a duration back like 24h, 7d)")
	fl.StringVar(&o.until, "until", "", "only rows before this time (same forms as --since)")
	fl.StringVar(&o.status, "status", "", "audit rows with this status (repaired, would_repair, conflict, failed, ...)")
	fl.StringVar(&o.runStatus, "run-status", "", "runs with this status (running, completed, failed, cancelled, abandoned)")
	fl.StringVar(&o.filter.Stage, "stage", "", "audit rows where this stage acted (e.g. move_results)")
	fl.StringVar(&o.filter.Issue, "issue", "", "audit rows with this issue code (e.g. tool_call_without_result)")
	fl.StringVar(&o.filter.Dialect, "dialect", "", "audit rows of this dialect")
	fl.IntVar(&o.filter.Limit, "limit", 50, "rows per page")
	fl.Int64Var(&o.filter.Cursor, "cursor", 0, "continue after this row id (the last id of the previous page)")
	fl.BoolVar(&o.json, "json", false, "JSON Lines instead of a table")
	return cmd
}

// runReport answers one of report's questions: a session's diff or history, a run's
// totals, audit rows, or runs.
// notInSource names the source a session was looked for in: history is kept per table,
// so a session repaired under other --table or --preset options is not found here.
func notInSource(err error, st *store.Store) error {
	if errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("%w in %s (history is kept per table: give the --table, --layout or --preset options it was repaired with)", err, st.Key())
	}
	return err
}

func runReport(ctx context.Context, e *Env, o *reportOptions) error {
	st, closeDB, err := openStore(ctx, newLogger(e, o.db.logLevel), o.db, true)
	if err != nil {
		return err
	}
	defer closeDB()
	switch {
	case o.cleared:
		cleared, err := st.Cleared(ctx, o.session, false)
		if err != nil {
			return err
		}
		if o.json {
			return report.JSONLines(e.Stdout, cleared)
		}
		return report.ClearedText(e.Stdout, o.session, cleared)
	case o.session != "" && o.diff:
		reports, _, err := st.History(ctx, o.session)
		if err != nil {
			return notInSource(err, st)
		}
		before, after, err := st.VersionPair(ctx, o.session, o.version)
		if err != nil {
			return err
		}
		d, err := report.DiffVersions(before, after, reports)
		if err != nil {
			return fmt.Errorf("compare versions %d and %d: %w", before.Version, after.Version, err)
		}
		if o.json {
			return report.JSONLines(e.Stdout, []*report.TranscriptDiff{d})
		}
		return report.DiffText(e.Stdout, d, isTerminal(e.Stdout))
	case o.session != "":
		reports, versions, err := st.History(ctx, o.session)
		if err != nil {
			return notInSource(err, st)
		}
		if o.json {
			return report.JSONLines(e.Stdout, []any{map[string]any{"session_id": o.session, "reports": reports, "versions": versions}})
		}
		return report.HistoryText(e.Stdout, o.session, reports, versions)
	case o.runID > 0 && !o.filtered():
		run, err := st.Run(ctx, o.runID)
		if err != nil {
			return err
		}
		if o.json {
			return report.JSONLines(e.Stdout, []model.RunRow{run})
		}
		return report.RunSummaryText(e.Stdout, run)
	case o.runID > 0 || o.filtered():
		f := o.filter
		f.RunID = o.runID
		rows, err := st.ListReports(ctx, f)
		if err != nil {
			return err
		}
		if o.json {
			return report.JSONLines(e.Stdout, rows)
		}
		if err := report.ReportsText(e.Stdout, rows); err != nil {
			return err
		}
		if len(rows) == max(f.Limit, 1) {
			e.eprintf("more: --cursor %d\n", rows[len(rows)-1].ID)
		}
		return nil
	default:
		runs, err := st.ListRuns(ctx, o.runFilter)
		if err != nil {
			return err
		}
		if o.json {
			return report.JSONLines(e.Stdout, runs)
		}
		return report.RunsText(e.Stdout, runs)
	}
}

// rollbackOptions are the options of rollback.
type rollbackOptions struct {
	db                  dbOptions
	session             string
	runID               int64
	to                  int
	force, dryRun, json bool
}

func (o *rollbackOptions) load(s *settings, _ []string) error { return o.db.load(s) }

func (o *rollbackOptions) Validate() error {
	switch {
	case (o.session == "") == (o.runID == 0):
		return errors.New("give --session or --run (one of them)")
	case o.to != 0 && o.runID != 0:
		return errors.New("--to-version goes with --session")
	case o.to < 0:
		return errors.New("--to-version must be positive")
	}
	return o.db.Validate()
}

func newRollbackCmd(e *Env) *cobra.Command {
	o := &rollbackOptions{}
	cmd := &cobra.Command{
		Use:   "rollback (--session ID [--to-version N] | --run RUN_ID)",
		Short: "Restore what a repair replaced, safely",
		Long: `Restore a session's saved version, by default the content tmend's latest write replaced;
--run restores every session a run repaired or compacted. A session is restored only while it still
holds exactly what tmend wrote; otherwise it is refused, and the reason printed, unless
--force, which first keeps the current content as a new version. Each session is
restored atomically, saved as a new version and recorded as a report (rolled_back or
rollback_refused); rolling back a rollback restores the repair.

A session tmend compacted (--compact) that the agent appended turns to since is restored
to its messages before compaction followed by everything it holds after them, appended
turns kept, while those first messages are still exactly what tmend wrote.

A rolled-back session is left alone by scheduled and full runs until its content changes
again; 'tmend repair --session ID' repairs it on demand.

Exit codes: 0 all restored (or, with --dry-run, all would be), 1 some refused, or the
session, run or --to-version does not exist (refused before anything is recorded), 2 usage,
4 some failed (an error while restoring them). --json prints one object: the counts and a line per session, each
with its status (restored, would_restore, refused, failed) and reason or error; errors
go to stderr.

` + configHelp,
		Example: `  tmend rollback --session 7f3e2a
  tmend rollback --session 7f3e2a --to-version 1 --dry-run
  tmend rollback --run 42`,
		Args: noArgs,
		RunE: runE(e, o, runRollback),
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	registerSourceFlags(fl, true)
	fl.StringVar(&o.session, "session", "", "the session to restore")
	fl.Int64Var(&o.runID, "run", 0, "restore every session this run repaired")
	fl.IntVar(&o.to, "to-version", 0, "the version to restore (default: the one tmend's latest write replaced)")
	fl.BoolVar(&o.force, "force", false, "restore sessions changed since tmend wrote them, keeping their current content as a version first")
	fl.BoolVar(&o.dryRun, "dry-run", false, "say what would be restored or refused; change nothing")
	fl.BoolVar(&o.json, "json", false, "print the outcome as one JSON object")
	return cmd
}

func runRollback(ctx context.Context, e *Env, o *rollbackOptions) error {
	log := newLogger(e, o.db.logLevel)
	st, closeDB, err := openStore(ctx, log, o.db, o.dryRun)
	if err != nil {
		return err
	}
	defer closeDB()
	sc := scanner.New(st, log, scanner.Config{Source: st.Source().Name()})
	out, err := sc.Rollback(ctx, model.RollbackOptions{SessionID: o.session, To: o.to, RunID: o.runID,
		Force: o.force, DryRun: o.dryRun, Trigger: model.TriggerCLI, Actor: cliActor()})
	if err != nil {
		return err
	}
	switch {
	case o.json:
		err = report.JSONLines(e.Stdout, []model.RollbackOutcome{out})
	case o.runID != 0 && len(out.Sessions) == 0:
		e.printf("run %d repaired no sessions; nothing to roll back\n", o.runID)
	default:
		err = report.RollbackText(e.Stdout, out)
	}
	if err != nil {
		return err
	}
	switch {
	case out.Failed > 0:
		return failedSessions(out.Failed, len(out.Sessions), fmt.Sprintf(" to restore, %d refused", out.Refused))
	case out.Refused > 0 && o.dryRun:
		return shown(fmt.Errorf("%d of %d sessions would not be restored", out.Refused, len(out.Sessions)))
	case out.Refused > 0:
		return shown(fmt.Errorf("%d of %d sessions were not restored", out.Refused, len(out.Sessions)))
	}
	return nil
}

// pruneOptions are the options of prune.
type pruneOptions struct {
	db                dbOptions
	olderThan         string
	age               time.Duration
	dryRun, all, json bool
}

func (o *pruneOptions) load(s *settings, _ []string) error {
	if err := o.db.load(s); err != nil {
		return err
	}
	// Prune deletes old rows of every source; the store opens on tmend's own table,
	// which every migrated schema has.
	o.db.source = store.DefaultSource
	var err error
	if o.age, err = model.ParseDuration(o.olderThan); err != nil {
		return fmt.Errorf("--older-than must be a positive duration like 90d, 2w or 1y, got %q", o.olderThan)
	}
	return nil
}

func (o *pruneOptions) Validate() error {
	if o.age <= 0 {
		return fmt.Errorf("--older-than must be a positive duration like 90d, 2w or 1y, got %q", o.olderThan)
	}
	return o.db.Validate()
}

func newPruneCmd(e *Env) *cobra.Command {
	o := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Delete old versions and audit rows, keeping what undoing the latest repairs needs",
		Long: `Delete saved versions and report rows older than --older-than. For every session the
version tmend last wrote and the one before it are kept, and the report of that write
when it was a repair, so its latest repair can still be rolled back (also by
'rollback --run'), unless --all. Nothing of a running run is deleted, even with --all.
Runs are kept. 'tmend serve --prune-schedule' runs this on
its own schedule.

` + configHelp,
		Example: `  tmend prune --older-than 90d --dry-run
  tmend prune --older-than 2w
  tmend prune --older-than 1y --all`,
		Args: noArgs,
		RunE: runE(e, o, runPrune),
	}
	fl := cmd.Flags()
	registerDBFlags(fl)
	fl.StringVar(&o.olderThan, "older-than", "", "age of what to delete: numbers with units, largest first: y (365d), w, d, h, m, s or ms (90d, 2w, 1y, 1d12h)")
	fl.BoolVar(&o.dryRun, "dry-run", false, "count what would be deleted; delete nothing")
	fl.BoolVar(&o.all, "all", false, "also delete the versions that rolling back the latest repairs needs")
	fl.BoolVar(&o.json, "json", false, `print the counts as JSON: {"dry_run", "deleted" or with --dry-run "would_delete": {"versions", "reports"}}`)
	return cmd
}

func runPrune(ctx context.Context, e *Env, o *pruneOptions) error {
	st, closeDB, err := openStore(ctx, newLogger(e, o.db.logLevel), o.db, true)
	if err != nil {
		return err
	}
	defer closeDB()
	versions, reports, err := st.Prune(ctx, time.Now().Add(-o.age), o.all, o.dryRun)
	if err != nil {
		return err
	}
	verb := "deleted"
	if o.dryRun {
		verb = "would delete"
	}
	if o.json {
		counts := map[string]int{"versions": versions, "reports": reports}
		return report.JSONLines(e.Stdout, []map[string]any{{"dry_run": o.dryRun, strings.ReplaceAll(verb, " ", "_"): counts}})
	}
	e.printf("%s %d versions and %d reports older than %s\n", verb, versions, reports, o.olderThan)
	return nil
}
