package httpapi

import (
	"encoding/json"

	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/streams"
)

// Durable streams (see service/streams): a streaming turn answers with the
// header x-genkit-stream-id, and a POST to the same endpoint with that
// header joins the stream again from its start, as the Genkit client does
// (streamFlow with streamId); Last-Event-ID (`<stream id>:<seq>`, or
// `<seq>` next to x-genkit-stream-id) joins it after that frame. An unknown
// stream, or one the caller may not read, answers 204.

// headerStreamID names a durable stream, in the answer and in a rejoin.
const headerStreamID = "x-genkit-stream-id"

// headerLastEventID is the SSE reconnection header.
const headerLastEventID = "Last-Event-ID"

// rejoining reports whether a streaming request joins a stream rather
// than starting a turn.
func rejoining(c echo.Context) bool {
	h := c.Request().Header
	return h.Get(headerStreamID) != "" || h.Get(headerLastEventID) != ""
}

// wantsEventIDs reports whether the frames get `id:` lines: the Genkit
// client reads only `data:` lines, so only a client that asks gets them,
// with ?ids=true or by rejoining with Last-Event-ID. A frame's seq is its
// position in the stream (from 1) either way.
func wantsEventIDs(c echo.Context) bool {
	return c.QueryParam("ids") == "true" || c.Request().Header.Get(headerLastEventID) != ""
}

// eventID is the SSE id of a frame, or "" when the client gets none.
func eventID(id uuid.UUID, seq int, send bool) string {
	if !send || seq <= 0 {
		return ""
	}
	return id.String() + ":" + strconv.Itoa(seq)
}

// rejoinPoint reads the stream and the position a rejoin asks for. ok is
// false for a stream id that cannot be one of ours (answered 204); a
// malformed Last-Event-ID is INVALID_ARGUMENT.
func rejoinPoint(c echo.Context) (id uuid.UUID, after int, ok bool, err error) {
	h := c.Request().Header
	sid, last := strings.TrimSpace(h.Get(headerStreamID)), strings.TrimSpace(h.Get(headerLastEventID))
	if last != "" {
		lid, seq, found := strings.Cut(last, ":")
		if !found {
			lid, seq = "", last
		}
		n, perr := strconv.Atoi(seq)
		if perr != nil || n < 0 || len(seq) > 9 || (lid == "" && sid == "") || (lid != "" && sid != "" && lid != sid) {
			return uuid.UUID{}, 0, false, invalid("Last-Event-ID must be <stream id>:<seq> (the id of a frame of the stream), or <seq> with x-genkit-stream-id")
		}
		after = n
		if lid != "" {
			sid = lid
		}
	}
	id, perr := uuid.Parse(sid)
	if perr != nil {
		return uuid.UUID{}, 0, false, nil
	}
	return id, after, true, nil
}

// rejoin sends a durable stream's frames after the requested position,
// then the live ones up to the terminal frame.
func (a *api) rejoin(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	name := c.Param("agent")
	ctx := c.Request().Context()
	if _, err := a.rt.LookupFor(ctx, caller, name); err != nil {
		return err
	}
	id, after, ok, err := rejoinPoint(c)
	if err != nil {
		return err
	}
	if ok {
		ok, err = a.opts.Streams.Lookup(ctx, caller, name, id)
		if err != nil {
			return err
		}
	}
	if !ok {
		return c.NoContent(http.StatusNoContent)
	}
	c.Response().Header().Set(headerStreamID, id.String())
	ids := wantsEventIDs(c)
	err = a.opts.Streams.Follow(ctx, caller, id, after, func(f streams.Frame) error {
		return writeTurnEvent(c, eventID(id, f.Seq, ids), f.Frame)
	})
	if ctx.Err() != nil {
		return nil // the client went
	}
	return err
}

// durableStream is the durable side of a streaming turn: every frame goes
// to the writer, and a turn that detaches carries it on (Detached).
type durableStream struct {
	w        *streams.Writer
	detached atomic.Bool
	log      func(msg string, args ...any)
}

func (d *durableStream) frame(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		d.log("encoding a stream frame failed", "err", err)
		return nil
	}
	return b
}

func (d *durableStream) Detached() { d.detached.Store(true) }

func (d *durableStream) Chunk(chunk service.StreamChunk) {
	if b := d.frame(messageFrame{Message: chunk}); b != nil {
		d.w.Append(b)
	}
}

func (d *durableStream) Done(out *service.AgentOutput) {
	d.w.Finish(d.frame(resultFrame{Result: out}))
}

// invokeDurable runs a streaming turn into a durable stream. The turn does
// not end with the connection: its frames and outcome are recorded for
// whoever rejoins.
func (a *api) invokeDurable(c echo.Context, caller service.Caller, name string, init service.AgentInit, input service.AgentInput) error {
	// The turn goes on when the client goes, and ends with the runtime.
	ctx, cancel := a.rt.Outliving(c.Request().Context())
	defer cancel()
	w, err := a.opts.Streams.Open(ctx, caller, name)
	if err != nil {
		return err
	}
	rid := requestID(c)
	ds := &durableStream{w: w, log: func(msg string, args ...any) { a.log.Error(msg, append(args, "request_id", rid)...) }}
	c.Response().Header().Set(headerStreamID, w.ID().String())
	ids := wantsEventIDs(c)
	var writeErr error
	send := func(seq int, b []byte) {
		if writeErr == nil && b != nil {
			if writeErr = writeTurnEvent(c, eventID(w.ID(), seq, ids), b); writeErr != nil {
				a.log.Debug("stream chunk not delivered; the turn goes on", "err", writeErr, "request_id", rid)
			}
		}
	}
	sink := func(chunk service.StreamChunk) {
		b := ds.frame(messageFrame{Message: chunk})
		if b != nil {
			send(w.Append(b), b)
		}
	}
	out, err := a.rt.InvokeOne(service.WithDetachedStream(ctx, ds), caller, name, init, input, sink)
	if err != nil {
		_, body, _ := classify(err)
		body.RequestID = rid
		w.Finish(ds.frame(errorFrame{Error: body}))
		if writeErr != nil {
			return nil
		}
		return err // handleError sends the same error frame
	}
	b := ds.frame(resultFrame{Result: out})
	if ds.detached.Load() {
		// The turn runs on here: this client gets the pending snapshot,
		// and the stream goes on to the turn's outcome (Done).
		send(0, b)
		return nil
	}
	// The client has its result before the stream's end is written;
	// the handler still waits for that write, so it is there for any
	// rejoin once this request is over.
	send(w.End(b), b)
	w.Wait()
	return nil
}

var _ service.DetachedStream = (*durableStream)(nil)
