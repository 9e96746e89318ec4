package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
)

// ErrStreamAbandoned is what Stream.Response returns when the loop over
// Chunks stopped early: the request was cancelled, and with it the turn.
var ErrStreamAbandoned = errors.New("holdpoint: the stream was abandoned before its result")

// Stream is one streamed turn. Range over Chunks once, to the end, then
// read Response; breaking out of the loop cancels the turn.
type Stream struct {
	ctx   context.Context
	chat  *Chat
	input Input

	started bool
	done    bool
	resp    *Response
	err     error
}

// frame is one data frame of a turn stream: a chunk, the result, or an
// error.
type frame struct {
	Message *Chunk     `json:"message"`
	Result  *Output    `json:"result"`
	Error   *wireError `json:"error"`
}

// Chunks sends the turn and yields its chunks as they arrive. A failure
// (an HTTP error, an error frame after the 200, a lost connection) is
// yielded once as an error, which Response returns too.
func (s *Stream) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if s.started || s.done {
			if s.err != nil && !s.started {
				s.started = true
				yield(Chunk{}, s.err)
			}
			return
		}
		s.started = true
		s.resp, s.err = s.run(yield)
		s.done = true
		if s.err != nil && !errors.Is(s.err, ErrStreamAbandoned) {
			yield(Chunk{}, s.err)
		}
	}
}

// Response returns the turn's answer once the stream ended; if Chunks was
// not ranged over, it runs the turn and drops its chunks. A turn that
// failed returns its Response and an *Error, as Chat.Send does.
func (s *Stream) Response() (*Response, error) {
	if !s.done {
		for range s.Chunks() {
		}
	}
	return s.resp, s.err
}

// run sends the request and reads the stream, yielding chunks.
func (s *Stream) run(yield func(Chunk, error) bool) (*Response, error) {
	ch := s.chat
	c := ch.agent.c
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	rollback := ch.begin(s.input)
	req, err := c.newRequest(ctx, http.MethodPost, ch.agent.path(""), nil, envelope{Data: s.input, Init: ch.init()}, "text/event-stream")
	if err != nil {
		rollback()
		return nil, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		rollback()
		return nil, fmt.Errorf("holdpoint: stream %s: %w", ch.agent.name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		rollback()
		return nil, errorFromResponse(res)
	}
	if !isStream(res.Header.Get("Content-Type")) {
		// A server may answer JSON even when asked for a stream.
		var body struct {
			Result *Output `json:"result"`
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Result == nil {
			rollback()
			return nil, fmt.Errorf("holdpoint: stream %s: an answer that is neither a stream nor a result", ch.agent.name)
		}
		return ch.finish(body.Result, rollback)
	}
	resp, err := s.readFrames(ctx, newSSEReader(res.Body), res.Header.Get("X-Request-Id"), yield)
	if err != nil {
		rollback()
		return nil, err
	}
	return ch.finish(resp, rollback)
}

// isStream reports whether an answer's content type is a stream of
// frames: text/event-stream, or text/plain as the Genkit JS reference
// server sends the same "data: ..." frames.
func isStream(contentType string) bool {
	return strings.HasPrefix(contentType, "text/event-stream") || strings.HasPrefix(contentType, "text/plain")
}

// readFrames yields the stream's message chunks until its result frame,
// which it returns, or an error frame, the end of the body or the caller
// leaving.
func (s *Stream) readFrames(ctx context.Context, r *sseReader, requestID string, yield func(Chunk, error) bool) (*Output, error) {
	name := s.chat.agent.name
	for {
		ev, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errStreamEnded
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("holdpoint: stream %s: %w", name, err)
		}
		if ev.data == "" {
			continue
		}
		var f frame
		if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
			return nil, fmt.Errorf("holdpoint: stream %s: bad frame: %w", name, err)
		}
		switch {
		case f.Error != nil:
			return nil, f.Error.toError(http.StatusOK, requestID)
		case f.Result != nil:
			return f.Result, nil
		case f.Message != nil:
			if !yield(*f.Message, nil) {
				return nil, ErrStreamAbandoned
			}
		}
	}
}
