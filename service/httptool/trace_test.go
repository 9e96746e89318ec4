package httptool_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestCallCarriesTraceparent: a call made within a span carries its W3C
// traceparent, so the tool's server continues the trace; one made without
// a span carries none.
func TestCallCarriesTraceparent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{}`))
	})
	c := newClient(t, dev, s)

	if _, err := c.Do(context.Background(), request(s.URL)); err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "tool call")
	if _, err := c.Do(ctx, request(s.URL)); err != nil {
		t.Fatal(err)
	}
	span.End()

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d requests, want 2", len(seen))
	}
	if seen[0] != "" {
		t.Errorf("call without a span sent traceparent %q", seen[0])
	}
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if seen[1] != want {
		t.Errorf("traceparent %q, want %q", seen[1], want)
	}
}
