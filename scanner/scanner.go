// Package scanner runs repairs over stored sessions: it streams candidates page by page,
// repairs them on a bounded worker pool, writes the changed ones, and records the run.
package scanner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// Store is what the scanner needs from the database.
type Store interface {
	Sessions(ctx context.Context, q model.Query) ([]model.Session, error)
	// ApplyBatch writes repaired sessions, each whole, and returns what became of each as
	// one session's write would (outcome, or error).
	ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error)
	// InsertReports records reports of sessions it wrote nothing of, all or none.
	InsertReports(ctx context.Context, rs []model.Report) error
	StartRun(ctx context.Context, r model.Run) (int64, time.Time, error)
	FinishRun(ctx context.Context, f model.Finish) error
	ScanPosition(ctx context.Context, source string) (time.Time, bool, error)
	HasUpdatedAt() bool
	// How many sessions a full or an incremental scan reads, by the table's statistics.
	EstimateSessions(ctx context.Context) (int64, error)
	EstimateChanged(ctx context.Context, since time.Time) (int64, error)

	// A partition of a run: claimed by one job attempt, checkpointed, ended; RunReports
	// lists what the run already reported of some sessions, for a resumed partition.
	ClaimPartition(ctx context.Context, runID int64, partition int) (model.Claim, error)
	Checkpoint(ctx context.Context, cp model.Checkpoint) error
	EndPartition(ctx context.Context, e model.PartitionEnd) (ended bool, err error)
	RunReports(ctx context.Context, runID int64, ids []string) (map[string]model.ReportRow, error)

	// Rollback restores one session; RunSessions lists the reports of the sessions a run
	// repaired, Versions a session's saved versions; a rollback is recorded as a run of its
	// own (StartRun).
	Rollback(ctx context.Context, req model.RollbackRequest) (model.RollbackResult, error)
	RunSessions(ctx context.Context, runID int64) ([]model.ReportRow, error)
	Versions(ctx context.Context, sessionID string) ([]model.VersionRow, error)
	Run(ctx context.Context, id int64) (model.RunRow, error)
}

// Config tunes every run of a Scanner.
type Config struct {
	Source  string // the source's name, for runs and scan state
	Workers int    // sessions repaired at once; default twice GOMAXPROCS
	// (a worker waits for the writer when it is behind, so more workers than CPUs keep both busy)
	BatchSize int // sessions per page; default 500
	MaxBytes  int // larger sessions are reported too_large and left alone; default 64 MiB (see repair.DefaultMaxMemory)
	// MaxInflightBytes bounds the content read and not yet repaired and written, across
	// pages and workers; a session larger than this is handled alone. Default 16 MiB.
	// Memory in use is a small multiple of it (a repair holds its input, its output and
	// what it parsed): BENCHMARKS.md has the figures.
	MaxInflightBytes int
	// Overlap re-reads the end of the previous incremental window, for rows committed
	// late and for sessions left pending; default 15m, at least the quiet period.
	Overlap time.Duration
	// BatchPause is a jittered pause between pages, to go easy on a busy database.
	BatchPause time.Duration
	// Repair options; Now, UpdatedAt and Force are set per session and run.
	Repair repair.Options
	// Retries bounds the attempts at an operation while the database is unavailable,
	// with jittered exponential backoff from RetryBase between them (defaults 7 and 500ms:
	// six waits of 0.5s to 16s, about 30s in all, as README.md says).
	Retries   int
	RetryBase time.Duration
	// Compact, when set, compacts each session after its repair with this profile (the
	// store must support it: CanCompact).
	Compact compact.Profile
	// Alone, when set, is called as a session larger than MaxInflightBytes is read to be
	// handled alone, with its size; done is called once it is handled and written (the
	// command caps the heap meanwhile).
	Alone func(size int) (done func())
	// ReportsLinger is how long the reports of sessions left as they are wait for more to
	// be written with them, in one transaction (default 50ms): it delays their page's
	// commit by as much, not the run's end (the last ones go once the workers are done).
	ReportsLinger time.Duration
}

func (c *Config) defaults() {
	if c.Workers < 1 {
		c.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if c.BatchSize < 1 {
		c.BatchSize = 500
	}
	if c.MaxBytes < 1 {
		c.MaxBytes = 64 << 20
	}
	if c.MaxInflightBytes < 1 {
		c.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if c.Repair.MaxMemory < 1 {
		c.Repair.MaxMemory = repair.DefaultMaxMemory(int64(c.MaxBytes))
	}
	q := c.Repair.QuietPeriod
	if q == 0 {
		q = repair.DefaultQuietPeriod
	}
	if c.Overlap <= 0 {
		c.Overlap = 15 * time.Minute
	}
	c.Overlap = max(c.Overlap, q)
	if c.Retries < 1 {
		c.Retries = 7
	}
	if c.ReportsLinger <= 0 {
		c.ReportsLinger = 50 * time.Millisecond
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 500 * time.Millisecond
	}
}

// DefaultMaxInflightBytes is Config.MaxInflightBytes' default, sized for the 256 MiB
// memory limit of the shipped manifests (BENCHMARKS.md).
const DefaultMaxInflightBytes = 16 << 20

// Scanner runs repairs against a Store.
type Scanner struct {
	store Store
	log   zerolog.Logger
	cfg   Config
}

// New returns a Scanner; cfg's zero fields take their defaults.
func New(store Store, log zerolog.Logger, cfg Config) *Scanner {
	cfg.defaults()
	return &Scanner{store: store, log: log.With().Str("component", "scanner").Logger(), cfg: cfg}
}

// RunOptions say what one run does.
type RunOptions struct {
	Trigger model.Trigger
	// Actor is who started the run (model.Run.Actor); its reports record it too.
	Actor     string
	Mode      model.Mode
	SessionID string // ModeSession
	DryRun    bool   // report what would change; write no content
	Limit     int    // stop after this many sessions (0: no limit)
	Force     bool   // repair calls still within the quiet period
	// Progress, if set, is called after each session from one goroutine.
	Progress func(Progress)
	// KeepOutcomes keeps every non-clean session's outcome in the result (for on-demand
	// repairs, which print them).
	KeepOutcomes bool
	// Stop, when closed, ends the run softly: no more sessions are read, and those already
	// handed to workers are finished and committed. Cancelling ctx is the hard stop.
	Stop <-chan struct{}
	// OnStart, if set, is called with the run's id once its row exists.
	OnStart func(runID int64)

	// Set by WorkPartition for one partition of a run.
	part partScan
}

// partScan is what a partition's scan adds to a run's: its slice of the sessions, where
// the last checkpoint left it, and how to record the next ones.
type partScan struct {
	slice model.Slice
	after model.Cursor
	// resumed: an earlier attempt may have handled sessions past after, so a page's
	// sessions already reported in the run are counted from their reports instead.
	resumed bool
	// retry: an earlier attempt failed or was interrupted, so a write that outlasts
	// this attempt too fails its sessions rather than the attempt (see write); began is
	// when this attempt started.
	retry bool
	began time.Time
	// yield, when closed, ends the scan at the next page boundary with errYield.
	yield <-chan struct{}
	// checkpoint records progress: every session up to after is counted in soFar.
	checkpoint func(ctx context.Context, after model.Cursor, soFar model.RunResult) error
	// lease is the attempt's hold on its partition, which every report it writes names:
	// a write after the attempt lost it (its run ended, a newer attempt claimed the
	// partition) is refused with model.ErrLeaseLost, and the attempt stops.
	lease *model.Lease
}

// Progress is a run's state so far.
type Progress struct {
	Counts  model.RunCounts
	Elapsed time.Duration
}

// Run performs one run. A session that cannot be handled is reported and counted, and
// the run goes on; only a database that stays unavailable (or ctx) ends it early, with
// everything committed so far kept. The error is nil when the run completed.
func (s *Scanner) Run(ctx context.Context, o RunOptions) (model.RunResult, error) {
	res := model.NewRunResult()
	res.Trigger, res.Mode, res.DryRun = o.Trigger, o.Mode, o.DryRun
	var from time.Time
	if o.Mode == model.ModeSession {
		// A session that does not exist is the caller's mistake, not a failed run.
		if err := s.exists(ctx, o.SessionID); err != nil {
			return res, err
		}
	} else {
		plan, err := s.Plan(ctx, o, 1)
		if err != nil {
			return res, err
		}
		res.Mode, o.Mode, from = plan.Mode, plan.Mode, plan.ScannedFrom
	}

	err := s.retry(ctx, "start run", func() error {
		var err error
		res.RunID, res.StartedAt, err = s.store.StartRun(ctx, model.Run{Trigger: o.Trigger, Actor: o.Actor, Mode: o.Mode,
			DryRun: o.DryRun, Source: s.cfg.Source, Options: s.options(o)})
		return err
	})
	if err != nil {
		return res, err
	}
	if o.OnStart != nil {
		o.OnStart(res.RunID)
	}
	start := time.Now()
	log := s.log.With().Int64("run_id", res.RunID).Str("mode", string(o.Mode)).Bool("dry_run", o.DryRun).Logger()
	log.Debug().Msg("run started")
	res.ScannedFrom, res.ScannedThrough = from, res.StartedAt

	_, runErr := s.stream(ctx, &res, o, start, log)
	res.Duration = time.Since(start)
	switch {
	case runErr == nil:
		res.Status = model.RunCompleted
	case errors.Is(runErr, context.Canceled), errors.Is(runErr, errStopped):
		res.Status, res.Error = model.RunCancelled, "stopped before the run completed"
	default:
		res.Status, res.Error = model.RunFailed, runErr.Error()
	}
	fin := model.Finish{RunID: res.RunID, Status: res.Status, Counts: res.Counts, Error: res.Error,
		ScannedFrom: from, ScannedThrough: res.StartedAt, Source: s.cfg.Source, Summary: res.Summary(),
		AdvanceScanState: runErr == nil && !o.DryRun && o.Limit == 0 && o.Mode != model.ModeSession}
	// Record the outcome even when ctx was cancelled; a database that is gone for good is
	// only logged.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.retry(fctx, "finish run", func() error { return s.store.FinishRun(fctx, fin) }); err != nil {
		log.Error().Err(err).Msg("could not record the run's outcome; it stays marked running")
		if runErr == nil {
			runErr = err
		}
	}
	ev := log.Info()
	if res.Counts.Repaired+res.Counts.Conflict+res.Counts.Failed == 0 {
		ev = log.Debug()
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, errStopped) {
		ev = log.Error().Err(runErr)
	}
	ev.Str("status", string(res.Status)).Int("num_scanned", res.Counts.Scanned).Int("num_repaired", res.Counts.Repaired).
		Int("num_conflict", res.Counts.Conflict).Int("num_failed", res.Counts.Failed).
		Int64("duration_ms", res.Duration.Milliseconds()).Msg("run finished")
	return res, runErr
}

// exists returns model.ErrNotFound unless the session is there; it reads no content.
func (s *Scanner) exists(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("a session run needs a session id")
	}
	var page []model.Session
	err := s.retry(ctx, "read session", func() error {
		var err error
		page, err = s.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 0})
		return err
	})
	if err == nil && len(page) == 0 {
		err = fmt.Errorf("session %q %w", id, model.ErrNotFound)
	}
	return err
}

func (s *Scanner) options(o RunOptions) model.RunOptions {
	return model.RunOptions{Limit: o.Limit, Force: o.Force, MaxBytes: s.cfg.MaxBytes, Overlap: s.cfg.Overlap.String(),
		QuietPeriod: s.cfg.Repair.QuietPeriod.String(), FailedTurns: string(s.cfg.Repair.FailedTurns),
		Target: string(s.cfg.Repair.Target), Dialect: string(s.cfg.Repair.Dialect), SessionID: o.SessionID,
		Compact: string(s.cfg.Compact)}
}

// errStopped ends a run that was stopped softly through RunOptions.Stop.
var errStopped = errors.New("run stopped")

// errYield ends a partition's scan at a page boundary when its time slice is up.
var errYield = errors.New("partition yielded")

// done is a handled session, with the page it came from. A session the run had already
// reported (a resumed partition) comes with that report instead of an outcome.
type done struct {
	out      model.SessionOutcome
	reported *model.ReportRow
	page     int
}

// pageEnd tells the counting loop how many sessions of page seq were handed to workers
// and where the next page starts.
type pageEnd struct {
	seq, sent int
	after     model.Cursor
}

// committed is the progress a scan can checkpoint: every page up to after is handled.
type committed struct {
	soFar model.RunResult
	after model.Cursor
	dirty bool // pages were committed since the last checkpoint
}

// checkpointEvery spaces a partition's checkpoints (each is a short transaction).
const checkpointEvery = time.Second

// stream reads pages in one goroutine, handles sessions on cfg.Workers goroutines,
// writes the repaired ones on a writer goroutine and counts here, so reading, repairing
// and writing overlap. Pages are committed in order once all their sessions are
// handled; a partition checkpoints them. res counts every handled session; the returned
// progress only the committed pages.
func (s *Scanner) stream(ctx context.Context, res *model.RunResult, o RunOptions, start time.Time, log zerolog.Logger) (committed, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A page of slack lets the reader fetch the next page while the workers repair this
	// one, so the database keeps producing rows (its text output is the costly part).
	work := make(chan []item, (s.cfg.BatchSize+handoff-1)/handoff+s.cfg.Workers)
	outs := make(chan []done, s.cfg.Workers*2)
	writes := make(chan write, writeBatch)
	pages := make(chan pageEnd, 4)
	bud := newBudget(s.cfg.MaxInflightBytes)

	var readErr error
	go func() {
		defer close(pages)
		defer close(work)
		readErr = s.read(ctx, res, o, work, pages, bud, log)
		if readErr != nil && !errors.Is(readErr, errStopped) && !errors.Is(readErr, errYield) {
			cancel(readErr) // a soft stop lets the workers finish what they have
		}
	}()
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for items := range work {
				ds := make([]done, 0, len(items))
				freed := 0
				for i, it := range items {
					items[i] = item{} // its content is garbage once handled
					d := done{reported: it.reported, page: it.page}
					if it.reported == nil {
						var w *write
						d.out, w = s.handle(res, o, it.sess)
						if w == nil || w.report != nil { // nothing of the content is written
							unborrow(it.sess)
						}
						if w != nil { // the writer releases its bytes once written
							w.out, w.page, w.bytes = d.out, it.page, it.bytes
							writes <- *w
							continue
						}
					}
					freed += it.bytes
					ds = append(ds, d)
				}
				bud.release(freed)
				if len(ds) > 0 {
					outs <- ds
				}
			}
		}()
	}
	// A writer takes whatever the workers queued (up to writeBatch sessions) and writes it
	// with a store call for the repairs and one for the reports alone. A repair goes as
	// soon as it comes; reports alone wait up to ReportsLinger for more (in a dry run they
	// came one to three at a time: a transaction each on the database the read runs on).
	var wwg sync.WaitGroup
	for range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for w := range writes {
				batch, held := []write{w}, w.bytes
				var linger <-chan time.Time
			fill:
				for len(batch) < writeBatch {
					select {
					case w, ok := <-writes:
						if !ok {
							break fill
						}
						batch, held = append(batch, w), held+w.bytes
						continue
					default:
					}
					// What waits holds its budget: a writer stops waiting at a quarter of it.
					if !reportsOnly(batch) || held >= s.cfg.MaxInflightBytes/(2*writers) {
						break fill
					}
					if linger == nil {
						linger = time.After(s.cfg.ReportsLinger)
					}
					select {
					case w, ok := <-writes:
						if !ok {
							break fill
						}
						batch, held = append(batch, w), held+w.bytes
					case <-linger:
						break fill
					case <-ctx.Done():
						break fill
					}
				}
				began := time.Now()
				ds := s.write(ctx, res, batch, cancel, o.part)
				log.Debug().Int("num_sessions", len(batch)).Int64("duration_ms", time.Since(began).Milliseconds()).Msg("sessions written")
				if len(ds) > 0 {
					outs <- ds
				}
				for _, w := range batch {
					unborrow(w.apply.Session)
					bud.release(w.bytes)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(writes); wwg.Wait(); close(outs) }()

	// Pages not yet committed: their counts so far, sessions handled, and end once read.
	type pending struct {
		res     model.RunResult
		handled int
		end     *pageEnd
	}
	prog := committed{soFar: model.NewRunResult(), after: o.part.after}
	prog.soFar.Merge(*res) // what earlier attempts of a partition committed
	open := map[int]*pending{}
	next, last := 0, time.Now()
	commit := func(final bool) {
		for p := open[next]; p != nil && p.end != nil && p.handled == p.end.sent; p = open[next] {
			prog.soFar.Merge(p.res)
			prog.after, prog.dirty = p.end.after, true
			delete(open, next)
			next++
		}
		if o.part.checkpoint == nil || !prog.dirty || !final && time.Since(last) < checkpointEvery || context.Cause(ctx) != nil {
			return
		}
		if err := o.part.checkpoint(ctx, prog.after, prog.soFar); err != nil {
			cancel(err)
			return
		}
		prog.dirty, last = false, time.Now()
	}
	page := func(seq int) *pending {
		if open[seq] == nil {
			open[seq] = &pending{res: model.NewRunResult()}
		}
		return open[seq]
	}
	count := func(d done) {
		p := page(d.page)
		p.handled++
		if r := d.reported; r != nil {
			stages := make(map[repair.Stage]int, len(r.StageCounts))
			for st, n := range r.StageCounts {
				stages[repair.Stage(st)] = n
			}
			res.Count(r.Status, stages, r.IssueCodes, r.Dialect)
			p.res.Count(r.Status, stages, r.IssueCodes, r.Dialect)
			if c := reportedCompaction(r); c != nil {
				res.Compaction.Add(c)
				p.res.Compaction.Add(c)
			}
			return
		}
		res.Add(d.out)
		p.res.Add(d.out)
		if o.KeepOutcomes && d.out.Status != model.StatusClean {
			res.Outcomes = append(res.Outcomes, d.out)
		}
	}
	for outs != nil || pages != nil {
		select {
		case ds, ok := <-outs:
			if !ok {
				outs = nil
				continue
			}
			for _, d := range ds {
				count(d)
			}
			if o.Progress != nil {
				o.Progress(Progress{Counts: res.Counts, Elapsed: time.Since(start)})
			}
		case e, ok := <-pages:
			if !ok {
				pages = nil
				continue
			}
			page(e.seq).end = &e
		}
		commit(false)
	}
	if context.Cause(ctx) == nil {
		commit(true)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return prog, err
	}
	if readErr != nil {
		return prog, readErr
	}
	return prog, ctx.Err()
}

// writeBatch bounds the sessions written together in one transaction; the budget
// (MaxInflightBytes) bounds their bytes. writers write batches at once: a batch's time
// is mostly the database's work on the contents (versions, hashes), which a second
// writer puts on another core while the first waits.
const (
	writeBatch = 64
	writers    = 2
)

// reportsOnly says whether a batch holds reports alone.
func reportsOnly(batch []write) bool {
	for _, w := range batch {
		if w.report == nil {
			return false
		}
	}
	return true
}

// write is a handled session on its way to the writer: its write (a repair, or only its
// report), and its outcome to finish once written.
type write struct {
	apply  model.Apply
	report *model.Report // set for a report alone, of a session left as it is
	out    model.SessionOutcome
	page   int
	bytes  int
}

// write writes a batch: the reports alone with one store call, the repairs with another,
// retrying what the database was unavailable for, and finishes each session's outcome
// as handle would have. A write that ends the run (a database that stays unavailable, a
// lease lost) cancels the run with its error, and its sessions are not handled.
//
// The repairs must be written within the partition job's time (ctx's deadline), less a
// margin to record what happened: one that takes longer fails the attempt, which River
// retries from the checkpoint; on a retry its sessions fail instead, with the reason,
// so that a session too large to write in a job's time is reported once rather than
// retried until the job's attempts run out. Only a write that had half the attempt's
// time: one begun late is retried again, first after the checkpoint.
func (s *Scanner) write(ctx context.Context, res *model.RunResult, batch []write, cancel context.CancelCauseFunc, part partScan) []done {
	var reports []model.Report
	var applies []write
	ds := make([]done, 0, len(batch))
	for _, w := range batch {
		if w.report != nil {
			reports = append(reports, *w.report)
		} else {
			applies = append(applies, w)
		}
	}
	if len(reports) > 0 {
		if err := s.record(ctx, reports...); err != nil {
			cancel(err)
		} else {
			for _, w := range batch {
				if w.report != nil {
					ds = append(ds, done{out: w.out, page: w.page})
				}
			}
		}
	}
	if len(applies) == 0 {
		return ds
	}
	outs, errs := make([]model.Outcome, len(applies)), make([]error, len(applies))
	rest := make([]int, len(applies))
	for i := range rest {
		rest[i] = i
	}
	wctx, stop := ctx, context.CancelFunc(func() {})
	began := time.Now()
	d, ok := ctx.Deadline()
	if ok {
		wctx, stop = context.WithDeadline(ctx, d.Add(-min(writeMargin, time.Until(d)/4)))
	}
	defer stop()
	err := s.retry(wctx, "write sessions", func() error {
		as := make([]model.Apply, len(rest))
		for j, i := range rest {
			as[j] = applies[i].apply
		}
		os, es := s.store.ApplyBatch(wctx, as)
		var again []int
		var unavailable error
		for j, i := range rest {
			outs[i], errs[i] = os[j], es[j]
			if errors.Is(es[j], model.ErrUnavailable) {
				again, unavailable = append(again, i), es[j]
			}
		}
		rest = again
		return unavailable
	})
	for _, i := range rest {
		errs[i] = err // still unavailable, or ctx's end
	}
	if wctx.Err() != nil && ctx.Err() == nil {
		const tooLong = "the write took longer than its partition job may run ((--partition-slice + --rescue-after) / 2, less the time to record this)"
		if !part.retry || part.began.IsZero() || d.Sub(began) < d.Sub(part.began)/2 {
			cancel(errors.New(tooLong + "; the job is retried from its checkpoint"))
			return ds
		}
		for i := range errs {
			if errs[i] != nil {
				errs[i] = errors.New(tooLong + ", on a retry too: raise --rescue-after and run again")
			}
		}
	}
	for i, w := range applies {
		out, err := s.written(ctx, res, w, outs[i], errs[i])
		if err != nil {
			cancel(err)
			continue
		}
		ds = append(ds, done{out: out, page: w.page})
	}
	return ds
}

// writeMargin is the part of a partition job's time a write leaves to record its
// sessions' failure when it takes longer (see write): a quarter of the time left, at
// most this.
const writeMargin = 10 * time.Second

// reportOnly is the write of a session's report alone.
func reportOnly(r model.Report) *write { return &write{report: &r} }

// Sessions go to the workers handoff at a time, or fewer of handoffBytes together, so
// that the reader, which the database waits for, seldom waits for a processor behind
// the workers to hand over a session (a page's 500 sessions were 500 sends and wakeups).
const (
	handoff      = 16
	handoffBytes = 256 << 10
)

// item is a session handed to a worker, with the bytes it holds of the budget and the
// page it came from.
type item struct {
	sess     model.Session
	reported *model.ReportRow
	bytes    int
	page     int
}

// read sends sessions page by page in keyset order until the last page or the limit.
// The content read and not yet handled stays within the byte budget: a page is read
// only as large as the room left, and a session that does not fit comes deferred and is
// read alone once there is room for it (or once nothing else is in flight). After a
// page's sessions it sends the page's end.
func (s *Scanner) read(ctx context.Context, res *model.RunResult, o RunOptions, work chan<- []item, pages chan<- pageEnd, bud *budget, log zerolog.Logger) error {
	q := model.Query{Mode: o.Mode, SessionID: o.SessionID, From: res.ScannedFrom, To: res.ScannedThrough,
		Limit: s.cfg.BatchSize, MaxBytes: s.cfg.MaxBytes, Slice: o.part.slice, After: o.part.after, NoRows: o.DryRun}
	sent := 0
	var seenBytes, seenRows int // content read so far, to size pages
	for seq := 0; ; seq++ {
		// The database renders every row up to the page's limit, also those past its
		// byte bound (read again alone later): wait for room for a session of the mean
		// size seen so far, and ask for about as many rows as fit.
		avg := 0
		if seenRows > 0 {
			avg = max(seenBytes/seenRows, 1)
		}
		if err := bud.wait(ctx, o.Stop, min(max(avg, 1), s.cfg.MaxInflightBytes)); err != nil {
			return s.readStopped(ctx, err)
		}
		q.PageBytes = bud.room()
		q.Limit = min(s.cfg.BatchSize, 64)
		if avg > 0 {
			q.Limit = min(s.cfg.BatchSize, max(q.PageBytes/avg, 1))
		}
		if o.Limit > 0 {
			q.Limit = min(q.Limit, o.Limit-sent)
		}
		var page []model.Session
		err := s.retry(ctx, "read sessions", func() error {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			var err error
			page, err = s.store.Sessions(qctx, q)
			return err
		})
		if err != nil {
			return err
		}
		log.Debug().Int("num_sessions", len(page)).Msg("page read")
		if o.Mode == model.ModeSession && len(page) == 0 {
			return fmt.Errorf("session %q %w", o.SessionID, model.ErrNotFound)
		}
		reported, err := s.reported(ctx, res.RunID, o, page)
		if err != nil {
			return err
		}
		for _, sess := range page {
			bud.take(len(sess.Messages))
			if sess.Messages != nil || sess.Deferred {
				seenBytes += sess.Size
				seenRows++
			}
		}
		handed := 0
		var items []item
		itemBytes := 0
		hand := func() error {
			if len(items) == 0 {
				return nil
			}
			var err error
			select {
			case work <- items:
				handed += len(items)
				items, itemBytes = nil, 0
				return nil
			case <-o.Stop:
				err = errStopped
			case <-ctx.Done():
				err = ctx.Err()
			}
			for _, it := range items {
				unborrow(it.sess)
			}
			return err
		}
		for _, sess := range page {
			it := item{page: seq}
			if r, ok := reported[sess.ID]; ok {
				bud.release(len(sess.Messages))
				it.reported = &r
			} else {
				if sess.Deferred {
					// What waits in items holds budget the session may need.
					if err := hand(); err != nil {
						return s.readStopped(ctx, err)
					}
					full, ok, err := s.readAlone(ctx, o, bud, sess)
					if err != nil || !ok {
						if err != nil {
							return s.readStopped(ctx, err)
						}
						continue // deleted since the page was read
					}
					sess = full
				}
				it.sess, it.bytes = sess, len(sess.Messages)
			}
			items = append(items, it)
			itemBytes += it.bytes
			if len(items) == handoff || itemBytes >= handoffBytes {
				if err := hand(); err != nil {
					return s.readStopped(ctx, err)
				}
			}
		}
		if err := hand(); err != nil {
			return s.readStopped(ctx, err)
		}
		sent += len(page)
		var after model.Cursor
		if len(page) > 0 {
			last := page[len(page)-1]
			after = model.Cursor{Position: last.Position, ID: last.ID, Started: true}
		} else {
			after = q.After
		}
		select {
		case pages <- pageEnd{seq: seq, sent: handed, after: after}:
		case <-ctx.Done():
			return nil
		}
		if len(page) == 0 || o.Mode == model.ModeSession || len(page) < q.Limit && !page[len(page)-1].Deferred ||
			o.Limit > 0 && sent >= o.Limit {
			return nil
		}
		q.After = after
		select {
		case <-o.part.yield:
			return errYield
		default:
		}
		var pause <-chan time.Time
		if s.cfg.BatchPause > 0 {
			pause = time.After(s.cfg.BatchPause/2 + rand.N(s.cfg.BatchPause))
		} else {
			pause = closedTime
		}
		select {
		case <-ctx.Done():
			return nil
		case <-o.Stop:
			return errStopped
		case <-pause:
		}
	}
}

// reported returns which sessions of a resumed partition's page the run already
// reported, by id; nil for any other scan.
func (s *Scanner) reported(ctx context.Context, runID int64, o RunOptions, page []model.Session) (map[string]model.ReportRow, error) {
	if !o.part.resumed || len(page) == 0 {
		return nil, nil
	}
	ids := make([]string, len(page))
	for i, sess := range page {
		ids[i] = sess.ID
	}
	var out map[string]model.ReportRow
	err := s.retry(ctx, "read reports", func() error {
		var err error
		out, err = s.store.RunReports(ctx, runID, ids)
		return err
	})
	return out, err
}

// readAlone reads a deferred session once the budget has room for it (or nothing else
// is in flight, for one larger than the whole budget). ok is false when it is gone.
func (s *Scanner) readAlone(ctx context.Context, o RunOptions, bud *budget, d model.Session) (model.Session, bool, error) {
	want := min(d.Size, s.cfg.MaxInflightBytes)
	if err := bud.wait(ctx, o.Stop, want); err != nil {
		return d, false, err
	}
	bud.take(want)
	done := func() {}
	if s.cfg.Alone != nil && d.Size > s.cfg.MaxInflightBytes {
		done = s.cfg.Alone(d.Size)
	}
	var page []model.Session
	err := s.retry(ctx, "read session", func() error {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var err error
		// One larger than the whole budget is alone in flight: its content is not copied
		// out of the read (which holds a connection until unborrow).
		page, err = s.store.Sessions(qctx, model.Query{Mode: model.ModeSession, SessionID: d.ID, MaxBytes: s.cfg.MaxBytes, NoRows: o.DryRun,
			Borrow: d.Size > s.cfg.MaxInflightBytes})
		return err
	})
	if err != nil || len(page) == 0 {
		bud.release(want)
		done()
		return d, false, err
	}
	// It may have changed size since; the budget counts what is really held.
	got := len(page[0].Messages)
	bud.take(got - want)
	sess := page[0]
	if release := sess.Release; release != nil {
		sess.Release = func() { release(); done() }
	} else {
		sess.Release = done
	}
	return sess, true, nil
}

// unborrow ends a borrowed read (Query.Borrow) once the session's content and all
// sliced from it are no longer used: handled, and written if it was repaired.
func unborrow(sess model.Session) {
	if sess.Release != nil {
		sess.Release()
	}
}

// readStopped turns a budget wait's end into read's result: a soft stop ends the run
// as stopped, a cancelled ctx is the workers' business, anything else is an error.
func (s *Scanner) readStopped(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errStopped):
		return errStopped
	case ctx.Err() != nil:
		return nil
	}
	return err
}

var closedTime = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// handle repairs one session and returns its outcome and what the writer writes of it:
// the repair (finished by written), or its report alone; nil for a session that leaves
// no row (clean, held).
func (s *Scanner) handle(res *model.RunResult, o RunOptions, sess model.Session) (model.SessionOutcome, *write) {
	out := model.SessionOutcome{SessionID: sess.ID, BytesBefore: sess.Size, BytesAfter: sess.Size}
	report := model.Report{RunID: res.RunID, SessionID: sess.ID, Trigger: o.Trigger, Actor: o.Actor, BeforeBytes: sess.Size,
		Lease: o.part.lease}
	switch {
	case sess.Unreadable != "":
		out.Status, out.Reason = model.StatusUnparseable, sess.Unreadable
		report.Status, report.Reason = out.Status, out.Reason
		return out, reportOnly(report)
	case sess.InFlight != "":
		out.Status, out.Reason = model.StatusPending, sess.InFlight
		report.Status, report.Reason = out.Status, out.Reason
		return out, reportOnly(report)
	}
	if sess.Null {
		out.Status = model.StatusUnparseable
		out.Reason = "the messages column is NULL; left alone"
		report.Status, report.Reason = out.Status, out.Reason
		return out, reportOnly(report)
	}
	if sess.Messages == nil {
		out.Status = model.StatusTooLarge
		out.Reason = fmt.Sprintf("session is %d bytes, over the %d-byte limit; left alone", sess.Size, s.cfg.MaxBytes)
		report.Status, report.Reason = out.Status, out.Reason
		return out, reportOnly(report)
	}
	if sess.HoldHash != "" && o.Mode != model.ModeSession && model.ContentHash(sess.Messages) == sess.HoldHash {
		// Rolled back and unchanged since: only an on-demand repair touches it again.
		out.Status = model.StatusHeld
		return out, nil
	}
	opts := s.cfg.Repair
	opts.Now, opts.UpdatedAt, opts.Force = res.StartedAt, sess.UpdatedAt, o.Force
	var r repair.Result
	var origins []repair.Origin
	var err error
	after := -1 // the repaired length, when r.Messages is not built
	switch {
	case sess.Rows != nil && !o.DryRun: // one row per message: the store writes by where each came from
		r, origins, err = repair.RepairWithOrigins(sess.Messages, opts)
		if r.Changed() {
			after = repair.OriginsLen(origins)
			if s.cfg.Compact != "" { // compaction takes the array (refused for this layout when the run starts)
				r.Messages = repair.JoinOrigins(origins)
			}
		}
	case o.DryRun && s.cfg.Compact == "": // reported, not written nor compacted
		r.Report, after, err = repair.RepairedSize(sess.Messages, opts)
	case sess.Release != nil && s.cfg.Compact == "": // borrowed: the store writes it in pieces
		r, err = repair.RepairPieces(sess.Messages, opts)
	default:
		r, err = repair.Repair(sess.Messages, opts)
	}
	out.Report = r.Report
	out.Status, out.Reason = model.EngineStatus(r.Report.Status), r.Report.Reason
	report.Status, report.Reason, report.Dialect = out.Status, out.Reason, string(r.Report.Dialect)
	report.IssueCodes, report.StageCounts, report.Actions = r.Report.IssueCodeSet(), r.Report.StageCounts, r.Report.Actions
	if err != nil {
		return out, reportOnly(report) // unparseable or unknown_dialect, left alone
	}
	clean := r.Report.Status == repair.StatusClean
	switch {
	case r.Report.Status == repair.StatusPending:
		return out, reportOnly(report)
	case clean && s.cfg.Compact == "":
		return out, nil // counted on the run, no row of its own
	case clean:
		r.Messages = sess.Messages
	}
	// Compaction follows the repair in the same write; a session the repair left
	// pending or could not handle has returned above.
	var comp *model.Compaction
	if s.cfg.Compact != "" {
		var c compact.Result
		c, comp = s.compact(r.Messages, sess, res.StartedAt, r.Report.Dialect)
		out.Compaction = &c.Report
		switch c.Report.Status {
		case compact.StatusCompacted:
			r.Messages = c.Messages
			report.Actions = append(report.Actions, compactActions(c.Report.Actions)...)
			if clean {
				out.Status, report.Status = model.StatusCompacted, model.StatusCompacted
			}
		case compact.StatusRejected:
			s.log.Warn().Str("session_id", sess.ID).Int64("run_id", res.RunID).Str("reason", c.Report.Reason).
				Msg("compacted session failed a check; compaction not written")
			report.Reason = "compact_rejected: " + c.Report.Reason
			if clean {
				out.Status, out.Reason = model.StatusCompactRejected, c.Report.Reason
				report.Status, report.Reason = out.Status, out.Reason
				return out, reportOnly(report)
			}
		default:
			if clean {
				return out, nil
			}
		}
	}
	if after < 0 {
		after = len(r.Messages)
		for _, p := range r.Pieces {
			after += len(p)
		}
	}
	out.BytesAfter = after
	if o.DryRun {
		out.Status, report.Status = model.StatusWouldRepair, model.StatusWouldRepair
		if clean {
			out.Status, report.Status = model.StatusWouldCompact, model.StatusWouldCompact
		}
		report.AfterBytes = after
		return out, reportOnly(report)
	}
	return out, &write{apply: model.Apply{RunID: res.RunID, Trigger: o.Trigger, Session: sess,
		NewMessages: r.Messages, NewPieces: r.Pieces, Origins: origins, Report: report, Compaction: comp}}
}

// written finishes the outcome of a session the writer wrote, from its write's outcome
// or error. Its error is only ever one that ends the run.
func (s *Scanner) written(ctx context.Context, res *model.RunResult, w write, oc model.Outcome, err error) (model.SessionOutcome, error) {
	out, report, sess := w.out, w.apply.Report, w.apply.Session
	switch {
	case errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrLeaseLost) || ctx.Err() != nil:
		return out, err
	case err != nil:
		out.Status, out.Reason = model.StatusFailed, err.Error()
		report.Status, report.Reason = out.Status, out.Reason
		out.Compaction = nil
		s.log.Error().Err(err).Str("session_id", sess.ID).Int64("run_id", res.RunID).Msg("session not repaired")
		return out, s.record(ctx, report)
	case oc.Conflict:
		out.Status, out.Reason = model.StatusConflict, "the session changed while it was repaired; left for the next run"
		out.BytesAfter = sess.Size
		out.Compaction = nil // nothing compacted was written
	default:
		out.FromVersion, out.ToVersion = oc.FromVersion, oc.ToVersion
	}
	return out, nil
}

// compact compacts a session's content (repaired, or as read when clean) with the run's
// profile; the session's updated-at column is its last activity for the idle gate. When
// it compacted, the Compaction is what the store keeps to undo it.
func (s *Scanner) compact(msgs []byte, sess model.Session, now time.Time, d repair.Dialect) (compact.Result, *model.Compaction) {
	opts, err := compact.ForProfile(s.cfg.Compact)
	if err != nil { // checked when the run started (forRun, the command line)
		return compact.Result{Messages: msgs, Report: compact.Report{Status: compact.StatusSkipped, Reason: err.Error(),
			BytesBefore: len(msgs), BytesAfter: len(msgs)}}, nil
	}
	opts.Dialect, opts.Now, opts.UpdatedAt = d, now, sess.UpdatedAt
	c := compact.Compact(msgs, opts)
	if c.Report.Status != compact.StatusCompacted {
		return c, nil
	}
	start, end, ok := model.PrefixSpan(msgs, c.Report.Boundary)
	rep, err := json.Marshal(c.Report)
	if !ok || err != nil {
		// Compact read it as an array of at least Boundary messages; not writing is
		// the safe answer all the same.
		c.Report.Status, c.Report.Reason = compact.StatusRejected, "the compacted prefix could not be located"
		c.Messages, c.Report.BytesAfter = msgs, len(msgs)
		return c, nil
	}
	return c, &model.Compaction{Boundary: c.Report.Boundary, Prefix: msgs[start:end], Report: rep}
}

// reportedCompaction is what a session's report row says of its compaction, for a
// resumed partition's counts: the row's status, or its actions and reason when it was
// repaired too. nil when it was not compacted.
func reportedCompaction(r *model.ReportRow) *compact.Report {
	c := &compact.Report{Status: compact.StatusCompacted, BytesBefore: r.BeforeBytes, BytesAfter: r.AfterBytes}
	switch {
	case r.Status == model.StatusCompactRejected || strings.HasPrefix(r.Reason, "compact_rejected: "):
		c.Status, c.BytesAfter = compact.StatusRejected, r.BeforeBytes
	case r.Status == model.StatusCompacted || r.Status == model.StatusWouldCompact:
	case slices.ContainsFunc(r.Actions, func(a repair.Action) bool { return strings.HasPrefix(string(a.Stage), compact.StagePrefix) }):
		// Repaired and compacted: the bytes saved include the repair's change, which
		// the row does not tell apart.
	default:
		return nil
	}
	return c
}

// compactActions are a compaction's actions as report actions: stage compact_RULE, each
// naming the tool and the bytes before and after.
func compactActions(as []compact.Action) []repair.Action {
	out := make([]repair.Action, len(as))
	for i, a := range as {
		out[i] = repair.Action{Stage: repair.Stage(compact.StagePrefix + string(a.Rule)), Action: repair.ActionRewrite,
			MessageIndex: a.MessageIndex, CallID: a.CallID, ToolName: a.Tool,
			Detail: fmt.Sprintf("%s %s: %d -> %d bytes", a.Category, a.Target, a.BytesBefore, a.BytesAfter)}
	}
	return out
}

// record inserts reports of sessions nothing was written of, all in one transaction.
func (s *Scanner) record(ctx context.Context, rs ...model.Report) error {
	return s.retry(ctx, "record reports", func() error { return s.store.InsertReports(ctx, rs) })
}

// retry runs fn until it succeeds, fails for a reason other than an unavailable
// database, or has failed cfg.Retries times, backing off exponentially with jitter.
func (s *Scanner) retry(ctx context.Context, what string, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !errors.Is(err, model.ErrUnavailable) || attempt >= s.cfg.Retries {
			if err != nil && errors.Is(err, model.ErrUnavailable) {
				return fmt.Errorf("%s: database still unavailable after %d attempts: %w", what, attempt, err)
			}
			return err
		}
		d := s.cfg.RetryBase << (attempt - 1)
		d = d/2 + rand.N(d)
		s.log.Warn().Err(err).Str("operation", what).Int("attempt", attempt).Dur("retry_in", d).Msg("database unavailable; retrying")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}
