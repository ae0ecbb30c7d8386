package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// Metrics are the daemon's Prometheus metrics, on a registry of their own, served at
// /metrics.
type Metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec
	sessions *prometheus.CounterVec
	actions  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lastRun  *prometheus.GaugeVec
	skipped  prometheus.Counter
}

// NewMetrics registers the metrics (and the Go and process collectors) on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
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
			Help: "Scheduled scans skipped because a scan of the source was still running."}),
	}
	m.reg.MustRegister(m.runs, m.sessions, m.actions, m.duration, m.lastRun, m.skipped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, st := range repair.Stages() {
		m.actions.WithLabelValues(string(st)) // export zeros, so rates work from the start
	}
	return m
}

func (m *Metrics) observe(r *model.RunResult) {
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
