// Package console is tmend's audit console: web pages of runs, a run's sessions, a
// session's history and the diff of any two of its versions, with rollback buttons. The
// daemon installs it on its mux. It needs only the standard library (and x/time/rate to
// limit wrong sign-ins), and its stylesheet
// and script are embedded: no CDN, no build step, so it works in air-gapped clusters.
//
// Every page that shows audit rows or transcript content needs a credential: the read
// token or the write token, given once in a sign-in form (which sets a signed cookie) or
// as a bearer token. Rollbacks need the write token and, from a browser, a CSRF token.
package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/tmend/tmend/store/model"
)

// Store is what the console reads.
type Store interface {
	ListRuns(ctx context.Context, f model.RunFilter) ([]model.RunRow, error)
	Run(ctx context.Context, id int64) (model.RunRow, error)
	RunProgress(ctx context.Context, runID int64) (map[model.SessionStatus]int, error)
	RunPartitions(ctx context.Context, runID int64) ([]model.PartitionRow, error)
	ListReports(ctx context.Context, f model.ReportFilter) ([]model.ReportRow, error)
	Versions(ctx context.Context, sessionID string) ([]model.VersionRow, error)
	Version(ctx context.Context, sessionID string, version int) (model.VersionRow, error)
	// Cleared is what a session's compactions replaced by stubs (report --cleared).
	Cleared(ctx context.Context, sessionID string, latest bool) ([]model.Cleared, error)
}

// Rollbacker restores what tmend replaced: the scanner's Rollback.
type Rollbacker interface {
	Rollback(ctx context.Context, o model.RollbackOptions) (model.RollbackOutcome, error)
}

// Config is what a Console needs.
type Config struct {
	Store Store
	// Rollback restores sessions; nil leaves the console read-only.
	Rollback Rollbacker
	// WriteToken (the API token) signs in to read and roll back, ReadToken only to read.
	// With neither set nobody can sign in, as the API then refuses its GETs.
	WriteToken, ReadToken string
	Log                   zerolog.Logger
	// Work is the context rollbacks run under instead of the request's, so that a client
	// that goes away does not stop one half-way; the daemon passes the one its hard stop
	// cancels. Default: context.Background().
	Work context.Context
	// SignInFor is how long a sign-in lasts; default 12 hours.
	SignInFor time.Duration
	// Schedule is the daemon's scan schedule (its cron.Schedule), written ScheduleSpec,
	// for the runs page's next tick; nil when the daemon schedules no scans.
	Schedule     interface{ Next(time.Time) time.Time }
	ScheduleSpec string
}

// Console serves the audit console.
type Console struct {
	cfg    Config
	log    zerolog.Logger
	pages  map[string]*template.Template
	static http.Handler
	// signIns limits wrong sign-ins per client.
	signIns *signInLimiter
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New checks cfg and parses the pages.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: no store")
	}
	if cfg.Work == nil {
		cfg.Work = context.Background()
	}
	if cfg.SignInFor <= 0 {
		cfg.SignInFor = 12 * time.Hour
	}
	c := &Console{cfg: cfg, log: cfg.Log.With().Str("component", "console").Logger(), pages: map[string]*template.Template{}}
	c.signIns = newSignInLimiter(c.log)
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		c.pages[page] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix("/console/static/", http.FileServerFS(static))
	c.static = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no listings
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
	return c, nil
}

// Route is one of the console's routes: its ServeMux pattern and what it serves.
type Route struct {
	Pattern, Help string
	handler       http.Handler
}

// routes are the console's pages, its assets and its JSON, which Install registers.
func (c *Console) routes() []Route {
	return []Route{
		{"GET /{$}", "the runs", c.secure(c.reader(c.runsPage))},
		{"GET /login", "sign in with the read or the API token", c.secure(http.HandlerFunc(c.loginPage))},
		{"POST /login", "sign in", c.secure(http.HandlerFunc(c.login))},
		{"POST /logout", "sign out", c.secure(http.HandlerFunc(c.logout))},
		{"GET /runs/{id}", "a run: its counts, sessions and issues", c.secure(c.reader(c.runPage))},
		{"POST /runs/{id}/rollback", "roll back a run (API token)", c.secure(c.writer(c.runRollback))},
		{"GET /session", "a session's versions, reports and diffs (?id)", c.secure(c.reader(c.sessionPage))},
		{"POST /session/rollback", "roll back a session (API token)", c.secure(c.writer(c.sessionRollback))},
		{"GET /reports", "audit rows with filters", c.secure(c.reader(c.reportsPage))},
		{"GET /console/static/", "the console's script and stylesheet", c.secure(c.static)},
		{"GET /console/api/runs/{id}", "a running run's live progress, as JSON", c.secure(c.reader(c.runJSON))},
	}
}

// Routes lists the console's routes, for serve --help.
func Routes() []Route { return (&Console{}).routes() }

// Install registers the console's pages, its assets and its JSON (routes) on mux.
func (c *Console) Install(mux *http.ServeMux) {
	for _, r := range c.routes() {
		mux.Handle(r.Pattern, r.handler)
	}
}

// contentSecurityPolicy allows only the console's own script and stylesheet (no inline
// script or style), requests only to the console itself (the live progress poll), no
// frames, and no forms posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the headers every console response carries.
func (c *Console) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(r.URL.Path, "/console/static/") {
			h.Set("Cache-Control", "no-store") // audit rows and transcripts stay out of caches
		}
		next.ServeHTTP(w, r)
	})
}

// view is what every page template gets.
type view struct {
	Title string
	// Who is the signed-in reader or writer; zero on the sign-in page.
	Who  identity
	CSRF string
	// CanRollback: the reader may roll back and the console has a rollbacker.
	CanRollback bool
	Body        any
}

// render executes a page into a buffer first, so that a template error answers 500
// instead of half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.log.Error().Err(err).Str("page", page).Msg("render page")
		http.Error(w, "internal error; see the daemon's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away
}

// pageError is an error page's body.
type pageError struct {
	Status  int
	Message string
}

// fail answers an error with a page: the message for what the reader can fix (400,
// 404), a generic one for the rest, whose details go to the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, who identity, status int, err error) {
	msg := err.Error()
	switch {
	case errors.Is(err, model.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, model.ErrUnavailable):
		c.log.Warn().Err(err).Str("path", r.URL.Path).Msg("database unavailable")
		w.Header().Set("Retry-After", "10")
		status, msg = http.StatusServiceUnavailable, "The database is unavailable; try again later."
	case status >= 500:
		c.log.Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
		msg = "Something went wrong; the details are in the daemon's log."
	}
	c.render(w, r, status, "error", c.view(who, http.StatusText(status), pageError{status, msg}))
}

func (c *Console) view(who identity, title string, body any) view {
	return view{Title: title, Who: who, CSRF: c.csrfToken(who), CanRollback: who.role == roleWrite && c.cfg.Rollback != nil, Body: body}
}

// badInput is an error the reader can fix, shown as it is.
func badInput(format string, args ...any) error { return fmt.Errorf(format, args...) }

// validText refuses what Postgres cannot hold in a text value (a NUL, bytes that are not
// UTF-8), as the API does.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func validQuery(r *http.Request) error {
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if !validText(name) || !validText(v) {
				return badInput("query parameters must be UTF-8 text without NUL characters")
			}
		}
	}
	if !validText(r.PathValue("id")) {
		return badInput("ids must be UTF-8 text without NUL characters")
	}
	return nil
}
