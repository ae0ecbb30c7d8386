package deploy

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	plabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/repair"
	tmodel "github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// registry is what a running daemon exports: every series name (a histogram's _bucket,
// _sum and _count), with the labels its series carry.
type registry map[string]map[string]bool

// Labels Prometheus adds to every series of a target (the ServiceMonitor's, or a pod's).
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// synthetic are series Prometheus itself writes for every target.
var synthetic = registry{"up": {}}

const brokenSession = `{"id":"a","updated_at":"2020-01-01T00:00:00Z","messages":[{"role":"user","content":"ls"},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}`

var (
	daemonOnce     sync.Once
	daemonRegistry registry
)

// daemonMetrics starts `tmend serve` on a fresh database holding one broken session,
// starts a run through the API so that every tmend_ family has a series, and reads
// /metrics.
func daemonMetrics(t *testing.T) registry {
	t.Helper()
	daemonOnce.Do(func() { daemonRegistry = scrapeDaemon(t) })
	require.NotEmpty(t, daemonRegistry, "an earlier test failed to scrape the daemon")
	return daemonRegistry
}

func scrapeDaemon(t *testing.T) registry {
	t.Helper()
	env := []string{"TMEND_DATABASE_URL=" + storetest.NewDBURL(t), "TMEND_LOG_LEVEL=error", "TMEND_API_TOKEN=secret"}
	cmd := exec.Command(tmendBinary(t), "import", "-")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(brokenSession + "\n")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "tmend import: %s", out)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port must be free for the daemon to take
	daemon := exec.Command(tmendBinary(t), "serve", "--listen", addr, "--schedule", "0 0 1 1 *")
	daemon.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var logs bytes.Buffer
	daemon.Stdout, daemon.Stderr = &logs, &logs
	require.NoError(t, daemon.Start())
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			t.Logf("tmend serve ended: %v", err)
		case <-time.After(30 * time.Second):
			_ = daemon.Process.Kill()
			t.Logf("tmend serve killed: %v", <-exited)
		}
	}()

	base := "http://" + addr
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, ""
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, exited, &logs, func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	req, err := http.NewRequest(http.MethodPost, base+"/v1/runs", strings.NewReader(`{"mode":"full"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var text string
	waitFor(t, exited, &logs, func() bool {
		var code int
		code, text = get("/metrics")
		return code == http.StatusOK && strings.Contains(text, `tmend_sessions_total{status="repaired"} 1`)
	})

	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	reg := registry{}
	for name, f := range families {
		names := []string{name}
		extra := ""
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names, extra = []string{name + "_bucket", name + "_sum", name + "_count"}, "le"
		case dto.MetricType_SUMMARY:
			names, extra = []string{name, name + "_sum", name + "_count"}, "quantile"
		}
		for _, n := range names {
			reg[n] = map[string]bool{}
			if extra != "" {
				reg[n][extra] = true
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					reg[n][l.GetName()] = true
				}
			}
		}
	}
	return reg
}

// waitFor polls cond until it holds, failing when the daemon exits or 30s pass.
func waitFor(t *testing.T, exited <-chan error, logs *bytes.Buffer, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("tmend serve exited: %v\n%s", err, logs)
		case <-deadline:
			t.Fatalf("condition not met in 30s; tmend serve said:\n%s", logs)
		case <-tick.C:
		}
	}
}

// labelValues are the values a label of a tmend series can take.
var labelValues = map[string]map[string][]string{
	"tmend_sessions_total":         {"status": strs(tmodel.SessionStatuses())},
	"tmend_compact_sessions_total": {"status": {string(tmodel.StatusCompacted), string(tmodel.StatusCompactRejected)}},
	"tmend_runs_total": {"status": strs(tmodel.RunStatuses()), "trigger": strs(tmodel.Triggers()),
		"mode": strs(tmodel.Modes())},
	"tmend_last_run_timestamp_seconds": {"status": strs(tmodel.RunStatuses()), "trigger": strs(tmodel.Triggers()),
		"mode": strs(tmodel.Modes()), "dry_run": {"true", "false"}},
	"tmend_run_duration_seconds_bucket": {"trigger": strs(tmodel.Triggers())},
	"tmend_issues_total":                {"code": issueCodes()},
	"tmend_sessions_by_dialect_total":   {"dialect": strs(repair.Dialects())},
	"tmend_river_jobs":                  {"state": strs(rivertype.JobStates()), "kind": riverKinds},
	"tmend_river_jobs_errored":          {"state": strs(rivertype.JobStates()), "kind": riverKinds},
	"tmend_river_jobs_rescued":          {"state": strs(rivertype.JobStates()), "kind": riverKinds},
}

// riverKinds are the kinds of tmend's River jobs.
var riverKinds = []string{queue.PartitionArgs{}.Kind(), queue.ScheduledArgs{}.Kind()}

// fromDatabase are the series the daemon reads from the database at scrape time: every
// replica (and a scan's textfile) reports the same values, so a sum across targets would
// count each run once per replica.
var fromDatabase = regexp.MustCompile(`^tmend_(runs_total|sessions_total|compact_sessions_total|compact_saved_bytes_total|issues_total|sessions_by_dialect_total|` +
	`stage_actions_total|run_duration_seconds_(bucket|sum|count)|last_run_timestamp_seconds|running_runs|` +
	`running_run_sessions_scanned|river_.+)$`)

// checkTakesMax requires every selection of a series read from the database to go
// through max (or min) before any other aggregation: max by (...) across targets, then
// sum over the labels tmend sets, if at all.
func checkTakesMax(t *testing.T, where, expr string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	require.NoError(t, err, "%s: %s", where, expr)
	parser.Inspect(e, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || !fromDatabase.MatchString(vs.Name) {
			return nil
		}
		for i := len(path) - 1; i >= 0; i-- {
			if c, ok := path[i].(*parser.Call); ok && strings.HasPrefix(c.Func.Name, "absent") {
				return nil // whether it exists at all
			}
			if a, ok := path[i].(*parser.AggregateExpr); ok {
				require.True(t, a.Op == parser.MAX || a.Op == parser.MIN,
					"%s: %s is the same on every replica: aggregate it with max before %s: %s", where, vs.Name, a.Op, expr)
				return nil
			}
		}
		require.Fail(t, "not aggregated", "%s: %s is the same on every replica: aggregate it with max: %s", where, vs.Name, expr)
		return nil
	})
}

func issueCodes() []string {
	var out []string
	for _, ic := range repair.IssueCodes() {
		out = append(out, string(ic.Code))
	}
	return out
}

func strs[T ~string](vs []T) []string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v))
	}
	return out
}

var alternation = regexp.MustCompile(`^[a-z_-]+(\|[a-z_-]+)*$`)

// checkExpr parses a PromQL expression and checks every series it selects against the
// daemon's registry: the series exists, its label matchers and groupings name labels it
// has (or a target's), and status values are statuses tmend has.
func checkExpr(t *testing.T, where, expr string, reg registry) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	require.NoError(t, err, "%s: %s", where, expr)
	selected := 0
	labelsOf := func(vs *parser.VectorSelector) map[string]bool {
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == plabels.MatchEqual {
				name = m.Value
			}
		}
		ls, ok := reg[name]
		if !ok {
			ls, ok = synthetic[name]
		}
		require.True(t, ok, "%s: %q is not a series the daemon exports: %s", where, name, expr)
		return ls
	}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			selected++
			ls := labelsOf(n)
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					continue
				}
				require.True(t, ls[m.Name] || slices.Contains(targetLabels, m.Name), "%s: %s has no label %q: %s", where, name, m.Name, expr)
				valid, ok := labelValues[name][m.Name]
				if !ok {
					continue
				}
				values := []string{m.Value}
				if m.Type == plabels.MatchRegexp || m.Type == plabels.MatchNotRegexp {
					require.Regexp(t, alternation, m.Value, "%s: keep %s=~ to a list of values: %s", where, m.Name, expr)
					values = strings.Split(m.Value, "|")
				}
				for _, v := range values {
					require.Contains(t, valid, v, "%s: %s{%s=%q} never exists: %s", where, name, m.Name, v, expr)
				}
			}
		case *parser.AggregateExpr:
			have := map[string]bool{}
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					for l := range labelsOf(vs) {
						have[l] = true
					}
				}
				return nil
			})
			for _, g := range n.Grouping {
				require.True(t, have[g] || slices.Contains(targetLabels, g), "%s: grouping by %q, a label none of its series has: %s", where, g, expr)
			}
		}
		return nil
	})
	require.Positive(t, selected, "%s: selects no series: %s", where, expr)
}

func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t)
	rules := objectsOf[monitoringv1.PrometheusRule](objs)
	require.Len(t, rules, 1)
	reg := daemonMetrics(t)

	var names []string
	for _, g := range rules[0].Spec.Groups {
		require.NotEmpty(t, g.Rules, g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: recording rules are not expected", g.Name)
			require.Regexp(t, `^Tmend[A-Z][A-Za-z]+$`, r.Alert)
			require.NotContains(t, names, r.Alert, "alert names are unique")
			names = append(names, r.Alert)
			checkExpr(t, r.Alert, r.Expr.String(), reg)
			checkTakesMax(t, r.Alert, r.Expr.String())
			if r.For != nil {
				_, err := model.ParseDuration(string(*r.For))
				require.NoError(t, err, r.Alert)
			}
			require.Contains(t, []string{"info", "warning", "critical"}, r.Labels["severity"], r.Alert)
			for _, a := range []string{"summary", "description", "runbook_url"} {
				require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", r.Alert, a)
			}
			checkRunbookURL(t, r.Alert, r.Annotations["runbook_url"])
		}
	}
	// The runbook lists exactly these alerts.
	require.ElementsMatch(t, runbookAlerts(t), names, "deploy/README.md's alert table and prometheusrule.yaml disagree")
}

// TestNoRecentRunWatchesTheSchedule: on-demand runs, runs by hand and dry runs do not
// keep TmendNoRecentRun quiet; it selects completed scheduled scans only.
func TestNoRecentRunWatchesTheSchedule(t *testing.T) {
	t.Parallel()
	rules := objectsOf[monitoringv1.PrometheusRule](loadKubernetes(t))
	require.Len(t, rules, 1)
	var expr string
	for _, g := range rules[0].Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "TmendNoRecentRun" {
				expr = r.Expr.String()
			}
		}
	}
	require.NotEmpty(t, expr)
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	require.NoError(t, err)
	want := map[string]string{"trigger": "cron", "dry_run": "false", "status": "completed", "mode": "incremental|full"}
	selectors := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || vs.Name != "tmend_last_run_timestamp_seconds" {
			return nil
		}
		selectors++
		got := map[string]string{}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				got[m.Name] = m.Value
			}
		}
		require.Equal(t, want, got, vs.String())
		return nil
	})
	require.Positive(t, selectors)
}

func TestServiceMonitor(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t)
	sms := objectsOf[monitoringv1.ServiceMonitor](objs)
	require.Len(t, sms, 1)
	sm := sms[0]
	svc := objectsOf[corev1.Service](objs)[0]

	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	require.NoError(t, err)
	require.False(t, sel.Empty(), "an empty selector scrapes every Service")
	require.True(t, sel.Matches(labels.Set(svc.Labels)), "the ServiceMonitor selects the daemon's Service")
	// job="tmend", which the alerts and the dashboard select on, comes from a label of the
	// Service, not from its name.
	require.Equal(t, "tmend", svc.Labels[sm.Spec.JobLabel])
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	require.Equal(t, "/metrics", ep.Path)
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name)
	}
	require.Contains(t, ports, ep.Port, "the endpoint names a port of the Service")
}

// dashboard mirrors the parts of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string                   `json:"uid"`
	Title      string                   `json:"title"`
	Panels     []dashPanel              `json:"panels"`
	Templating struct{ List []dashVar } `json:"templating"`
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *dashDatasource `json:"datasource"`
	Targets    []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource *dashDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a collapsed row's
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashVar struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Definition string `json:"definition"`
}

// grafanaVars replaces the variables Grafana fills in before a query reaches Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "2m", "$__interval", "1m", "$__range", "7d", "${job}", "tmend", "$job", "tmend")

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "tmend.json"))
	require.NoError(t, err)
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	require.NoError(t, dec.Decode(&d))
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Title)
	reg := daemonMetrics(t)

	vars := map[string]dashVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	require.Equal(t, "datasource", vars["datasource"].Type, "the data source is chosen on import, not hard-wired")
	require.Contains(t, vars, "job")
	m := regexp.MustCompile(`^label_values\((\w+), job\)$`).FindStringSubmatch(vars["job"].Definition)
	require.NotNil(t, m, "the job variable lists the jobs of a tmend series")
	require.Contains(t, reg, m[1])

	ids, queries := map[int]bool{}, 0
	var walk func([]dashPanel)
	walk = func(panels []dashPanel) {
		for _, p := range panels {
			require.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
			ids[p.ID] = true
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			require.NotNil(t, p.Datasource, p.Title)
			require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				require.False(t, refs[tg.RefID], "panel %q: refId %s twice", p.Title, tg.RefID)
				refs[tg.RefID] = true
				require.NotNil(t, tg.Datasource, p.Title)
				require.Equal(t, "${datasource}", tg.Datasource.UID, p.Title)
				require.Contains(t, tg.Expr, `job=~"$job"`, "panel %q: every query follows the job variable", p.Title)
				checkExpr(t, "panel "+p.Title, grafanaVars.Replace(tg.Expr), reg)
				checkTakesMax(t, "panel "+p.Title, grafanaVars.Replace(tg.Expr))
				queries++
			}
		}
	}
	walk(d.Panels)
	require.GreaterOrEqual(t, queries, 10)
}

// runbookAlerts returns the alert names of deploy/README.md's alerts table.
func runbookAlerts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "README.md"))
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\| (Tmend\w+) \|`).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names)
	return names
}

// checkRunbookURL requires the URL to point at a heading of deploy/README.md.
func checkRunbookURL(t *testing.T, alert, url string) {
	t.Helper()
	page, anchor, ok := strings.Cut(url, "#")
	require.True(t, ok, "%s: runbook_url has no anchor", alert)
	require.True(t, strings.HasSuffix(page, "/deploy/README.md"), "%s: runbook_url %s", alert, url)
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "README.md"))
	require.NoError(t, err)
	var anchors []string
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(b), -1) {
		anchors = append(anchors, githubAnchor(m[1]))
	}
	require.Contains(t, anchors, anchor, "%s: runbook_url names no heading of deploy/README.md", alert)
}

// githubAnchor is the id GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
