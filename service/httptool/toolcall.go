package httptool

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// headerIdempotencyKey carries the call id (the webhook-id) again, under
// the name HTTP APIs dedupe by.
const headerIdempotencyKey = "Idempotency-Key"

// ToolCall is the JSON body the platform POSTs to a tenant's HTTP tool. The
// signature covers all of it, so the fields that say which tenant, agent,
// tool and URL the call was made for bind the signature to that one use:
// a receiver that checks them (VerifyToolCall) cannot be made to run a
// call the model addressed to another tool.
type ToolCall struct {
	// Tenant is the id of the tenant whose agent made the call.
	Tenant string `json:"tenant"`
	// Agent is the name of the tenant's agent whose model made the call.
	Agent string `json:"agent"`
	// AgentVersion is the version of its definition the turn ran with.
	AgentVersion int `json:"agentVersion"`
	// Tool is the name of the HTTP tool the model called.
	Tool string `json:"tool"`
	// URL is the tool URL the platform called, as the definition has it.
	URL string `json:"url"`
	// CallID names the turn and the call: the same on every retry and for
	// an instance that takes the turn over, so a receiver executes each
	// CallID once. It is also the webhook-id and Idempotency-Key headers.
	CallID string `json:"callId"`
	// Input is the model's input, checked against the tool's input schema.
	Input json.RawMessage `json:"input"`
	// SessionID is the session the call was made in.
	SessionID string `json:"sessionId"`
	// SnapshotID is the snapshot the turn writes, when it has one.
	SnapshotID string `json:"snapshotId,omitempty"`
	// EndUser is the end user the turn ran for, if any.
	EndUser string `json:"endUser,omitempty"`
	// Resumed is set on a restart of a call the endpoint paused.
	Resumed json.RawMessage `json:"resumed,omitempty"`
}

// Expect is what a tool receiver serves: VerifyToolCall refuses a call
// made for anything else.
type Expect struct {
	// Tool is the tool name the receiver serves (required), compared
	// exactly.
	Tool string
	// URL is the tool URL the receiver serves, as the tenant's definition
	// has it (required; see VerifyToolCall for how it is compared). It is
	// configured, not taken from the request, which a proxy may rewrite.
	URL string
	// Tenant, when not empty, is the only tenant id accepted.
	Tenant string
	// Tolerance is how far webhook-timestamp may be from now (default five
	// minutes).
	Tolerance time.Duration
	// Now is the time the timestamp is checked against (zero: time.Now()).
	Now time.Time
}

// The errors VerifyToolCall wraps, so that a receiver answers 401 to a call
// it cannot authenticate and 403 to a signed call made for another tool.
var (
	// ErrBadSignature: the signature, the timestamp or a header is missing
	// or wrong (answer 401).
	ErrBadSignature = errors.New("tool call: bad signature")
	// ErrWrongTarget: a genuine call made for another tool, URL or tenant,
	// or whose ids disagree (answer 403).
	ErrWrongTarget = errors.New("tool call: not made for this receiver")
)

// VerifyToolCall is what a tool receiver does with a call before acting on
// it, and the only check it needs: it verifies the Standard Webhooks
// signature and timestamp of body against any of secrets (as Verify does),
// then parses body and refuses it unless it was made for want.Tool at
// want.URL (and want.Tenant, when set), and returns the call. Execute each
// returned CallID at most once.
//
// URLs are compared normalized: the scheme and host lower-cased, a
// trailing dot of the host dropped, a port equal to the scheme's default
// (443, 80) dropped, an empty path read as "/", and the path compared in
// its escaped form, exactly (case and trailing slash count). The query is
// not compared; the tool name tells tools that share a path apart. The
// webhook-id header and an Idempotency-Key header, when present, must
// equal callId. Errors wrap ErrBadSignature or ErrWrongTarget; a signed
// body that is not a tool call wraps neither.
//
// Verify alone proves only that the platform signed the body for some
// call of the tenant's: a call the model made to a harmless tool verifies
// at every other endpoint of the tenant. Tool receivers must use
// VerifyToolCall.
func VerifyToolCall(secrets [][]byte, r *http.Request, body []byte, want Expect) (*ToolCall, error) {
	if want.Tool == "" || want.URL == "" {
		return nil, errors.New("tool call: Expect needs the Tool and the URL the receiver serves")
	}
	wantURL, err := normalizeToolURL(want.URL)
	if err != nil {
		return nil, fmt.Errorf("tool call: Expect.URL: %w", err)
	}
	now := want.Now
	if now.IsZero() {
		now = time.Now()
	}
	if err := Verify(secrets, r.Header, body, now, want.Tolerance); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	var c ToolCall
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("tool call: the body is not a tool call: %v", err)
	}
	if c.Tool != want.Tool {
		return nil, fmt.Errorf("%w: it was made for tool %q, this receiver serves %q", ErrWrongTarget, c.Tool, want.Tool)
	}
	if got, err := normalizeToolURL(c.URL); err != nil || got != wantURL {
		return nil, fmt.Errorf("%w: it was made for URL %q, this receiver serves %q", ErrWrongTarget, c.URL, want.URL)
	}
	if want.Tenant != "" && c.Tenant != want.Tenant {
		return nil, fmt.Errorf("%w: it was made for tenant %q", ErrWrongTarget, c.Tenant)
	}
	if c.CallID == "" || c.CallID != r.Header.Get(headerID) {
		return nil, fmt.Errorf("%w: callId %q is not the webhook-id", ErrWrongTarget, c.CallID)
	}
	if k := r.Header.Get(headerIdempotencyKey); k != "" && k != c.CallID {
		return nil, fmt.Errorf("%w: the Idempotency-Key header is not the callId", ErrWrongTarget)
	}
	return &c, nil
}

// normalizeToolURL is the form VerifyToolCall compares URLs in:
// scheme://host[:port]/path, the query and fragment dropped.
func normalizeToolURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if !u.IsAbs() || u.Host == "" {
		return "", fmt.Errorf("URL %q is not absolute", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	host := normalizeHost(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, port)
		host = strings.TrimSuffix(host, ":") // an IPv6 host without a port: [::1]
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}
