package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// pageSize is how many runs or reports a page lists.
const pageSize = 50

// runRow is a run as the tables show it. A running run's row has the counts of its
// partitions' last checkpoints (a page of sessions each); its reports, written as each
// session is handled, may be ahead, so each count is the larger of the two.
type runRow struct {
	model.RunRow
	Live     bool
	Counts   model.RunCounts
	Duration string
	// Changed is what the run changed or, dry, would change, as Verb says: sessions
	// repaired for a scan, restored for a rollback.
	Changed int
	Verb    string
	// RollbackOf is the run a rollback run rolled back.
	RollbackOf int64
}

func (c *Console) runRow(ctx context.Context, r model.RunRow, now time.Time) (runRow, error) {
	row := runRow{RunRow: r, Counts: r.Counts, Live: r.Status == model.RunRunning}
	end := now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	row.Duration = duration(end.Sub(r.StartedAt))
	if row.Live {
		byStatus, err := c.cfg.Store.RunProgress(ctx, r.ID)
		if err != nil {
			return row, err
		}
		row.Counts = atLeast(r.Counts, countsOf(byStatus))
	}
	row.Changed, row.Verb = row.Counts.Repaired, "repaired"
	if r.Mode == model.ModeRollback {
		row.Changed, row.Verb = row.Counts.Restored, "restored"
	}
	if r.DryRun {
		row.Verb = "would be " + row.Verb
	}
	if of, ok := r.Options["rollback_of_run"].(float64); ok {
		row.RollbackOf = int64(of)
	}
	return row, nil
}

// countsOf sums reports by status into run counts, as the scanner counts sessions (clean
// sessions have no report, so Scanned is a lower bound).
func countsOf(byStatus map[model.SessionStatus]int) model.RunCounts {
	var c model.RunCounts
	for st, n := range byStatus {
		c.Scanned += n
		switch st {
		case model.StatusRepaired, model.StatusWouldRepair:
			c.Repaired += n
		case model.StatusPending:
			c.Pending += n
		case model.StatusConflict:
			c.Conflict += n
		case model.StatusFailed:
			c.Failed += n
		case model.StatusRolledBack:
			c.Restored += n
		case model.StatusRefused:
			c.Refused += n
		default:
			c.Skipped += n
		}
	}
	return c
}

// atLeast is a with each count raised to b's.
func atLeast(a, b model.RunCounts) model.RunCounts {
	for _, p := range []struct{ a, b *int }{{&a.Scanned, &b.Scanned}, {&a.Clean, &b.Clean}, {&a.Repaired, &b.Repaired},
		{&a.Pending, &b.Pending}, {&a.Conflict, &b.Conflict}, {&a.Skipped, &b.Skipped}, {&a.Failed, &b.Failed},
		{&a.Restored, &b.Restored}, {&a.Refused, &b.Refused}} {
		*p.a = max(*p.a, *p.b)
	}
	return a
}

// duration is how the console shows a duration (also in the JSON console.js polls).
func duration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func int64Param(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badInput("%s must be a positive number", name)
	}
	return n, nil
}

// withQuery is path with the query values set, empty ones left out.
func withQuery(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// sessionURL is a session's page, comparing versions from and to when set.
func sessionURL(id string, from, to int) string {
	if from > 0 && to > 0 {
		return withQuery("/session", "id", id, "from", strconv.Itoa(from), "to", strconv.Itoa(to))
	}
	return withQuery("/session", "id", id)
}

type runsBody struct {
	Status status
	Runs   []runRow
	// Filter is the runs' status filter, Kind their kind.
	Filter   string
	Statuses []model.RunStatus
	Kind     string
	Kinds    []option
	Next     string
	Charts   []chart
}

// scanModes are the modes of scans; the others are housekeeping.
var scanModes = []model.Mode{model.ModeIncremental, model.ModeFull}

// runKinds are the runs page's kinds: scans apart from housekeeping, which would bury
// them. The first is the default.
var runKinds = []struct {
	option
	modes []model.Mode
}{
	{option{"scans", "scans"}, scanModes},
	{option{"housekeeping", "housekeeping (rollbacks, single sessions)"}, []model.Mode{model.ModeSession, model.ModeRollback}},
	{option{"all", "all runs"}, nil},
}

func (c *Console) runsPage(w http.ResponseWriter, r *http.Request, who identity) {
	q := r.URL.Query()
	f := model.RunFilter{Limit: pageSize}
	var err error
	if f.Cursor, err = int64Param(q.Get("cursor"), "cursor"); err != nil {
		c.fail(w, r, who, http.StatusBadRequest, err)
		return
	}
	if s := q.Get("status"); s != "" {
		if f.Status, err = model.ParseRunStatus(s); err != nil {
			c.fail(w, r, who, http.StatusBadRequest, badInput("%v", err))
			return
		}
	}
	body := runsBody{Filter: string(f.Status), Statuses: model.RunStatuses(), Kind: cmp.Or(q.Get("kind"), runKinds[0].Value)}
	known := false
	for _, k := range runKinds {
		body.Kinds = append(body.Kinds, k.option)
		if k.Value == body.Kind {
			f.Modes, known = k.modes, true
		}
	}
	if !known {
		c.fail(w, r, who, http.StatusBadRequest, badInput("unknown kind of run %q: want scans, housekeeping or all", body.Kind))
		return
	}
	now := time.Now()
	if body.Status, err = c.status(r.Context(), now); err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	runs, err := c.cfg.Store.ListRuns(r.Context(), f)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	for _, run := range runs {
		row, err := c.runRow(r.Context(), run, now)
		if err != nil {
			c.fail(w, r, who, http.StatusInternalServerError, err)
			return
		}
		body.Runs = append(body.Runs, row)
	}
	if len(runs) == pageSize {
		body.Next = withQuery("/", "status", string(f.Status), "kind", q.Get("kind"), "cursor", strconv.FormatInt(runs[len(runs)-1].ID, 10))
	}
	body.Charts = runCharts(runs)
	c.render(w, r, http.StatusOK, "runs", c.view(who, "Runs", body))
}

// option is one choice of a filter's select.
type option struct {
	Value, Label string
}

// filters are the report filters' choices: every status, issue code and dialect.
type filters struct {
	Statuses, Issues, Dialects []option
}

func reportFilters() filters {
	var f filters
	for _, s := range model.SessionStatuses() {
		if s != model.StatusHeld && s != model.StatusClean && s != model.StatusBroken { // never reported
			f.Statuses = append(f.Statuses, option{string(s), string(s)})
		}
	}
	for _, ic := range repair.IssueCodes() {
		f.Issues = append(f.Issues, option{string(ic.Code), termOf(string(ic.Code), "").Label})
	}
	for _, d := range repair.Dialects() {
		f.Dialects = append(f.Dialects, option{string(d), string(d)})
	}
	return f
}

// reportFilter reads the filters the run and reports pages share.
func reportFilter(r *http.Request) (model.ReportFilter, error) {
	q := r.URL.Query()
	f := model.ReportFilter{Issue: q.Get("issue"), Limit: pageSize}
	var err error
	if s := q.Get("status"); s != "" {
		if f.Status, err = model.ParseSessionStatus(s); err != nil {
			return f, badInput("%v", err)
		}
	}
	if d := q.Get("dialect"); d != "" {
		dialect, err := repair.ParseDialect(d)
		if err != nil {
			return f, badInput("%v", err)
		}
		f.Dialect = string(dialect)
	}
	if f.Issue != "" && !slices.ContainsFunc(repair.IssueCodes(), func(ic struct {
		Code    repair.IssueCode
		Meaning string
	}) bool {
		return string(ic.Code) == f.Issue
	}) {
		return f, badInput("unknown issue code %q", f.Issue)
	}
	if f.Cursor, err = int64Param(q.Get("cursor"), "cursor"); err != nil {
		return f, err
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if *dst, err = parseTime(q.Get(name)); err != nil {
			return f, badInput("%s: %v", name, err)
		}
	}
	return f, nil
}

// parseTime reads a time filter: what a datetime-local input sends (taken as UTC), or
// RFC 3339.
func parseTime(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("want a time like 2026-01-02T15:04 (UTC), got %q", v)
}

// filterForm is the report filters' form: where it goes and the values it shows.
type filterForm struct {
	Action, Anchor                       string
	Times                                bool // with since and until
	Status, Issue, Dialect, Since, Until string
	filters
}

func formOf(r *http.Request, anchor string, times bool) filterForm {
	q := r.URL.Query()
	return filterForm{Action: r.URL.Path, Anchor: anchor, Times: times, Status: q.Get("status"), Issue: q.Get("issue"),
		Dialect: q.Get("dialect"), Since: q.Get("since"), Until: q.Get("until"), filters: reportFilters()}
}

// nextPage is the URL of the page after rows, when rows filled this one.
func nextPage(r *http.Request, rows []model.ReportRow) string {
	if len(rows) < pageSize {
		return ""
	}
	q := r.URL.Query()
	q.Set("cursor", strconv.FormatInt(rows[len(rows)-1].ID, 10))
	return r.URL.Path + "?" + q.Encode()
}

// countRow is one line of a totals table.
type countRow struct {
	Name string
	N    int
	// Href lists the run's sessions of that kind, when it can.
	Href string
	// Term is Name in words, with its meaning where tmend has one.
	Term term
}

type totals struct {
	Title string
	Rows  []countRow
}

type runBody struct {
	Run     runRow
	Totals  []totals
	Reports []model.ReportRow
	Form    filterForm
	Next    string
	// CanBeRolledBack: the run wrote repairs.
	CanBeRolledBack bool
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, who identity) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		c.fail(w, r, who, http.StatusNotFound, badInput("There is no run %q.", r.PathValue("id")))
		return
	}
	f, err := reportFilter(r)
	if err != nil {
		c.fail(w, r, who, http.StatusBadRequest, err)
		return
	}
	run, err := c.cfg.Store.Run(r.Context(), id)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	row, err := c.runRow(r.Context(), run, time.Now())
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	f.RunID = id
	reports, err := c.cfg.Store.ListReports(r.Context(), f)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	body := runBody{Run: row, Reports: reports, Form: formOf(r, "#sessions", false), Next: nextPage(r, reports),
		CanBeRolledBack: run.Mode != model.ModeRollback && !run.DryRun && run.Status != model.RunRunning && run.Counts.Repaired > 0}
	body.Totals = runTotals(run)
	c.render(w, r, http.StatusOK, "run", c.view(who, fmt.Sprintf("Run %d", id), body))
}

// runTotals are a run's totals by status, stage, dialect and issue, in the orders tmend
// lists them, each linking to the run's sessions of that kind where a filter exists.
func runTotals(run model.RunRow) []totals {
	self := fmt.Sprintf("/runs/%d", run.ID)
	s := run.Summary
	var byStatus totals
	byStatus.Title = "By status"
	for _, st := range model.SessionStatuses() {
		if n, ok := s.ByStatus[st]; ok {
			href := ""
			if st != model.StatusClean && st != model.StatusHeld {
				href = withQuery(self, "status", string(st)) + "#sessions"
			}
			byStatus.Rows = append(byStatus.Rows, countRow{string(st), n, href, termOf(string(st), "")})
		}
	}
	byStage := totals{Title: "Actions by stage"}
	for _, st := range repair.Stages() {
		if n, ok := s.ByStage[string(st)]; ok {
			byStage.Rows = append(byStage.Rows, countRow{string(st), n, "", termOf(string(st), st.Meaning())})
		}
	}
	byDialect := totals{Title: "Sessions by dialect"}
	for _, d := range repair.Dialects() {
		if n, ok := s.ByDialect[string(d)]; ok {
			byDialect.Rows = append(byDialect.Rows, countRow{string(d), n, withQuery(self, "dialect", string(d)) + "#sessions", term{Code: string(d), Label: string(d)}})
		}
	}
	byIssue := totals{Title: "Sessions by issue"}
	for _, ic := range repair.IssueCodes() {
		if n, ok := s.ByIssue[string(ic.Code)]; ok {
			byIssue.Rows = append(byIssue.Rows, countRow{string(ic.Code), n, withQuery(self, "issue", string(ic.Code)) + "#sessions",
				termOf(string(ic.Code), ic.Meaning)})
		}
	}
	return []totals{byStatus, byStage, byDialect, byIssue}
}

type reportsBody struct {
	Reports []model.ReportRow
	Form    filterForm
	Next    string
}

func (c *Console) reportsPage(w http.ResponseWriter, r *http.Request, who identity) {
	f, err := reportFilter(r)
	if err != nil {
		c.fail(w, r, who, http.StatusBadRequest, err)
		return
	}
	reports, err := c.cfg.Store.ListReports(r.Context(), f)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	c.render(w, r, http.StatusOK, "reports", c.view(who, "Reports", reportsBody{Reports: reports, Form: formOf(r, "", true), Next: nextPage(r, reports)}))
}

// event is one entry of a session's timeline: a report or a saved version. A report's
// repair actions are Actions; its compaction, if any, is shown apart.
type event struct {
	At         time.Time
	Report     *model.ReportRow
	Actions    []repair.Action
	Compaction *compaction
	Version    *model.VersionRow
}

// compaction is what a report row says of a compaction (scan or repair --compact): its
// actions (stage compact_RULE) in rule order then by tool, and whether its checks
// rejected it (then nothing of it was written).
type compaction struct {
	Actions  []repair.Action
	Rejected bool
	// Saved is what the session shrank by (Would: in a dry run, would have), when the
	// row is a compaction's alone.
	Saved int64
	Would bool
}

// reportEvent splits a report row's actions into its repair's and its compaction's.
func reportEvent(r *model.ReportRow) event {
	e := event{At: r.CreatedAt, Report: r}
	c := &compaction{Rejected: r.Status == model.StatusCompactRejected || strings.HasPrefix(r.Reason, string(model.StatusCompactRejected)+":")}
	for _, a := range r.Actions {
		if strings.HasPrefix(string(a.Stage), compact.StagePrefix) {
			c.Actions = append(c.Actions, a)
		} else {
			e.Actions = append(e.Actions, a)
		}
	}
	if r.Status == model.StatusCompacted || r.Status == model.StatusWouldCompact {
		c.Saved, c.Would = int64(r.BeforeBytes-r.AfterBytes), r.Status == model.StatusWouldCompact
	}
	if len(c.Actions) > 0 || c.Rejected || c.Saved > 0 {
		order := func(a repair.Action) int {
			return slices.Index(compact.Rules(), compact.Rule(strings.TrimPrefix(string(a.Stage), compact.StagePrefix)))
		}
		slices.SortStableFunc(c.Actions, func(a, b repair.Action) int {
			return cmp.Or(cmp.Compare(order(a), order(b)), cmp.Compare(a.ToolName, b.ToolName))
		})
		e.Compaction = c
	}
	return e
}

type sessionBody struct {
	ID       string
	Timeline []event
	Versions []model.VersionRow
	// Latest is the newest version, which rolling back to would change nothing.
	Latest   int
	From, To int
	Diff     *diffView
	// DiffError says why the versions could not be compared.
	DiffError string
	// More: the session has more reports than the page shows.
	More bool
	// Cleared is what the session's compactions replaced by stubs, as report --cleared
	// prints it; "" when tmend never wrote a compaction of it.
	Cleared string
}

// maxSessionReports bounds the reports a session page lists.
const maxSessionReports = 1000

func (c *Console) sessionPage(w http.ResponseWriter, r *http.Request, who identity) {
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" {
		c.fail(w, r, who, http.StatusBadRequest, badInput("Give a session id."))
		return
	}
	body := sessionBody{ID: id}
	var err error
	for name, dst := range map[string]*int{"from": &body.From, "to": &body.To} {
		n, perr := int64Param(q.Get(name), name)
		if perr != nil || n > 1<<31 {
			c.fail(w, r, who, http.StatusBadRequest, badInput("%s must be a version number", name))
			return
		}
		*dst = int(n)
	}
	reports, err := c.cfg.Store.ListReports(r.Context(), model.ReportFilter{SessionID: id, Limit: maxSessionReports})
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	body.More = len(reports) == maxSessionReports
	versions, err := c.cfg.Store.Versions(r.Context(), id)
	if err != nil {
		c.fail(w, r, who, http.StatusInternalServerError, err)
		return
	}
	if len(reports) == 0 && len(versions) == 0 {
		c.fail(w, r, who, http.StatusNotFound, badInput("tmend has no record of session %q.", id))
		return
	}
	body.Versions = versions
	compacted := false
	for i := range reports {
		e := reportEvent(&reports[i])
		compacted = compacted || (e.Compaction != nil && reports[i].ToVersion > 0)
		body.Timeline = append(body.Timeline, e)
	}
	if compacted {
		cleared, err := c.cfg.Store.Cleared(r.Context(), id, false)
		if err != nil {
			c.fail(w, r, who, http.StatusInternalServerError, err)
			return
		}
		if len(cleared) > 0 {
			var b strings.Builder
			if err := report.ClearedText(&b, id, cleared); err != nil {
				c.fail(w, r, who, http.StatusInternalServerError, err)
				return
			}
			body.Cleared = b.String()
		}
	}
	for i := range versions {
		body.Timeline = append(body.Timeline, event{At: versions[i].CreatedAt, Version: &versions[i]})
		body.Latest = versions[i].Version
	}
	// Oldest first. Rows written in one transaction have one time: versions go in their
	// order, and a report after the versions it names.
	slices.SortFunc(body.Timeline, func(a, b event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		switch {
		case a.Version != nil && b.Version != nil:
			return cmp.Compare(a.Version.Version, b.Version.Version)
		case a.Report != nil && b.Report != nil:
			return cmp.Compare(a.Report.ID, b.Report.ID)
		case a.Version != nil:
			return -1
		}
		return 1
	})
	if body.From == 0 && body.To == 0 {
		body.From, body.To, _ = model.LatestWrite(versions)
	}
	if body.From > 0 && body.To > 0 {
		var d *report.TranscriptDiff
		d, err = Diff(r.Context(), c.cfg.Store, id, body.From, body.To, reports)
		if err == nil {
			body.Diff = newDiffView(d)
			if i := slices.IndexFunc(reports, func(r model.ReportRow) bool { return r.ID == d.ReportID }); i >= 0 {
				body.Diff.By = &reports[i]
			}
		}
		switch {
		case errors.Is(err, ErrCannotCompare):
			body.DiffError = "The" + strings.TrimPrefix(err.Error(), "the") + "."
		case errors.Is(err, model.ErrNotFound):
			body.DiffError = fmt.Sprintf("Version %d or %d is not saved (pruned, or never existed).", body.From, body.To)
		case err != nil:
			c.fail(w, r, who, http.StatusInternalServerError, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "session", c.view(who, "Session "+id, body))
}

// ErrCannotCompare marks versions that are not both transcripts (JSON arrays of messages).
var ErrCannotCompare = errors.New("the versions cannot be compared")

// Diff compares two saved versions of a session, with the actions of the report among
// reports (the session's) that wrote one from the other. A version that is not saved is
// model.ErrNotFound. The console's session page and the daemon's diff endpoint share it.
func Diff(ctx context.Context, st Store, id string, from, to int, reports []model.ReportRow) (*report.TranscriptDiff, error) {
	a, err := st.Version(ctx, id, from)
	if err != nil {
		return nil, err
	}
	b, err := st.Version(ctx, id, to)
	if err != nil {
		return nil, err
	}
	d, err := report.DiffVersions(a, b, reports)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotCompare, err)
	}
	return d, nil
}

// runProgress is what console.js polls while a run goes.
type runProgress struct {
	ID         int64           `json:"id"`
	Status     model.RunStatus `json:"status"`
	Mode       model.Mode      `json:"mode"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Duration   string          `json:"duration"`
	// Counts are the run's; while it runs, those of its reports so far (Live).
	Counts model.RunCounts `json:"counts"`
	Live   bool            `json:"live"`
	// Partitions of a running scan, as of their last checkpoint (a second old at most).
	Partitions []partitionProgress `json:"partitions,omitempty"`
}

type partitionProgress struct {
	Partition int                   `json:"partition"`
	Status    model.PartitionStatus `json:"status"`
	Attempt   int                   `json:"attempt"`
	Scanned   int                   `json:"scanned"`
	Worker    string                `json:"worker"`
	Ago       string                `json:"ago"`
	Quiet     bool                  `json:"quiet"`
}

func (c *Console) runJSON(w http.ResponseWriter, r *http.Request, _ identity) {
	w.Header().Set("Content-Type", "application/json")
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no such run"})
		return
	}
	run, err := c.cfg.Store.Run(r.Context(), id)
	var row runRow
	var parts []partition
	now := time.Now()
	if err == nil {
		row, err = c.runRow(r.Context(), run, now)
	}
	if err == nil && run.Status == model.RunRunning {
		parts, err = c.partitions(r.Context(), id, now)
	}
	switch {
	case errors.Is(err, model.ErrNotFound):
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	case err != nil:
		c.log.Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "internal error; see the daemon's log"})
	default:
		p := runProgress{ID: run.ID, Status: run.Status, Mode: run.Mode, StartedAt: run.StartedAt,
			FinishedAt: run.FinishedAt, Duration: row.Duration, Counts: row.Counts, Live: row.Live}
		for _, pt := range parts {
			p.Partitions = append(p.Partitions, partitionProgress{Partition: pt.Partition, Status: pt.Status,
				Attempt: pt.Attempt, Scanned: pt.Scanned, Worker: pt.Worker, Ago: pt.Ago, Quiet: pt.Quiet})
		}
		_ = json.NewEncoder(w).Encode(p)
	}
}
