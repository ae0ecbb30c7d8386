package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/scanner"
)

// queueOptions are how a process takes part in scans shared on River: how many
// partitions it works at once and for how long, and (where it starts scans) into how
// many partitions a scan is split.
type queueOptions struct {
	partitions, concurrency int
	slice, rescueAfter      time.Duration
}

func (o *queueOptions) register(fs *pflag.FlagSet, starts bool) {
	if starts {
		fs.Int("partitions", 0, "split a scan into this many partition jobs (default: one per 500,000 sessions it reads, by the table's statistics)")
	}
	fs.Int("concurrency", 1, "partitions this process works at once (each with --workers workers)")
	durationFlag(fs, new(time.Duration), "partition-slice", 30*time.Second, "how long a partition's job works before it checkpoints and goes back to the queue")
	durationFlag(fs, new(time.Duration), "rescue-after", 2*time.Minute, "a job whose worker went silent this long is handed to another worker (well over --partition-slice); a job runs at most (--partition-slice + this) / 2, which bounds a session's write")
}

func (o *queueOptions) load(s *settings) error {
	var err error
	if s.fs.Lookup("partitions") != nil {
		if o.partitions, err = s.int("partitions"); err != nil {
			return err
		}
	}
	if o.concurrency, err = s.int("concurrency"); err != nil {
		return err
	}
	if o.slice, err = s.duration("partition-slice"); err != nil {
		return err
	}
	o.rescueAfter, err = s.duration("rescue-after")
	return err
}

func (o *queueOptions) Validate() error {
	switch {
	case o.partitions < 0 || o.partitions > scanner.MaxPartitions:
		return fmt.Errorf("--partitions must be between 0 (automatic) and %d", scanner.MaxPartitions)
	case o.concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.slice <= 0:
		return errors.New("--partition-slice must be positive")
	case o.rescueAfter < 2*o.slice:
		return fmt.Errorf("--rescue-after (%s) must be at least twice --partition-slice (%s): a live worker would be taken for dead", o.rescueAfter, o.slice)
	}
	return nil
}

// poolSize is the connections a process needs: one per worker of each partition it
// works, its reader and checkpoints, and River's own (listener, fetches, leadership).
func (o *queueOptions) poolSize(workers int) int {
	return o.concurrency*(workers+2) + 6
}

// loadQueued loads the options of a command that works the queue's partitions (scan,
// worker, serve), its database pool sized for them.
func loadQueued(s *settings, db *dbOptions, run *runOptions, q *queueOptions) error {
	if err := db.load(s); err != nil {
		return err
	}
	if err := run.load(s, db.source); err != nil {
		return err
	}
	if err := q.load(s); err != nil {
		return err
	}
	db.poolSize = q.poolSize(run.config.Workers)
	return nil
}

func (o *queueOptions) config(schema string, schedule cron.Schedule) queue.Config {
	return queue.Config{Schema: schema, Concurrency: o.concurrency, Slice: o.slice, RescueAfter: o.rescueAfter, Schedule: schedule}
}

// workerOptions are the options of worker.
type workerOptions struct {
	db              dbOptions
	run             runOptions
	queue           queueOptions
	shutdownTimeout time.Duration
}

func (o *workerOptions) load(s *settings, _ []string) error {
	if err := loadQueued(s, &o.db, &o.run, &o.queue); err != nil {
		return err
	}
	o.db.connectLevel = zerolog.InfoLevel
	var err error
	o.shutdownTimeout, err = s.duration("shutdown-timeout")
	return err
}

func (o *workerOptions) Validate() error {
	return errors.Join(o.db.Validate(), o.run.Validate(), o.queue.Validate())
}

func newWorkerCmd(e *Env) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Work partitions of scans started anywhere, for extra capacity (no HTTP, no schedule)",
		Long: `Work the partition jobs of scans (scheduled by 'tmend serve', started by 'tmend scan' or
POST /v1/runs) alongside every other tmend process on the database, until stopped: those
of the source this worker is configured for (--table and the column flags, as for
'tmend serve'), which has a queue of its own; other sources' jobs are left alone. A
partition is worked for --partition-slice, checkpointed and put back in the queue; a
worker that dies has its partition handed on after --rescue-after, from its checkpoint.
Scans repair with the options they were started with; this process's --workers,
--batch-size and --max-inflight-bytes say how it reads and writes.

On SIGTERM or SIGINT the partitions in hand stop at their next page, checkpoint and go
back to the queue (within --shutdown-timeout; after it, they are cancelled and resume
from their last checkpoint elsewhere).

` + configHelp,
		Example: `  tmend worker --concurrency 2
  TMEND_DATABASE_URL=postgres://tmend@db/app tmend worker --workers 8`,
		Args: noArgs,
		RunE: runE(e, o, runWorker),
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f, true)
	o.run.register(f, pageFlags)
	o.queue.register(f, false)
	durationFlag(f, new(time.Duration), "shutdown-timeout", 60*time.Second, "how long a stopping worker lets its partitions reach a checkpoint")
	return cmd
}

func runWorker(ctx context.Context, e *Env, o *workerOptions) error {
	r, err := openRunner(ctx, e, o.db, o.run, false)
	if err != nil {
		return err
	}
	defer r.close()
	q, err := queue.New(r.store, r.sc, r.log, o.queue.config(o.db.schema, nil))
	if err != nil {
		return err
	}
	if err := q.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	r.log.Info().Int("concurrency", o.queue.concurrency).Msg("working")
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		q.Watch(ctx, queue.DefaultProgressEvery)
	}()
	<-ctx.Done()
	<-watched
	r.log.Info().Msg("stopping")
	stop, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := q.Stop(stop); err != nil {
		return err
	}
	r.log.Info().Msg("stopped")
	return nil
}
