package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdpoint/holdpoint/service/store"
)

// pendingReadTimeout bounds one read of the pending interrupts, so a slow
// database cannot hold a scrape.
const pendingReadTimeout = 3 * time.Second

// pendingCollector reports the pending interrupts and the age of the
// oldest (a cachedRead).
type pendingCollector struct {
	stats      *cachedRead[[]store.PendingStat]
	perTenant  bool
	pendDesc   *prometheus.Desc
	oldestDesc *prometheus.Desc
}

// cachedRead is a read from the store at scrape time, cached for ttl:
// however often (and however many at once) scrapers come, the store is
// read at most once per ttl.
type cachedRead[T any] struct {
	read func(ctx context.Context) (T, error)
	what string // for the log: "the pending interrupts"
	ttl  time.Duration
	log  *slog.Logger

	mu sync.Mutex
	at time.Time
	v  T
	ok bool
}

func newCachedRead[T any](opts Options, what string, read func(ctx context.Context) (T, error)) *cachedRead[T] {
	ttl := opts.PendingCacheTTL
	if ttl <= 0 {
		ttl = DefaultPendingCacheTTL
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &cachedRead[T]{read: read, what: what, ttl: ttl, log: log}
}

func newPendingCollector(opts Options) *pendingCollector {
	var labels []string
	if opts.TenantLabels {
		labels = []string{"tenant"}
	}
	return &pendingCollector{
		stats: newCachedRead(opts, "the pending interrupts", opts.Pending), perTenant: opts.TenantLabels,
		pendDesc:   prometheus.NewDesc(MetricPending, "Interrupts waiting for an answer.", labels, nil),
		oldestDesc: prometheus.NewDesc(MetricOldestPending, "Age of the oldest interrupt waiting for an answer (0: none waits).", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (p *pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.pendDesc
	ch <- p.oldestDesc
}

// Collect implements prometheus.Collector. When the store cannot be read
// the last figures read are reported while they are not older than ten
// periods; past that, none (a missing series alerts, a stale one lies).
func (p *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	stats, ok := p.stats.get()
	if !ok {
		return
	}
	now := time.Now()
	if p.perTenant {
		for _, s := range stats {
			ch <- prometheus.MustNewConstMetric(p.pendDesc, prometheus.GaugeValue, float64(s.Pending), s.TenantID)
			ch <- prometheus.MustNewConstMetric(p.oldestDesc, prometheus.GaugeValue, age(now, s.Oldest), s.TenantID)
		}
		return
	}
	var total int64
	var oldest time.Time
	for _, s := range stats {
		total += s.Pending
		if s.Pending > 0 && (oldest.IsZero() || s.Oldest.Before(oldest)) {
			oldest = s.Oldest
		}
	}
	ch <- prometheus.MustNewConstMetric(p.pendDesc, prometheus.GaugeValue, float64(total))
	ch <- prometheus.MustNewConstMetric(p.oldestDesc, prometheus.GaugeValue, age(now, oldest))
}

// get returns the cached value, reading it again once ttl passed. When
// the store cannot be read the last value read is returned while it is
// not older than ten periods; past that, none (a missing series alerts, a
// stale one lies).
func (c *cachedRead[T]) get() (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && time.Since(c.at) < c.ttl {
		return c.v, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), pendingReadTimeout)
	defer cancel()
	v, err := c.read(ctx)
	if err != nil {
		c.log.Warn("metrics: reading "+c.what+" failed", "err", err)
		if c.ok && time.Since(c.at) < 10*c.ttl {
			return c.v, true
		}
		c.ok = false
		var zero T
		return zero, false
	}
	c.v, c.at, c.ok = v, time.Now(), true
	return v, true
}

// heldCollector reports the events held back by an older transaction
// still open (store.HeldEvents), cached like the pending interrupts.
type heldCollector struct {
	held       *cachedRead[store.HeldEvents]
	heldDesc   *prometheus.Desc
	oldestDesc *prometheus.Desc
}

func newHeldCollector(opts Options) *heldCollector {
	return &heldCollector{
		held:       newCachedRead(opts, "the held events", opts.HeldEvents),
		heldDesc:   prometheus.NewDesc(MetricEventsHeld, "Events written but not yet sent to streams and webhooks: an older transaction of the database is still open.", nil, nil),
		oldestDesc: prometheus.NewDesc(MetricEventsHeldOldest, "Age of the oldest event held back (0: none is).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (h *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.heldDesc
	ch <- h.oldestDesc
}

// Collect implements prometheus.Collector.
func (h *heldCollector) Collect(ch chan<- prometheus.Metric) {
	held, ok := h.held.get()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(h.heldDesc, prometheus.GaugeValue, float64(held.Held))
	ch <- prometheus.MustNewConstMetric(h.oldestDesc, prometheus.GaugeValue, age(time.Now(), held.Oldest))
}

// age is seconds since t, 0 for the zero time (nothing waits).
func age(now, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(now.Sub(t).Seconds(), 0)
}
