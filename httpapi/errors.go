package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// codeUnimplemented answers a known path called with the wrong method, as
// grpc-gateway does for 405.
const codeUnimplemented = "UNIMPLEMENTED"

// codeDeadlineExceeded answers a request whose body did not arrive within
// the body timeout (HTTP 408): in the canonical codes a deadline expired
// before the operation could complete, which is what happened, and it
// tells the client that retrying with a faster upload may succeed, which
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED would not.
const codeDeadlineExceeded = "DEADLINE_EXCEEDED"

// edgeError is a refusal at the HTTP edge whose HTTP status is not the one
// its canonical code maps to (408 for a slow body, 415 for a wrong media
// type); its message is public.
type edgeError struct {
	httpStatus int
	code       string
	message    string
}

// Error returns the public message.
func (e *edgeError) Error() string { return e.message }

// errWrite marks a failure to write the answer, which after a disconnect is
// expected rather than a server fault.
var errWrite = errors.New("write answer")

// statusClientClosed is logged for a request whose client went away before
// the answer; nobody reads it (the nginx convention).
const statusClientClosed = 499

// errorBody is the protocol's error answer, plus the request id so a client
// can quote it when reporting a problem.
type errorBody struct {
	Status    string          `json:"status"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
}

// httpStatus maps a canonical status code to its HTTP status.
func httpStatus(code string) int {
	switch code {
	case service.CodeInvalidArgument, service.CodeFailedPrecondition:
		return http.StatusBadRequest
	case service.CodeNotFound:
		return http.StatusNotFound
	case service.CodeAlreadyExists, service.CodeAborted:
		return http.StatusConflict
	case service.CodePermissionDenied:
		return http.StatusForbidden
	case service.CodeUnauthenticated:
		return http.StatusUnauthorized
	case service.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case service.CodeUnavailable:
		return http.StatusServiceUnavailable
	case codeUnimplemented:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// classify turns any error a handler or middleware returned into the HTTP
// status and public body, and the internal cause to log (nil when the error
// is the client's).
func classify(err error) (int, errorBody, error) {
	var edge *edgeError
	if errors.As(err, &edge) {
		return edge.httpStatus, errorBody{Status: edge.code, Message: edge.message}, nil
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge, errorBody{
			Status:  service.CodeResourceExhausted,
			Message: fmt.Sprintf("request body exceeds the limit of %d bytes", tooLarge.Limit),
		}, nil
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return he.Code, errorBody{Status: service.CodeNotFound, Message: "no such route"}, nil
		case http.StatusMethodNotAllowed:
			return he.Code, errorBody{Status: codeUnimplemented, Message: "method not allowed on this route"}, nil
		case http.StatusRequestEntityTooLarge:
			return he.Code, errorBody{Status: service.CodeResourceExhausted, Message: "request body too large"}, nil
		}
		if he.Code < 500 {
			// Echo's other client errors carry a public text only.
			msg, _ := he.Message.(string)
			if msg == "" {
				msg = http.StatusText(he.Code)
			}
			return he.Code, errorBody{Status: service.CodeInvalidArgument, Message: msg}, nil
		}
		return http.StatusInternalServerError, errorBody{Status: service.CodeInternal, Message: "internal error"}, err
	}
	e := service.AsError(err)
	var cause error
	if e.Status == service.CodeInternal || e.Status == service.CodeUnavailable {
		cause = err
	}
	body := errorBody{Status: e.Status, Message: e.Message}
	if e.Details != nil && cause == nil {
		// Details are public by contract (e.g. schema violations); an
		// internal error's are not sent, like its cause.
		if b, err := json.Marshal(e.Details); err == nil {
			body.Details = b
		}
	} else if e.Retry != nil {
		// Retry advice is public whatever the status: a 5xx says whether
		// the decision was recorded and whether to send it again.
		if b, err := json.Marshal(e.Retry); err == nil {
			body.Details = b
		}
	}
	return httpStatus(e.Status), body, cause
}

// handleError is the one place errors become answers. Before anything was
// written it sends the canonical status and body, except to a turn that
// asked for an event stream: as the Genkit reference server does, that
// stream opens (200) and carries one error frame, the only answer from
// which the Genkit client learns the status (a non-200 answer reaches its
// users as UNKNOWN). Inside an event stream it sends an error frame, the
// only way left to tell the client.
func (a *api) handleError(err error, c echo.Context) {
	rid := requestID(c)
	if c.Request().Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, errWrite)) {
		// Nobody is left to answer; this is no failure of ours.
		a.log.Info("client went away", "request_id", rid)
		if !c.Response().Committed {
			c.Response().WriteHeader(statusClientClosed)
		}
		return
	}
	status, body, cause := classify(err)
	body.RequestID = rid
	if cause != nil {
		a.log.Error("request failed", "status", body.Status, "err", cause, "request_id", rid)
	} else {
		a.log.Debug("request rejected", "status", body.Status, "message", body.Message, "request_id", rid)
	}
	res := c.Response()
	if res.Committed {
		if strings.HasPrefix(res.Header().Get(echo.HeaderContentType), mimeEventStream) {
			if werr := writeFrame(c, errorFrame{Error: body}); werr != nil {
				a.log.Debug("error frame not delivered", "err", werr, "request_id", rid)
			}
		}
		return
	}
	setRetryAfter(c, err)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if a.streamsTurn(c) {
		a.log.Debug("error answered as a stream", "http_status", status, "request_id", rid)
		if werr := writeFrame(c, errorFrame{Error: body}); werr != nil {
			a.log.Debug("error frame not delivered", "err", werr, "request_id", rid)
		}
		return
	}
	if werr := c.JSON(status, body); werr != nil {
		a.log.Debug("error answer not delivered", "err", werr, "request_id", rid)
	}
}

// setRetryAfter sends Retry-After when err asks the client to wait: a
// domain error with a RetryAfter, which a database outage (a wrapped
// service.ErrUnavailable, not itself a service.Error) becomes too.
func setRetryAfter(c echo.Context, err error) {
	var edge *edgeError
	var he *echo.HTTPError
	if errors.As(err, &edge) || errors.As(err, &he) {
		return
	}
	if d := service.AsError(err).RetryAfter; d > 0 {
		c.Response().Header().Set("Retry-After", strconv.FormatInt(int64(max(d.Round(time.Second)/time.Second, 1)), 10))
	}
}

// invalid is an INVALID_ARGUMENT error with a client-facing message.
func invalid(format string, args ...any) error {
	return service.Errorf(service.CodeInvalidArgument, format, args...)
}

// decodeMember decodes the request member name (data or init) into dst. An
// absent or null member leaves dst as is. Messages name the offending field
// and never echo Go type names.
func decodeMember(raw json.RawMessage, name string, dst any) error {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil
	}
	if trimmed[0] != '{' {
		return invalid("invalid %s: must be a JSON object, got %s", name, jsonKind(trimmed))
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Type != nil {
			field := name
			if te.Field != "" {
				field += "." + te.Field
			}
			return invalid("invalid %s: expected %s, got %s", field, service.JSONTypeName(te.Type.Kind().String()), te.Value)
		}
		// The service types' decoders return client-facing texts such as
		// "message.role must be one of user, model, tool, system".
		return invalid("invalid %s: %s", name, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// jsonKind names the JSON type of a (valid) JSON text by its first byte.
func jsonKind(text string) string {
	switch text[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
