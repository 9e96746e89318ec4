package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/service/protocol"

	"github.com/google/uuid"
)

// Canonical status codes of the protocol.
const (
	CodeInvalidArgument    = "INVALID_ARGUMENT"
	CodeFailedPrecondition = "FAILED_PRECONDITION"
	CodeNotFound           = "NOT_FOUND"
	CodeAlreadyExists      = "ALREADY_EXISTS"
	CodeAborted            = "ABORTED"
	CodePermissionDenied   = "PERMISSION_DENIED"
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeResourceExhausted  = "RESOURCE_EXHAUSTED"
	CodeUnavailable        = "UNAVAILABLE"
	CodeInternal           = "INTERNAL"
)

// Error is a domain error: a canonical status, a message safe to show to the
// client, and an internal cause that is logged but never sent.
type Error struct {
	Status  string
	Message string
	// Details is extra public information (e.g. schema violations).
	Details any
	Cause   error
	// RetryAfter, when positive, is how long the client should wait
	// before trying again (HTTP Retry-After).
	RetryAfter time.Duration
	// Retry, when set, tells a client whether the decision its request
	// carried was recorded and whether sending it again is safe; it is
	// public and sent as the error's details.
	Retry *RetryAdvice
}

// RetryAdvice is the machine-readable "what to do now" of a failed resume
// or decision (docs/durability.md, "When is a retry safe").
type RetryAdvice struct {
	// DecisionRecorded says the decision is stored: it will be carried
	// out (or was), whatever happens to this request.
	DecisionRecorded bool `json:"decisionRecorded"`
	// RetrySafe says sending the same request again cannot run a tool
	// twice: it either does the work or answers the original outcome.
	RetrySafe bool `json:"retrySafe"`
	// Retry is what to do, for a human reading the answer.
	Retry string `json:"retry"`
	// InterruptID is the decided interrupt whose outcome to read, if any.
	InterruptID string `json:"interruptId,omitempty"`
	// ResumedSnapshotID is the snapshot the decision's turn writes.
	ResumedSnapshotID string `json:"resumedSnapshotId,omitempty"`
}

// Advice texts of RetryAdvice.Retry.
const (
	RetryResend   = "send the same request again; nothing was recorded"
	RetryOutcome  = "send the same request again to get the original outcome, or read the interrupt (GET /api/v1/interrupts/{id})"
	RetryByHuman  = "do not retry: a tool may have run; a human confirms or cancels the call (/api/v1/tool-calls/{id})"
	RetryNotAgain = "do not send a different decision: the interrupt was already decided; read its outcome (GET /api/v1/interrupts/{id})"
)

// ClaimRefused is the internal cause of a refused claim: which interrupt
// another decision or resume already took.
type ClaimRefused struct {
	InterruptID uuid.UUID
	Tool, Ref   string
}

func (c *ClaimRefused) Error() string {
	return "claim of interrupt " + c.InterruptID.String() + " refused"
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Status, e.Message, e.Cause)
	}
	return e.Status + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns a domain error with a client-facing message. Agent code
// (a tool, a model, a custom turn) returns one to show its message to the
// client; any other error it returns is logged and the client gets a fixed
// message with the request id.
func Errorf(status, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is what the store returns for a missing row (or a row of
// another tenant, which looks the same).
var ErrNotFound = errors.New("not found")

// InternalError wraps an unexpected failure: the client sees a fixed text.
func InternalError(cause error) *Error {
	return &Error{Status: CodeInternal, Message: "internal error", Cause: cause}
}

// AsError converts any error to a domain error; unknown errors become
// INTERNAL with a fixed public message.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, ErrUnavailable) {
		return UnavailableError(err)
	}
	return InternalError(err)
}

// ErrUnavailable marks failures to reach the database: it is down, cut
// off, shutting down, out of connection slots, or this instance is not
// ready (see Readiness). Clients get UNAVAILABLE with a Retry-After.
var ErrUnavailable = errors.New("database unavailable")

// UnavailableRetryAfter is what an UNAVAILABLE answer asks the client to
// wait: long enough for a restarted database or a freed connection slot,
// short enough that a client does not give up on a brief blip.
const UnavailableRetryAfter = 5 * time.Second

// UnavailableMessage is the public text of every database outage. It
// promises only what holds for every request (see docs/durability.md, "Database
// outages"): the request may be sent again.
const UnavailableMessage = "the database is unavailable; the request can be retried after the Retry-After delay"

// UnavailableError is the UNAVAILABLE answer for cause.
func UnavailableError(cause error) *Error {
	return &Error{Status: CodeUnavailable, Message: UnavailableMessage, Cause: cause, RetryAfter: UnavailableRetryAfter}
}

// ErrSessionMoved is what the store returns for a write whose
// SnapshotWrite.ExpectedHead is no longer the session's latest snapshot:
// nothing was written.
var ErrSessionMoved = errors.New("the session moved since its head was cached")

// Details returns the protocol's error object for a failed turn. Internal
// causes are replaced by the fixed public message.
func Details(err error) *protocol.ErrorDetails {
	e := AsError(err)
	out := &protocol.ErrorDetails{Status: e.Status, Message: e.Message}
	if e.Details != nil {
		out.Details, _ = json.Marshal(e.Details)
	} else if e.Retry != nil {
		out.Details, _ = json.Marshal(e.Retry)
	}
	return out
}

// ErrDecisionTaken is the store's refusal of a decided batch's guard when
// another guard took one of its decisions already (a repair raced the
// decision's own turn): that guard's turn carries the decision out.
var ErrDecisionTaken = errors.New("the decision is being carried out by another turn")

// ErrTooManyPending is the store's refusal of a write whose interrupts
// would leave more pending in its session than SnapshotWrite.MaxPending:
// nothing was written.
var ErrTooManyPending = errors.New("too many interrupts pending in the session")

// ErrTooManyDetached is the store's refusal of a detached turn past its
// tenant's or credential's bound (TurnJob.TenantCap, CredentialCap):
// nothing was written.
var ErrTooManyDetached = errors.New("too many detached turns queued or running")
