package httpapi

import (
	"context"
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
	return answerByID(a, c, toolCallID, a.inbox.GetToolCall)
}

// confirmToolCall records that an unknown call ran, with its outcome:
// POST /api/v1/tool-calls/:id/confirm {"output": ..., "note": ...}.
func (a *api) confirmToolCall(c echo.Context) error {
	return a.answerToolDecision(c, true, a.inbox.ConfirmToolCall)
}

// cancelToolCall records that an unknown call runs no more:
// POST /api/v1/tool-calls/:id/cancel {"note": ...}.
func (a *api) cancelToolCall(c echo.Context) error {
	return a.answerToolDecision(c, false, withoutOutput(a.inbox.CancelToolCall))
}

// retryToolCall runs an unknown call once more with the same call id and
// answers its recorded outcome: POST /api/v1/tool-calls/:id/retry.
func (a *api) retryToolCall(c echo.Context) error {
	return a.answerToolDecision(c, false, withoutOutput(a.inbox.RetryToolCall))
}

// toolDecideFunc is the inbox's ConfirmToolCall, or CancelToolCall or
// RetryToolCall as withoutOutput makes them.
type toolDecideFunc func(ctx context.Context, c service.Caller, id uuid.UUID, output json.RawMessage, note string) (*service.ToolCallRecord, error)

// withoutOutput is decide as a toolDecideFunc, which ignores the output
// (beginToolDecision refuses one where decide takes none).
func withoutOutput(decide func(ctx context.Context, c service.Caller, id uuid.UUID, note string) (*service.ToolCallRecord, error)) toolDecideFunc {
	return func(ctx context.Context, c service.Caller, id uuid.UUID, _ json.RawMessage, note string) (*service.ToolCallRecord, error) {
		return decide(ctx, c, id, note)
	}
}

// answerToolDecision makes the decision toolDecision makes and answers the
// call's record as JSON.
func (a *api) answerToolDecision(c echo.Context, withOutput bool, decide toolDecideFunc) error {
	rec, err := a.toolDecision(c, withOutput, decide)
	if err != nil {
		return err
	}
	return writeJSON(c, rec)
}

// toolDecision resolves the caller and the call the path names, checks the
// decision body (see beginToolDecision) and makes the decision with
// decide, given the body's output and note.
func (a *api) toolDecision(c echo.Context, withOutput bool, decide toolDecideFunc) (*service.ToolCallRecord, error) {
	caller, id, req, err := a.beginToolDecision(c, withOutput)
	if err != nil {
		return nil, err
	}
	return decide(c.Request().Context(), caller, id, req.Output, noteOf(req))
}

// beginToolDecision resolves the caller and the call id and decodes the
// body: confirm requires an output; cancel and retry take none (their body
// may be empty).
func (a *api) beginToolDecision(c echo.Context, withOutput bool) (service.Caller, uuid.UUID, decisionRequest, error) {
	want := `{"note": ...}`
	if withOutput {
		want = `{"output": ..., "note": ...}`
	}
	return a.beginBody(c, toolCallID, want, func(present bool, req decisionRequest) error {
		switch {
		case withOutput && (!present || req.Output == nil || string(req.Output) == "null"):
			return invalid("output is required: the outcome the call had, as %s", want)
		case !withOutput && req.Output != nil:
			return invalid("only confirm takes an output; expected %s", want)
		case req.Note != nil && utf8.RuneCountInString(*req.Note) > maxNoteLength:
			return invalid("note must be at most %d characters", maxNoteLength)
		case req.Note != nil && !validText(*req.Note):
			return invalid("note must be UTF-8 text without NUL")
		case withOutput && !json.Valid(req.Output):
			return invalid("output must be JSON")
		}
		return nil
	})
}
