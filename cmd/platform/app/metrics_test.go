package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/telemetry"
)

// TestMetricsListener: with --metrics-addr the metrics are served on their
// own listener, with the pool's figures, and nothing else is.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := telemetry.New(telemetry.Options{})
	m.Registry().MustRegister(newPoolCollector(pool))
	addr, stop, err := metricsServer("127.0.0.1:0", m.Handler(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stop(ctx)
	}()
	get := func(path string) (int, string) {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, name := range []string{metricPoolAcquired, metricPoolIdle, metricPoolTotal, metricPoolMax,
		metricPoolAcquires, metricPoolEmptyWaits, metricPoolAcquireSecs, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("%s missing", name)
		}
	}
	if !strings.Contains(body, metricPoolTotal+" ") || strings.Contains(body, metricPoolTotal+" 0\n") {
		t.Errorf("pool total connections should count the open connection:\n%s", body)
	}
	if code, _ := get("/api/agents"); code != 404 {
		t.Errorf("GET /api/agents on the metrics listener: %d, want 404", code)
	}
}

// TestServeMetricsFlags: the flags are known and documented.
func TestServeMetricsFlags(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	serveCommand(Platform{}, []string{"-h"}, &out)
	for _, want := range []string{"-metrics-addr", "-metrics-tenant-labels", "-metrics-token", "tenants' keys never read the metrics"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	out.Reset()
	if code := serveCommand(Platform{}, []string{"--metrics-token", "short"}, &out); code != 2 || !strings.Contains(out.String(), "at least 32 characters") {
		t.Errorf("a short --metrics-token: exit %d, %q; want 2 naming the length", code, out.String())
	}
}
