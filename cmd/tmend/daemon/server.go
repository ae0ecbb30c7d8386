// Package daemon is tmend serve: scheduled scans (and prunes), the HTTP API, /metrics,
// /healthz and /readyz, and a graceful shutdown. A Server is installed on a mux that
// other handlers may share, and served by Serve.
package daemon

import (
	"bytes"
	"context"
	_ "embed" // openapi.yaml
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/tmend/tmend/cmd/tmend/console"
	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// Config is what a Server is built from.
type Config struct {
	Scanner *scanner.Scanner
	Store   *store.Store
	// Queue configures the queue that starts and cancels scans, and works their
	// partitions (and enqueues the scheduled ones) while the daemon serves.
	Queue queue.Config
	// Schema is tmend's schema, which the readiness probe checks is at this binary's
	// version.
	Schema string
	Logger zerolog.Logger
	// Metrics are served at /metrics (NewMetrics; required); New adds the metrics read
	// from Store's database.
	Metrics *Metrics
	// APIToken is the bearer token that writes (and reads); ReadToken only reads. An
	// unset token allows nothing.
	APIToken, ReadToken string
	Schedule            Schedule
	// ShutdownTimeout is how long a stopping Serve lets running scans finish the
	// sessions they hold.
	ShutdownTimeout time.Duration
	// ProgressEvery spaces the progress lines of running runs (default
	// queue.DefaultProgressEvery).
	ProgressEvery time.Duration
}

// Schedule says when the daemon prunes, in cron syntax (see ParseSpec). The scan
// schedule is the queue's: one replica enqueues it.
type Schedule struct {
	Location *time.Location // the time zone of the spec; nil is UTC
	// Scan is the spec of the queue's scan schedule (Config.Queue.Schedule), which
	// Serve logs with the next tick.
	Scan string
	// Prune, unless empty, deletes versions and reports older than PruneOlderThan.
	Prune          string
	PruneOlderThan time.Duration
}

// ParseSpec parses a schedule the way the daemon reads it, in loc: five cron fields,
// or a descriptor such as @daily or @every 1h.
func ParseSpec(spec string, loc *time.Location) (cron.Schedule, error) {
	if loc != nil && !strings.HasPrefix(spec, "@every") {
		spec = "CRON_TZ=" + loc.String() + " " + spec
	}
	return cron.ParseStandard(spec)
}

// Server runs scans on a schedule and answers the HTTP API and the audit console.
type Server struct {
	cfg     Config
	queue   *queue.Queue
	console *console.Console
	log     zerolog.Logger
	httpLog zerolog.Logger // the access log's
	// work is cancelled on the hard stop; stop is closed on the soft stop, when
	// stopping is set, after which begin lets nothing in.
	work     context.Context
	hardStop context.CancelFunc
	mu       sync.Mutex
	stopping bool
	stop     chan struct{}
	// runs counts the writes and runs under way, which a stopping server waits for.
	runs sync.WaitGroup
	// watching is the queue's Watch, which ends with the hard stop.
	watching sync.WaitGroup
}

// New returns a Server; it does nothing until it is installed on a mux or served.
func New(cfg Config) (*Server, error) {
	if cfg.Metrics == nil {
		return nil, errors.New("daemon: Config.Metrics is required (NewMetrics)")
	}
	work, hardStop := context.WithCancel(context.Background())
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = queue.DefaultProgressEvery
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With().Str("component", "daemon").Logger(), work: work, hardStop: hardStop,
		stop: make(chan struct{}), httpLog: cfg.Logger.With().Str("component", "http").Logger()}
	if cfg.Store != nil {
		qc := cfg.Queue
		qc.OnScheduled = s.scheduled
		var err error
		if s.queue, err = queue.New(cfg.Store, cfg.Scanner, cfg.Logger, qc); err != nil {
			return nil, err
		}
		if err = cfg.Metrics.watch(work, cfg.Store); err != nil {
			return nil, err
		}
		if s.console, err = console.New(console.Config{Store: cfg.Store, Rollback: consoleRollback{s},
			WriteToken: cfg.APIToken, ReadToken: cfg.ReadToken, Log: cfg.Logger, Work: work,
			Schedule: qc.Schedule, ScheduleSpec: cfg.Schedule.Scan}); err != nil {
			return nil, err
		}
	}
	if cfg.APIToken == "" {
		s.log.Warn().Msg("no API token set: the API's POST endpoints are disabled")
	}
	if cfg.APIToken == "" && cfg.ReadToken == "" {
		s.log.Warn().Msg("no API or read token set: the API's GET endpoints are disabled")
	}
	return s, nil
}

// OpenAPI is the OpenAPI 3 document of the API and probes, served at /v1/openapi.yaml.
// The tests hold the routes and every answer they get to it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Install adds the API, the probes, /metrics and the audit console (at /) to mux.
func (s *Server) Install(mux *http.ServeMux) {
	if s.console != nil {
		s.console.Install(mux)
	}
	for _, r := range s.routes() {
		mux.Handle(r.pattern, r.handler)
	}
	mux.Handle("/", unrouted(mux))
}

// unrouted answers what no other pattern of mux takes with the JSON Error every other
// error of the API is: 405 with an Allow header when the path is served for other
// methods, 404 otherwise. ServeMux's own answers to those are text/plain.
func unrouted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
			http.MethodDelete, http.MethodOptions} {
			if m == r.Method {
				continue
			}
			other := r.Clone(r.Context())
			other.Method = m
			if _, pattern := mux.Handler(other); pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeError(w, http.StatusNotFound, "no such route: %s", r.URL.Path)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path,
			strings.Join(allow, ", "))
	})
}

type route struct {
	pattern string // "METHOD /path", as http.ServeMux takes it and openapi.yaml lists it
	help    string // one line of serve --help (RouteHelp)
	handler http.Handler
}

// routes are the API's and the probes' routes, which openapi.yaml documents and serve
// --help lists (RouteHelp).
func (s *Server) routes() []route {
	f := func(pattern, help string, h http.HandlerFunc) route { return route{pattern, help, h} }
	return []route{
		f("GET /healthz", "liveness (no token)",
			func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) }),
		f("GET /readyz", "readiness: database reachable, schema current (no token; no details: they are in the log)", s.ready),
		{"GET /metrics", "Prometheus metrics (no token)", promhttp.HandlerFor(s.cfg.Metrics.reg,
			// A collector whose query failed loses its series, not the scrape: the rest is served.
			promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: scrapeLog{s.log}})},
		f("GET /v1/openapi.yaml", "this API as an OpenAPI 3 document (no token)", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(OpenAPI) // the client went away: nothing to tell it
		}),
		f("POST /v1/sessions/{id}/repair", "repair one session now (?dry_run=true, ?force=true)", s.RequireWrite(s.repairSession)),
		f("POST /v1/runs", `start a run: {"mode": "incremental"|"full", "dry_run": false, "limit": 0, "partitions": 0}; `+
			"409 while a scan of the source runs", s.RequireWrite(s.startRun)),
		f("GET /v1/runs", "runs, newest first (?since, ?until, ?status, ?limit, ?cursor)", s.RequireRead(s.listRuns)),
		f("GET /v1/runs/{id}", "a run's status, counts and totals by status, stage, dialect, issue", s.RequireRead(s.getRun)),
		f("DELETE /v1/runs/{id}", "cancel a running scan's remaining partitions; 409 when not running", s.RequireWrite(s.cancelRun)),
		f("GET /v1/reports", "audit rows (?run, ?since, ?until, ?status, ?stage, ?issue, ?dialect, ?limit, ?cursor); "+
			`lists answer {"items": [...], "next_cursor": "..."}`, s.RequireRead(s.listReports)),
		f("GET /v1/sessions/{id}/reports", "a session's audit rows (the same filters)", s.RequireRead(s.listReports)),
		f("GET /v1/sessions/{id}/versions", "a session's saved versions, without their content", s.RequireRead(s.listVersions)),
		f("GET /v1/sessions/{id}/versions/{n}", "a saved version with its content", s.RequireRead(s.getVersion)),
		f("GET /v1/sessions/{id}/diff", "the diff of two versions (?from, ?to; by default what the latest write replaced)", s.RequireRead(s.diff)),
		f("POST /v1/sessions/{id}/rollback", `restore a version: {"to_version": 0, "force": false, "dry_run": false}; `+
			"409 when refused", s.RequireWrite(s.rollbackSession)),
		f("POST /v1/runs/{id}/rollback", `roll back a run's sessions: {"force": false, "dry_run": false}`,
			s.RequireWrite(s.rollbackRun)),
	}
}

// RouteHelp lists every route Install adds, one a line with what it does, from the
// tables the mux is built from: the API's and the probes', then the console's.
func RouteHelp() string {
	s := &Server{cfg: Config{Metrics: NewMetrics()}}
	var rows [][2]string
	for _, r := range s.routes() {
		rows = append(rows, [2]string{r.pattern, r.help})
	}
	for _, r := range console.Routes() {
		rows = append(rows, [2]string{strings.TrimSuffix(r.Pattern, "{$}"), "console: " + r.Help})
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	var b strings.Builder
	for _, r := range rows {
		// The help wraps at 100 columns, under itself.
		line := fmt.Sprintf("  %-*s ", width, r[0])
		for i, word := range strings.Fields(r[1]) {
			if i > 0 && len(line)+1+len(word) > 100 {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", width+3)
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// consoleRollback lets the console roll back only while the server takes writes, which
// a stopping server then waits for, as it does for the API's.
type consoleRollback struct{ s *Server }

func (c consoleRollback) Rollback(ctx context.Context, o model.RollbackOptions) (model.RollbackOutcome, error) {
	if !c.s.begin() {
		return model.RollbackOutcome{}, fmt.Errorf("%w: the daemon is stopping", model.ErrUnavailable)
	}
	defer c.s.runs.Done()
	return c.s.cfg.Scanner.Rollback(ctx, o)
}

// Serve answers HTTP on ln with h (a mux the Server is installed on, maybe beside other
// handlers; Instrument counts and logs its requests), works the queue (and, when this
// replica is River's leader, enqueues the scheduled scans) and prunes on schedule, until ctx ends or the HTTP server fails.
// Then it stops taking requests and work and shuts down as Shutdown does, within
// ShutdownTimeout, and returns the HTTP server's error, if that is why it stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	sched := s.cfg.Schedule
	loc := sched.Location
	if loc == nil {
		loc = time.UTC
	}
	cl := cronLogger{s.log}
	c := cron.New(cron.WithLocation(loc), cron.WithLogger(cl), cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	if sched.Prune != "" {
		if _, err := c.AddFunc(sched.Prune, func() { s.prune(sched.PruneOlderThan) }); err != nil {
			return fmt.Errorf("prune schedule %q: %w", sched.Prune, err)
		}
	}
	if err := s.Start(); err != nil {
		return err
	}
	srv := newHTTPServer(s.Instrument(h))
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if scan := s.cfg.Queue.Schedule; scan != nil {
		// Every replica logs the ticks, though one (River's leader) enqueues each scan.
		c.Schedule(scan, cron.FuncJob(func() {
			s.log.Info().Time("next_tick", scan.Next(time.Now())).Msg("scheduled scan tick; the leader enqueues its scan")
		}))
	}
	c.Start()
	s.log.Info().Str("listen", ln.Addr().String()).Msg("serving")
	now := time.Now()
	if scan := s.cfg.Queue.Schedule; scan != nil {
		s.log.Info().Str("schedule", sched.Scan).Str("time_zone", loc.String()).Time("next_tick", scan.Next(now)).
			Msg("scan schedule")
	} else {
		s.log.Info().Msg("no scan schedule: scans start only through the API or the CLI")
	}
	if sched.Prune != "" {
		if p, err := ParseSpec(sched.Prune, loc); err == nil {
			s.log.Info().Str("prune_schedule", sched.Prune).Time("next_prune", p.Next(now)).Msg("prune schedule")
		}
	}

	var failed error // the HTTP server's, which makes the daemon exit non-zero
	select {
	case <-ctx.Done():
		s.log.Info().Msg("stopping")
	case err := <-serveErr:
		failed = fmt.Errorf("http server: %w", err)
		s.log.Error().Err(err).Msg("http server failed")
	}
	// Soft stop: no new HTTP requests, writes or scheduled runs; running repairs finish
	// the sessions they hold, partitions stop at their next page. Shutdown's hard stop
	// cancels whatever is left.
	s.stopAccepting()
	cronDone := c.Stop().Done()
	deadline, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(deadline)
	s.Shutdown(deadline)
	<-cronDone
	s.log.Info().Msg("stopped")
	return failed
}

// scheduled is the queue's OnScheduled: it counts the ticks skipped because a scan of
// the source was still running.
func (s *Server) scheduled(_ int64, err error) {
	switch {
	case errors.Is(err, model.ErrBusy):
		s.cfg.Metrics.skipped.Inc()
	case err != nil && !errors.Is(err, context.Canceled):
		s.log.Error().Err(err).Msg("scheduled scan did not start")
	}
}

// Start starts working the queue's partitions (and, on River's leader, the schedule).
// Serve calls it; a Server only installed on a mux calls it to work runs.
func (s *Server) Start() error {
	if err := s.queue.Start(s.work); err != nil {
		return err
	}
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		s.queue.Watch(s.work, s.cfg.ProgressEvery)
	}()
	return nil
}

// Shutdown stops softly: no new writes or runs (they are answered 503), the running
// ones finish the sessions they hold, and partitions stop at their next page and go back
// to the queue. If ctx ends first, the hard stop cancels them (their open transactions
// roll back) and Shutdown waits for them to return. Serve calls it; a Server only
// installed on a mux needs it before its store is closed.
func (s *Server) Shutdown(ctx context.Context) {
	s.stopAccepting()
	if s.queue != nil {
		if err := s.queue.Stop(ctx); err != nil {
			s.log.Warn().Err(err).Msg("stopping the queue")
		}
	}
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn().Msg("shutdown timeout: cancelling the running scan; its open transactions roll back")
		s.hardStop()
		<-done
	}
	s.hardStop()
	s.watching.Wait()
}

// begin counts in a write or run, unless the server is stopping.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.runs.Add(1)
	return true
}

func (s *Server) stopAccepting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		s.stopping = true
		close(s.stop)
	}
}

// prune is the optional cron job that deletes old versions and reports, on one replica.
func (s *Server) prune(age time.Duration) {
	if !s.begin() {
		return
	}
	defer s.runs.Done()
	release, ok, err := s.cfg.Store.TryLock(s.work, "prune")
	if err != nil || !ok {
		return
	}
	defer release()
	versions, reports, err := s.cfg.Store.Prune(s.work, time.Now().Add(-age), false, false)
	if err != nil {
		s.log.Error().Err(err).Msg("prune failed")
		return
	}
	s.log.Info().Int("num_versions", versions).Int("num_reports", reports).Msg("pruned")
}

// repair repairs one session in a run that stops softly with the server, and returns
// the run as it is shown: its recorded row with the session's outcome.
func (s *Server) repair(o scanner.RunOptions) (model.RunRow, error) {
	o.Stop = s.stop
	res, err := s.cfg.Scanner.Run(s.work, o)
	if res.RunID == 0 {
		return model.RunRow{}, err
	}
	if err != nil {
		return model.RunRow{}, err
	}
	run, err := s.cfg.Store.Run(s.work, res.RunID)
	run.Outcomes = res.Outcomes
	return run, err
}

// newHTTPServer bounds how long a client may take to send a request and how long an
// idle connection stays open, so slow or idle clients cannot hold connections. There is
// no write timeout: a repair or rollback answers when it is done.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// decodeBody reads an optional JSON object into v; on anything else (null, an array, a
// second value) it answers 400 and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
	if err != nil {
		writeError(w, http.StatusBadRequest, "body: %v", err)
		return false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return true
	}
	if raw[0] != '{' {
		writeError(w, http.StatusBadRequest, "body must be a JSON object")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "body: %v", err)
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "body must be one JSON object")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers a store or scanner error: 404 for what does not exist, 503 with a generic
// message while the database is unavailable, 500 with a generic message for the rest.
// The details go to the log, never to the client.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, model.ErrNotFound):
		writeError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, model.ErrUnavailable):
		s.log.Warn().Err(err).Str("path", r.URL.Path).Msg("database unavailable")
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "database unavailable; try again later")
	default:
		s.log.Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
		writeError(w, http.StatusInternalServerError, "internal error; see the daemon's log")
	}
}

// writeError answers the error object the CLI's --json prints too: the message, and the
// code (here the HTTP status; there the exit code).
func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...), Code: code})
}

type apiError struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
}

// ready answers the readiness probe, which needs no token: it says ready or not and a
// generic reason, and logs the details (they name the database, its user and host).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	pool := s.cfg.Store.Pool()
	notReady := func(reason string, err error) {
		s.log.Warn().Err(err).Str("reason", reason).Msg("not ready")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
	}
	if err := pool.Ping(ctx); err != nil {
		notReady("database unavailable", err)
		return
	}
	if err := migrations.Check(ctx, pool, s.cfg.Schema); err != nil {
		notReady("schema not at this version of tmend", err)
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ready"})
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

func (s *Server) repairSession(w http.ResponseWriter, r *http.Request) {
	dry, err1 := boolParam(r, "dry_run")
	force, err2 := boolParam(r, "force")
	if err := errors.Join(err1, err2); err != nil {
		writeError(w, http.StatusBadRequest, "dry_run and force take true or false")
		return
	}
	if !s.begin() {
		writeError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	defer s.runs.Done()
	run, err := s.repair(scanner.RunOptions{Trigger: model.TriggerAPI, Actor: model.ActorAPI, Mode: model.ModeSession,
		SessionID: r.PathValue("id"), DryRun: dry, Force: force, KeepOutcomes: true})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Mode       model.Mode `json:"mode"`
		DryRun     bool       `json:"dry_run"`
		Limit      int        `json:"limit"`
		Partitions int        `json:"partitions"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Mode == "" {
		body.Mode = model.ModeIncremental
	}
	if body.Mode != model.ModeIncremental && body.Mode != model.ModeFull || body.Limit < 0 ||
		body.Partitions < 0 || body.Partitions > scanner.MaxPartitions {
		writeError(w, http.StatusBadRequest, `mode must be "incremental" or "full", limit not negative, partitions between 0 (automatic) and %d`,
			scanner.MaxPartitions)
		return
	}
	if !s.begin() {
		writeError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	defer s.runs.Done()
	id, err := s.queue.StartRun(r.Context(), scanner.RunOptions{Trigger: model.TriggerAPI, Actor: model.ActorAPI, Mode: body.Mode,
		DryRun: body.DryRun, Limit: body.Limit}, body.Partitions)
	switch {
	case errors.Is(err, model.ErrBusy):
		writeError(w, http.StatusConflict, "%v", err)
	case err != nil:
		s.fail(w, r, err)
	default:
		run, err := s.cfg.Store.Run(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", fmt.Sprintf("/v1/runs/%d", id))
		writeJSON(w, http.StatusAccepted, run)
	}
}

// runID reads the run id in the path, answering 400 when it is not a number.
func runID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "run id must be a number")
		return 0, false
	}
	return id, true
}

// cancelRun cancels a running scan's remaining partitions; 409 when it is not running.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	before, err := s.cfg.Store.Run(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if before.Status != model.RunRunning {
		writeError(w, http.StatusConflict, "run %d is %s, not running", id, before.Status)
		return
	}
	run, err := s.queue.Cancel(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	run, err := s.cfg.Store.Run(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// page writes a list with the cursor for the next page (the last row's id).
func page[T any](w http.ResponseWriter, items []T, limit int, last func(T) int64) {
	out := map[string]any{"items": items}
	if len(items) > 0 && len(items) == limit {
		out["next_cursor"] = strconv.FormatInt(last(items[len(items)-1]), 10)
	}
	if items == nil {
		out["items"] = []T{}
	}
	writeJSON(w, http.StatusOK, out)
}

// listParams reads the filters shared with 'tmend report'.
func listParams(r *http.Request) (model.ReportFilter, error) {
	q := r.URL.Query()
	f := model.ReportFilter{Stage: q.Get("stage"), Issue: q.Get("issue"),
		Dialect: q.Get("dialect"), SessionID: r.PathValue("id")}
	var err error
	now := time.Now()
	if f.Since, err = model.ParseSince(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = model.ParseSince(q.Get("until"), now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	for name, dst := range map[string]*int64{"run": &f.RunID, "cursor": &f.Cursor} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
				return f, fmt.Errorf("%s must be a number", name)
			}
		}
	}
	f.Limit = 50
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > 10000 {
			return f, errors.New("limit must be between 1 and 10000")
		}
	}
	return f, nil
}

func (s *Server) listReports(w http.ResponseWriter, r *http.Request) {
	f, err := listParams(r)
	if err == nil && r.URL.Query().Get("status") != "" {
		f.Status, err = model.ParseSessionStatus(r.URL.Query().Get("status"))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	rows, err := s.cfg.Store.ListReports(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page(w, rows, f.Limit, func(r model.ReportRow) int64 { return r.ID })
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	f, err := listParams(r)
	var status model.RunStatus
	if err == nil && r.URL.Query().Get("status") != "" {
		status, err = model.ParseRunStatus(r.URL.Query().Get("status"))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	runs, err := s.cfg.Store.ListRuns(r.Context(), model.RunFilter{Since: f.Since, Until: f.Until,
		Status: status, Cursor: f.Cursor, Limit: f.Limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page(w, runs, f.Limit, func(r model.RunRow) int64 { return r.ID })
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "version must be a number")
		return
	}
	v, err := s.cfg.Store.Version(r.Context(), r.PathValue("id"), n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, versionAnswer(v))
}

// versionWithContent is a version as GET /v1/sessions/{id}/versions/{n} answers it: its
// content is the saved transcript as JSON, not a string holding the JSON, so that clients
// decode it once. A content that is not JSON (a text column can hold anything) stays a
// string.
type versionWithContent struct {
	model.VersionRow
	Content json.RawMessage `json:"content"`
}

func versionAnswer(v model.VersionRow) versionWithContent {
	content := []byte(v.Content)
	if !json.Valid(content) {
		content, _ = json.Marshal(v.Content) // a string always marshals
	}
	return versionWithContent{VersionRow: v, Content: content}
}

func (s *Server) rollbackSession(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ToVersion int  `json:"to_version"`
		Force     bool `json:"force"`
		DryRun    bool `json:"dry_run"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	out, err := s.cfg.Scanner.Rollback(s.work, model.RollbackOptions{SessionID: r.PathValue("id"), To: body.ToVersion,
		Force: body.Force, DryRun: body.DryRun, Trigger: model.TriggerAPI, Actor: model.ActorAPI})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// One session was tried, in the shape of a run's rollback and of 'tmend rollback
	// --json'; the scanner has logged a failure's details.
	switch {
	case out.Failed > 0:
		writeError(w, http.StatusInternalServerError, "internal error; see the daemon's log")
	case out.Refused > 0:
		writeJSON(w, http.StatusConflict, out)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// listVersions lists a session's saved versions, without their content.
func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	versions, err := s.cfg.Store.Versions(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(versions) == 0 {
		writeError(w, http.StatusNotFound, "tmend saved no versions of session %q", id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": versions})
}

// diff answers the diff of two saved versions of a session (?from=&to=), by default what
// the latest write replaced, as the console shows it: report.TranscriptDiff.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	var from, to int
	for name, dst := range map[string]*int{"from": &from, "to": &to} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				writeError(w, http.StatusBadRequest, "%s must be a version number", name)
				return
			}
			*dst = n
		}
	}
	if (from == 0) != (to == 0) {
		writeError(w, http.StatusBadRequest, "give both from and to, or neither")
		return
	}
	reports, versions, err := s.cfg.Store.History(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if from == 0 {
		var ok bool
		if from, to, ok = model.LatestWrite(versions); !ok {
			writeError(w, http.StatusNotFound, "tmend never wrote session %q: nothing to diff", id)
			return
		}
	}
	d, err := console.Diff(r.Context(), s.cfg.Store, id, from, to, reports)
	switch {
	case errors.Is(err, console.ErrCannotCompare):
		writeError(w, http.StatusUnprocessableEntity, "%v", err)
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

// rollbackRun restores every session a run repaired, as 'tmend rollback --run' does;
// with dry_run it says what would be restored and refused, recorded as a dry run.
func (s *Server) rollbackRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	var body struct {
		Force  bool `json:"force"`
		DryRun bool `json:"dry_run"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	out, err := s.cfg.Scanner.Rollback(s.work, model.RollbackOptions{RunID: id, Force: body.Force, DryRun: body.DryRun,
		Trigger: model.TriggerAPI, Actor: model.ActorAPI})
	switch {
	case errors.Is(err, store.ErrSource):
		writeError(w, http.StatusConflict, "%v", err)
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}
