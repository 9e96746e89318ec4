package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/store"
)

// Metric names. Every one is exposed by a Metrics (the histograms as
// their _bucket, _sum and _count series).
const (
	MetricTurns             = "holdpoint_turns_total"
	MetricTurnSeconds       = "holdpoint_turn_duration_seconds"
	MetricModelSeconds      = "holdpoint_model_call_duration_seconds"
	MetricToolSeconds       = "holdpoint_tool_call_duration_seconds"
	MetricInterruptsCreated = "holdpoint_interrupts_created_total"
	MetricInterruptsResolve = "holdpoint_interrupts_resolved_total"
	MetricInterruptsExpired = "holdpoint_interrupts_expired_total"
	MetricEscalations       = "holdpoint_interrupts_escalated_total"
	MetricPending           = "holdpoint_interrupts_pending"
	MetricOldestPending     = "holdpoint_interrupt_oldest_pending_age_seconds"
	MetricEventsHeld        = "holdpoint_events_held"
	MetricEventsHeldOldest  = "holdpoint_events_held_oldest_age_seconds"
	MetricResumeConflicts   = "holdpoint_resume_conflicts_total"
	MetricHeadMoves         = "holdpoint_session_head_moves_total"
	MetricJobsRunning       = "holdpoint_detached_jobs_running"
	MetricJobsTakenOver     = "holdpoint_detached_jobs_taken_over_total"
	MetricRecoveries        = "holdpoint_recoveries_total"
	MetricWebhookDeliveries = "holdpoint_webhook_deliveries_total"
	MetricWebhookSeconds    = "holdpoint_webhook_delivery_duration_seconds"
	MetricHTTPRequests      = "holdpoint_http_requests_total"
	MetricHTTPSeconds       = "holdpoint_http_request_duration_seconds"
)

// DefaultPendingCacheTTL is how long the pending interrupts read from the
// store serve scrapes before they are read again.
const DefaultPendingCacheTTL = 5 * time.Second

// Options configure a Metrics.
type Options struct {
	// Pending reads every tenant's pending interrupts (the store's
	// PendingInterruptStats); nil leaves the pending metrics out.
	Pending func(ctx context.Context) ([]store.PendingStat, error)
	// HeldEvents reads the events held back by an older transaction
	// still open (the store's HeldEvents); nil leaves the held events
	// metrics out.
	HeldEvents func(ctx context.Context) (store.HeldEvents, error)
	// PendingCacheTTL bounds how often Pending and HeldEvents run,
	// however often the metrics are scraped (default
	// DefaultPendingCacheTTL).
	PendingCacheTTL time.Duration
	// TenantLabels reports the pending metrics per tenant (label tenant);
	// otherwise they are one series each. Tenants are unbounded: turn it
	// on only when they are few.
	TenantLabels bool
	// Logger receives the errors of reading Pending and HeldEvents.
	Logger *slog.Logger
}

// Metrics are the platform's Prometheus metrics, on a registry of their
// own (with the Go runtime and process collectors). It implements
// observe.Observer. Label children are cached, so a hook allocates no
// label strings once a label set has been seen.
type Metrics struct {
	reg *prometheus.Registry

	turns           *prometheus.CounterVec
	turnSeconds     *prometheus.HistogramVec
	modelSeconds    *prometheus.HistogramVec
	toolSeconds     *prometheus.HistogramVec
	created         *prometheus.CounterVec
	resolved        *prometheus.CounterVec
	expired         *prometheus.CounterVec
	escalated       *prometheus.CounterVec
	conflicts       *prometheus.CounterVec
	headMoves       prometheus.Counter
	jobsRunning     prometheus.Gauge
	jobsTakenOver   prometheus.Counter
	recoveries      *prometheus.CounterVec
	webhooks        *prometheus.CounterVec
	webhookSeconds  *prometheus.HistogramVec
	httpRequests    *prometheus.CounterVec
	httpSeconds     *prometheus.HistogramVec
	turnChildren    children[[2]string, prometheus.Counter]
	turnHist        children[string, prometheus.Observer]
	modelHist       children[[2]string, prometheus.Observer]
	toolHist        children[[3]string, prometheus.Observer]
	createdChildren children[[2]string, prometheus.Counter]
	resolvedChild   children[[2]string, prometheus.Counter]
	expiredChildren children[[2]string, prometheus.Counter]
	escalatedChild  children[[2]string, prometheus.Counter]
	conflictChild   children[string, prometheus.Counter]
	webhookChild    children[string, prometheus.Counter]
	webhookHist     children[string, prometheus.Observer]
	httpChildren    children[httpKey, prometheus.Counter]
	httpHist        children[[2]string, prometheus.Observer]
}

// httpKey is the label set of an HTTP request counter.
type httpKey struct {
	route, method string
	status        int
}

// Buckets of the latency histograms, in seconds: turns and model calls
// last up to minutes, tools and webhooks seconds, HTTP requests span both
// (a streamed turn is one request).
var (
	slowBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
	fastBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	httpBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
)

// New returns the metrics, registered with the Go runtime and process
// collectors and, with opts.Pending and opts.HeldEvents, the pending
// interrupts and held events collectors.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricTurns, Help: "Turns ended, by agent and finish reason.",
	}, []string{"agent", "finish_reason"})
	m.turnSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricTurnSeconds, Help: "Duration of turns (model and tool calls, the store write), by agent.", Buckets: slowBuckets,
	}, []string{"agent"})
	m.modelSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricModelSeconds, Help: "Duration of model calls, by agent and outcome (ok, error).", Buckets: slowBuckets,
	}, []string{"agent", "outcome"})
	m.toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricToolSeconds, Help: "Duration of tool calls, by agent, tool and outcome (succeeded, interrupted, failed).", Buckets: fastBuckets,
	}, []string{"agent", "tool", "outcome"})
	m.created = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricInterruptsCreated, Help: "Interrupts turns paused on, by agent and tool.",
	}, []string{"agent", "tool"})
	m.resolved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricInterruptsResolve, Help: "Interrupts answered (resumes, operators' decisions, deadlines that respond), by agent and tool.",
	}, []string{"agent", "tool"})
	m.expired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricInterruptsExpired, Help: "Interrupts whose deadline expired them, by agent and tool.",
	}, []string{"agent", "tool"})
	m.escalated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricEscalations, Help: "Pending approvals their policy's escalation handed to another scope, by agent and tool.",
	}, []string{"agent", "tool"})
	m.conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricResumeConflicts, Help: "Resumes refused because an interrupt they answer was already resolved (409), by agent.",
	}, []string{"agent"})
	m.headMoves = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricHeadMoves, Help: "Turns run again because the session head this instance cached had moved (another writer wrote the session).",
	})
	m.newJobMetrics()
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricWebhookDeliveries, Help: "Webhook delivery attempts, by outcome (delivered, pending: to be retried, dead).",
	}, []string{"outcome"})
	m.webhookSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricWebhookSeconds, Help: "Duration of webhook delivery attempts, by outcome.", Buckets: fastBuckets,
	}, []string{"outcome"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricHTTPRequests, Help: "HTTP requests, by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricHTTPSeconds, Help: "Duration of HTTP requests, by route pattern and method.", Buckets: httpBuckets,
	}, []string{"route", "method"})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.turns, m.turnSeconds, m.modelSeconds, m.toolSeconds, m.created, m.resolved, m.expired,
		m.escalated, m.conflicts, m.headMoves, m.jobsRunning, m.jobsTakenOver, m.recoveries, m.webhooks, m.webhookSeconds, m.httpRequests, m.httpSeconds,
	)
	if opts.Pending != nil {
		m.reg.MustRegister(newPendingCollector(opts))
	}
	if opts.HeldEvents != nil {
		m.reg.MustRegister(newHeldCollector(opts))
	}
	return m
}

// Registry is the registry the metrics are on, to add collectors of other
// layers (the database pool's).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

var _ observe.Observer = (*Metrics)(nil)

// TurnFinished implements observe.Observer.
func (m *Metrics) TurnFinished(agent, finishReason string, d time.Duration) {
	m.turnChildren.get([2]string{agent, finishReason}, func() prometheus.Counter {
		return m.turns.WithLabelValues(agent, finishReason)
	}).Inc()
	m.turnHist.get(agent, func() prometheus.Observer { return m.turnSeconds.WithLabelValues(agent) }).Observe(d.Seconds())
}

// ModelCalled implements observe.Observer.
func (m *Metrics) ModelCalled(agent string, d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.modelHist.get([2]string{agent, outcome}, func() prometheus.Observer {
		return m.modelSeconds.WithLabelValues(agent, outcome)
	}).Observe(d.Seconds())
}

// ToolCalled implements observe.Observer.
func (m *Metrics) ToolCalled(agent, tool, outcome string, d time.Duration) {
	m.toolHist.get([3]string{agent, tool, outcome}, func() prometheus.Observer {
		return m.toolSeconds.WithLabelValues(agent, tool, outcome)
	}).Observe(d.Seconds())
}

// InterruptCreated implements observe.Observer.
func (m *Metrics) InterruptCreated(agent, tool string) {
	m.createdChildren.get([2]string{agent, tool}, func() prometheus.Counter { return m.created.WithLabelValues(agent, tool) }).Inc()
}

// InterruptResolved implements observe.Observer.
func (m *Metrics) InterruptResolved(agent, tool string) {
	m.resolvedChild.get([2]string{agent, tool}, func() prometheus.Counter { return m.resolved.WithLabelValues(agent, tool) }).Inc()
}

// InterruptExpired implements observe.Observer.
func (m *Metrics) InterruptExpired(agent, tool string) {
	m.expiredChildren.get([2]string{agent, tool}, func() prometheus.Counter { return m.expired.WithLabelValues(agent, tool) }).Inc()
}

// InterruptEscalated implements observe.Observer.
func (m *Metrics) InterruptEscalated(agent, tool string) {
	m.escalatedChild.get([2]string{agent, tool}, func() prometheus.Counter { return m.escalated.WithLabelValues(agent, tool) }).Inc()
}

// ResumeConflict implements observe.Observer.
func (m *Metrics) ResumeConflict(agent string) {
	m.conflictChild.get(agent, func() prometheus.Counter { return m.conflicts.WithLabelValues(agent) }).Inc()
}

// SessionHeadMoved implements observe.Observer.
func (m *Metrics) SessionHeadMoved() { m.headMoves.Inc() }

// JobStarted implements observe.Observer.
func (m *Metrics) JobStarted(takenOver bool) {
	m.jobsRunning.Inc()
	if takenOver {
		m.jobsTakenOver.Inc()
	}
}

// JobEnded implements observe.Observer.
func (m *Metrics) JobEnded() { m.jobsRunning.Dec() }

// newJobMetrics makes the metrics of detached turns and of recovery.
func (m *Metrics) newJobMetrics() {
	m.jobsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricJobsRunning, Help: "Detached turns running on this instance.",
	})
	m.jobsTakenOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricJobsTakenOver, Help: "Detached turns this instance took from the queue (started elsewhere, or handed back).",
	})
	m.recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRecoveries, Help: "What the sweeps repaired after a fault, by kind (stranded_decision: a decision whose turn never started, now started; lost_tool_call: a call a dead instance left running, now unknown for a human to decide).",
	}, []string{"kind"})
}

// Recovered implements observe.Observer.
func (m *Metrics) Recovered(kind string, n int) {
	if n > 0 {
		m.recoveries.WithLabelValues(kind).Add(float64(n))
	}
}

// WebhookAttempted implements observe.Observer.
func (m *Metrics) WebhookAttempted(outcome string, d time.Duration) {
	m.webhookChild.get(outcome, func() prometheus.Counter { return m.webhooks.WithLabelValues(outcome) }).Inc()
	m.webhookHist.get(outcome, func() prometheus.Observer { return m.webhookSeconds.WithLabelValues(outcome) }).Observe(d.Seconds())
}

// HTTPRequest counts a request answered with status after d. route must
// be the matched route pattern (never the raw path, which the client
// chooses), "" for a request no route matched.
func (m *Metrics) HTTPRequest(route, method string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // the client chooses it: keep the label set bounded
	}
	m.httpChildren.get(httpKey{route, method, status}, func() prometheus.Counter {
		return m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status))
	}).Inc()
	m.httpHist.get([2]string{route, method}, func() prometheus.Observer {
		return m.httpSeconds.WithLabelValues(route, method)
	}).Observe(d.Seconds())
}

// children caches the children of a metric vector by label set, so a hot
// path finds its child without building label strings or hashing them.
type children[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *children[K, V]) get(k K, newChild func() V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	v = newChild()
	c.m[k] = v
	return v
}
