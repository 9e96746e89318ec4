package httpapi

import (
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// RequestObserver counts HTTP requests (telemetry.Metrics implements it).
type RequestObserver interface {
	// HTTPRequest: a request of the route pattern ("" when no route
	// matched) and method was answered status after d.
	HTTPRequest(route, method string, status int, d time.Duration)
}

// MetricsPath is where the metrics are served on the API's address, to
// the bearer of Options.MetricsToken only, when both Options.MetricsHandler
// and the token are set.
const MetricsPath = "/metrics"

// errMetricsToken answers a scrape without the metrics token.
var errMetricsToken = service.Errorf(service.CodeUnauthenticated, "the metrics need the operator's metrics token: send Authorization: Bearer <token>")

// metrics serves Options.MetricsHandler to a request whose bearer
// credential is Options.MetricsToken, compared in constant time; any other
// credential, a tenant's admin key included, is 401 and learns nothing.
func (a *api) metrics(c echo.Context) error {
	cred, ok := bearer(c.Request().Header.Values(echo.HeaderAuthorization))
	if !ok || subtle.ConstantTimeCompare([]byte(cred), []byte(a.opts.MetricsToken)) != 1 {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="holdpoint-metrics"`)
		return errMetricsToken
	}
	a.opts.MetricsHandler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// tracerName names the tracer of the request spans.
const tracerName = "github.com/holdpoint/holdpoint/httpapi"

// traceContext reads an incoming W3C traceparent, so a caller's trace goes
// on through the request; a malformed one is ignored.
var traceContext propagation.TraceContext

// observe makes the span of each request (continuing the caller's trace)
// and reports the request to Options.Metrics. It sits outside the
// request logger, so the span is in the context the log line is written
// with and the status is the one the client got. Routes are reported by
// their pattern, never by the path the client sent.
func (a *api) observe(next echo.HandlerFunc) echo.HandlerFunc {
	tp := a.opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	tracer := tp.Tracer(tracerName)
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		route := c.Path()
		name := "HTTP " + req.Method
		if route != "" {
			name += " " + route
		}
		ctx := traceContext.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		status := c.Response().Status
		if a.opts.Metrics != nil {
			a.opts.Metrics.HTTPRequest(route, req.Method, status, time.Since(start))
		}
		if span.IsRecording() {
			span.SetAttributes(
				attribute.String("http.request.method", req.Method),
				attribute.String("http.route", route),
				attribute.Int("http.response.status_code", status),
				attribute.String("holdpoint.request_id", requestID(c)),
			)
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		span.End()
		return err
	}
}
