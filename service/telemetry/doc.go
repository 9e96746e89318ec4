// Package telemetry is the platform's observability: the Prometheus
// metrics (Metrics, on a registry of its own, implementing
// observe.Observer), the collector of pending interrupts read from the
// store at scrape time, the OpenTelemetry tracer provider configured by the
// standard OTEL_* environment variables (off unless an OTLP endpoint is
// set), and a slog handler that puts the trace and span ids of a record's
// context on it.
//
// It is a feature beside the turn engine: it imports service/observe and
// service/store, never the engine, pgx, the generated db package or the
// HTTP edge (tests/layers checks it).
package telemetry
