// Package telemetry is Gantry's Prometheus metrics (DESIGN §10): HTTP latency by
// route, run phase durations, queue latency per job kind, approval wait, decisions by
// outcome and policy evaluation time, observed in this process; and gauges read from
// the database at each scrape (runs by state and environment, River's queue depth), so
// that every replica reports the same numbers. It is a leaf: the composition root hands
// it the functions that read the gauges, and the layers that observe call its methods.
// Every method is safe on a nil *Metrics (metrics off).
package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric.
const Namespace = "gantry"

// RunCount is how many runs of one organization and environment are in one state.
type RunCount struct {
	Organization string
	Environment  string
	State        string
	Count        int64
}

// QueueCount is how many jobs of one kind are in one state of River's queue.
type QueueCount struct {
	Kind  string
	State string
	Count int64
}

// Gauges read the database at scrape time.
type Gauges struct {
	Runs  func(ctx context.Context) ([]RunCount, error)
	Queue func(ctx context.Context) ([]QueueCount, error)
}

// GaugeTimeout bounds the database reads of one scrape.
const GaugeTimeout = 5 * time.Second

// Metrics holds the collectors and their registry.
type Metrics struct {
	registry     *prometheus.Registry
	http         *prometheus.HistogramVec
	phase        *prometheus.HistogramVec
	queueLatency *prometheus.HistogramVec
	approvalWait *prometheus.HistogramVec
	decisions    *prometheus.CounterVec
	policy       *prometheus.HistogramVec
}

// New registers Gantry's metrics, the Go runtime's and the process's in a registry of
// their own.
func New(g Gauges, logger *slog.Logger) *Metrics {
	if logger == nil {
		logger = slog.Default()
	}
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.http = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
		Help: "Time to answer an HTTP request, by method, route pattern and status class.", Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
		[]string{"method", "route", "status"})
	m.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "run_phase_duration_seconds",
		Help: "Time an executor took for a run's plan, apply or verify, by executor and outcome.", Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}},
		[]string{"phase", "executor", "outcome"})
	m.queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "queue_latency_seconds",
		Help: "Time from when a job was due to when a worker started it, by job kind.", Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"kind"})
	m.approvalWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "approval_wait_seconds",
		Help: "Time a run waited for a person before it was approved or rejected.", Buckets: []float64{60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 24 * 3600, 72 * 3600, 168 * 3600}},
		[]string{"outcome"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "decisions_total",
		Help: "Decisions on runs by outcome (approve, reject, override, cancel, recover, expired_late)."}, []string{"outcome"})
	m.policy = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "policy_evaluation_seconds",
		Help: "Time to evaluate a run's plan against its policies, by outcome (ok, error).", Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
		[]string{"outcome"})
	m.registry.MustRegister(m.http, m.phase, m.queueLatency, m.approvalWait, m.decisions, m.policy,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&databaseGauges{g: g, logger: logger})
	return m
}

// Handler serves the metrics in Prometheus's text format. A gauge the database could
// not answer is left out (gantry_database_gauges_up says so); the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is where the metrics are registered (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ObserveHTTP records one answered request: route is the pattern it matched (never
// the raw path, so ids do not become labels).
func (m *Metrics) ObserveHTTP(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.http.WithLabelValues(method, route, strconv.Itoa(status/100)+"xx").Observe(d.Seconds())
}

// ObservePhase records how long an executor took for phase (plan, apply, verify).
func (m *Metrics) ObservePhase(phase, executor string, failed bool, d time.Duration) {
	if m == nil {
		return
	}
	m.phase.WithLabelValues(phase, executor, outcome(failed)).Observe(d.Seconds())
}

// ObserveQueueLatency records how long a job of kind waited past when it was due.
func (m *Metrics) ObserveQueueLatency(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.queueLatency.WithLabelValues(kind).Observe(max(d, 0).Seconds())
}

// Decided records a decision on a run; wait is how long the run had waited for a
// person (zero when it was not waiting: a cancel, a recover).
func (m *Metrics) Decided(action string, wait time.Duration) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(action).Inc()
	if wait > 0 && (action == "approve" || action == "reject") {
		m.approvalWait.WithLabelValues(action).Observe(wait.Seconds())
	}
}

// PolicyEvaluated records one evaluation of a plan against its policies.
func (m *Metrics) PolicyEvaluated(d time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.policy.WithLabelValues(outcome(failed)).Observe(d.Seconds())
}

func outcome(failed bool) string {
	if failed {
		return "error"
	}
	return "ok"
}

// databaseGauges reads the runs by state and the queue depth at each scrape.
type databaseGauges struct {
	g      Gauges
	logger *slog.Logger
}

var (
	runsDesc = prometheus.NewDesc(Namespace+"_runs", "Runs by organization, environment and state (read from the database: the same on every replica).",
		[]string{"organization", "environment", "state"}, nil)
	queueDesc = prometheus.NewDesc(Namespace+"_queue_jobs", "River jobs not yet finished, by kind and state (available, scheduled, retryable, running).",
		[]string{"kind", "state"}, nil)
	upDesc = prometheus.NewDesc(Namespace+"_database_gauges_up", "1 when the database answered the gauges' reads at this scrape, else 0.", nil, nil)
)

func (d *databaseGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- queueDesc
	ch <- upDesc
}

func (d *databaseGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), GaugeTimeout)
	defer cancel()
	up := 1.0
	if d.g.Runs != nil {
		counts, err := d.g.Runs(ctx)
		if err != nil {
			d.logger.Warn("metrics: reading runs by state", "error", err)
			up = 0
		}
		for _, c := range counts {
			ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(c.Count), c.Organization, c.Environment, c.State)
		}
	}
	if d.g.Queue != nil {
		counts, err := d.g.Queue(ctx)
		if err != nil {
			d.logger.Warn("metrics: reading the queue depth", "error", err)
			up = 0
		}
		for _, c := range counts {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(c.Count), c.Kind, c.State)
		}
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up)
}
