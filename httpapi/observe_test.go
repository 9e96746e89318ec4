package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/telemetry"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// observedServer is the API with authentication, metrics on the API's
// address and spans recorded in memory, over a fresh database reached as
// the application role.
type observedServer struct {
	*authServer
	spans *tracetest.SpanRecorder
	logs  *testproc.Output
}

func newObservedServer(t *testing.T, extra ...*service.Agent) *observedServer {
	t.Helper()
	logs := new(testproc.Output)
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, nil)))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// The metrics read the environment's store, which New makes after
	// them: the first scrape comes once New has returned.
	var env *servicetest.Env
	pending := func(ctx context.Context) ([]store.PendingStat, error) { return env.Store.PendingInterruptStats(ctx) }
	held := func(ctx context.Context) (store.HeldEvents, error) { return env.Store.HeldEvents(ctx) }
	// No cache: each scrape reads the store, so the test sees each change.
	metrics := telemetry.New(telemetry.Options{Pending: pending, HeldEvents: held, PendingCacheTTL: time.Nanosecond, Logger: log})
	env = servicetest.New(t, servicetest.Options{
		Runtime:  service.Options{Logger: log, Observer: metrics, TracerProvider: tp},
		Register: register(append([]*service.Agent{demo.BankingAgent(demo.NewModel())}, extra...)...),
		// Auth: the environment's tenants.
		HTTP: &httpapi.Options{Metrics: metrics, MetricsHandler: metrics.Handler(), MetricsToken: testMetricsToken, TracerProvider: tp},
	})
	a := &authServer{srv: env.Server, owner: testdb.OwnerPool(t, env.URL), acc: env.Tenants, logs: logs, rt: env.Runtime, store: env.Store}
	return &observedServer{authServer: a, spans: spans, logs: logs}
}

// testMetricsToken is the operator's scrape token of the observed server.
const testMetricsToken = "metrics-token-0123456789abcdef0123456789"

// scrape reads /metrics with cred and returns each series' value by its
// name and labels as exposed (e.g. `x_total{a="b",c="d"}`).
func (s *observedServer) scrape(t *testing.T, cred string) map[string]float64 {
	t.Helper()
	r := s.call(t, "GET", "/metrics", cred, nil)
	if r.status != 200 {
		t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// pausedTransfer asks the banking agent for a transfer, which pauses on
// userApproval, and returns the answer's result.
func pausedTransfer(t *testing.T, s *observedServer, key string, headers ...string) map[string]any {
	t.Helper()
	r := s.call(t, "POST", "/api/agents/bankingAgent", key,
		map[string]any{"data": userMessage("Transfer $50 to account 12345")}, headers...)
	var res map[string]any
	resultOf(t, r, &res)
	if res["finishReason"] != "interrupted" {
		t.Fatalf("finishReason %v, want interrupted: %s", res["finishReason"], r.body)
	}
	return res
}

// approve resumes a paused transfer with an approval.
func approve(t *testing.T, s *observedServer, key string, paused map[string]any) map[string]any {
	t.Helper()
	var respond []map[string]any
	for _, p := range paused["message"].(map[string]any)["content"].([]any) {
		part := p.(map[string]any)
		if req, ok := part["toolRequest"].(map[string]any); ok {
			respond = append(respond, map[string]any{"toolResponse": map[string]any{
				"name": req["name"], "ref": req["ref"], "output": map[string]any{"approved": true}}})
		}
	}
	r := s.call(t, "POST", "/api/agents/bankingAgent", key, map[string]any{
		"init": map[string]any{"snapshotId": paused["snapshotId"]},
		"data": map[string]any{"resume": map[string]any{"respond": respond}},
	})
	var res map[string]any
	resultOf(t, r, &res)
	if res["finishReason"] != "stop" {
		t.Fatalf("finishReason %v, want stop: %s", res["finishReason"], r.body)
	}
	return res
}

func TestMetricsAfterPauseAndApproval(t *testing.T) {
	t.Parallel()
	s := newObservedServer(t)
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	client, _ := s.key(t, "acme", tenants.RoleClient)

	// Never public, and no tenant's credential reads what describes every
	// tenant: only the operator's metrics token does.
	for name, cred := range map[string]string{"no credential": "", "a client key": client, "an admin key": admin,
		"another token": testMetricsToken + "x", "a prefix of the token": testMetricsToken[:20]} {
		if r := s.call(t, "GET", "/metrics", cred, nil); r.status != 401 {
			t.Errorf("GET /metrics with %s: %d, want 401", name, r.status)
		} else {
			checkNoLeak(t, r.body)
			if bytes.Contains(r.body, []byte("holdpoint_")) {
				t.Errorf("GET /metrics with %s leaked metrics: %s", name, r.body)
			}
		}
	}
	admin = testMetricsToken

	before := s.scrape(t, admin)
	if before[telemetry.MetricPending] != 0 {
		t.Errorf("pending before any turn: %v", before[telemetry.MetricPending])
	}
	paused := pausedTransfer(t, s, client)
	mid := s.scrape(t, admin)
	want := map[string]float64{
		telemetry.MetricPending: 1,
		telemetry.MetricTurns + `{agent="bankingAgent",finish_reason="interrupted"}`:             1,
		telemetry.MetricInterruptsCreated + `{agent="bankingAgent",tool="userApproval"}`:         1,
		telemetry.MetricHTTPRequests + `{method="POST",route="/api/agents/:agent",status="200"}`: 1,
		telemetry.MetricTurnSeconds + `_count{agent="bankingAgent"}`:                             1,
		telemetry.MetricModelSeconds + `_count{agent="bankingAgent",outcome="ok"}`:               1,
	}
	for k, v := range want {
		if got, ok := mid[k]; !ok || got != v {
			t.Errorf("after the pause: %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if mid[telemetry.MetricOldestPending] <= 0 {
		t.Errorf("oldest pending age %v, want > 0", mid[telemetry.MetricOldestPending])
	}
	// Read as the server's role (a system function it may call): the
	// figures are there, whatever they are at this moment.
	for _, k := range []string{telemetry.MetricEventsHeld, telemetry.MetricEventsHeldOldest} {
		if got, ok := mid[k]; !ok || got < 0 {
			t.Errorf("after the pause: %s = %v (present %v), want a figure", k, got, ok)
		}
	}

	approve(t, s, client, paused)
	// A second resume of the same interrupt with another answer is
	// refused (409), says so, and is counted.
	if r := s.call(t, "POST", "/api/agents/bankingAgent", client, map[string]any{
		"init": map[string]any{"snapshotId": paused["snapshotId"]},
		"data": map[string]any{"resume": map[string]any{"respond": []any{map[string]any{"toolResponse": map[string]any{
			"name": "userApproval", "ref": firstRef(t, paused), "output": map[string]any{"approved": false}}}}}},
	}); r.status != 409 || !strings.Contains(string(r.body), "already decided") || !strings.Contains(string(r.body), `"decisionRecorded":true`) || !strings.Contains(string(r.body), `"retrySafe":false`) {
		t.Errorf("second resume: %d %s, want 409 saying it was decided", r.status, r.body)
	}
	after := s.scrape(t, admin)
	want = map[string]float64{
		telemetry.MetricPending:       0,
		telemetry.MetricOldestPending: 0,
		telemetry.MetricTurns + `{agent="bankingAgent",finish_reason="interrupted"}`:                          1,
		telemetry.MetricTurns + `{agent="bankingAgent",finish_reason="stop"}`:                                 1,
		telemetry.MetricInterruptsResolve + `{agent="bankingAgent",tool="userApproval"}`:                      1,
		telemetry.MetricResumeConflicts + `{agent="bankingAgent"}`:                                            1,
		telemetry.MetricToolSeconds + `_count{agent="bankingAgent",outcome="succeeded",tool="transferMoney"}`: 1,
		telemetry.MetricHTTPRequests + `{method="POST",route="/api/agents/:agent",status="200"}`:              2,
		telemetry.MetricHTTPRequests + `{method="POST",route="/api/agents/:agent",status="409"}`:              1,
		telemetry.MetricHTTPRequests + `{method="GET",route="/metrics",status="401"}`:                         5,
	}
	for k, v := range want {
		if got, ok := after[k]; !ok || got != v {
			t.Errorf("after the approval: %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// Runtime and process collectors, and no raw path as a route label.
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total"} {
		if _, ok := after[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	s.call(t, "GET", "/no/such/route/12345", admin, nil)
	for k := range s.scrape(t, admin) {
		if strings.Contains(k, "12345") {
			t.Errorf("a raw path became a label: %s", k)
		}
	}
}

// firstRef is the ref of the paused answer's first tool request.
func firstRef(t *testing.T, paused map[string]any) string {
	t.Helper()
	for _, p := range paused["message"].(map[string]any)["content"].([]any) {
		if req, ok := p.(map[string]any)["toolRequest"].(map[string]any); ok {
			return req["ref"].(string)
		}
	}
	t.Fatal("no tool request in the paused answer")
	return ""
}

func TestTraceOfATurn(t *testing.T) {
	t.Parallel()
	s := newObservedServer(t)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)

	// The caller's trace is continued.
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	paused := pausedTransfer(t, s, client, "traceparent", "00-"+traceID+"-"+parentID+"-01")
	approve(t, s, client, paused)

	spans := s.spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
	}
	var httpSpan, turnSpan sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.SpanContext().TraceID().String() != traceID {
			continue
		}
		switch sp.Name() {
		case "HTTP POST /api/agents/:agent":
			httpSpan = sp
		case "holdpoint.turn":
			turnSpan = sp
		}
	}
	if httpSpan == nil || turnSpan == nil {
		t.Fatalf("no HTTP and turn spans in the caller's trace; spans: %v", names(spans))
	}
	if got := httpSpan.Parent().SpanID().String(); got != parentID {
		t.Errorf("HTTP span's parent %s, want the caller's %s", got, parentID)
	}
	if turnSpan.Parent().SpanID() != httpSpan.SpanContext().SpanID() {
		t.Errorf("turn span's parent is not the HTTP span")
	}
	attrs := attrMap(turnSpan)
	for _, k := range []string{"holdpoint.agent", "holdpoint.session_id", "holdpoint.snapshot_id", "holdpoint.finish_reason"} {
		if attrs[k] == "" {
			t.Errorf("turn span lacks %s: %v", k, attrs)
		}
	}
	if attrs["holdpoint.snapshot_id"] != paused["snapshotId"] {
		t.Errorf("turn span snapshot %q, want %v", attrs["holdpoint.snapshot_id"], paused["snapshotId"])
	}
	// Model and tool spans are children of their turn; the resume turn
	// names the interrupt it answered.
	var model, tool, resumeTurn bool
	for _, sp := range spans {
		parent, ok := byID[sp.Parent().SpanID()]
		switch sp.Name() {
		case "holdpoint.model":
			model = model || (ok && parent.Name() == "holdpoint.turn")
		case "holdpoint.tool":
			tool = tool || (ok && parent.Name() == "holdpoint.turn" && attrMap(sp)["holdpoint.tool"] == "transferMoney")
		case "holdpoint.turn":
			resumeTurn = resumeTurn || attrMap(sp)["holdpoint.interrupt_ids"] != ""
		}
	}
	if !model || !tool || !resumeTurn {
		t.Errorf("model span under a turn %v, transferMoney tool span under a turn %v, resume turn with interrupt ids %v", model, tool, resumeTurn)
	}
	// Ids only: no message text in any attribute.
	for _, sp := range spans {
		for k, v := range attrMap(sp) {
			if strings.Contains(v, "Transfer") || strings.Contains(v, "$50") || strings.Contains(v, "account") {
				t.Errorf("span %s attribute %s carries message text: %q", sp.Name(), k, v)
			}
		}
	}
	// The request's log line names the trace.
	if !strings.Contains(s.logs.String(), `"trace_id":"`+traceID+`"`) {
		t.Errorf("no log line carries trace_id %s", traceID)
	}
}

func TestLogInsideATurnCarriesTraceID(t *testing.T) {
	t.Parallel()
	logs := new(testproc.Output)
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, nil)))
	agent := &service.Agent{Name: "loggingAgent", ServerManaged: true, Turn: func(ctx context.Context, t *service.Turn) (string, error) {
		log.InfoContext(ctx, "inside the turn")
		return echoTurn(ctx, t)
	}}
	s := newObservedServer(t, agent)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	r := s.call(t, "POST", "/api/agents/loggingAgent", client, map[string]any{"data": userMessage("hi")})
	if r.status != 200 {
		t.Fatalf("turn: %d %s", r.status, r.body)
	}
	var turnTrace string
	for _, sp := range s.spans.Ended() {
		if sp.Name() == "holdpoint.turn" {
			turnTrace = sp.SpanContext().TraceID().String()
		}
	}
	var line struct {
		Msg     string `json:"msg"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	for l := range strings.Lines(logs.String()) {
		if err := json.Unmarshal([]byte(l), &line); err == nil && line.Msg == "inside the turn" {
			break
		}
	}
	if line.Msg == "" || turnTrace == "" || line.TraceID != turnTrace || line.SpanID == "" {
		t.Errorf("log line %+v, want trace_id %s and a span_id", line, turnTrace)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func attrMap(sp sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range sp.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}
