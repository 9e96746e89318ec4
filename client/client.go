package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAgentsPath is where the server serves the agent protocol routes.
const DefaultAgentsPath = "/api/agents"

// defaultUserAgent identifies this client unless WithUserAgent says otherwise.
const defaultUserAgent = "holdpoint-go-client"

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// Client talks to one Holdpoint server. It is safe for concurrent use.
type Client struct {
	base       *url.URL
	agentsPath string
	http       *http.Client
	credential string
	endUser    string
	userAgent  string
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey authenticates every request with an API key (a client key for
// the agent routes, an admin key for everything including /api/v1), sent
// as Authorization: Bearer.
func WithAPIKey(key string) Option { return func(c *Client) { c.credential = key } }

// WithToken authenticates every request with a user token minted for an
// end user; the server then scopes everything to that user's sessions.
func WithToken(token string) Option { return func(c *Client) { c.credential = token } }

// WithEndUser makes a key act for one end user (the X-End-User header).
func WithEndUser(id string) Option { return func(c *Client) { c.endUser = id } }

// WithHTTPClient sends the requests through hc (timeouts, proxies, TLS).
// Streams last as long as their turn or subscription, so hc should not set
// a Timeout shorter than that; contexts bound each call instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithAgentsPath sets where the agent routes live (default /api/agents);
// "" or "/" is the server's root, where a Genkit flow server (such as
// @genkit-ai/express's) serves each agent at /{name}.
func WithAgentsPath(p string) Option { return func(c *Client) { c.agentsPath = p } }

// New returns a client of the server at baseURL, such as
// http://127.0.0.1:8080.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("holdpoint: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("holdpoint: base URL %q must be an absolute http or https URL", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, agentsPath: DefaultAgentsPath, http: http.DefaultClient, userAgent: defaultUserAgent}
	for _, o := range opts {
		o(c)
	}
	c.agentsPath = "/" + strings.Trim(c.agentsPath, "/")
	if c.agentsPath == "/" {
		c.agentsPath = ""
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	if strings.ContainsAny(c.endUser, "\r\n") || strings.ContainsAny(c.credential, "\r\n") {
		return nil, errors.New("holdpoint: credential and end user must not contain line breaks")
	}
	return c, nil
}

// ForEndUser returns a copy of the client that acts for the end user id
// (X-End-User), as a backend holding a client key does for its users.
func (c *Client) ForEndUser(id string) *Client {
	cp := *c
	cp.endUser = id
	return &cp
}

// endpoint is the URL of path, whose segments the caller escaped, with
// query q.
func (c *Client) endpoint(path string, q url.Values) string {
	u := c.base.String() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// newRequest builds a request with the client's headers; body, when not
// nil, is sent as JSON.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any, accept string) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("holdpoint: encode request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(path, q), r)
	if err != nil {
		return nil, fmt.Errorf("holdpoint: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.credential)
	}
	if c.endUser != "" {
		req.Header.Set("X-End-User", c.endUser)
	}
	return req, nil
}

// doJSON sends a request and decodes a 200 JSON answer into out (unless
// out is nil); any other answer becomes an *Error.
func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.newRequest(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("holdpoint: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return errorFromResponse(res)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("holdpoint: decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// wireError is the server's error body (and error frame).
type wireError struct {
	Status    string          `json:"status"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
}

func (w wireError) toError(httpStatus int, requestID string) *Error {
	e := &Error{HTTPStatus: httpStatus, Status: w.Status, Message: w.Message, Details: w.Details, RequestID: w.RequestID}
	if e.RequestID == "" {
		e.RequestID = requestID
	}
	if e.Status == "" {
		e.Status = statusForHTTP(httpStatus)
	}
	return e
}

// errorFromResponse reads an error answer. A body that is not the
// server's JSON error (a proxy's page) still gives the HTTP status and a
// status derived from it.
func errorFromResponse(res *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var w wireError
	if json.Unmarshal(b, &w) != nil || w.Status == "" {
		w = wireError{Message: http.StatusText(res.StatusCode)}
	}
	e := w.toError(res.StatusCode, res.Header.Get("X-Request-Id"))
	if s := res.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// statusForHTTP is the protocol status an HTTP status stands for, for an
// answer that did not name one.
func statusForHTTP(code int) string {
	switch code {
	case http.StatusBadRequest:
		return StatusInvalidArgument
	case http.StatusUnauthorized:
		return StatusUnauthenticated
	case http.StatusForbidden:
		return StatusPermissionDenied
	case http.StatusNotFound:
		return StatusNotFound
	case http.StatusConflict:
		return StatusAborted
	case http.StatusRequestTimeout:
		return StatusDeadlineExceeded
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return StatusResourceExhausted
	case http.StatusNotImplemented:
		return StatusUnimplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return StatusUnavailable
	case http.StatusOK:
		return StatusUnknown
	}
	if code >= 500 {
		return StatusInternal
	}
	return StatusUnknown
}

// pathEscape escapes one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }
