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
// oldest, read from the store at scrape time and cached for ttl: however
// often (and however many at once) scrapers come, the store is read at
// most once per ttl.
type pendingCollector struct {
	read       func(ctx context.Context) ([]store.PendingStat, error)
	ttl        time.Duration
	perTenant  bool
	log        *slog.Logger
	pendDesc   *prometheus.Desc
	oldestDesc *prometheus.Desc

	mu    sync.Mutex
	at    time.Time
	stats []store.PendingStat
	ok    bool
}

func newPendingCollector(opts Options) *pendingCollector {
	var labels []string
	if opts.TenantLabels {
		labels = []string{"tenant"}
	}
	ttl := opts.PendingCacheTTL
	if ttl <= 0 {
		ttl = DefaultPendingCacheTTL
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &pendingCollector{
		read: opts.Pending, ttl: ttl, perTenant: opts.TenantLabels, log: log,
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
	stats, ok := p.current()
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

// current returns the cached figures, reading them again once ttl passed.
func (p *pendingCollector) current() ([]store.PendingStat, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok && time.Since(p.at) < p.ttl {
		return p.stats, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), pendingReadTimeout)
	defer cancel()
	stats, err := p.read(ctx)
	if err != nil {
		p.log.Warn("metrics: reading the pending interrupts failed", "err", err)
		if p.ok && time.Since(p.at) < 10*p.ttl {
			return p.stats, true
		}
		p.ok = false
		return nil, false
	}
	p.stats, p.at, p.ok = stats, time.Now(), true
	return stats, true
}

// age is seconds since t, 0 for the zero time (nothing waits).
func age(now, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(now.Sub(t).Seconds(), 0)
}
