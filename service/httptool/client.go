package httptool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/holdpoint/holdpoint/internal/wait"
)

// traceContext writes the W3C traceparent (and tracestate) of the span in
// a call's context on its request; without a span it writes nothing.
var traceContext propagation.TraceContext

// Defaults and bounds of a Client and a Request.
const (
	defaultMaxBody     = 1 << 20
	defaultAttempts    = 3
	defaultBackoff     = 200 * time.Millisecond
	maxBackoff         = time.Minute
	defaultTimeout     = 10 * time.Second
	maxTimeout         = 60 * time.Second
	tlsHandshakeTime   = 10 * time.Second
	maxIDLen           = 256
	userAgent          = "holdpoint-tool/1"
	maxResponseHeaders = 64 << 10
)

// Client calls tool URLs. Its zero value is usable (with the zero Policy:
// public https hosts only). Its fields must not change once it is in use,
// and a Client must not be copied then; it is safe for concurrent use. It
// keeps one http.Transport (built on first use) whose connections are pooled
// per scheme, host and port, each dialed to an address vetted under Policy.
type Client struct {
	// Policy says which tool URLs may be called.
	Policy Policy
	// Resolver resolves host names (nil: net.DefaultResolver). Tests inject
	// one.
	Resolver interface {
		LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	}
	// MaxBody is the largest response body read (default 1 MiB); a larger
	// 2xx body is an error (KindTooLarge). A larger non-2xx body is cut to
	// MaxBody, its status being the failure.
	MaxBody int64
	// Attempts is the number of attempts in all (default 3), retried only on
	// network errors, timeouts and 5xx.
	Attempts int
	// Backoff is the first retry delay (default 200ms), doubled each retry
	// (at most a minute), with +-20% jitter.
	Backoff time.Duration
	// Now gives the signature timestamp (default time.Now).
	Now func() time.Time
	// RootCAs are the roots TLS certificates are verified against (nil: the
	// system's). It is for tests (httptest.NewTLSServer) and private CAs.
	RootCAs *x509.CertPool
	// IdleConnsPerHost is how many idle connections to one host are kept
	// for reuse (default 2); a caller with more calls in flight to one host
	// raises it.
	IdleConnsPerHost int

	once      sync.Once
	transport *http.Transport
}

// Request is one tool call.
type Request struct {
	// URL is the tool URL.
	URL string
	// Timeout bounds each attempt, connecting and reading the response
	// included (default 10s; at most 60s, a longer one is cut to 60s).
	Timeout time.Duration
	// ID is sent as webhook-id and as Idempotency-Key: stable across
	// retries and across instances (the call id). It must be 1 to 256 printable ASCII characters without
	// spaces.
	ID string
	// Body is the JSON body, sent as is with Content-Type: application/json.
	Body []byte
	// Secrets are the signing secrets; each signs (rotation overlap). At
	// least one, none empty.
	Secrets [][]byte
}

// Result is the outcome of a call.
type Result struct {
	// Status is the HTTP status of the last attempt (0 when none answered).
	Status int
	// Body is its body (bounded by Client.MaxBody; nil when too large).
	Body []byte
	// Attempts is the number of attempts made.
	Attempts int
	// Duration is the time from the first attempt to the end.
	Duration time.Duration
}

// Do POSTs req, retrying as Attempts/Backoff say; it returns the 2xx result
// or a *CallError (with the Result).
//
// The URL is checked as CheckURL does, then on each attempt the host is
// resolved, every address it resolves to is vetted under Policy (any one
// refused refuses the call), and the connection goes to a vetted address.
// The caller's ctx bounds the whole call, backoff sleeps included; when it
// ends the call, the CallError wraps ctx.Err() and is not retried. A
// malformed req (no ID, no secret, a body that is not JSON) is a plain
// error, with an empty Result, and nothing is sent. The Result is never nil.
func (c *Client) Do(ctx context.Context, req Request) (*Result, error) {
	res := &Result{}
	if err := validateRequest(req); err != nil {
		return res, err
	}
	pol, err := parsePolicy(c.Policy)
	if err != nil {
		return res, &CallError{Kind: KindRefused, Err: err}
	}
	pu, err := pol.checkURL(req.URL, true)
	if err != nil {
		return res, &CallError{Kind: KindRefused, Err: err}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	timeout = min(timeout, maxTimeout)
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	start := time.Now()
	// sent: some attempt's request was written in full.
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			sent.Store(true)
		}
	}})
	for i := 1; ; i++ {
		if err := ctx.Err(); err != nil {
			res.Duration = time.Since(start)
			return res, ctxError(ctx, res, sent.Load())
		}
		res.Attempts = i
		status, body, fail := c.attempt(ctx, pol, pu, req, timeout)
		res.Status, res.Body = status, body
		if fail == nil {
			res.Duration = time.Since(start)
			return res, nil
		}
		if ctx.Err() != nil {
			res.Duration = time.Since(start)
			return res, ctxError(ctx, res, sent.Load())
		}
		if !fail.retry || i >= attempts {
			res.Duration = time.Since(start)
			return res, &CallError{Kind: fail.kind, Status: status, Attempts: i, Err: fail.err, MayHaveRun: sent.Load() && status == 0}
		}
		if wait.Sleep(ctx, c.backoff(i)) != nil {
			res.Duration = time.Since(start)
			return res, ctxError(ctx, res, sent.Load())
		}
	}
}

// ctxError is the CallError of a call the caller's context ended; sent
// says a request of it went out.
func ctxError(ctx context.Context, res *Result, sent bool) *CallError {
	err := ctx.Err()
	kind := KindNetwork
	if errors.Is(err, context.DeadlineExceeded) {
		kind = KindTimeout
	}
	return &CallError{Kind: kind, Status: res.Status, Attempts: res.Attempts, Err: fmt.Errorf("tool call ended by its context: %w", err),
		MayHaveRun: sent && res.Status == 0}
}

func validateRequest(req Request) error {
	if req.ID == "" || len(req.ID) > maxIDLen {
		return fmt.Errorf("httptool: request ID must be 1 to %d characters", maxIDLen)
	}
	for i := 0; i < len(req.ID); i++ {
		if c := req.ID[i]; c <= ' ' || c >= 0x7f {
			return errors.New("httptool: request ID must be printable ASCII without spaces")
		}
	}
	if len(req.Secrets) == 0 {
		return errors.New("httptool: request has no signing secret")
	}
	for _, s := range req.Secrets {
		if len(s) == 0 {
			return errors.New("httptool: request has an empty signing secret")
		}
	}
	if !json.Valid(req.Body) {
		return errors.New("httptool: request body is not JSON")
	}
	return nil
}

// backoff is the delay before attempt n+1: Backoff doubled n-1 times, at
// most maxBackoff, with +-20% jitter.
func (c *Client) backoff(n int) time.Duration {
	d := c.Backoff
	if d <= 0 {
		d = defaultBackoff
	}
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// failure is a failed attempt.
type failure struct {
	kind  Kind
	retry bool
	err   error
}

// attempt makes one attempt and returns the status and body of the answer,
// if any, and how it failed, if it did.
func (c *Client) attempt(ctx context.Context, pol *policy, pu *parsedURL, req Request, timeout time.Duration) (int, []byte, *failure) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The host is resolved (and its addresses vetted) only when the
	// transport dials: a call over a pooled connection, dialed to an
	// address vetted under the same policy, needs no lookup.
	tgt := &target{host: pu.host, policy: pol, timeout: timeout,
		lookup: func(ctx context.Context) ([]netip.Addr, error) { return c.resolve(ctx, pol, pu) }}
	hreq, err := http.NewRequestWithContext(context.WithValue(actx, targetKey{}, tgt), http.MethodPost, pu.u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return 0, nil, &failure{kind: KindRefused, err: err}
	}
	hreq.Header = c.header(req)
	// The caller's trace goes on (traceparent), when there is one.
	traceContext.Inject(actx, propagation.HeaderCarrier(hreq.Header))

	resp, err := c.roundTripper().RoundTrip(hreq)
	if err != nil {
		return 0, nil, classifyErr(actx, err)
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	maxBody := c.MaxBody
	if maxBody <= 0 {
		maxBody = defaultMaxBody
	}
	ok := status >= 200 && status < 300
	if status >= 300 && status < 400 {
		return status, nil, &failure{kind: KindRefused, err: fmt.Errorf("tool URL answered a redirect (status %d)", status)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return status, nil, classifyErr(actx, err)
	}
	if int64(len(body)) > maxBody {
		if ok {
			return status, nil, &failure{kind: KindTooLarge, err: fmt.Errorf("tool URL answered a body larger than %d bytes", maxBody)}
		}
		body = body[:maxBody]
	}
	switch {
	case ok:
		return status, body, nil
	case status >= 500 && status < 600:
		return status, body, &failure{kind: KindStatus, retry: true, err: fmt.Errorf("tool URL answered status %d", status)}
	default:
		return status, body, &failure{kind: KindStatus, err: fmt.Errorf("tool URL answered status %d", status)}
	}
}

// header is the header of an attempt of req: signed now, with every secret.
func (c *Client) header(req Request) http.Header {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ts := now()
	sigs := make([]string, len(req.Secrets))
	for i, s := range req.Secrets {
		sigs[i] = Sign(s, req.ID, ts, req.Body)
	}
	return http.Header{
		"Content-Type":  {"application/json"},
		"User-Agent":    {userAgent},
		headerID:        {req.ID},
		headerTimestamp: {fmt.Sprint(ts.Unix())},
		headerSignature: {strings.Join(sigs, " ")},
		// The call id again, under the name receivers' HTTP frameworks
		// dedupe by (it is not signed: the signed id is webhook-id).
		headerIdempotencyKey: {req.ID},
	}
}

// classifyErr classifies the error of an attempt whose context is actx.
func classifyErr(actx context.Context, err error) *failure {
	var refused *refusedError
	if errors.As(err, &refused) {
		return &failure{kind: KindRefused, err: refused}
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &failure{kind: KindTimeout, retry: true, err: fmt.Errorf("tool URL did not answer in time: %w", err)}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &failure{kind: KindTimeout, retry: true, err: err}
	}
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var authErr x509.UnknownAuthorityError
	var invalidErr x509.CertificateInvalidError
	if errors.As(err, &certErr) || errors.As(err, &hostErr) || errors.As(err, &authErr) || errors.As(err, &invalidErr) {
		return &failure{kind: KindNetwork, err: err}
	}
	return &failure{kind: KindNetwork, retry: true, err: err}
}

// resolve returns the addresses of the URL's host, each vetted under the
// policy (an IP literal was vetted by checkURL). A plain-http URL with a host
// name must resolve to loopback addresses only.
func (c *Client) resolve(ctx context.Context, pol *policy, pu *parsedURL) ([]netip.Addr, error) {
	if pu.ip.IsValid() {
		return []netip.Addr{pu.ip.Unmap()}, nil
	}
	var r interface {
		LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	} = net.DefaultResolver
	if c.Resolver != nil {
		r = c.Resolver
	}
	ips, err := r.LookupIPAddr(ctx, pu.host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("tool URL host %s resolves to no address", pu.host)
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, refusef("tool URL host %s resolves to an invalid address", pu.host)
		}
		a = a.WithZone(ip.Zone)
		if err := pol.checkResolved(pu.host, a); err != nil {
			return nil, err
		}
		if pu.u.Scheme == "http" && classify(a) != classLoopback {
			return nil, refusef("tool URL must use https (host %s resolves to %s, not a loopback address)", pu.host, a.Unmap())
		}
		a = a.Unmap()
		if !containsAddr(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

func containsAddr(addrs []netip.Addr, a netip.Addr) bool {
	for _, b := range addrs {
		if a == b {
			return true
		}
	}
	return false
}

// target is what the dialer may connect to for one attempt: the vetted
// addresses of the URL's host, which lookup resolves and vets. It travels
// in the request's context.
type target struct {
	host    string
	lookup  func(ctx context.Context) ([]netip.Addr, error)
	policy  *policy
	timeout time.Duration
}

type targetKey struct{}

// roundTripper returns the Client's transport, building it on first use.
func (c *Client) roundTripper() *http.Transport {
	c.once.Do(func() {
		c.transport = &http.Transport{
			Proxy:       nil, // never an environment proxy
			DialContext: dialVetted,
			TLSClientConfig: &tls.Config{
				RootCAs:    c.RootCAs,
				MinVersion: tls.VersionTLS12,
				// ServerName is left empty: the transport sets it per
				// connection to the URL's host, so the certificate is
				// verified against the name, not the dialed address.
			},
			TLSHandshakeTimeout:    tlsHandshakeTime,
			ResponseHeaderTimeout:  maxTimeout, // the attempt's context bounds it tighter
			ExpectContinueTimeout:  time.Second,
			MaxIdleConns:           64,
			MaxIdleConnsPerHost:    cmp.Or(c.IdleConnsPerHost, 2),
			IdleConnTimeout:        60 * time.Second,
			MaxResponseHeaderBytes: maxResponseHeaders,
			DisableCompression:     true,
		}
	})
	return c.transport
}

// closeIdleConnections closes the transport's idle connections.
func (c *Client) closeIdleConnections() {
	c.roundTripper().CloseIdleConnections()
}

// dialVetted is the transport's DialContext: it resolves the request's
// target once, vetting every address, connects only to those addresses,
// and its net.Dialer's Control checks the address once more just before
// connecting.
func dialVetted(ctx context.Context, network, address string) (net.Conn, error) {
	tgt, _ := ctx.Value(targetKey{}).(*target)
	if tgt == nil {
		return nil, refusef("tool URL dial without a vetted address")
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if normalizeHost(host) != tgt.host {
		return nil, refusef("tool URL dial to %s, not the vetted host %s", host, tgt.host)
	}
	// The transport lets a dial outlive the request that asked for it (for
	// a later request to use); the attempt's timeout bounds all of it,
	// the lookup included.
	ctx, cancel := context.WithTimeout(ctx, tgt.timeout)
	defer cancel()
	addrs, err := tgt.lookup(ctx)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return refusef("tool URL dial to unparsable address %q", address)
			}
			a := ap.Addr().Unmap()
			if !containsAddr(addrs, a) {
				return refusef("tool URL dial to %s, not a vetted address of %s", a, tgt.host)
			}
			return tgt.policy.checkResolved(tgt.host, a)
		},
	}
	var first error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		var refused *refusedError
		if errors.As(err, &refused) || ctx.Err() != nil {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}
