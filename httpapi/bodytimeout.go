package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultBodyTimeout is how long a client has to send a request body unless
// Options says otherwise.
const DefaultBodyTimeout = 10 * time.Second

// unreadBodyLinger bounds how long the server goes on reading a body it
// answered without reading (the client's pace no longer matters after).
const unreadBodyLinger = time.Second

// boundBody gives a request body BodyTimeout, counted from the start of
// the request, to arrive in full; the connection's read deadline does it,
// so a client trickling bytes cannot hold a connection. The deadline is
// lifted once the body has been read to its end, so a streamed answer or a
// long turn afterwards is not cut. A body still unread when the handler
// is done (a 401, 403, 404, 429 before the handler reads it) gets a last
// second: Go's server reads up to 256 KiB of what is left before it sends
// the answer, to keep the connection; at a trickling client's pace that
// read times out, and the server answers and closes the connection. (A body
// too large to read is not read: Go answers and closes, lingering so that
// the client can read the answer.) It runs first of all middleware, so the
// handler is done when it finishes.
func (a *api) boundBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
			return next(c)
		}
		res := c.Response()
		rc := http.NewResponseController(res.Writer)
		if err := rc.SetReadDeadline(time.Now().Add(a.opts.BodyTimeout)); err != nil {
			// A writer without a connection (httptest.ResponseRecorder):
			// there is nothing to hold.
			return next(c)
		}
		body := &timedBody{ReadCloser: req.Body, rc: rc, timeout: a.opts.BodyTimeout}
		req.Body = body
		err := next(c)
		if !body.eof.Load() {
			// The answer is still buffered: Go sends it after its read of
			// the rest of the body, which this bounds.
			_ = rc.SetReadDeadline(time.Now().Add(unreadBodyLinger))
		}
		return err
	}
}

// timedBody is a request body under boundBody's deadline.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	// eof is set once the body has been read to its end.
	eof atomic.Bool
}

// Read reads the body, lifts the deadline at its end, and turns an expired
// deadline into the client's 408.
func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if b.eof.CompareAndSwap(false, true) {
			// The server is about to watch the connection for the client
			// going away (a read that would fail at the deadline and
			// cancel the request); this lifts the deadline of that read.
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case err != nil && isTimeout(err):
		err = &edgeError{
			httpStatus: http.StatusRequestTimeout,
			code:       codeDeadlineExceeded,
			message:    fmt.Sprintf("the request body did not arrive within %s", b.timeout),
		}
	}
	return n, err
}

// isTimeout reports whether err is an expired read deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
