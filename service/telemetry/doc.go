// Package telemetry is the platform's observability: the Prometheus
// metrics (Metrics, on a registry of its own, implementing
// service.Observer), the collector of pending interrupts read from the
// store at scrape time, the OpenTelemetry tracer provider configured by the
// standard OTEL_* environment variables (off unless an OTLP endpoint is
// set), and a slog handler that puts the trace and span ids of a record's
// context on it.
//
// Like the rest of service/... it imports neither pgx, nor the generated
// db package, nor the HTTP edge (tests/layers checks it).
package telemetry
