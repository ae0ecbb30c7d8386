package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
	"github.com/tmend/tmend/store"
)

// Metrics are tmend's Prometheus metrics, on a registry of their own, served at
// /metrics. The metrics of runs and of River's jobs are read from the database at
// scrape time (runCollector, riverCollector), so every replica reports the same values
// for them: aggregate them with max, not sum. The HTTP, pool and process metrics are
// each process's own.
type Metrics struct {
	reg      *prometheus.Registry
	skipped  prometheus.Counter
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the daemon's own metrics (and the Go and process collectors) on
// a new registry; New adds those read from the database.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tmend_scheduled_runs_skipped_total",
			Help: "Scheduled scans skipped because a scan of the source was still running (counted by the replica that skipped)."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tmend_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code."}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tmend_http_request_duration_seconds",
			Help:    "How long HTTP requests took to answer, by route pattern, method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9)}, []string{"route", "method", "code"}),
	}
	m.reg.MustRegister(m.skipped, m.requests, m.latency, buildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watch adds the metrics read from st's database: runs, River's jobs and the pool.
// Their queries end with ctx.
func (m *Metrics) watch(ctx context.Context, st *store.Store) error {
	for _, c := range []prometheus.Collector{newRunCollector(ctx, st, true), newRiverCollector(ctx, st), newPoolCollector(st.Pool())} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("daemon: register metrics (a Metrics serves one Server): %w", err)
		}
	}
	return nil
}

func buildInfo() prometheus.Gauge {
	bi := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tmend_build_info", Help: "The running tmend's build; always 1.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "go_version": bi.GoVersion}})
	g.Set(1)
	return g
}

// WriteTextfile writes the metrics of runs that st's database holds (those 'tmend
// serve' exports at /metrics, read the same way) to path in Prometheus' text format,
// atomically, for node-exporter's textfile collector. They are totals over every run
// recorded, so the file is replaced, not added to. A symlink is followed: its target is
// replaced and the link kept (a textfile directory often links to files kept elsewhere).
func WriteTextfile(ctx context.Context, st *store.Store, path string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRunCollector(ctx, st, false), buildInfo())
	path = followLinks(path)
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
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

// scrapeLog logs the errors of a scrape (a collector's query failed) as warnings.
type scrapeLog struct{ log zerolog.Logger }

func (l scrapeLog) Println(v ...any) {
	l.log.Warn().Str("error", strings.TrimSpace(fmt.Sprintln(v...))).Msg("metrics scrape incomplete")
}

// cronLogger adapts zerolog to cron's logger, with key/value pairs as fields.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg(msg) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg(msg)
}
