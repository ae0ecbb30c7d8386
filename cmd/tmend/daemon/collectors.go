package daemon

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"github.com/tmend/tmend/cmd/tmend/queue"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// scrapeTimeout bounds each collector's query, below Prometheus' default scrape timeout
// (10s): a slow database fails that collector's series, not the whole scrape.
const scrapeTimeout = 5 * time.Second

// runDurationBuckets are tmend_run_duration_seconds' buckets: 0.1s to about 7h.
var runDurationBuckets = prometheus.ExponentialBuckets(0.1, 4, 10)

// runCollector reads the metrics of runs from the run rows at scrape time: a run is
// counted once its row says it ended, however it ended and whichever process ended it,
// and the running-run gauges say what the rows say now. Every series of a fixed label
// set exists from the start, at zero, so that increase() sees the first event.
//
// Each scrape counts the runs by group (one query); the sums over the ended runs'
// summaries and durations, which cost a pass over every run's summary, are read again,
// in the same snapshot, only when the counts of ended runs changed, as they do whenever
// a run ends.
type runCollector struct {
	ctx context.Context
	st  *store.Store
	mu  sync.Mutex
	// ended is what the ended runs added up to when their counts were endedKey.
	ended    store.EndedRuns
	endedKey string
	// withRunning adds the running-run gauges: a daemon's, not a textfile's, where they
	// would be stale until the next write.
	withRunning    bool
	runs           *prometheus.Desc
	sessions       *prometheus.Desc
	compacted      *prometheus.Desc
	savedBytes     *prometheus.Desc
	actions        *prometheus.Desc
	issues         *prometheus.Desc
	dialects       *prometheus.Desc
	duration       *prometheus.Desc
	lastRun        *prometheus.Desc
	running        *prometheus.Desc
	runningScanned *prometheus.Desc
}

func newRunCollector(ctx context.Context, st *store.Store, withRunning bool) *runCollector {
	d := prometheus.NewDesc
	return &runCollector{ctx: ctx, st: st, withRunning: withRunning,
		runs: d("tmend_runs_total", "Ended runs by trigger, mode and outcome, from the run rows (every replica reports the same: take the max).",
			[]string{"trigger", "mode", "status"}, nil),
		sessions: d("tmend_sessions_total", "Sessions the ended runs scanned, by what happened to them.", []string{"status"}, nil),
		actions:  d("tmend_stage_actions_total", "Repair actions of the ended runs, by stage.", []string{"stage"}, nil),
		compacted: d("tmend_compact_sessions_total", "Sessions the ended runs with --compact compacted (dry runs not counted), "+
			"and those whose compacted content failed a check and was not written (status=\"compact_rejected\": a bug to report).",
			[]string{"status"}, nil),
		savedBytes: d("tmend_compact_saved_bytes_total", "Bytes the ended runs' compactions took off stored sessions (dry runs not counted).",
			nil, nil),
		issues: d("tmend_issues_total", "Sessions the ended runs found with each issue code (a session counts once per code).",
			[]string{"code"}, nil),
		dialects: d("tmend_sessions_by_dialect_total", "Sessions of the ended runs that were not clean, by dialect.",
			[]string{"dialect"}, nil),
		duration: d("tmend_run_duration_seconds", "How long the ended runs took.", []string{"trigger"}, nil),
		lastRun: d("tmend_last_run_timestamp_seconds", "When the last run of each trigger, mode, dry or not, and outcome ended.",
			[]string{"trigger", "mode", "dry_run", "status"}, nil),
		running: d("tmend_running_runs", "Runs recorded as running in the database (every replica reports the same: take the max).",
			nil, nil),
		runningScanned: d("tmend_running_run_sessions_scanned",
			"Sessions the running runs have scanned so far, as their partitions checkpoint (every replica reports the same).", nil, nil),
	}
}

func (c *runCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.runs, c.sessions, c.compacted, c.savedBytes, c.actions, c.issues, c.dialects, c.duration, c.lastRun} {
		ch <- d
	}
	if c.withRunning {
		ch <- c.running
		ch <- c.runningScanned
	}
}

func (c *runCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.ctx, scrapeTimeout)
	defer cancel()
	groups, t, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.runs, err)
		return
	}
	type runKey struct {
		trigger model.Trigger
		mode    model.Mode
		status  model.RunStatus
	}
	runs := map[runKey]int64{}
	for _, tr := range model.Triggers() {
		for _, mode := range model.Modes() {
			for _, st := range model.RunStatuses() {
				if st != model.RunRunning {
					runs[runKey{tr, mode, st}] = 0
				}
			}
		}
	}
	var running, scanned int64
	for _, g := range groups {
		if g.Status == model.RunRunning {
			running += g.Runs
			scanned += g.Scanned
			continue
		}
		runs[runKey{g.Trigger, g.Mode, g.Status}] += g.Runs
		ch <- prometheus.MustNewConstMetric(c.lastRun, prometheus.GaugeValue, float64(g.LastFinished.UnixMilli())/1000,
			string(g.Trigger), string(g.Mode), strconv.FormatBool(g.DryRun), string(g.Status))
	}
	for k, n := range runs {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.CounterValue, float64(n), string(k.trigger), string(k.mode), string(k.status))
	}
	if c.withRunning {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running))
		ch <- prometheus.MustNewConstMetric(c.runningScanned, prometheus.GaugeValue, float64(scanned))
	}

	sessions := map[string]int{}
	for _, st := range model.SessionStatuses() {
		if st != model.StatusBroken { // a file check's, never a run's
			sessions[string(st)] = 0
		}
	}
	for st, n := range t.Sessions.ByStatus {
		sessions[string(st)] += n
	}
	counters(ch, c.sessions, sessions)
	cc := t.Sessions.Compaction
	counters(ch, c.compacted, map[string]int{string(model.StatusCompacted): cc.Compacted, string(model.StatusCompactRejected): cc.Rejected})
	ch <- prometheus.MustNewConstMetric(c.savedBytes, prometheus.CounterValue, float64(cc.SavedBytes))
	stages := map[string]int{}
	for _, st := range repair.Stages() {
		stages[string(st)] = 0
	}
	for st, n := range t.Sessions.ByStage {
		stages[st] += n
	}
	counters(ch, c.actions, stages)
	issues := map[string]int{}
	for _, ic := range repair.IssueCodes() {
		issues[string(ic.Code)] = 0
	}
	for code, n := range t.Sessions.ByIssue {
		issues[code] += n
	}
	counters(ch, c.issues, issues)
	dialects := map[string]int{}
	for _, d := range repair.Dialects() {
		dialects[string(d)] = 0
	}
	for d, n := range t.Sessions.ByDialect {
		dialects[d] += n
	}
	counters(ch, c.dialects, dialects)

	for _, tr := range model.Triggers() {
		d := t.Durations[tr]
		if d == nil {
			d = &store.RunDurations{Buckets: make([]uint64, len(runDurationBuckets)+1)}
		}
		buckets := map[float64]uint64{}
		var cum uint64
		for i, bound := range runDurationBuckets {
			cum += d.Buckets[i]
			buckets[bound] = cum
		}
		ch <- prometheus.MustNewConstHistogram(c.duration, d.Count, d.Sum, buckets, string(tr))
	}
}

// read reads the runs by group and what the ended runs add up to, the latter again
// only when runs ended since the last read.
func (c *runCollector) read(ctx context.Context) ([]store.RunGroup, store.EndedRuns, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var key string
	groups, ended, err := c.st.RunTotals(ctx, runDurationBuckets, func(groups []store.RunGroup) bool {
		var b strings.Builder
		for _, g := range groups {
			if g.Status != model.RunRunning {
				fmt.Fprintf(&b, "%s/%s/%t/%s=%d;", g.Trigger, g.Mode, g.DryRun, g.Status, g.Runs)
			}
		}
		key = b.String()
		return c.endedKey != "" && key == c.endedKey
	})
	if err != nil {
		return nil, store.EndedRuns{}, err
	}
	if ended != nil {
		c.ended, c.endedKey = *ended, key
	}
	return groups, c.ended, nil
}

func counters(ch chan<- prometheus.Metric, desc *prometheus.Desc, values map[string]int) {
	for label, n := range values {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(n), label)
	}
}

// riverCollector reads River's job table at scrape time: what is queued, running,
// retrying or dead, and how long the oldest job ready to run has waited.
type riverCollector struct {
	ctx     context.Context
	st      *store.Store
	jobs    *prometheus.Desc
	errored *prometheus.Desc
	rescued *prometheus.Desc
	waited  *prometheus.Desc
}

func newRiverCollector(ctx context.Context, st *store.Store) *riverCollector {
	d := prometheus.NewDesc
	return &riverCollector{ctx: ctx, st: st,
		jobs: d("tmend_river_jobs", "River jobs in tmend's schema by state and kind; state=\"available\" is the queue's depth "+
			"(every replica reports the same: take the max).", []string{"state", "kind"}, nil),
		errored: d("tmend_river_jobs_errored", "River jobs still kept that failed at least one attempt, by state and kind.",
			[]string{"state", "kind"}, nil),
		rescued: d("tmend_river_jobs_rescued", "River jobs still kept that River's rescuer took from a worker that went silent, by state and kind.",
			[]string{"state", "kind"}, nil),
		waited: d("tmend_river_oldest_available_job_age_seconds",
			"How long the oldest River job ready to run has waited for a worker; 0 when none waits.", nil, nil),
	}
}

func (c *riverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.errored, c.rescued, c.waited} {
		ch <- d
	}
}

func (c *riverCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.ctx, scrapeTimeout)
	defer cancel()
	jobs, err := c.st.RiverJobs(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, err)
		return
	}
	type key struct{ state, kind string }
	var counts [3]map[key]int64
	for i := range counts {
		counts[i] = map[key]int64{}
		for _, st := range rivertype.JobStates() {
			for _, kind := range []string{queue.PartitionArgs{}.Kind(), queue.ScheduledArgs{}.Kind()} {
				counts[i][key{string(st), kind}] = 0
			}
		}
	}
	for _, g := range jobs.Groups {
		k := key{g.State, g.Kind}
		counts[0][k] += g.Jobs
		counts[1][k] += g.Errored
		counts[2][k] += g.Rescued
	}
	for i, desc := range []*prometheus.Desc{c.jobs, c.errored, c.rescued} {
		for k, n := range counts[i] {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), k.state, k.kind)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.waited, prometheus.GaugeValue, jobs.OldestAvailable.Seconds())
}

// poolCollector reads this process's pgx pool statistics (pgxpool.Stat) at scrape time.
type poolCollector struct {
	pool                                           *pgxpool.Pool
	acquired, idle, constructing, total, maxConns  *prometheus.Desc
	acquires, acquireSeconds, empty, canceled, new *prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("tmend_db_pool_"+name, help, nil, nil)
	}
	return &poolCollector{pool: pool,
		acquired:       d("acquired_connections", "Connections of this process's pool in use now."),
		idle:           d("idle_connections", "Idle connections in the pool now."),
		constructing:   d("constructing_connections", "Connections being opened now."),
		total:          d("connections", "Connections in the pool now: acquired, idle and being opened."),
		maxConns:       d("max_connections", "The most connections the pool opens (pool_max_conns)."),
		acquires:       d("acquires_total", "Connections acquired from the pool."),
		acquireSeconds: d("acquire_duration_seconds_total", "Time spent acquiring connections, waits included."),
		empty:          d("empty_acquires_total", "Acquires that had to wait for a connection: none was idle."),
		canceled:       d("canceled_acquires_total", "Acquires given up (their context ended) before a connection was free."),
		new:            d("new_connections_total", "Connections the pool opened."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.constructing, c.total, c.maxConns, c.acquires, c.acquireSeconds,
		c.empty, c.canceled, c.new} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	n := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.acquired, float64(s.AcquiredConns()))
	g(c.idle, float64(s.IdleConns()))
	g(c.constructing, float64(s.ConstructingConns()))
	g(c.total, float64(s.TotalConns()))
	g(c.maxConns, float64(s.MaxConns()))
	n(c.acquires, float64(s.AcquireCount()))
	n(c.acquireSeconds, s.AcquireDuration().Seconds())
	n(c.empty, float64(s.EmptyAcquireCount()))
	n(c.canceled, float64(s.CanceledAcquireCount()))
	n(c.new, float64(s.NewConnsCount()))
}
