package httptool

import "fmt"

// Kind classifies a failed call.
type Kind string

// The kinds of failed call.
const (
	// KindRefused: the URL or the address it resolved to is not allowed
	// (SSRF), or the tool URL answered a redirect. Never retried.
	KindRefused Kind = "refused"
	// KindNetwork: the connection failed, was reset or closed early, the
	// host did not resolve, or TLS failed; also a call the caller's context
	// canceled. Retried, except a TLS certificate error and a cancellation.
	KindNetwork Kind = "network"
	// KindTimeout: an attempt outlived its timeout (retried), or the
	// caller's context deadline passed (not retried).
	KindTimeout Kind = "timeout"
	// KindStatus: a non-2xx, non-3xx status (4xx are never retried; 5xx are,
	// and this is the last one).
	KindStatus Kind = "status"
	// KindTooLarge: a 2xx response body larger than Client.MaxBody. Not
	// retried.
	KindTooLarge Kind = "too_large"
)

// CallError is a failed call; Result is still filled as far as known.
// Status is the HTTP status of the last attempt (0 when none answered) and
// Attempts the number of attempts made (0 when the URL was refused before
// any). When the caller's context ended the call, errors.Is(err,
// context.Canceled) or errors.Is(err, context.DeadlineExceeded) holds.
type CallError struct {
	Kind     Kind
	Status   int
	Attempts int
	Err      error
	// MayHaveRun: a request went out in full and no answer came back
	// (a timeout, a cut connection, the caller's context ended): the
	// endpoint may have acted on it. Its call id lets it dedupe a retry.
	MayHaveRun bool
}

// Error describes the failure: its kind, the attempts made and the cause.
func (e *CallError) Error() string {
	msg := "unknown error"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Kind == KindRefused {
		return "tool call refused: " + msg
	}
	plural := "s"
	if e.Attempts == 1 {
		plural = ""
	}
	return fmt.Sprintf("tool call failed (%s, %d attempt%s): %s", e.Kind, e.Attempts, plural, msg)
}

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// PolicyRefusal reports whether the address policy refused the call (its
// URL, or an address its host resolved to), not a redirect the URL
// answered. Such a refusal is permanent for the URL and the policy, and
// Err names the host and the address: log it, and show callers a text
// without them.
func (e *CallError) PolicyRefusal() bool { return e.Kind == KindRefused && e.Status == 0 }
