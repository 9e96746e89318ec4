package httpapi

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/internal/cursor"
	"github.com/holdpoint/holdpoint/service"
)

// toolCallPage is one page of a session's tool calls.
type toolCallPage struct {
	Items      []service.ToolCallRecord `json:"items"`
	NextCursor string                   `json:"nextCursor,omitempty"`
}

// sessionToolCalls answers a page of the tool calls a session's turns
// made, oldest first: GET /api/v1/sessions/:id/tool-calls.
func (a *api) sessionToolCalls(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	// A session id is any client string: it arrives escaped in the path.
	sessionID, err := pathParam(c, "id")
	if err != nil {
		return service.Errorf(service.CodeNotFound, "session not found")
	}
	limit := defaultInboxPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > service.MaxToolCallPage {
			return invalid("limit must be an integer from 1 to %d", service.MaxToolCallPage)
		}
		limit = n
	}
	var after *service.ToolCallCursor
	if v := c.QueryParam("cursor"); v != "" {
		if after, err = decodeToolCallCursor(v); err != nil {
			return err
		}
	}
	items, err := a.rt.SessionToolCalls(c.Request().Context(), caller, sessionID, after, limit)
	if err != nil {
		return err
	}
	page := toolCallPage{Items: items}
	if page.Items == nil {
		page.Items = []service.ToolCallRecord{}
	}
	if len(items) == limit {
		last := items[len(items)-1]
		page.NextCursor = encodeToolCallCursor(service.ToolCallCursor{StartedAt: last.StartedAt, TurnID: last.TurnID, CallKey: last.CallKey})
	}
	return writeJSON(c, page)
}

// interruptToolCalls answers the tool calls of the turn that paused on an
// interrupt and of the turn that resumed it:
// GET /api/v1/interrupts/:id/tool-calls.
func (a *api) interruptToolCalls(c echo.Context) error {
	return interruptItems(a, c, a.rt.InterruptToolCalls)
}

// encodeToolCallCursor makes the opaque keyset cursor of a tool call page.
func encodeToolCallCursor(cur service.ToolCallCursor) string {
	return cursor.Encode(cur.StartedAt.UTC().Format(time.RFC3339Nano), cur.TurnID, cur.CallKey)
}

// decodeToolCallCursor reads a cursor made by encodeToolCallCursor.
func decodeToolCallCursor(s string) (*service.ToolCallCursor, error) {
	bad := invalid("%s", cursor.ErrMalformed)
	f, err := cursor.Decode(s, 3)
	if err != nil {
		return nil, bad
	}
	at, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil {
		return nil, bad
	}
	return &service.ToolCallCursor{StartedAt: at, TurnID: f[1], CallKey: f[2]}, nil
}

// validText reports whether s can reach the database as text: valid UTF-8
// without NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
