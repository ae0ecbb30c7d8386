package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/store/model"
)

// serveOptions are the options of serve.
type serveOptions struct {
	db                  dbOptions
	run                 runOptions
	queue               queueOptions
	scanSpec            string
	scanSchedule        cron.Schedule
	schedule            daemon.Schedule
	listen              string
	apiToken, readToken string
	shutdownTimeout     time.Duration
}

func (o *serveOptions) load(s *settings, _ []string) error {
	if err := loadQueued(s, &o.db, &o.run, &o.queue); err != nil {
		return err
	}
	o.db.connectLevel = zerolog.InfoLevel
	o.scanSpec = s.get("schedule")
	o.schedule = daemon.Schedule{Prune: s.get("prune-schedule"), Scan: o.scanSpec}
	var err error
	if o.schedule.Location, err = time.LoadLocation(s.get("time-zone")); err != nil {
		return fmt.Errorf("--time-zone: %w", err)
	}
	if o.shutdownTimeout, err = s.duration("shutdown-timeout"); err != nil {
		return err
	}
	if o.schedule.Prune != "" {
		age, err := model.ParseDuration(s.get("prune-older-than"))
		if err != nil || age <= 0 {
			return fmt.Errorf("--prune-older-than must be a positive duration like 90d, 2w or 1y, got %q", s.get("prune-older-than"))
		}
		o.schedule.PruneOlderThan = age
	}
	o.listen, o.apiToken, o.readToken = s.get("listen"), s.get("api-token"), s.get("read-token")
	return nil
}

// specHelp says what a schedule looks like, after the cron parser's own reason.
const specHelp = "want cron syntax: minute hour day-of-month month day-of-week, as '0 3 * * *', or @daily, @weekly, @every 1h"

func (o *serveOptions) Validate() error {
	var err error
	if o.scanSchedule, err = daemon.ParseSpec(o.scanSpec, o.schedule.Location); err != nil {
		return fmt.Errorf("--schedule %q: %w (%s)", o.scanSpec, err, specHelp)
	}
	if o.schedule.Prune != "" {
		if _, err := daemon.ParseSpec(o.schedule.Prune, o.schedule.Location); err != nil {
			return fmt.Errorf("--prune-schedule %q: %w (%s)", o.schedule.Prune, err, specHelp)
		}
	}
	return errors.Join(o.db.Validate(), o.run.Validate(), o.queue.Validate())
}

func newServeCmd(e *Env) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: scheduled scans, the HTTP API, /metrics, /healthz and /readyz",
		Long: `Run scheduled incremental scans (--schedule, cron syntax, in --time-zone), work the
partitions of scans started anywhere (--concurrency at once, as 'tmend worker' does), and
serve the HTTP API. Several replicas may run: River's elected leader enqueues one scan per
tick, every replica works its partitions, and one scan of a source runs at a time (a tick
that finds one running is skipped).

API (JSON). POSTs need "Authorization: Bearer <token>" with --api-token / TMEND_API_TOKEN;
GETs under /v1 return audit rows and transcripts and need the read token (--read-token /
TMEND_READ_TOKEN) or the API token. Without a token set, those endpoints are refused.
Every route it serves (the console's pages take the same tokens, as a sign-in):
` + daemon.RouteHelp() + `
On SIGTERM or SIGINT it stops taking work: partitions in hand stop at their next page,
checkpoint and go back to the queue for other replicas, and a running repair finishes
(up to --shutdown-timeout; then the rest is cancelled): every session is either written
whole or not at all.

` + configHelp,
		Example: `  TMEND_API_TOKEN=s3cret tmend serve --schedule '0 3 * * *' --time-zone Europe/Berlin
  tmend serve --listen 127.0.0.1:9090 --schedule '@every 1h'
  curl -X POST -H "Authorization: Bearer $TMEND_API_TOKEN" localhost:8080/v1/sessions/7f3e2a/repair`,
		Args: noArgs,
		RunE: runE(e, o, runServe),
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f, true)
	o.run.register(f, repairFlags|pageFlags)
	f.String("schedule", "0 3 * * *", "when to scan, in cron syntax (5 fields or @every 1h, @daily, ...)")
	f.String("time-zone", "UTC", "time zone of the schedule (IANA name)")
	f.String("listen", "127.0.0.1:8080", "address of the HTTP API and metrics")
	f.String("api-token", "", "bearer token required by the API's POST endpoints; it also reads (prefer TMEND_API_TOKEN)")
	f.String("read-token", "", "bearer token for the API's GET endpoints, which return audit rows and transcripts (prefer TMEND_READ_TOKEN)")
	durationFlag(f, new(time.Duration), "shutdown-timeout", 60*time.Second, "how long a stopping daemon lets a running scan finish its sessions")
	f.String("prune-schedule", "", "when to prune old versions and reports, in cron syntax (default: never)")
	f.String("prune-older-than", "90d", "what the scheduled prune deletes (see 'tmend prune')")
	o.queue.register(f, false)
	return cmd
}

// runServe listens, opens the database and runs a daemon.Server until ctx ends.
func runServe(ctx context.Context, e *Env, o *serveOptions) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	defer func() { _ = ln.Close() }() // Serve closes it; this is for the early returns
	r, err := openRunner(ctx, e, o.db, o.run, false)
	if err != nil {
		return err
	}
	defer r.close()
	srv, err := daemon.New(daemon.Config{Scanner: r.sc, Store: r.store, Queue: o.queue.config(o.db.schema, o.scanSchedule),
		Schema: o.db.schema, Logger: r.log, Metrics: daemon.NewMetrics(), APIToken: o.apiToken, ReadToken: o.readToken,
		Schedule: o.schedule, ShutdownTimeout: o.shutdownTimeout})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	srv.Install(mux)
	return srv.Serve(ctx, ln, mux)
}
