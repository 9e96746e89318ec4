package httpapi

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// registerToolCalls adds the routes of one tool call and of the decisions
// on a call whose outcome is unknown (it may have run): confirm it ran
// (with its outcome), cancel it, or retry it once with the same call id.
// Like the inbox's decisions they take an admin key (or the dashboard).
func (a *api) registerToolCalls(g *echo.Group) {
	g.GET("/tool-calls/:id", a.getToolCall)
	g.POST("/tool-calls/:id/confirm", a.confirmToolCall)
	g.POST("/tool-calls/:id/cancel", a.cancelToolCall)
	g.POST("/tool-calls/:id/retry", a.retryToolCall)
}

// toolCallID reads the :id path parameter. An id that is not a UUID names
// no call: 404, like an unknown one.
func toolCallID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil || len(c.Param("id")) != 36 {
		return uuid.Nil, service.Errorf(service.CodeNotFound, "tool call not found")
	}
	return id, nil
}

// getToolCall answers one tool call: GET /api/v1/tool-calls/:id.
func (a *api) getToolCall(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	id, err := toolCallID(c)
	if err != nil {
		return err
	}
	rec, err := a.inbox.GetToolCall(c.Request().Context(), caller, id)
	if err != nil {
		return err
	}
	return writeJSON(c, rec)
}

// confirmToolCall records that an unknown call ran, with its outcome:
// POST /api/v1/tool-calls/:id/confirm {"output": ..., "note": ...}.
func (a *api) confirmToolCall(c echo.Context) error {
	caller, id, req, err := a.beginToolDecision(c, true)
	if err != nil {
		return err
	}
	rec, err := a.inbox.ConfirmToolCall(c.Request().Context(), caller, id, req.Output, noteOf(req))
	if err != nil {
		return err
	}
	return writeJSON(c, rec)
}

// cancelToolCall records that an unknown call runs no more:
// POST /api/v1/tool-calls/:id/cancel {"note": ...}.
func (a *api) cancelToolCall(c echo.Context) error {
	caller, id, req, err := a.beginToolDecision(c, false)
	if err != nil {
		return err
	}
	rec, err := a.inbox.CancelToolCall(c.Request().Context(), caller, id, noteOf(req))
	if err != nil {
		return err
	}
	return writeJSON(c, rec)
}

// retryToolCall runs an unknown call once more with the same call id and
// answers its recorded outcome: POST /api/v1/tool-calls/:id/retry.
func (a *api) retryToolCall(c echo.Context) error {
	caller, id, req, err := a.beginToolDecision(c, false)
	if err != nil {
		return err
	}
	rec, err := a.inbox.RetryToolCall(c.Request().Context(), caller, id, noteOf(req))
	if err != nil {
		return err
	}
	return writeJSON(c, rec)
}

// beginToolDecision resolves the caller and the call id and decodes the
// body: confirm requires an output; cancel and retry take none (their body
// may be empty).
func (a *api) beginToolDecision(c echo.Context, withOutput bool) (service.Caller, uuid.UUID, decisionRequest, error) {
	var req decisionRequest
	caller, err := a.opts.Caller(c)
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	id, err := toolCallID(c)
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	want := `{"note": ...}`
	if withOutput {
		want = `{"output": ..., "note": ...}`
	}
	present, err := decodeBody(c, &req, want, true)
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	switch {
	case withOutput && (!present || req.Output == nil || string(req.Output) == "null"):
		return caller, uuid.Nil, req, invalid("output is required: the outcome the call had, as %s", want)
	case !withOutput && req.Output != nil:
		return caller, uuid.Nil, req, invalid("only confirm takes an output; expected %s", want)
	case req.Note != nil && utf8.RuneCountInString(*req.Note) > maxNoteLength:
		return caller, uuid.Nil, req, invalid("note must be at most %d characters", maxNoteLength)
	case req.Note != nil && !validText(*req.Note):
		return caller, uuid.Nil, req, invalid("note must be UTF-8 text without NUL")
	}
	if withOutput && !json.Valid(req.Output) {
		return caller, uuid.Nil, req, invalid("output must be JSON")
	}
	return caller, id, req, nil
}
