package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// envelope is the body of every protocol POST, as the Genkit client sends
// it: {"data": input, "init": init}. Other members are ignored so a newer
// client that adds one keeps working.
type envelope struct {
	Data json.RawMessage `json:"data"`
	Init json.RawMessage `json:"init"`
}

// resultBody is the successful answer of every protocol POST.
type resultBody struct {
	Result any `json:"result"`
}

// agentInfo describes an agent in the listing.
type agentInfo struct {
	Name          string `json:"name"`
	Description   string `json:"description,omitempty"`
	ServerManaged bool   `json:"serverManaged"`
}

// listAgents answers the registered agents, so a client or operator can
// discover what this server runs.
func (a *api) listAgents(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	names, err := a.rt.AgentNamesFor(ctx, caller)
	if err != nil {
		return err
	}
	out := make([]agentInfo, 0, len(names))
	for _, n := range names {
		ag, err := a.rt.LookupFor(ctx, caller, n)
		if err != nil || ag.Disabled {
			continue // gone in between; nothing to show
		}
		out = append(out, agentInfo{Name: ag.Name, Description: ag.Description, ServerManaged: ag.ServerManaged})
	}
	return c.JSON(http.StatusOK, map[string]any{"agents": out})
}

// invoke runs one turn: POST {base}/:agent.
func (a *api) invoke(c echo.Context) error {
	if a.opts.Streams != nil && wantsStream(c) && rejoining(c) {
		return a.rejoin(c)
	}
	caller, name, env, err := a.begin(c)
	if err != nil {
		return err
	}
	var input service.AgentInput
	if err := decodeMember(env.Data, "data", &input); err != nil {
		return err
	}
	var init service.AgentInit
	if err := decodeMember(env.Init, "init", &init); err != nil {
		return err
	}
	ctx := c.Request().Context() // cancelled when the client disconnects

	if !wantsStream(c) {
		out, err := a.rt.InvokeOne(ctx, caller, name, init, input, nil)
		if err != nil {
			return err
		}
		if out.Error != nil && out.Error.Status == service.CodeUnavailable {
			// A turn that failed on the database outage: the protocol
			// answers 200 with the failure, and the header still says
			// when trying again makes sense.
			setRetryAfter(c, service.AsError(service.ErrUnavailable))
		}
		return writeJSON(c, resultBody{Result: out})
	}

	if a.opts.Streams != nil {
		return a.invokeDurable(c, caller, name, init, input)
	}
	// The 200 and the stream headers go out with the first frame, so an
	// error found before any output still gets its own status code.
	var writeErr error
	sink := func(chunk service.StreamChunk) {
		if writeErr != nil {
			return // the client is gone; the turn ends with the context
		}
		if writeErr = writeFrame(c, messageFrame{Message: chunk}); writeErr != nil {
			a.log.Debug("stream chunk not delivered", "err", writeErr, "request_id", requestID(c))
		}
	}
	out, err := a.rt.InvokeOne(ctx, caller, name, init, input, sink)
	if err != nil {
		return err // handleError sends an error frame once the stream started
	}
	if writeErr != nil {
		return nil
	}
	return writeFrame(c, resultFrame{Result: out})
}

// getSnapshot answers a snapshot by id or a session's latest:
// POST {base}/:agent/getSnapshot.
func (a *api) getSnapshot(c echo.Context) error {
	caller, name, env, err := a.begin(c)
	if err != nil {
		return err
	}
	var lookup service.SnapshotLookup
	if err := decodeMember(env.Data, "data", &lookup); err != nil {
		return err
	}
	if (lookup.SnapshotID == "") == (lookup.SessionID == "") {
		return invalid("data must carry exactly one of snapshotId and sessionId")
	}
	snap, err := a.rt.GetSnapshot(c.Request().Context(), caller, name, lookup)
	if err != nil {
		return err
	}
	return writeJSON(c, resultBody{Result: snap})
}

// abortRequest is the data of an abort.
type abortRequest struct {
	SnapshotID string `json:"snapshotId"`
}

// abort flips a pending snapshot to aborted: POST {base}/:agent/abort.
func (a *api) abort(c echo.Context) error {
	caller, name, env, err := a.begin(c)
	if err != nil {
		return err
	}
	var req abortRequest
	if err := decodeMember(env.Data, "data", &req); err != nil {
		return err
	}
	if req.SnapshotID == "" {
		return invalid("data.snapshotId is required")
	}
	res, err := a.rt.Abort(c.Request().Context(), caller, name, req.SnapshotID)
	if err != nil {
		return err
	}
	return writeJSON(c, resultBody{Result: res})
}

// begin does what every protocol POST starts with: resolve the caller, check
// the agent exists (404 before the envelope is decoded), and decode the
// envelope.
func (a *api) begin(c echo.Context) (service.Caller, string, envelope, error) {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return service.Caller{}, "", envelope{}, err
	}
	name := c.Param("agent")
	if _, err := a.rt.LookupFor(c.Request().Context(), caller, name); err != nil {
		return service.Caller{}, "", envelope{}, err
	}
	env, err := readEnvelope(c)
	if err != nil {
		return service.Caller{}, "", envelope{}, err
	}
	return caller, name, env, nil
}

// readEnvelope reads the (size-limited) body and decodes its envelope.
func readEnvelope(c echo.Context) (envelope, error) {
	const want = `{"data": ..., "init": ...}`
	var env envelope
	present, err := decodeBody(c, &env, want, false)
	if err == nil && !present {
		err = invalid("request body is empty: expected a JSON object %s", want)
	}
	return env, err
}

// streamsTurn reports whether the request is a turn (POST {base}/:agent)
// that asked for an event stream: its errors are answered in the stream.
func (a *api) streamsTurn(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Path() == a.opts.BasePath+"/:agent" && wantsStream(c)
}

// wantsStream reports whether the client asked for an event stream, as the
// Genkit client does with its Accept header.
func wantsStream(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), mimeEventStream) ||
		c.QueryParam("stream") == "true"
}

// writeJSON sends a 200 JSON answer. It encodes before writing anything so
// an encoding failure still reaches the error handler as a clean 500.
func writeJSON(c echo.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	if err := c.JSONBlob(http.StatusOK, b); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}
