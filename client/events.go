package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// Event is one event of the tenant's live stream (GET /api/v1/events):
// one definition, shared with the server (protocol.Event). Its ID is what
// a stream resumes after.
type Event = protocol.Event

// Defaults of the event stream's reconnection.
const (
	// DefaultReconnectDelay is the first wait before reconnecting when
	// neither EventsOptions nor the server says otherwise.
	DefaultReconnectDelay = time.Second
	// DefaultMaxReconnectDelay bounds the wait between two attempts.
	DefaultMaxReconnectDelay = 30 * time.Second
)

// EventsOptions select and tune an event stream.
type EventsOptions struct {
	// Agent, Tool and Types keep only matching events.
	Agent string
	Tool  string
	Types []string
	// After resumes the stream after this event id: every later event is
	// replayed from the server's log first.
	After string
	// ReconnectDelay is the first wait before reconnecting (default: what
	// the server asks for with retry:, else DefaultReconnectDelay); it
	// doubles on each failed attempt up to MaxReconnectDelay (default
	// DefaultMaxReconnectDelay), with jitter.
	ReconnectDelay    time.Duration
	MaxReconnectDelay time.Duration
	// MaxAttempts gives up after that many failed connection attempts in a
	// row, yielding the last error (0: keep trying while ctx lasts).
	MaxAttempts int
	// OnReconnect, when set, is called before each wait to reconnect with
	// why the connection ended or failed, the attempt number (1 for the
	// first retry after a working connection) and the wait.
	OnReconnect func(cause error, attempt int, wait time.Duration)
}

// seenWindow is how many recent event ids a stream remembers to drop a
// repeat, should a server ever send one across a reconnection.
const seenWindow = 1024

// Events streams the tenant's live events. When the connection drops (or
// the server ends the stream, or answers 5xx or 429), it reconnects with
// Last-Event-ID set to the last id it saw, after a bounded, growing wait,
// so the server replays what was missed: every event is yielded once, in
// order, none skipped. It ends with an error yielded: ctx's when ctx ends,
// the server's *Error for a refusal that retrying cannot cure (400, 401,
// 403, 404, 501), or the last failure after MaxAttempts. Breaking out of
// the loop closes the stream.
func (c *Client) Events(ctx context.Context, o EventsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s := &eventStream{c: c, o: o, last: o.After, seen: map[string]struct{}{}}
		s.run(ctx, yield)
	}
}

// eventStream is the state of one Events iteration across connections.
type eventStream struct {
	c     *Client
	o     EventsOptions
	last  string
	retry time.Duration // the server's retry: hint
	seen  map[string]struct{}
	order []string
}

func (s *eventStream) query() url.Values {
	q := url.Values{}
	if s.o.Agent != "" {
		q.Set("agent", s.o.Agent)
	}
	if s.o.Tool != "" {
		q.Set("tool", s.o.Tool)
	}
	if len(s.o.Types) > 0 {
		q.Set("type", strings.Join(s.o.Types, ","))
	}
	return q
}

func (s *eventStream) run(ctx context.Context, yield func(Event, error) bool) {
	attempt := 0
	for {
		connected, stop, err := s.connect(ctx, yield)
		if stop {
			return
		}
		if ctx.Err() != nil {
			yield(Event{}, ctx.Err())
			return
		}
		if connected {
			attempt = 0
		}
		attempt++
		if s.o.MaxAttempts > 0 && attempt > s.o.MaxAttempts {
			yield(Event{}, err)
			return
		}
		wait := s.backoff(attempt)
		if s.o.OnReconnect != nil {
			s.o.OnReconnect(err, attempt, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			yield(Event{}, ctx.Err())
			return
		case <-t.C:
		}
	}
}

// backoff is the wait before the attempt-th reconnection: the base
// doubled per attempt, capped, and jittered down by up to a half.
func (s *eventStream) backoff(attempt int) time.Duration {
	base := s.o.ReconnectDelay
	if base <= 0 {
		base = s.retry
	}
	if base <= 0 {
		base = DefaultReconnectDelay
	}
	maxWait := s.o.MaxReconnectDelay
	if maxWait <= 0 {
		maxWait = DefaultMaxReconnectDelay
	}
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + rand.N(d/2+1)
}

// retryable reports whether an answer may be cured by trying again.
func retryable(e *Error) bool {
	switch e.HTTPStatus {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return e.HTTPStatus >= 500 && e.HTTPStatus != http.StatusNotImplemented
}

// connect runs one connection. connected reports whether the server took
// the subscription (200); stop whether the iteration is over (the consumer
// stopped or a final error was yielded); err why the connection ended.
func (s *eventStream) connect(ctx context.Context, yield func(Event, error) bool) (connected, stop bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := s.c.newRequest(ctx, http.MethodGet, "/api/v1/events", s.query(), nil, "text/event-stream")
	if err != nil {
		yield(Event{}, err)
		return false, true, err
	}
	req.Header.Set("Cache-Control", "no-cache")
	if s.last != "" {
		req.Header.Set("Last-Event-ID", s.last)
	}
	res, err := s.c.http.Do(req)
	if err != nil {
		return false, false, fmt.Errorf("holdpoint: events: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e := errorFromResponse(res)
		if !retryable(e) {
			yield(Event{}, e)
			return false, true, e
		}
		return false, false, e
	}
	r := newSSEReader(res.Body)
	for {
		ev, err := r.next()
		if err != nil {
			return true, false, fmt.Errorf("holdpoint: events: connection ended: %w", err)
		}
		if ev.retry > 0 {
			s.retry = time.Duration(ev.retry) * time.Millisecond
		}
		if ev.hasID && ev.id != "" {
			s.last = ev.id
		}
		if ev.data == "" {
			continue // an id-only frame moves the position; nothing to yield
		}
		var e Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			err = fmt.Errorf("holdpoint: events: bad event: %w", err)
			yield(Event{}, err)
			return true, true, err
		}
		if e.ID == "" {
			e.ID = ev.id
		}
		if e.Type == "" {
			e.Type = ev.event
		}
		if s.remember(e.ID) {
			continue
		}
		if !yield(e, nil) {
			return true, true, errors.New("holdpoint: events: stopped")
		}
	}
}

// remember records id and reports whether it was seen already.
func (s *eventStream) remember(id string) bool {
	if id == "" {
		return false
	}
	if _, ok := s.seen[id]; ok {
		return true
	}
	s.seen[id] = struct{}{}
	s.order = append(s.order, id)
	if len(s.order) > seenWindow {
		delete(s.seen, s.order[0])
		s.order = s.order[1:]
	}
	return false
}
