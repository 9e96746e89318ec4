package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// mimeEventStream is the media type of the streaming answer.
const mimeEventStream = "text/event-stream"

// messageFrame carries one stream chunk.
type messageFrame struct {
	Message service.StreamChunk `json:"message"`
}

// resultFrame ends a stream with the invocation's output.
type resultFrame struct {
	Result *service.AgentOutput `json:"result"`
}

// errorFrame ends a stream that failed after it started.
type errorFrame struct {
	Error errorBody `json:"error"`
}

// writeFrame sends one server-sent event, `data: JSON` and a blank line, the
// framing the Genkit client splits on, and flushes it so the client sees it
// now. The first frame commits the 200 and the stream headers.
// encoding/json escapes newlines inside strings, so a frame never contains
// the blank line that would end it early.
func writeFrame(c echo.Context, frame any) error {
	b, err := json.Marshal(frame)
	if err != nil {
		return fmt.Errorf("encode stream frame: %w", err)
	}
	return writeTurnEvent(c, "", b)
}

// writeTurnEvent sends one encoded frame, with an `id:` line before its data
// when id is not empty (see writeFrame).
func writeTurnEvent(c echo.Context, id string, b []byte) error {
	res := c.Response()
	if !res.Committed {
		h := res.Header()
		h.Set(echo.HeaderContentType, mimeEventStream)
		h.Set(echo.HeaderCacheControl, "no-cache")
		// Reverse proxies such as nginx would otherwise buffer the stream.
		h.Set("X-Accel-Buffering", "no")
		res.WriteHeader(http.StatusOK)
	}
	buf := make([]byte, 0, len(b)+len(id)+13)
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := res.Write(buf); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if err := http.NewResponseController(res.Writer).Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}
