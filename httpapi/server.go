package httpapi

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/readiness"
	"github.com/holdpoint/holdpoint/service/requestid"
	"github.com/holdpoint/holdpoint/service/streams"
	"github.com/holdpoint/holdpoint/service/tenantagents"
	"github.com/holdpoint/holdpoint/service/tenants"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// DefaultBodyLimit is the largest request body accepted unless Options says
// otherwise (1 MiB).
const DefaultBodyLimit int64 = 1 << 20

// DefaultBasePath is where the agent routes live unless Options says otherwise.
const DefaultBasePath = "/api/agents"

// Options configure the HTTP API.
type Options struct {
	// Logger receives request logs and the causes of internal errors.
	Logger *slog.Logger
	// BodyLimit bounds every request body in bytes (default 1 MiB). A larger
	// body is answered 413 with status RESOURCE_EXHAUSTED, the code gRPC uses
	// for a message over its size limit.
	BodyLimit int64
	// Ready reports whether the server can take traffic (database reachable,
	// migrations applied); nil means always ready. /readyz calls it on
	// each request unless Readiness is set.
	Ready func(ctx context.Context) error
	// Readiness, when set, is the instance's probed readiness: /readyz
	// answers from it without touching the database, and while it says
	// not ready the work routes (turns, interrupt decisions, redeliveries,
	// new event streams) are refused 503 with a Retry-After before any
	// credential lookup, instead of queueing against a dead pool.
	Readiness *readiness.Readiness
	// Caller resolves who a request acts for; nil means the caller the
	// authentication middleware resolved (see Auth).
	Caller func(c echo.Context) (service.Caller, error)
	// Auth authenticates API keys and user tokens; every route but the
	// health checks then needs one. Nil is dev mode: no authentication,
	// every request acts as DevCaller with admin rights.
	Auth Authenticator
	// RateLimit is the sustained requests per second allowed to one
	// credential (to one remote address in dev mode); 0 means no limit.
	RateLimit float64
	// RateBurst is how many requests one credential may send at once
	// (default: RateLimit rounded up).
	RateBurst int
	// IPRateLimit is the sustained requests per second allowed to one
	// remote address (IPv6: one /64), counted before credentials are
	// checked; health checks are exempt. 0 means no limit. It applies with
	// authentication only: in dev mode RateLimit counts per address.
	IPRateLimit float64
	// IPRateBurst is how many requests one remote address may send at once
	// (default: IPRateLimit rounded up).
	IPRateBurst int
	// BodyTimeout is how long a client has, from the start of a request, to
	// send its body (default DefaultBodyTimeout). A body that takes longer
	// is answered 408 DEADLINE_EXCEEDED and its connection closed.
	BodyTimeout time.Duration
	// MaxEventStreams bounds the live event streams (GET /api/v1/events)
	// one credential holds open at once; past it the route answers 429
	// RESOURCE_EXHAUSTED. 0 means no limit.
	MaxEventStreams int
	// BasePath prefixes the agent routes (default /api/agents).
	BasePath string
	// Events feeds GET /api/v1/events; nil answers that route 501.
	// Agents keeps the tenants' own agents (PUT/GET/DELETE
	// /api/v1/agents); nil answers those routes 501.
	Agents *tenantagents.Manager
	Events *eventhub.Hub
	// Streams makes streaming turns durable (rejoinable with
	// x-genkit-stream-id or Last-Event-ID, on any instance, and run to
	// their end when the client goes); nil: streams end with their
	// connection.
	Streams *streams.Hub
	// Webhooks keeps the tenants' webhook endpoints (/api/v1/webhooks);
	// nil answers those routes 501. EventIDs encodes the deliveries'
	// event ids (required with Webhooks).
	Webhooks *webhooks.Manager
	EventIDs *keys.EventIDs
	// Metrics counts the requests by route pattern and status (nil: not
	// counted). MetricsHandler is served at MetricsPath when MetricsToken
	// is set too, to requests bearing that token and no one else: the
	// metrics describe every tenant, so no tenant's key may read them
	// (serve them on a listener of their own instead to leave them out of
	// the API). TracerProvider makes a span per request (nil: none).
	Metrics        RequestObserver
	MetricsHandler http.Handler
	MetricsToken   string
	TracerProvider trace.TracerProvider
	// TrustedProxies are the addresses of the reverse proxies in front of
	// the server. Only a request whose connection comes from one of them
	// has its X-Forwarded-Proto believed; that scheme makes the dashboard's
	// cookies Secure and is the one its Origin checks expect. Empty: the
	// scheme is the connection's own.
	TrustedProxies []*net.IPNet
}

// DevCaller is the caller every request acts for when no authentication is
// configured (serve --dev); X-End-User narrows it to one end user. It holds
// every scope.
var DevCaller = service.Caller{TenantID: "default", Actor: "dev", KeyName: "dev", Scopes: []string{tenants.ScopeAll}}

// readyTimeout bounds a readiness probe so a hung database answers 503
// rather than hanging the prober.
const readyTimeout = 3 * time.Second

// api holds what the handlers share.
type api struct {
	rt    *service.Runtime
	inbox *inbox.Inbox
	log   *slog.Logger
	opts  Options
	// streams counts the open live event streams per credential.
	streams *streamSlots
}

// New returns the HTTP handler of the platform over rt.
func New(rt *service.Runtime, opts Options) *echo.Echo {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.Caller == nil {
		opts.Caller = callerFromAccess
	}
	opts.BasePath = "/" + strings.Trim(opts.BasePath, "/")
	if opts.BasePath == "/" {
		opts.BasePath = DefaultBasePath
	}
	a := &api{rt: rt, inbox: inbox.New(rt), log: opts.Logger, opts: opts, streams: newStreamSlots(opts.MaxEventStreams)}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = a.handleError
	e.SchemeExtractor = schemeExtractor(opts.TrustedProxies)

	// Order matters: the body deadline is set before anything waits on
	// the client and sees the answer written when it returns; the request
	// id must exist before anything logs; the logger must see the final
	// status (it runs the error handler itself); recovery sits inside the
	// logger so a panic is logged as a 500.
	e.Use(a.boundBody)
	e.Use(assignRequestID)
	e.Use(a.observe)
	e.Use(a.logRequests)
	e.Use(a.recoverPanics)
	e.Use(limitBody(opts.BodyLimit))
	// The cheap refusals come before any credential lookup: too many
	// requests from one address, and, without authentication, requests a
	// web page could have made.
	e.Use(a.limitAddressRate(newRateLimiter(opts.IPRateLimit, opts.IPRateBurst)))
	e.Use(a.guardDevMode)
	// Who is calling is settled before the rate limit (per credential)
	// and before any byte of the body is read.
	// Not ready: work is refused before a credential lookup could wait
	// on the database.
	e.Use(a.gateWork)
	e.Use(a.authenticate)
	e.Use(a.limitRate(newRateLimiter(opts.RateLimit, opts.RateBurst)))
	e.Use(checkJSONBody)
	a.routes(e)
	return e
}

// routes adds every route, each behind the middleware New installed.
func (a *api) routes(e *echo.Echo) {
	e.GET("/healthz", a.healthz)
	e.GET("/readyz", a.readyz)
	e.GET(OpenAPIPath, openAPI)

	base := a.opts.BasePath
	e.GET(base, a.listAgents)
	e.POST(base+"/:agent", a.invoke)
	e.POST(base+"/:agent/getSnapshot", a.getSnapshot)
	e.POST(base+"/:agent/abort", a.abort)
	a.registerV1(e.Group("/api/v1"))
	a.registerAgentDefs(e.Group("/api/v1"))
	a.registerWebhooks(e.Group("/api/v1"))
	a.registerToolCalls(e.Group("/api/v1"))
	a.registerUI(e)
	e.POST("/api/v1/tokens", a.mintToken)
	e.POST("/api/v1/tokens/revoke", a.revokeTokens)
	if a.opts.MetricsHandler != nil && a.opts.MetricsToken != "" {
		// The operator's scrape token only (authenticate leaves the
		// route to it).
		e.GET(MetricsPath, a.metrics)
	}
}

// schemeExtractor believes X-Forwarded-Proto from the trusted proxies
// only: Echo's default believes any loopback or private peer, so anyone on
// the server's network could make plain HTTP pass for HTTPS.
func schemeExtractor(proxies []*net.IPNet) echo.SchemeExtractor {
	if len(proxies) == 0 {
		return echo.ExtractSchemeDirect()
	}
	trust := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		trust = append(trust, echo.TrustIPRange(p))
	}
	return echo.ExtractSchemeFromHeaders(trust...)
}

// healthz answers as long as the process serves HTTP.
func (a *api) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 503 while the database is unreachable or migrations are
// pending, so a load balancer keeps traffic away; the reason is logged, not
// sent.
func (a *api) readyz(c echo.Context) error {
	if r := a.opts.Readiness; r != nil {
		if cause := r.Cause(); cause != nil {
			a.log.Warn("not ready", "err", cause, "request_id", requestID(c))
			return c.JSON(http.StatusServiceUnavailable, errorBody{
				Status:    service.CodeUnavailable,
				Message:   "not ready",
				RequestID: requestID(c),
			})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	}
	if a.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
		defer cancel()
		if err := a.opts.Ready(ctx); err != nil {
			a.log.Warn("not ready", "err", err, "request_id", requestID(c))
			return c.JSON(http.StatusServiceUnavailable, errorBody{
				Status:    service.CodeUnavailable,
				Message:   "not ready",
				RequestID: requestID(c),
			})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// gateWork refuses new work while the instance is not ready (see
// Options.Readiness): the request is answered 503 UNAVAILABLE with a
// Retry-After at once, nothing of it having run. Reads are let through;
// they answer or fail on their own, and a dashboard stays usable against a
// slow but working database.
func (a *api) gateWork(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := a.opts.Readiness.Err(); err != nil && a.isWorkRoute(c) {
			return err
		}
		return next(c)
	}
}

// isWorkRoute reports whether the request starts work: a turn, an
// interrupt decision, a webhook redelivery, or a live event stream (which
// holds a connection's worth of attention for as long as it is open).
func (a *api) isWorkRoute(c echo.Context) bool {
	route, method := c.Path(), c.Request().Method
	switch {
	case method == http.MethodPost && route == a.opts.BasePath+"/:agent":
		return true
	case method == http.MethodGet && route == "/api/v1/events":
		return true
	case method != http.MethodPost:
		return false
	}
	switch route {
	case "/api/v1/interrupts/:id/respond", "/api/v1/interrupts/:id/restart",
		"/api/v1/webhooks/:id/deliveries/:delivery/redeliver", "/ui/webhooks/:id/deliveries/:delivery/redeliver":
		return true
	}
	return false
}

// safeRequestID is what a client-supplied X-Request-Id must look like to be
// kept (a proxy's id ties our log lines to its own); anything else could
// forge or garble log lines and is replaced.
var safeRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// assignRequestID puts an X-Request-Id on every response: the client's or
// proxy's when it is a plain token, else a fresh random one. (Echo's own
// middleware package would pull in golang.org/x/time for its rate limiter.)
func assignRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !safeRequestID.MatchString(id) {
			id = rand.Text()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		req := c.Request()
		c.SetRequest(req.WithContext(requestid.With(req.Context(), id)))
		return next(c)
	}
}

// requestID is the id assignRequestID put on the response.
func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// logRequests writes one log line per request. It runs the error handler
// itself so that the logged status is the one the client got.
func (a *api) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		res := c.Response()
		a.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
			slog.String("method", c.Request().Method),
			slog.String("path", c.Request().URL.Path),
			slog.Int("status", res.Status),
			slog.Int64("bytes", res.Size),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("request_id", requestID(c)),
		)
		return nil
	}
}

// recoverPanics turns a panic into an internal error, so the client gets the
// fixed 500 answer and the stack goes to the log with the request id.
func (a *api) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					// The server's own signal to drop the connection.
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// limitBody bounds request bodies. A declared length over the limit is
// refused before reading; an undeclared (chunked) one fails with
// *http.MaxBytesError when the handler reads past the limit.
func limitBody(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return &http.MaxBytesError{Limit: limit}
			}
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, limit)
			return next(c)
		}
	}
}
