package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/telemetry"
)

func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "false"}, true},
	}
	for _, c := range cases {
		if got := telemetry.TracingEnabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: enabled %v, want %v", c.env, got, c.want)
		}
	}
}

// TestTracingOffWithoutEnv: with no OTLP endpoint in the environment no
// exporter is made and no goroutine started. (Not parallel: it reads the
// process environment and counts goroutines.)
func TestTracingOffWithoutEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	before := runtime.NumGoroutine()
	tr, err := telemetry.TracingFromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled {
		t.Error("tracing enabled without an endpoint")
	}
	if _, ok := tr.Provider.(noop.TracerProvider); !ok {
		t.Errorf("provider %T, want the no-op provider", tr.Provider)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after, %d before: something was started", n, before)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestTracingOnWithEnv: an endpoint makes an exporter; shutting down
// stops it (nothing listens there: no span is made, nothing is sent).
func TestTracingOnWithEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := telemetry.TracingFromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Error("tracing off with an endpoint set")
	}
	if _, ok := tr.Provider.(noop.TracerProvider); ok {
		t.Error("no-op provider with an endpoint set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

// scrape returns the metrics text m serves.
func scrape(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestPendingCachedAndPerTenant(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	old := time.Now().Add(-time.Minute)
	read := func(context.Context) ([]store.PendingStat, error) {
		reads.Add(1)
		return []store.PendingStat{{TenantID: "a", Pending: 2, Oldest: old}, {TenantID: "b", Pending: 3, Oldest: time.Now()}}, nil
	}
	one := telemetry.New(telemetry.Options{Pending: read, PendingCacheTTL: time.Hour})
	for range 5 {
		body := scrape(t, one)
		if !strings.Contains(body, "\n"+telemetry.MetricPending+" 5\n") {
			t.Fatalf("want one series of 5 pending:\n%s", grep(body, telemetry.MetricPending))
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("store read %d times for 5 scrapes within the cache period, want 1", n)
	}
	perTenant := telemetry.New(telemetry.Options{Pending: read, TenantLabels: true})
	body := scrape(t, perTenant)
	for _, want := range []string{telemetry.MetricPending + `{tenant="a"} 2`, telemetry.MetricPending + `{tenant="b"} 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s:\n%s", want, grep(body, telemetry.MetricPending))
		}
	}
	age := regexp.MustCompile(telemetry.MetricOldestPending + `\{tenant="a"\} ([0-9.e+]+)`).FindStringSubmatch(body)
	if age == nil {
		t.Fatalf("no oldest age for tenant a:\n%s", grep(body, telemetry.MetricOldestPending))
	}
	if secs, err := strconv.ParseFloat(age[1], 64); err != nil || secs < 59 {
		t.Errorf("oldest age of tenant a: %s, want about 60", age[1])
	}

	failing := telemetry.New(telemetry.Options{Pending: func(context.Context) ([]store.PendingStat, error) {
		return nil, errors.New("database down")
	}})
	if body := scrape(t, failing); strings.Contains(body, "\n"+telemetry.MetricPending+" ") {
		t.Errorf("pending reported although the store could not be read")
	}
}

func TestHeldEventsReported(t *testing.T) {
	t.Parallel()
	held := store.HeldEvents{Held: 3, Oldest: time.Now().Add(-30 * time.Second)}
	m := telemetry.New(telemetry.Options{HeldEvents: func(context.Context) (store.HeldEvents, error) { return held, nil }})
	body := scrape(t, m)
	if !strings.Contains(body, "\n"+telemetry.MetricEventsHeld+" 3\n") {
		t.Errorf("want 3 held:\n%s", grep(body, telemetry.MetricEventsHeld))
	}
	age := regexp.MustCompile("\n" + telemetry.MetricEventsHeldOldest + ` ([0-9.e+]+)`).FindStringSubmatch(body)
	if age == nil {
		t.Fatalf("no oldest held age:\n%s", grep(body, telemetry.MetricEventsHeld))
	}
	if secs, err := strconv.ParseFloat(age[1], 64); err != nil || secs < 29 {
		t.Errorf("oldest held age %s, want about 30", age[1])
	}

	none := telemetry.New(telemetry.Options{HeldEvents: func(context.Context) (store.HeldEvents, error) { return store.HeldEvents{}, nil }})
	body = scrape(t, none)
	for _, want := range []string{telemetry.MetricEventsHeld + " 0\n", telemetry.MetricEventsHeldOldest + " 0\n"} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("none held: missing %q:\n%s", want, grep(body, telemetry.MetricEventsHeld))
		}
	}

	failing := telemetry.New(telemetry.Options{HeldEvents: func(context.Context) (store.HeldEvents, error) {
		return store.HeldEvents{}, errors.New("database down")
	}})
	if body := scrape(t, failing); strings.Contains(body, "\n"+telemetry.MetricEventsHeld) {
		t.Errorf("held events reported although the store could not be read:\n%s", grep(body, telemetry.MetricEventsHeld))
	}
}

func grep(body, prefix string) string {
	var out []string
	for l := range strings.Lines(body) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestDashboardNamesExposedMetrics checks every panel expression of the
// sample Grafana dashboard names metrics the platform exposes.
func TestDashboardNamesExposedMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/grafana-holdpoint.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Inputs []struct {
			Name string `json:"name"`
		} `json:"__inputs"`
		Panels []struct {
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].Name != "DS_PROMETHEUS" {
		t.Errorf("inputs %+v, want DS_PROMETHEUS", dash.Inputs)
	}
	// Every metric of the registry, with a sample of each labelled one so
	// that it is exposed, plus the pool metrics registered by serve.
	m := telemetry.New(telemetry.Options{Pending: func(context.Context) ([]store.PendingStat, error) { return nil, nil }})
	m.TurnFinished("a", "stop", time.Second)
	m.ModelCalled("a", time.Second, false)
	m.ToolCalled("a", "t", "succeeded", time.Second)
	m.InterruptCreated("a", "t")
	m.InterruptResolved("a", "t")
	m.InterruptExpired("a", "t")
	m.ResumeConflict("a")
	m.WebhookAttempted("delivered", time.Second)
	m.HTTPRequest("/x", "GET", 200, time.Second)
	exposed := map[string]bool{}
	for l := range strings.Lines(scrape(t, m)) {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name = strings.Fields(name)[0]
			exposed[name] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exposed[name+suffix] = true
			}
		}
	}
	for _, n := range []string{"holdpoint_db_pool_acquired_conns", "holdpoint_db_pool_idle_conns", "holdpoint_db_pool_total_conns",
		"holdpoint_db_pool_max_conns", "holdpoint_db_pool_acquires_total", "holdpoint_db_pool_empty_acquires_total",
		"holdpoint_db_pool_acquire_wait_seconds_total"} {
		exposed[n] = true // cmd/platform/app's pool collector (its test checks the names)
	}
	ident := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	notMetrics := map[string]bool{"sum": true, "by": true, "rate": true, "max": true, "histogram_quantile": true, "le": true,
		"agent": true, "tool": true, "route": true, "status": true, "outcome": true, "finish_reason": true}
	if len(dash.Panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range dash.Panels {
		if p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: datasource %q", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no expression", p.Title)
		}
		for _, tg := range p.Targets {
			names := 0
			for _, id := range ident.FindAllString(regexp.MustCompile(`\[[^]]*\]`).ReplaceAllString(tg.Expr, ""), -1) {
				if notMetrics[id] {
					continue
				}
				names++
				if !exposed[id] {
					t.Errorf("panel %q: %s names %s, which is not exposed", p.Title, tg.Expr, id)
				}
			}
			if names == 0 {
				t.Errorf("panel %q: %s names no metric", p.Title, tg.Expr)
			}
		}
	}
}
