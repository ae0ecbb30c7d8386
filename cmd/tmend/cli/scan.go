package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// runner is a scanner wired to the database from a command's options.
type runner struct {
	sc    *scanner.Scanner
	store *store.Store
	log   zerolog.Logger
	close func()
	tp    *termProgress // on a terminal
}

func openRunner(ctx context.Context, e *Env, db dbOptions, run runOptions, readOnly bool) (*runner, error) {
	log, tp := progressLogger(e, db.logLevel)
	st, closeDB, err := openStore(ctx, log, db, readOnly)
	if err != nil {
		return nil, err
	}
	cfg := run.config
	ev := log.Info().Str("source", st.Key()).Int("workers", cfg.Workers)
	if run.repairs {
		ev = ev.Str("quiet_period", cfg.Repair.QuietPeriod.String()).Str("target", string(cfg.Repair.Target))
	}
	ev.Msg("configured")
	release := holdHeapFloor(e, int64(cfg.MaxInflightBytes))
	cfg.Alone = func(size int) func() { return holdHeapCeiling(e, int64(size)) }
	closeAll := func() { closeDB(); release() }
	return &runner{sc: scanner.New(st, log, cfg), store: st, log: log, close: closeAll, tp: tp}, nil
}

// progress shows a bar on a terminal, of total sessions when known (total <= 0: a
// spinner), and a log line every 10s otherwise. done clears the bar.
func (r *runner) progress(total int64) (func(scanner.Progress), func()) {
	if r.tp != nil {
		r.tp.start("scanning", total, true, "sessions")
		return func(p scanner.Progress) { r.tp.set(int64(p.Counts.Scanned)) }, r.tp.stop
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

// total estimates how many sessions run id scans, for the bar, by the table's
// statistics (store.EstimateRun); 0 when unknown.
func (r *runner) total(ctx context.Context, id int64) int64 {
	if r.tp == nil {
		return 0
	}
	run, err := r.store.Run(ctx, id)
	if err != nil {
		return 0
	}
	n, err := r.store.EstimateRun(ctx, run)
	if err != nil {
		return 0
	}
	return n
}

// scanOptions are the options of scan.
type scanOptions struct {
	db                 dbOptions
	run                runOptions
	queue              queueOptions
	full, dryRun, json bool
	session            string
	limit              int
	cancel             int64
	// scheduled records the run as the schedule's (trigger cron), for the CronJob and
	// timer; metricsTextfile is where its metrics go for node-exporter.
	scheduled       bool
	metricsTextfile string
}

func (o *scanOptions) load(s *settings, _ []string) error {
	if err := loadQueued(s, &o.db, &o.run, &o.queue); err != nil {
		return err
	}
	o.metricsTextfile = s.get("metrics-textfile")
	return nil
}

func (o *scanOptions) Validate() error {
	switch {
	case o.full && o.session != "":
		return errors.New("give --full or --session, not both")
	case o.limit < 0:
		return errors.New("--limit must not be negative")
	case o.cancel < 0:
		return errors.New("--cancel takes a run id")
	case o.cancel > 0 && (o.full || o.session != "" || o.dryRun || o.limit > 0 || o.scheduled):
		return errors.New("--cancel takes no other scan options")
	case o.scheduled && o.session != "":
		return errors.New("--scheduled is for incremental and full scans, not --session")
	}
	return errors.Join(o.db.Validate(), o.run.Validate(), o.queue.Validate())
}

func newScanCmd(e *Env) *cobra.Command {
	o := &scanOptions{}
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Repair stored sessions: those changed since the last run, or all with --full",
		Long: `Scan the session table and repair the sessions whose tool calls and results are out of
step. Each repaired session is written whole (up to 64 in one transaction), with its
prior and new content kept as versions and a report row in the audit table. Clean
sessions are counted on the run, not written.

By default a run is incremental: the sessions changed since the last completed run, with
a safety overlap. --dry-run writes only reports (status would_repair) and exits 3 when it
finds sessions to repair. A run that failed some sessions (status failed: an error while
writing one, such as a constraint or trigger of the table) exits 4; the others are
handled.

A scan is split into --partitions partition jobs on River, in the database: this command
works them (--concurrency at once) and waits for the run to end, while any 'tmend serve'
or 'tmend worker' running on the database helps. One scan of a source runs at a time.
Ctrl-C cancels the run; --cancel RUN cancels a run started anywhere.

--compact[=PROFILE] also compacts each session after its repair, in the same write (one
version and report per session; 'tmend rollback' undoes it, also after the agent appended
turns; 'tmend report --session ID --cleared' shows what each stub replaced): profiles
conservative, standard (a bare --compact) and aggressive, as 'tmend compact --help'
describes; the idle gate reads the table's updated-at column. Tables kept one row per
session only. A dry run reports the saving per session and for the run, and exits 3
when some session would be compacted, even with none to repair.

--metrics-textfile writes, after the run, the metrics of every run recorded in the
database (those 'tmend serve' exports at /metrics, read the same way) to a file,
atomically, for runs without a daemon (a CronJob, a timer).

` + configHelp,
		Example: `  tmend scan --dry-run
  tmend scan --full --json
  tmend scan --full --compact --dry-run
  tmend scan --compact=conservative
  tmend scan --full --partitions 16 --concurrency 2
  tmend scan --cancel 42
  tmend scan --scheduled --metrics-textfile /var/lib/node_exporter/textfile_collector/tmend.prom
  tmend scan --table public.conversations --id-column conv_id --messages-column payload --updated-at-column modified_at
  tmend scan --preset langchain-postgres --dry-run
  tmend scan --preset ai-sdk-chatbot --table 'chatbot."Message_v2"'
  tmend scan --layout messages --table chat_messages --session-column conversation_id --order-column created_at --message-column body
  tmend scan --layout langgraph --dry-run
  tmend scan --layout langgraph --table agents.checkpoints --session '["thread-1","tools:6e2d"]'`,
		Args: noArgs,
		RunE: runE(e, o, runScan),
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f, true)
	o.run.register(f, repairFlags|forceFlag|pageFlags|compactFlag)
	f.BoolVar(&o.full, "full", false, "scan every session, not only those changed since the last run")
	f.StringVar(&o.session, "session", "", "scan this one session")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would change; write no content")
	f.IntVar(&o.limit, "limit", 0, "stop after this many sessions (the incremental position does not move)")
	f.BoolVar(&o.json, "json", false, "print the run as a JSON object (the API's shape)")
	f.Int64Var(&o.cancel, "cancel", 0, "cancel this running run's remaining partitions, and print it (exit 1 when it is not running)")
	f.BoolVar(&o.scheduled, "scheduled", false, "record the run as a scheduled one (trigger cron), as the shipped CronJob and timer do")
	f.String("metrics-textfile", "", "after the run, write the metrics of the recorded runs to this file (Prometheus text format, for node-exporter's textfile collector)")
	o.queue.register(f, true)
	return cmd
}

func runScan(ctx context.Context, e *Env, o *scanOptions) error {
	mode := model.ModeIncremental
	switch {
	case o.full:
		mode = model.ModeFull
	case o.session != "":
		mode = model.ModeSession
	}
	r, err := openRunner(ctx, e, o.db, o.run, o.dryRun)
	if err != nil {
		return err
	}
	defer r.close()
	trigger := model.TriggerCLI
	if o.scheduled {
		trigger = model.TriggerCron
	}
	var run model.RunRow
	if mode == model.ModeSession {
		onProgress, done := r.progress(0)
		var res model.RunResult
		res, err = r.sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Actor: cliActor(), Mode: mode, SessionID: o.session,
			DryRun: o.dryRun, Force: o.run.engine.force, Progress: onProgress, KeepOutcomes: true})
		done()
		run, err = r.recorded(ctx, res, err)
	} else {
		run, err = scanShared(ctx, e, r, o, scanner.RunOptions{Trigger: trigger, Actor: cliActor(), Mode: mode, DryRun: o.dryRun,
			Limit: o.limit, Force: o.run.engine.force})
	}
	err = endRun(e, run, err, o.json, o.dryRun)
	if run.ID != 0 && o.metricsTextfile != "" {
		// Also after Ctrl-C, which ended the run: the file counts it cancelled.
		if werr := daemon.WriteTextfile(context.WithoutCancel(ctx), r.store, o.metricsTextfile); werr != nil {
			if err != nil {
				e.eprintf("tmend: %v\n", werr)
				return err
			}
			return werr
		}
	}
	return err
}

// recorded returns a single-session run as it is shown: its recorded row, with the
// session's outcome. err is the run's error, joined with any reading the row.
func (r *runner) recorded(ctx context.Context, res model.RunResult, err error) (model.RunRow, error) {
	if res.RunID == 0 {
		return model.RunRow{}, err
	}
	run, rerr := r.store.Run(context.WithoutCancel(ctx), res.RunID)
	if rerr != nil {
		return model.RunRow{}, errors.Join(err, rerr)
	}
	run.Outcomes = res.Outcomes
	return run, err
}

// endRun prints a run (if one started) and returns the command's error: the run's, which
// the printed run shows; exit 4 when it failed sessions; or, for a dry run that found
// work, exit 3.
func endRun(e *Env, run model.RunRow, err error, asJSON, dryRun bool) error {
	if run.ID == 0 {
		return err
	}
	if werr := printRun(e, run, asJSON); werr != nil {
		return errors.Join(err, werr)
	}
	res := run.Result()
	switch {
	case err != nil:
		return shown(err)
	case res.Counts.Failed > 0:
		return failedSessions(res.Counts.Failed, res.Counts.Scanned,
			fmt.Sprintf(" (tmend report --run %d --status failed lists them with the error)", run.ID))
	case dryRun && res.Problems():
		return errProblems
	}
	return nil
}

// scanShared starts a scan on the queue (or, with --cancel, cancels one), works its
// partitions here while others may help, and waits for it to end. Interrupted, it
// cancels the run.
func scanShared(ctx context.Context, e *Env, r *runner, o *scanOptions, ro scanner.RunOptions) (model.RunRow, error) {
	if o.cancel > 0 {
		// As DELETE /v1/runs/{id} answers 409: a run that ended has nothing to cancel.
		before, err := r.store.Run(ctx, o.cancel)
		if err != nil {
			return model.RunRow{}, err
		}
		if before.Status != model.RunRunning {
			return model.RunRow{}, fmt.Errorf("run %d is %s, not running: nothing to cancel", o.cancel, before.Status)
		}
	}
	qc := o.queue.config(o.db.schema, nil)
	qc.OwnsRuns = true // the run lives while this process does (README, "Repairing stored sessions")
	q, err := queue.New(r.store, r.sc, r.log, qc)
	if err != nil {
		return model.RunRow{}, err
	}
	if o.cancel > 0 {
		return q.Cancel(ctx, o.cancel)
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := q.Stop(stop); err != nil {
			r.log.Warn().Err(err).Msg("stopping the queue")
		}
	}()
	started, err := q.StartScan(ctx, ro, o.queue.partitions)
	if err != nil {
		return model.RunRow{}, err
	}
	id := started.ID
	if started.TakenOver && o.queue.partitions > 0 && started.Partitions > 0 && started.Partitions != o.queue.partitions {
		e.eprintf("tmend: run %d, whose processes died, is taken over: it goes on in its own %d partitions from their checkpoints; --partitions %d does not apply to it\n",
			id, started.Partitions, o.queue.partitions)
	}
	if err := q.Start(context.WithoutCancel(ctx)); err != nil {
		return model.RunRow{}, err
	}
	onProgress, done := r.progress(r.total(ctx, id))
	start := time.Now()
	run, err := q.Wait(ctx, id, func(run model.RunRow) {
		onProgress(scanner.Progress{Counts: run.Counts, Elapsed: time.Since(start)})
	})
	done()
	if err != nil && ctx.Err() != nil {
		// Interrupted: the run's remaining partitions are cancelled; what they wrote
		// stays, each session whole.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if run, cerr := q.Cancel(cctx, id); cerr == nil {
			return run, err
		}
	}
	if err != nil {
		return run, err
	}
	if run.Status != model.RunCompleted {
		return run, fmt.Errorf("run %d %s: %s", id, run.Status, run.Error)
	}
	return run, nil
}

func printRun(e *Env, run model.RunRow, asJSON bool) error {
	var err error
	if asJSON {
		err = report.JSONLines(e.Stdout, []model.RunRow{run})
	} else {
		res := run.Result()
		err = report.RunText(e.Stdout, &res)
	}
	if err != nil {
		return fmt.Errorf("print run: %w", err)
	}
	return nil
}

// repairOptions are the options of repair.
type repairOptions struct {
	db           dbOptions
	run          runOptions
	session      string
	dryRun, json bool
}

func (o *repairOptions) load(s *settings, _ []string) error {
	if err := o.db.load(s); err != nil {
		return err
	}
	return o.run.load(s, o.db.source)
}

func (o *repairOptions) Validate() error {
	if o.session == "" {
		return errors.New("--session is required")
	}
	if err := o.db.Validate(); err != nil {
		return err
	}
	return o.run.Validate()
}

func newRepairCmd(e *Env) *cobra.Command {
	o := &repairOptions{}
	cmd := &cobra.Command{
		Use:   "repair --session ID",
		Short: "Repair one stored session now and print exactly what changed",
		Long: `Repair one session now, whatever its age, and print each action with the sizes before
and after. The prior content is kept as a version, so 'tmend rollback --session ID'
undoes it. --dry-run shows the same without writing; --force also answers calls of the
last turn that may still be running (the quiet period). Like 'scan --dry-run', a dry
run exits 3 when the session needs repair (or cannot be handled) or, with --compact,
compaction; a run exits 3 when it left the session as it is because it cannot be
handled (unparseable, unsupported, too large) or changed meanwhile (conflict), and 4
when the session failed (an error while writing it).

--compact[=PROFILE] also compacts it after the repair, in the same write (profiles
conservative, standard (a bare --compact) and aggressive, as 'tmend compact --help'
describes; tables kept one row per session only): the printed result lists each content
replaced, 'tmend report --session ID --cleared' shows what the stubs replaced, and
'tmend rollback --session ID' undoes it, also after the agent appended turns.

` + configHelp,
		Example: `  tmend repair --session 7f3e2a
  tmend repair --session 7f3e2a --dry-run --json
  tmend repair --session 7f3e2a --compact=aggressive --dry-run`,
		Args: noArgs,
		RunE: runE(e, o, runRepair),
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f, true)
	o.run.register(f, repairFlags|forceFlag|compactFlag)
	f.StringVar(&o.session, "session", "", "the session's id")
	f.BoolVar(&o.dryRun, "dry-run", false, "show what would change; write nothing but the report")
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

func runRepair(ctx context.Context, e *Env, o *repairOptions) error {
	r, err := openRunner(ctx, e, o.db, o.run, o.dryRun)
	if err != nil {
		return err
	}
	defer r.close()
	res, err := r.sc.Run(ctx, scanner.RunOptions{Trigger: model.TriggerCLI, Actor: cliActor(), Mode: model.ModeSession,
		SessionID: o.session, DryRun: o.dryRun, Force: o.run.engine.force, KeepOutcomes: true})
	run, err := r.recorded(ctx, res, err)
	err = endRun(e, run, err, o.json, o.dryRun)
	if err != nil {
		return err
	}
	if run.Summary.ByStatus[model.StatusClean] == 1 && !o.json {
		e.printf("\nsession %s is clean; nothing to do\n", report.Escape(o.session))
	}
	// Asked to repair it now, a session tmend left as it is (it could not read it, or
	// it changed meanwhile) is not an all-clear: the printed result says why.
	if res := run.Result(); res.Counts.Skipped-res.ByStatus[model.StatusHeld]+res.Counts.Conflict > 0 {
		return errProblems
	}
	return nil
}
