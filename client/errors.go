package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Protocol statuses the server answers with (the canonical codes of the
// Genkit protocol).
const (
	StatusInvalidArgument    = "INVALID_ARGUMENT"
	StatusFailedPrecondition = "FAILED_PRECONDITION"
	StatusNotFound           = "NOT_FOUND"
	StatusAlreadyExists      = "ALREADY_EXISTS"
	StatusAborted            = "ABORTED"
	StatusPermissionDenied   = "PERMISSION_DENIED"
	StatusUnauthenticated    = "UNAUTHENTICATED"
	StatusResourceExhausted  = "RESOURCE_EXHAUSTED"
	StatusDeadlineExceeded   = "DEADLINE_EXCEEDED"
	StatusUnavailable        = "UNAVAILABLE"
	StatusUnimplemented      = "UNIMPLEMENTED"
	StatusInternal           = "INTERNAL"
	StatusUnknown            = "UNKNOWN"
)

// Error is a failure the server reported: an HTTP error answer, an error
// frame of a stream, or a turn that ended failed.
type Error struct {
	// HTTPStatus is the HTTP status of the answer: 200 for an error frame
	// of a stream or a failed turn.
	HTTPStatus int
	// Status is the protocol status, e.g. NOT_FOUND or ABORTED.
	Status string
	// Message is the server's public explanation.
	Message string
	// Details is the server's structured detail, when it sent one (e.g.
	// {"violations": [...]} for an output that breaks its schema).
	Details json.RawMessage
	// RequestID names the request in the server's log.
	RequestID string
	// RetryAfter is what a 429 or 503 asked the client to wait, if anything.
	RetryAfter time.Duration
}

// Error returns the status, message and request id.
func (e *Error) Error() string {
	s := "holdpoint: " + e.Status
	if e.HTTPStatus != 0 && e.HTTPStatus != http.StatusOK {
		s += fmt.Sprintf(" (HTTP %d)", e.HTTPStatus)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

// Is reports whether target is a sentinel of this package (ErrNotFound,
// ErrConflict, ...) that e matches.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.match(e)
}

// sentinel is a class of errors for errors.Is.
type sentinel struct {
	name  string
	match func(*Error) bool
}

func (s *sentinel) Error() string { return "holdpoint: " + s.name }

func status(code string) func(*Error) bool {
	return func(e *Error) bool { return e.Status == code }
}

// Sentinels for errors.Is(err, client.ErrNotFound) and the like.
var (
	// ErrInvalidArgument matches a request the server refused as malformed
	// or against the rules (HTTP 400, or an equivalent error frame).
	ErrInvalidArgument error = &sentinel{"invalid argument", status(StatusInvalidArgument)}
	// ErrFailedPrecondition matches a request that cannot apply to the
	// current state, such as deciding an expired interrupt.
	ErrFailedPrecondition error = &sentinel{"failed precondition", status(StatusFailedPrecondition)}
	// ErrNotFound matches an unknown agent, session, snapshot or interrupt
	// (or one the caller may not see).
	ErrNotFound error = &sentinel{"not found", status(StatusNotFound)}
	// ErrConflict matches a request that lost to another one: an interrupt
	// already decided or resumed (ABORTED), an id already taken
	// (ALREADY_EXISTS), or any HTTP 409.
	ErrConflict error = &sentinel{"conflict", func(e *Error) bool {
		return e.Status == StatusAborted || e.Status == StatusAlreadyExists || e.HTTPStatus == http.StatusConflict
	}}
	// ErrUnauthenticated matches a missing, unknown, revoked or expired
	// credential.
	ErrUnauthenticated error = &sentinel{"unauthenticated", status(StatusUnauthenticated)}
	// ErrPermissionDenied matches a valid credential on a route its role
	// may not use.
	ErrPermissionDenied error = &sentinel{"permission denied", status(StatusPermissionDenied)}
	// ErrRateLimited matches a request refused for a rate or stream limit.
	ErrRateLimited error = &sentinel{"resource exhausted", status(StatusResourceExhausted)}
	// ErrUnavailable matches a server that cannot serve now (its database
	// is down); retrying later may succeed.
	ErrUnavailable error = &sentinel{"unavailable", status(StatusUnavailable)}
)

// StatusOf returns the protocol status of err when it is (or wraps) an
// *Error, else "".
func StatusOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return ""
}

// IsNotFound reports whether err is the server's NOT_FOUND.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is a conflict (see ErrConflict): most
// often an interrupt somebody else decided first.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInvalidArgument reports whether err is the server's INVALID_ARGUMENT.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// IsUnauthenticated reports whether err is the server's UNAUTHENTICATED.
func IsUnauthenticated(err error) bool { return errors.Is(err, ErrUnauthenticated) }

// AlreadyDecidedError is the conflict of an inbox decision on an interrupt
// that was decided (or resumed) first by someone else. It wraps the
// server's *Error, so errors.As(err, &*Error) and IsConflict hold too, and
// names who decided when the interrupt could be read back.
type AlreadyDecidedError struct {
	// Err is the server's answer (status ABORTED).
	Err *Error
	// Interrupt is the interrupt as it reads now (Status, ResolvedBy,
	// ResolvedAt), or nil when it could not be read.
	Interrupt *InboxInterrupt
}

// Error says who decided first, when known.
func (e *AlreadyDecidedError) Error() string {
	if e.Interrupt != nil && e.Interrupt.ResolvedBy != "" {
		at := ""
		if e.Interrupt.ResolvedAt != nil {
			at = " at " + e.Interrupt.ResolvedAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s (already %s by %s%s)", e.Err.Error(), e.Interrupt.Status, e.Interrupt.ResolvedBy, at)
	}
	return e.Err.Error()
}

// Unwrap returns the server's error.
func (e *AlreadyDecidedError) Unwrap() error { return e.Err }

// ResolvedBy is who decided first ("" when unknown).
func (e *AlreadyDecidedError) ResolvedBy() string {
	if e.Interrupt == nil {
		return ""
	}
	return e.Interrupt.ResolvedBy
}
