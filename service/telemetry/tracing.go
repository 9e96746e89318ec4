package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is the service.name of the spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another.
const DefaultServiceName = "holdpoint"

// Tracing is the tracer provider the environment chose, and how to flush
// and stop it.
type Tracing struct {
	// Provider makes the spans: a no-op provider when tracing is off.
	Provider trace.TracerProvider
	// Enabled says spans are exported (an OTLP exporter exists).
	Enabled bool
	// Shutdown flushes the spans not exported yet and stops the exporter.
	Shutdown func(context.Context) error
}

// TracingEnabled reports whether getenv asks for traces: an OTLP endpoint
// is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// and OTEL_SDK_DISABLED is not true.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// TracingFromEnv sets up tracing from the standard OTEL_* variables. Off
// (TracingEnabled false) it returns a no-op provider and starts nothing:
// no exporter, no goroutine. On, spans go in batches to the OTLP/HTTP
// exporter, which reads its endpoint, headers, timeout and compression from
// the OTEL_EXPORTER_OTLP_* variables itself; the sampler follows
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default: parent-based,
// always on), and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to holdpoint).
func TracingFromEnv(ctx context.Context) (*Tracing, error) {
	if !TracingEnabled(os.Getenv) {
		return &Tracing{Provider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	// NewTracerProvider applies OTEL_TRACES_SAMPLER itself.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Enabled: true, Shutdown: tp.Shutdown}, nil
}
