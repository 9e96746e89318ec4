package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Names of the database pool metrics.
const (
	metricPoolAcquired    = "holdpoint_db_pool_acquired_conns"
	metricPoolIdle        = "holdpoint_db_pool_idle_conns"
	metricPoolTotal       = "holdpoint_db_pool_total_conns"
	metricPoolMax         = "holdpoint_db_pool_max_conns"
	metricPoolAcquires    = "holdpoint_db_pool_acquires_total"
	metricPoolEmptyWaits  = "holdpoint_db_pool_empty_acquires_total"
	metricPoolAcquireSecs = "holdpoint_db_pool_acquire_wait_seconds_total"
)

// poolCollector reports a pgx pool's statistics at scrape time.
type poolCollector struct {
	pool                                                       *pgxpool.Pool
	acquired, idle, total, maxConns, acquires, empty, waitSecs *prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &poolCollector{
		pool:     pool,
		acquired: d(metricPoolAcquired, "Database connections in use."),
		idle:     d(metricPoolIdle, "Idle database connections."),
		total:    d(metricPoolTotal, "Database connections open (in use, idle and being opened)."),
		maxConns: d(metricPoolMax, "Most database connections the pool opens."),
		acquires: d(metricPoolAcquires, "Connections taken from the pool."),
		empty:    d(metricPoolEmptyWaits, "Connections taken from the pool that had to wait for one (the pool was empty)."),
		waitSecs: d(metricPoolAcquireSecs, "Time spent taking connections from the pool."),
	}
}

// Describe implements prometheus.Collector.
func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.acquired, p.idle, p.total, p.maxConns, p.acquires, p.empty, p.waitSecs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(p.acquired, float64(s.AcquiredConns()))
	gauge(p.idle, float64(s.IdleConns()))
	gauge(p.total, float64(s.TotalConns()))
	gauge(p.maxConns, float64(s.MaxConns()))
	counter(p.acquires, float64(s.AcquireCount()))
	counter(p.empty, float64(s.EmptyAcquireCount()))
	counter(p.waitSecs, s.AcquireDuration().Seconds())
}

// metricsServer serves the metrics alone on a listener of its own
// (--metrics-addr): for a scraper on a private network, without an API
// key. It returns the bound address and a function that stops it.
func metricsServer(addr string, metrics http.Handler, log *slog.Logger) (string, func(context.Context), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "err", err)
		}
	}()
	return ln.Addr().String(), func(ctx context.Context) { _ = srv.Shutdown(ctx) }, nil
}
