package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// Metrics are tmend's Prometheus metrics, on a registry of their own: the daemon's,
// served at /metrics (NewMetrics), or one run's, written for node-exporter's textfile
// collector (NewRunMetrics, WriteTextfile).
type Metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec
	sessions *prometheus.CounterVec
	actions  *prometheus.CounterVec
	issues   *prometheus.CounterVec
	dialects *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lastRun  *prometheus.GaugeVec
	// The daemon's alone.
	skipped        prometheus.Counter
	running        prometheus.Gauge
	runningScanned prometheus.Gauge
}

const lastRunName = "tmend_last_run_timestamp_seconds"

// NewMetrics registers the daemon's metrics (and the Go and process collectors) on a
// new registry.
func NewMetrics() *Metrics {
	m := NewRunMetrics()
	m.skipped = prometheus.NewCounter(prometheus.CounterOpts{Name: "tmend_scheduled_runs_skipped_total",
		Help: "Scheduled scans skipped because a scan of the source was still running."})
	m.running = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tmend_running_runs",
		Help: "Runs recorded as running in the database (every replica reports the same: take the max)."})
	m.runningScanned = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tmend_running_run_sessions_scanned",
		Help: "Sessions the running runs have scanned so far, as their partitions checkpoint (every replica reports the same)."})
	m.reg.MustRegister(m.skipped, m.running, m.runningScanned,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// NewRunMetrics registers the metrics of runs, and tmend_build_info, on a new registry.
// Every series of a fixed label set exists from the start, at zero, so that increase()
// sees the first event.
func NewRunMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_runs_total",
			Help: "Runs by trigger, mode and outcome."}, []string{"trigger", "mode", "status"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_sessions_total",
			Help: "Sessions scanned, by what happened to them."}, []string{"status"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_stage_actions_total",
			Help: "Repair actions by stage."}, []string{"stage"}),
		issues: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_issues_total",
			Help: "Sessions found with each issue code (a session counts once per code)."}, []string{"code"}),
		dialects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_sessions_by_dialect_total",
			Help: "Sessions that were not clean, by dialect."}, []string{"dialect"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tmend_run_duration_seconds",
			Help: "How long runs take.", Buckets: prometheus.ExponentialBuckets(0.1, 4, 10)}, []string{"trigger"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: lastRunName,
			Help: "When the last run of each trigger, mode, dry or not, and outcome finished."},
			[]string{"trigger", "mode", "dry_run", "status"}),
	}
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tmend_build_info", Help: "The running tmend's build; always 1.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "go_version": bi.GoVersion}})
	build.Set(1)
	m.reg.MustRegister(m.runs, m.sessions, m.actions, m.issues, m.dialects, m.duration, m.lastRun, build)
	for _, tr := range model.Triggers() {
		m.duration.WithLabelValues(string(tr))
		for _, mode := range model.Modes() {
			for _, st := range model.RunStatuses() {
				if st != model.RunRunning {
					m.runs.WithLabelValues(string(tr), string(mode), string(st))
				}
			}
		}
	}
	for _, st := range model.SessionStatuses() {
		if st != model.StatusBroken { // a file check's, never a run's
			m.sessions.WithLabelValues(string(st))
		}
	}
	for _, st := range repair.Stages() {
		m.actions.WithLabelValues(string(st))
	}
	for _, ic := range repair.IssueCodes() {
		m.issues.WithLabelValues(string(ic.Code))
	}
	for _, d := range repair.Dialects() {
		m.dialects.WithLabelValues(string(d))
	}
	return m
}

// Observe counts an ended run.
func (m *Metrics) Observe(r *model.RunResult) {
	m.runs.WithLabelValues(string(r.Trigger), string(r.Mode), string(r.Status)).Inc()
	for status, n := range r.ByStatus {
		m.sessions.WithLabelValues(string(status)).Add(float64(n))
	}
	for st, n := range r.ByStage {
		m.actions.WithLabelValues(string(st)).Add(float64(n))
	}
	for code, n := range r.ByIssue {
		m.issues.WithLabelValues(code).Add(float64(n))
	}
	for d, n := range r.ByDialect {
		m.dialects.WithLabelValues(d).Add(float64(n))
	}
	m.duration.WithLabelValues(string(r.Trigger)).Observe(r.Duration.Seconds())
	m.lastRun.WithLabelValues(string(r.Trigger), string(r.Mode), strconv.FormatBool(r.DryRun), string(r.Status)).SetToCurrentTime()
}

// setRunning sets the running-run gauges from the runs recorded as running.
func (m *Metrics) setRunning(runs []model.RunRow) {
	scanned := 0
	for _, r := range runs {
		scanned += r.Counts.Scanned
	}
	m.running.Set(float64(len(runs)))
	m.runningScanned.Set(float64(scanned))
}

// WriteTextfile writes the metrics to path in Prometheus' text format, atomically, for
// node-exporter's textfile collector, added to what the file held: counters and
// histograms go on counting across the runs that write it, and the last-run timestamps
// of other triggers and modes stay (a dry run by hand does not hide the scheduled run's).
// A symlink is followed: its target is replaced and the link kept (a textfile
// directory often links to files kept elsewhere).
func (m *Metrics) WriteTextfile(path string) error {
	path = followLinks(path)
	prev, err := readTextfile(path)
	if err != nil {
		return err
	}
	err = prometheus.WriteToTextfile(path, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		cur, err := m.reg.Gather()
		if err != nil {
			return nil, err
		}
		return mergeFamilies(prev, cur), nil
	}))
	if err != nil {
		return fmt.Errorf("write metrics to %s: %w", path, err)
	}
	return nil
}

// followLinks follows symlinks from path to where they end, which need not exist yet.
func followLinks(path string) string {
	for range 40 {
		link, err := os.Readlink(path)
		if err != nil {
			return path // not a link, or not there yet
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return path
}

// readTextfile parses the tmend metrics a textfile holds; none when it does not exist.
func readTextfile(path string) (map[string]*dto.MetricFamily, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read metrics from %s: %w", path, err)
	}
	defer func() { _ = f.Close() }() // read only
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("read metrics from %s (remove it to start counting again): %w", path, err)
	}
	return fams, nil
}

// mergeFamilies adds the samples of prev to cur's: counters and histograms are summed,
// the series of prev that cur lacks are kept, except for gauges other than the last-run
// timestamps (tmend_build_info names this build only). Families cur does not have are
// dropped.
func mergeFamilies(prev map[string]*dto.MetricFamily, cur []*dto.MetricFamily) []*dto.MetricFamily {
	for _, f := range cur {
		old, ok := prev[f.GetName()]
		if !ok || old.GetType() != f.GetType() {
			continue
		}
		olds := map[string]*dto.Metric{}
		for _, o := range old.GetMetric() {
			olds[labelKey(o.GetLabel())] = o
		}
		for _, c := range f.GetMetric() {
			key := labelKey(c.GetLabel())
			o := olds[key]
			delete(olds, key)
			switch {
			case o == nil:
			case f.GetType() == dto.MetricType_COUNTER:
				v := c.GetCounter().GetValue() + o.GetCounter().GetValue()
				c.Counter.Value = &v
			case f.GetType() == dto.MetricType_HISTOGRAM:
				addHistogram(c.GetHistogram(), o.GetHistogram())
			}
		}
		if f.GetType() == dto.MetricType_GAUGE && f.GetName() != lastRunName {
			continue
		}
		keys := make([]string, 0, len(olds))
		for k := range olds {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f.Metric = append(f.Metric, olds[k])
		}
	}
	return cur
}

func addHistogram(h, o *dto.Histogram) {
	n, sum := h.GetSampleCount()+o.GetSampleCount(), h.GetSampleSum()+o.GetSampleSum()
	h.SampleCount, h.SampleSum = &n, &sum
	for _, b := range h.GetBucket() {
		for _, ob := range o.GetBucket() {
			if ob.GetUpperBound() == b.GetUpperBound() {
				c := b.GetCumulativeCount() + ob.GetCumulativeCount()
				b.CumulativeCount = &c
			}
		}
	}
}

func labelKey(ls []*dto.LabelPair) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.GetName() + "=" + strconv.Quote(l.GetValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// cronLogger adapts zerolog to cron's logger, with key/value pairs as fields.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg(msg) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg(msg)
}
