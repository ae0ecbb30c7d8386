package main

import (
	"bytes"
	"context"
	"crypto/subtle"
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
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store/model"
)

func newServeCmd(e *env) *cobra.Command {
	var rf repairFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: scheduled scans, the HTTP API, /metrics, /healthz and /readyz",
		Long: `Run scheduled incremental scans (--schedule, cron syntax, in --time-zone) and serve the
HTTP API. Several replicas may run: a Postgres advisory lock lets one scheduled or API run
go at a time; the others skip it.

API (JSON). POSTs need "Authorization: Bearer <token>" with --api-token / TMEND_API_TOKEN;
GETs under /v1 return audit rows and transcripts and need the read token (--read-token /
TMEND_READ_TOKEN) or the API token. Without a token set, those endpoints are refused.
  POST /v1/sessions/{id}/repair   repair one session now (?dry_run=true, ?force=true)
  POST /v1/runs                   start a run: {"mode": "incremental"|"full", "dry_run": false, "limit": 0}
  GET  /v1/runs                   runs, newest first (?since, ?until, ?status, ?limit, ?cursor)
  GET  /v1/runs/{id}              a run's status, counts and totals by status, stage, dialect, issue
  GET  /v1/reports                audit rows (?run, ?since, ?until, ?status, ?stage, ?issue, ?dialect,
                                  ?limit, ?cursor); lists answer {"items": [...], "next_cursor": "..."}
  GET  /v1/sessions/{id}/reports  a session's audit rows (same filters)
  GET  /v1/sessions/{id}/versions/{n}  a saved version with its content
  POST /v1/sessions/{id}/rollback {"to_version": 0, "force": false, "dry_run": false}; 409 when refused
  GET  /metrics                   Prometheus metrics (no token)
  GET  /healthz, /readyz          liveness; readiness (database reachable, schema current; no token,
                                  and no details: they are in the log)

On SIGTERM or SIGINT it stops taking work, lets a running scan finish the sessions it
has in hand (up to --shutdown-timeout), then cancels the rest: every session is either
written whole or not at all.

` + configHelp,
		Example: `  TMEND_API_TOKEN=s3cret tmend serve --schedule '0 3 * * *' --time-zone Europe/Berlin
  tmend serve --listen 127.0.0.1:9090 --schedule '@every 1h'
  curl -X POST -H "Authorization: Bearer $TMEND_API_TOKEN" localhost:8080/v1/sessions/7f3e2a/repair`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, e, &rf) },
	}
	f := cmd.Flags()
	registerDBFlags(f)
	registerSourceFlags(f)
	registerScanFlags(f, &rf)
	f.String("schedule", "0 3 * * *", "when to scan, in cron syntax (5 fields or @every 1h, @daily, ...)")
	f.String("time-zone", "UTC", "time zone of the schedule (IANA name)")
	f.String("listen", "127.0.0.1:8080", "address of the HTTP API and metrics")
	f.String("api-token", "", "bearer token required by the API's POST endpoints; it also reads (prefer TMEND_API_TOKEN)")
	f.String("read-token", "", "bearer token for the API's GET endpoints, which return audit rows and transcripts (prefer TMEND_READ_TOKEN)")
	f.Duration("shutdown-timeout", 60*time.Second, "how long a stopping daemon lets a running scan finish its sessions")
	f.String("prune-schedule", "", "when to prune old versions and reports, in cron syntax (default: never)")
	f.String("prune-older-than", "90d", "what the scheduled prune deletes (see 'tmend prune')")
	return cmd
}

// daemon holds what the scheduled job and the API share.
type daemon struct {
	r       *runner
	log     zerolog.Logger
	metrics *metrics
	token   string // writes and reads
	// readToken only reads.
	readToken string
	// work is cancelled last, on a hard stop; stop is closed first, on a soft stop.
	work context.Context
	stop chan struct{}
	runs sync.WaitGroup
}

func serve(cmd *cobra.Command, e *env, rf *repairFlags) error {
	s, err := loadSettings(e, cmd)
	if err != nil {
		return err
	}
	loc, err := time.LoadLocation(s.get("time-zone"))
	if err != nil {
		return usageErrorf("--time-zone: %v", err)
	}
	spec := s.get("schedule")
	if _, err := cron.ParseStandard(spec); err != nil {
		return usageErrorf("--schedule %q: %v", spec, err)
	}
	shutdownTimeout, err := s.duration("shutdown-timeout")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.get("listen"))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.get("listen"), err)
	}
	defer func() { _ = ln.Close() }() // srv.Serve closes it; this is for the early returns

	// The root context ends on a signal; work outlives it until the hard stop.
	work, hardStop := context.WithCancel(context.WithoutCancel(cmd.Context()))
	defer hardStop()
	r, err := openRunner(work, e, cmd, rf, false)
	if err != nil {
		return err
	}
	defer r.close()
	d := &daemon{r: r, log: r.log.With().Str("component", "daemon").Logger(), metrics: newMetrics(),
		token: s.get("api-token"), readToken: s.get("read-token"), work: work, stop: make(chan struct{})}
	if d.token == "" {
		d.log.Warn().Msg("no API token set: the API's POST endpoints are disabled")
	}
	if d.token == "" && d.readToken == "" {
		d.log.Warn().Msg("no API or read token set: the API's GET endpoints are disabled")
	}

	cl := cronLogger{d.log}
	c := cron.New(cron.WithLocation(loc), cron.WithLogger(cl), cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	if _, err := c.AddFunc(spec, d.scheduled); err != nil {
		return usageErrorf("--schedule %q: %v", spec, err)
	}
	if ps := s.get("prune-schedule"); ps != "" {
		age, err := parseDuration(s.get("prune-older-than"))
		if err != nil || age <= 0 {
			return usageErrorf("--prune-older-than must be a duration like 90d, got %q", s.get("prune-older-than"))
		}
		if _, err := c.AddFunc(ps, func() { d.prune(age) }); err != nil {
			return usageErrorf("--prune-schedule %q: %v", ps, err)
		}
	}
	srv := newHTTPServer(d.routes())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	c.Start()
	d.log.Info().Str("listen", ln.Addr().String()).Str("schedule", spec).Str("time_zone", loc.String()).
		Str("next_run", c.Entries()[0].Next.Format(time.RFC3339)).Msg("serving")

	select {
	case <-cmd.Context().Done():
		d.log.Info().Msg("stopping")
	case err := <-serveErr:
		d.log.Error().Err(err).Msg("http server failed")
	}
	// Soft stop: no new HTTP requests or scheduled runs; running scans finish the
	// sessions they hold. Then the hard stop cancels whatever is left.
	close(d.stop)
	deadline, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(deadline)
	done := make(chan struct{})
	go func() { <-c.Stop().Done(); d.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline.Done():
		d.log.Warn().Msg("shutdown timeout: cancelling the running scan; its open transactions roll back")
		hardStop()
		<-done
	}
	d.log.Info().Msg("stopped")
	return nil
}

// scheduled is the cron job: one incremental run, if no other replica is running one.
func (d *daemon) scheduled() {
	_, err := d.runLocked(scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeIncremental}, nil)
	switch {
	case errors.Is(err, scanner.ErrBusy):
		d.metrics.skipped.Inc()
		d.log.Debug().Msg("another replica is running a scan; skipping this one")
	case err != nil && !errors.Is(err, context.Canceled):
		d.log.Error().Err(err).Msg("scheduled run failed")
	}
}

// prune is the optional cron job that deletes old versions and reports, on one replica.
func (d *daemon) prune(age time.Duration) {
	release, ok, err := d.r.store.TryLock(d.work, "prune")
	if err != nil || !ok {
		return
	}
	defer release()
	versions, reports, err := d.r.store.Prune(d.work, time.Now().Add(-age), false, false)
	if err != nil {
		d.log.Error().Err(err).Msg("prune failed")
		return
	}
	d.log.Info().Int("num_versions", versions).Int("num_reports", reports).Msg("pruned")
}

// runLocked runs under the source's run lock; scanner.ErrBusy when another process holds it.
func (d *daemon) runLocked(o scanner.RunOptions, started chan<- int64) (model.RunResult, error) {
	return d.run(o, started, true)
}

func (d *daemon) run(o scanner.RunOptions, started chan<- int64, exclusive bool) (model.RunResult, error) {
	o.Stop = d.stop
	if started != nil {
		o.OnStart = func(id int64) { started <- id }
	}
	run := d.r.sc.Run
	if exclusive {
		run = d.r.sc.RunExclusive
	}
	res, err := run(d.work, o)
	if res.RunID != 0 {
		d.metrics.observe(&res)
	}
	return res, err
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

func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", d.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /v1/sessions/{id}/repair", d.auth(d.repairSession))
	mux.HandleFunc("POST /v1/runs", d.auth(d.startRun))
	mux.HandleFunc("GET /v1/runs", d.read(d.listRuns))
	mux.HandleFunc("GET /v1/runs/{id}", d.read(d.getRun))
	mux.HandleFunc("GET /v1/reports", d.read(d.listReports))
	mux.HandleFunc("GET /v1/sessions/{id}/reports", d.read(d.listReports))
	mux.HandleFunc("GET /v1/sessions/{id}/versions/{n}", d.read(d.getVersion))
	mux.HandleFunc("POST /v1/sessions/{id}/rollback", d.auth(d.rollbackSession))
	return mux
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
func (d *daemon) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, model.ErrNotFound):
		writeError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, model.ErrUnavailable):
		d.log.Warn().Err(err).Str("path", r.URL.Path).Msg("database unavailable")
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "database unavailable; try again later")
	default:
		d.log.Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
		writeError(w, http.StatusInternalServerError, "internal error; see the daemon's log")
	}
}
func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// bearer returns the request's bearer token; the scheme is case-insensitive (RFC 9110).
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// tokenIs compares in constant time; an unset token matches nothing.
func tokenIs(got, want string) bool {
	return want != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tmend"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
}

// validInput refuses ids and filters that Postgres cannot hold in a text value (a NUL,
// bytes that are not UTF-8) with a 400, before they reach a query.
func validInput(w http.ResponseWriter, r *http.Request) bool {
	bad := func(s string) bool { return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 }
	if bad(r.PathValue("id")) {
		writeError(w, http.StatusBadRequest, "ids must be UTF-8 text without NUL characters")
		return false
	}
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if bad(name) || bad(v) {
				writeError(w, http.StatusBadRequest, "query parameters must be UTF-8 text without NUL characters")
				return false
			}
		}
	}
	return true
}

// read requires the read token or the API token: what GETs return (audit rows,
// transcripts) is as private as the sessions themselves.
func (d *daemon) read(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d.token == "" && d.readToken == "" {
			writeError(w, http.StatusForbidden, "no read token is configured; set --read-token or TMEND_READ_TOKEN to enable reads")
			return
		}
		if got := bearer(r); !tokenIs(got, d.readToken) && !tokenIs(got, d.token) {
			unauthorized(w)
			return
		}
		if !validInput(w, r) {
			return
		}
		next(w, r)
	}
}

// auth requires the API token; without a configured token, writes are refused.
func (d *daemon) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d.token == "" {
			writeError(w, http.StatusForbidden, "no API token is configured; set --api-token or TMEND_API_TOKEN to enable writes")
			return
		}
		if !tokenIs(bearer(r), d.token) {
			unauthorized(w)
			return
		}
		if !validInput(w, r) {
			return
		}
		select {
		case <-d.stop:
			writeError(w, http.StatusServiceUnavailable, "shutting down")
			return
		default:
		}
		d.runs.Add(1)
		defer d.runs.Done()
		next(w, r)
	}
}

// ready answers the readiness probe, which needs no token: it says ready or not and a
// generic reason, and logs the details (they name the database, its user and host).
func (d *daemon) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	pool := d.r.store.Pool()
	notReady := func(reason string, err error) {
		d.log.Warn().Err(err).Str("reason", reason).Msg("not ready")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
	}
	if err := pool.Ping(ctx); err != nil {
		notReady("database unavailable", err)
		return
	}
	if err := checkSchema(ctx, pool, d.r.schema); err != nil {
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

func (d *daemon) repairSession(w http.ResponseWriter, r *http.Request) {
	dry, err1 := boolParam(r, "dry_run")
	force, err2 := boolParam(r, "force")
	if err := errors.Join(err1, err2); err != nil {
		writeError(w, http.StatusBadRequest, "dry_run and force take true or false")
		return
	}
	res, err := d.run(scanner.RunOptions{Trigger: model.TriggerAPI, Mode: model.ModeSession,
		SessionID: r.PathValue("id"), DryRun: dry, Force: force, KeepOutcomes: true}, nil, false)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (d *daemon) startRun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Mode   model.Mode `json:"mode"`
		DryRun bool       `json:"dry_run"`
		Limit  int        `json:"limit"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Mode == "" {
		body.Mode = model.ModeIncremental
	}
	if body.Mode != model.ModeIncremental && body.Mode != model.ModeFull || body.Limit < 0 {
		writeError(w, http.StatusBadRequest, `mode must be "incremental" or "full", and limit not negative`)
		return
	}
	started := make(chan int64, 1)
	finished := make(chan error, 1)
	d.runs.Add(1)
	go func() {
		defer d.runs.Done()
		_, err := d.runLocked(scanner.RunOptions{Trigger: model.TriggerAPI, Mode: body.Mode, DryRun: body.DryRun, Limit: body.Limit}, started)
		finished <- err
	}()
	select {
	case id := <-started:
		writeJSON(w, http.StatusAccepted, map[string]any{"run_id": id, "status": model.RunRunning, "url": fmt.Sprintf("/v1/runs/%d", id)})
	case err := <-finished:
		if errors.Is(err, scanner.ErrBusy) {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
		d.fail(w, r, err)
	}
}

func (d *daemon) getRun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "run id must be a number")
		return
	}
	run, err := d.r.store.Run(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
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
	if f.Since, err = parseSince(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = parseSince(q.Get("until"), now); err != nil {
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

func (d *daemon) listReports(w http.ResponseWriter, r *http.Request) {
	f, err := listParams(r)
	if err == nil && r.URL.Query().Get("status") != "" {
		f.Status, err = model.ParseSessionStatus(r.URL.Query().Get("status"))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	rows, err := d.r.store.ListReports(r.Context(), f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	page(w, rows, f.Limit, func(r model.ReportRow) int64 { return r.ID })
}

func (d *daemon) listRuns(w http.ResponseWriter, r *http.Request) {
	f, err := listParams(r)
	var status model.RunStatus
	if err == nil && r.URL.Query().Get("status") != "" {
		status, err = model.ParseRunStatus(r.URL.Query().Get("status"))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	runs, err := d.r.store.ListRuns(r.Context(), model.RunFilter{Since: f.Since, Until: f.Until,
		Status: status, Cursor: f.Cursor, Limit: f.Limit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	page(w, runs, f.Limit, func(r model.RunRow) int64 { return r.ID })
}

func (d *daemon) getVersion(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "version must be a number")
		return
	}
	v, err := d.r.store.Version(r.Context(), r.PathValue("id"), n)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (d *daemon) rollbackSession(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ToVersion int  `json:"to_version"`
		Force     bool `json:"force"`
		DryRun    bool `json:"dry_run"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	res, err := d.r.store.Rollback(d.work, model.RollbackRequest{SessionID: r.PathValue("id"), To: body.ToVersion,
		Force: body.Force, DryRun: body.DryRun, Trigger: model.TriggerAPI})
	switch {
	case err != nil:
		d.fail(w, r, err)
	case !res.Restored:
		writeJSON(w, http.StatusConflict, res)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// metrics are the daemon's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec
	sessions *prometheus.CounterVec
	actions  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lastRun  *prometheus.GaugeVec
	skipped  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_runs_total",
			Help: "Runs by trigger, mode and outcome."}, []string{"trigger", "mode", "status"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_sessions_total",
			Help: "Sessions scanned, by what happened to them."}, []string{"status"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_stage_actions_total",
			Help: "Repair actions by stage."}, []string{"stage"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tmend_run_duration_seconds",
			Help: "How long runs take.", Buckets: prometheus.ExponentialBuckets(0.1, 4, 10)}, []string{"trigger"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tmend_last_run_timestamp_seconds",
			Help: "When the last run of each outcome finished."}, []string{"status"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tmend_scheduled_runs_skipped_total",
			Help: "Scheduled runs skipped because another replica held the lock."}),
	}
	m.reg.MustRegister(m.runs, m.sessions, m.actions, m.duration, m.lastRun, m.skipped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, st := range repair.Stages() {
		m.actions.WithLabelValues(string(st)) // export zeros, so rates work from the start
	}
	return m
}

func (m *metrics) observe(r *model.RunResult) {
	m.runs.WithLabelValues(string(r.Trigger), string(r.Mode), string(r.Status)).Inc()
	for status, n := range r.ByStatus {
		m.sessions.WithLabelValues(string(status)).Add(float64(n))
	}
	for st, n := range r.ByStage {
		m.actions.WithLabelValues(string(st)).Add(float64(n))
	}
	m.duration.WithLabelValues(string(r.Trigger)).Observe(r.Duration.Seconds())
	m.lastRun.WithLabelValues(string(r.Status)).SetToCurrentTime()
}

// cronLogger adapts zerolog to cron's logger, with key/value pairs as fields.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg(msg) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg(msg)
}
