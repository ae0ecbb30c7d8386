// Package queue runs tmend's scans as River jobs (github.com/riverqueue/river) in the
// database the sessions are in: a scan is a run row and one job per partition, worked by
// every process that runs a Queue (`tmend serve`, `tmend worker`, and `tmend scan` while
// it waits for its own run). River brings the rest: jobs claimed with FOR UPDATE SKIP
// LOCKED, retries with backoff, rescue of jobs whose worker died, unique jobs, and one
// leader that enqueues the scheduled scan.
package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// Config tunes a Queue.
type Config struct {
	// Schema holds River's tables (tmend's schema).
	Schema string
	// Concurrency is how many partitions this process works at once; 0 works none (a
	// process that only enqueues). Each partition uses the scanner's workers.
	Concurrency int
	// Slice is how long a partition's job works before it checkpoints and yields its
	// turn, so that a scan moves between workers; default 30s.
	Slice time.Duration
	// RescueAfter is when River hands a job whose worker went silent to another worker:
	// it must be well over Slice plus the time to finish the sessions in hand. Default 2m.
	RescueAfter time.Duration
	// MaxAttempts bounds a partition's job attempts (failures, not yields); default 10.
	MaxAttempts int
	// Schedule, when set, is the cron schedule of the incremental scan that the elected
	// leader among all processes with a schedule enqueues, once per tick.
	Schedule cron.Schedule
	// OnScheduled, if set, is told how each scheduled scan started (ErrBusy: skipped).
	OnScheduled func(runID int64, err error)
	// OwnsRuns says that the runs this process starts are its own, alive while it is,
	// and that it works only while it waits for them (tmend scan). Without it, the
	// process works any run's partitions for as long as it lives (serve, worker), and
	// the runs it starts are carried on by every such process.
	OwnsRuns bool
}

func (c *Config) defaults() {
	if c.Slice <= 0 {
		c.Slice = 30 * time.Second
	}
	if c.RescueAfter <= 0 {
		c.RescueAfter = 2 * time.Minute
	}
	if c.MaxAttempts < 1 {
		c.MaxAttempts = 10
	}
}

// Queue starts, works and cancels scans.
type Queue struct {
	client *river.Client[pgx.Tx]
	// stopping is closed by Stop: partitions yield at their next page.
	stopping chan struct{}
	stopOnce sync.Once
	store    *store.Store
	sc       *scanner.Scanner
	log      zerolog.Logger
	// riverLog is River's logger: the caller's, with component=river and not queue
	// (zerolog would write both keys, and log stores keep one of the two).
	riverLog *slog.Logger
	cfg      Config
	// name is the River queue of the source's jobs (store.QueueName), the only one this
	// process works: a partition of another source's run is not this process's to read.
	name string
	// worked holds the runs this process works a partition of, and when it last
	// stopped working one of each (zero while one is in hand).
	workedMu sync.Mutex
	worked   map[int64]worked
	// alive holds this process's liveness locks (store.HoldLiveness) from before its
	// client may hold a job, or its first run exists, until its client stopped;
	// watched ends the goroutine that keeps them.
	aliveMu sync.Mutex
	alive   *store.Liveness
	watched context.CancelFunc
	watchWG sync.WaitGroup
	// ended is closed, and replaced, when a partition this process worked ended its run,
	// so that Wait reads the run at once instead of at its next poll.
	endedMu sync.Mutex
	ended   chan struct{}
	// poll is how often Wait reads a run that others may end.
	poll time.Duration
}

type worked struct {
	inHand int
	last   time.Time
}

// PartitionArgs is the job of one partition of a run.
type PartitionArgs struct {
	RunID     int64 `json:"run_id"`
	Partition int   `json:"partition"`
}

// Kind is River's name for the job.
func (PartitionArgs) Kind() string { return "tmend_partition" }

// ScheduledArgs is the job that starts the scheduled scan of one tick.
type ScheduledArgs struct {
	Source string    `json:"source"`
	Tick   time.Time `json:"tick"`
}

// Kind is River's name for the job.
func (ScheduledArgs) Kind() string { return "tmend_scheduled_scan" }

// New returns a Queue over st's database. Work starts with Start.
func New(st *store.Store, sc *scanner.Scanner, log zerolog.Logger, cfg Config) (*Queue, error) {
	cfg.defaults()
	q := &Queue{store: st, sc: sc, log: log.With().Str("component", "queue").Logger(), cfg: cfg, stopping: make(chan struct{}),
		name:     st.QueueName(),
		worked:   map[int64]worked{},
		ended:    make(chan struct{}),
		poll:     250 * time.Millisecond,
		riverLog: slog.New(zerolog.NewSlogHandler(log.With().Str("component", "river").Logger().Level(zerolog.WarnLevel)))}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &partitionWorker{q: q}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &scheduledWorker{q: q}); err != nil {
		return nil, err
	}
	rc := &river.Config{
		ID:      clientID(),
		Schema:  cfg.Schema,
		Workers: workers,
		// A partition bounds its own turn (Slice), but River rescues only jobs that have
		// a timeout, so a job gets one between its slice and the rescue.
		JobTimeout:           (cfg.Slice + cfg.RescueAfter) / 2,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		Logger:               q.riverLog,
	}
	if cfg.Concurrency > 0 {
		rc.Queues = map[string]river.QueueConfig{q.name: {MaxWorkers: cfg.Concurrency}}
	}
	if cfg.Schedule != nil {
		ts := &tickSchedule{Schedule: cfg.Schedule}
		source := st.Source().Name()
		rc.PeriodicJobs = []*river.PeriodicJob{river.NewPeriodicJob(ts, func() (river.JobArgs, *river.InsertOpts) {
			// One job per tick, whichever leader enqueues it.
			return ScheduledArgs{Source: source, Tick: ts.due()}, &river.InsertOpts{Queue: q.name,
				UniqueOpts: river.UniqueOpts{ByArgs: true}}
		}, nil)}
	}
	client, err := river.NewClient(riverpgxv5.New(st.Pool()), rc)
	if err != nil {
		return nil, fmt.Errorf("set up River: %w", err)
	}
	q.client = client
	return q, nil
}

// tickSchedule is a cron schedule that remembers the tick River planned last, which is
// the one due when River asks for the job to insert.
type tickSchedule struct {
	cron.Schedule
	mu   sync.Mutex
	next time.Time
}

func (t *tickSchedule) Next(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next = t.Schedule.Next(now)
	return t.next
}

func (t *tickSchedule) due() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next.UTC()
}

// clientID is a River client ID unique to this process: host, process id and a random
// part (River's default, host and start time, may repeat for two processes started at
// once on one host). The liveness lock is named after it.
func clientID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("tmend_%s_%d_%016x", cmp.Or(host, "localhost"), os.Getpid(), rand.Uint64())
}

// ClientID is this process's River client ID, which River records on the jobs it works.
func (q *Queue) ClientID() string { return q.client.ID() }

// Start begins working jobs and, on the elected leader, the schedule; with Concurrency
// 0, it does nothing (the Queue only starts and cancels runs). It returns at once.
func (q *Queue) Start(ctx context.Context) error {
	if q.cfg.Concurrency == 0 {
		return nil
	}
	if err := q.holdLiveness(ctx); err != nil {
		return err
	}
	if err := q.moveOldQueueJobs(ctx); err != nil {
		return err
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	return nil
}

// moveOldQueueJobs moves the source's jobs that a tmend before a queue per source left
// in the shared queue to this source's (store.MoveOldQueueJobs), where they are worked.
func (q *Queue) moveOldQueueJobs(ctx context.Context) error {
	n, err := q.store.MoveOldQueueJobs(ctx, PartitionArgs{}.Kind(), ScheduledArgs{}.Kind())
	if n > 0 {
		q.log.Info().Int64("num_jobs", n).Str("queue", q.name).Msg("jobs moved from the old shared queue to this source's")
	}
	return err
}

// Stop stops working: running partitions finish their sessions in hand, checkpoint and
// yield; after ctx ends, they are cancelled (each session is written whole or not at
// all, and a later attempt resumes from the checkpoint). Then the process's liveness
// locks go.
func (q *Queue) Stop(ctx context.Context) error {
	if q.cfg.Concurrency == 0 {
		return nil
	}
	q.stopOnce.Do(func() { close(q.stopping) })
	err := q.client.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = q.client.StopAndCancel(context.Background())
	}
	if err == nil { // no job in hand (or the client never started)
		q.releaseLiveness()
	}
	return err
}

// livenessCheckEvery is how often the liveness connection is checked, and how long a
// lost one (a database restart) waits before it is taken again.
const livenessCheckEvery = 2 * time.Second

// holdLiveness takes this process's liveness locks, once, and keeps them: a lost
// connection (a database restart, a cut connection) is replaced, and the locks taken
// again, as soon as the database answers. Meanwhile others may find this process's runs
// abandoned; its partitions then stop at their next write (model.ErrLeaseLost).
func (q *Queue) holdLiveness(ctx context.Context) error {
	q.aliveMu.Lock()
	defer q.aliveMu.Unlock()
	if q.alive != nil {
		return nil
	}
	l, err := q.store.HoldLiveness(ctx, q.client.ID(), !q.cfg.OwnsRuns)
	if err != nil {
		return err
	}
	q.alive = l
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q.watched = cancel
	q.watchWG.Add(1)
	go func() {
		defer q.watchWG.Done()
		t := time.NewTicker(livenessCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			q.aliveMu.Lock()
			l := q.alive
			q.aliveMu.Unlock()
			cctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			err := l.Check(cctx)
			cancel()
			if err == nil || wctx.Err() != nil {
				continue
			}
			q.log.Warn().Err(err).Msg("liveness lock lost; taking it again")
			l.Release(context.Background())
			nl, err := q.store.HoldLiveness(wctx, q.client.ID(), !q.cfg.OwnsRuns)
			if err != nil {
				q.log.Warn().Err(err).Msg("taking the liveness lock again")
				nl = l // checked again, and failing, on the next tick
			} else {
				q.log.Info().Msg("liveness lock taken again")
			}
			q.aliveMu.Lock()
			q.alive = nl
			q.aliveMu.Unlock()
		}
	}()
	return nil
}

// releaseLiveness drops the liveness locks once the client holds no job.
func (q *Queue) releaseLiveness() {
	q.aliveMu.Lock()
	cancel := q.watched
	q.aliveMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	q.watchWG.Wait()
	q.aliveMu.Lock()
	defer q.aliveMu.Unlock()
	if q.alive != nil {
		q.alive.Release(context.Background())
		q.alive, q.watched = nil, nil
	}
}

// Started is the scan StartScan started or took over.
type Started struct {
	ID int64
	// TakenOver says that ID is a dead scan this one goes on with. It keeps its own
	// partitions, Partitions of them, whatever count was asked for: each is a range of
	// ids with a checkpoint, and split anew they would lose their progress.
	TakenOver  bool
	Partitions int
}

// StartRun is StartScan for a caller that needs only the run's id.
func (q *Queue) StartRun(ctx context.Context, o scanner.RunOptions, partitions int) (int64, error) {
	st, err := q.StartScan(ctx, o, partitions)
	return st.ID, err
}

// StartScan records a scan with options o in partitions partitions (0: chosen from the
// table's size) and enqueues them; model.ErrBusy when a scan of the source is running.
// When the running scan of the source is dead (store.CreateRun) and is the one asked
// for, it is taken over instead, with its own partitions, and goes on from their
// checkpoints; a partition count asked for that differs is logged as not applied.
func (q *Queue) StartScan(ctx context.Context, o scanner.RunOptions, partitions int) (Started, error) {
	plan, err := q.sc.Plan(ctx, o, partitions)
	if err != nil {
		return Started{}, err
	}
	if q.cfg.Concurrency > 0 {
		// Alive before the run exists, so that no other scan finds it ownerless.
		if err := q.holdLiveness(ctx); err != nil {
			return Started{}, err
		}
		if q.cfg.OwnsRuns {
			plan.Owner = q.client.ID()
		}
	}
	enqueue := func(ctx context.Context, tx pgx.Tx, runID int64, parts []int) ([]int64, error) {
		params := make([]river.InsertManyParams, len(parts))
		for i, p := range parts {
			params[i] = river.InsertManyParams{Args: PartitionArgs{RunID: runID, Partition: p},
				InsertOpts: &river.InsertOpts{Queue: q.name}}
		}
		res, err := q.client.InsertManyTx(ctx, tx, params)
		if err != nil {
			return nil, err
		}
		ids := make([]int64, len(res))
		for i, r := range res {
			ids[i] = r.Job.ID
		}
		return ids, nil
	}
	run, err := q.store.CreateRun(ctx, plan, store.RunJobs{Enqueue: enqueue, Cancel: q.cancelJobs})
	for _, id := range run.Abandoned {
		q.log.Warn().Int64("run_id", id).Msg("run abandoned: no live process worked it, and this scan asks for another; this scan covers its sessions")
	}
	if err != nil {
		return Started{}, err
	}
	if !run.TakenOver {
		q.log.Info().Int64("run_id", run.ID).Str("mode", string(plan.Mode)).Bool("dry_run", plan.DryRun).
			Int("partitions", run.Partitions).Msg("run started")
		return Started{ID: run.ID, Partitions: run.Partitions}, nil
	}
	q.log.Warn().Int64("run_id", run.ID).Str("mode", string(plan.Mode)).Bool("dry_run", plan.DryRun).
		Int("partitions", run.Partitions).
		Msg("run taken over: no live process worked it; this scan goes on with it from its partitions' checkpoints")
	st := Started{ID: run.ID, TakenOver: true}
	// run.Partitions counts the unfinished ones only; the run row has them all. The run
	// is this scan's already: not reading it fails nothing but the notice.
	row, err := q.store.Run(ctx, run.ID)
	if err != nil {
		q.log.Debug().Err(err).Int64("run_id", run.ID).Msg("reading the run taken over")
		return st, nil
	}
	st.Partitions = row.Partitions
	if partitions > 0 && partitions != st.Partitions {
		q.log.Warn().Int64("run_id", run.ID).Int("partitions", st.Partitions).Int("partitions_asked", partitions).
			Msg("the run taken over keeps its own partitions, each with its checkpoint; the count asked for does not apply to it")
	}
	return st, nil
}

// cancelJobs cancels River jobs in tx. A job still marked running stays so until its
// client acknowledges, or, when that client is dead, River's rescuer finds it cancelled.
func (q *Queue) cancelJobs(ctx context.Context, tx pgx.Tx, jobIDs []int64) error {
	for _, id := range jobIDs {
		if _, err := q.client.JobCancelTx(ctx, tx, id); err != nil && !errors.Is(err, river.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Cancel cancels a run's remaining partitions and returns the run as it ended.
func (q *Queue) Cancel(ctx context.Context, runID int64) (model.RunRow, error) {
	return q.store.CancelRun(ctx, runID, q.cancelJobs)
}

// Wait polls a run until it ends and returns it; progress, if set, sees each poll. A run
// that ends in this process is read at once.
func (q *Queue) Wait(ctx context.Context, runID int64, progress func(model.RunRow)) (model.RunRow, error) {
	t := time.NewTicker(q.poll)
	defer t.Stop()
	for {
		ended := q.endedSignal() // before the read, so that an end after it wakes the select
		run, err := q.store.Run(ctx, runID)
		if err != nil && !errors.Is(err, model.ErrUnavailable) {
			return run, err
		}
		if err == nil {
			if progress != nil {
				progress(run)
			}
			if run.Status != model.RunRunning {
				return run, nil
			}
		}
		select {
		case <-ctx.Done():
			return run, ctx.Err()
		case <-t.C:
		case <-ended:
		}
	}
}

func (q *Queue) endedSignal() <-chan struct{} {
	q.endedMu.Lock()
	defer q.endedMu.Unlock()
	return q.ended
}

// runEnded wakes every Wait.
func (q *Queue) runEnded() {
	q.endedMu.Lock()
	defer q.endedMu.Unlock()
	close(q.ended)
	q.ended = make(chan struct{})
}

// working counts a partition of run runID in (+1) or out (-1) of this process's hands.
func (q *Queue) working(runID int64, delta int) {
	q.workedMu.Lock()
	defer q.workedMu.Unlock()
	w := q.worked[runID]
	w.inHand += delta
	w.last = time.Now()
	q.worked[runID] = w
}

// WorkedSince returns the runs this process has worked a partition of since t, and
// forgets those it has not.
func (q *Queue) WorkedSince(t time.Time) map[int64]bool {
	q.workedMu.Lock()
	defer q.workedMu.Unlock()
	out := map[int64]bool{}
	for id, w := range q.worked {
		if w.inHand == 0 && w.last.Before(t) {
			delete(q.worked, id)
			continue
		}
		out[id] = true
	}
	return out
}

type partitionWorker struct {
	river.WorkerDefaults[PartitionArgs]
	q *Queue
}

func (w *partitionWorker) Work(ctx context.Context, job *river.Job[PartitionArgs]) error {
	w.q.working(job.Args.RunID, 1)
	defer w.q.working(job.Args.RunID, -1)
	out, err := w.q.sc.WorkPartition(ctx, job.Args.RunID, job.Args.Partition, scanner.PartitionOptions{
		// A yield snoozes the job, which River does not count as an attempt.
		Slice: w.q.cfg.Slice, Stop: w.q.stopping, Last: job.Attempt >= job.MaxAttempts, Retry: job.Attempt > 1})
	if err != nil {
		return err
	}
	switch out {
	case scanner.PartitionYielded:
		return river.JobSnooze(0) // back in the queue at once, for any worker; not an attempt
	case scanner.RunEnded:
		w.q.runEnded()
	}
	return nil
}

type scheduledWorker struct {
	river.WorkerDefaults[ScheduledArgs]
	q *Queue
}

func (w *scheduledWorker) Work(ctx context.Context, job *river.Job[ScheduledArgs]) error {
	id, err := w.q.StartRun(ctx, scanner.RunOptions{Trigger: model.TriggerCron, Actor: model.ActorCron,
		Mode: model.ModeIncremental}, 0)
	if w.q.cfg.OnScheduled != nil {
		w.q.cfg.OnScheduled(id, err)
	}
	if errors.Is(err, model.ErrBusy) {
		w.q.log.Info().Time("tick", job.Args.Tick).Msg("a scan of this source is still running; skipping this tick")
		return nil
	}
	return err
}
