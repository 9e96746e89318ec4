package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/events"
)

// eventsHeartbeat is how often an idle event stream gets a comment line, so
// proxies and load balancers do not close it as idle and a client notices a
// dead connection.
const eventsHeartbeat = 15 * time.Second

// DefaultMaxEventStreams is the serve flag --max-event-streams: how many
// live event streams one credential may hold open at once.
const DefaultMaxEventStreams = 8

// streamSlots counts the open event streams of each credential (access
// rateKey), so that one credential cannot hold an unbounded number of
// connections and hub subscriptions. Counts are per instance.
type streamSlots struct {
	limit int

	mu   sync.Mutex
	open map[string]int
}

// newStreamSlots returns slots allowing limit streams per credential, or
// nil (no limit) when limit is not positive.
func newStreamSlots(limit int) *streamSlots {
	if limit <= 0 {
		return nil
	}
	return &streamSlots{limit: limit, open: map[string]int{}}
}

// acquire takes a slot of key, reporting false when all are taken. A nil
// streamSlots always has one.
func (s *streamSlots) acquire(key string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.limit {
		return false
	}
	s.open[key]++
	return true
}

// release gives back a slot acquire took.
func (s *streamSlots) release(key string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key]--; s.open[key] <= 0 {
		delete(s.open, key)
	}
}

// Bounds of the event stream's resumption and filters.
const (
	// replayBatch is how many missed events one read of the log takes.
	replayBatch = 500
	// maxReplay bounds the events one connection replays; a listener far
	// behind gets the rest on its next reconnection.
	maxReplay = 20000
	// eventsRetryMillis is the reconnection delay the stream suggests.
	eventsRetryMillis = 1000
)

// eventFilter selects events of a stream.
type eventFilter struct {
	agent, tool string
	types       map[string]bool
}

func (f eventFilter) match(n service.Notification) bool {
	return (f.agent == "" || n.Agent == f.agent) && (f.tool == "" || n.Tool == f.tool) &&
		(len(f.types) == 0 || f.types[n.Type])
}

// parseEventFilter reads ?agent=, ?tool= and ?type= (repeated or comma
// separated).
func parseEventFilter(c echo.Context) (eventFilter, error) {
	q := c.QueryParams()
	f := eventFilter{agent: q.Get("agent"), tool: q.Get("tool")}
	for _, name := range []string{"agent", "tool"} {
		if v := q.Get(name); len(v) > maxFilterLength || !isPlainText(v) {
			return f, fieldInvalid(name, "at most %d characters of text", maxFilterLength)
		}
	}
	for _, v := range q["type"] {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !events.Known(t) {
				return f, fieldInvalid("type", "unknown event type %q: want one of %s", t, strings.Join(events.Names(), ", "))
			}
			if f.types == nil {
				f.types = map[string]bool{}
			}
			f.types[t] = true
		}
	}
	return f, nil
}

// fieldInvalid is the 400 of one bad field.
func fieldInvalid(field, format string, args ...any) error {
	e := service.Errorf(service.CodeInvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
	e.Details = map[string]any{"field": field}
	return e
}

// streamEvents pushes the caller's tenant's events as server-sent events
// until the client goes away: GET /api/v1/events. Each event is `event:
// <type>` (interrupt.created, turn.completed, ...) with the notification as
// data and its opaque id as the SSE id. A client that reconnects with
// Last-Event-ID (or ?after=ID) first gets every event after that one from
// the log, then live ones: nothing is missed across disconnections,
// restarts or instances. ?agent=, ?tool= and ?type= filter.
func (a *api) streamEvents(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if a.opts.Events == nil {
		return service.Errorf(codeUnimplemented, "live events are not enabled on this server")
	}
	filter, err := parseEventFilter(c)
	if err != nil {
		return err
	}
	st := &eventStream{c: c, events: a.opts.Events, tenant: caller.TenantID, filter: filter}
	if err := st.parseAfter(); err != nil {
		return err
	}
	acc, ok := accessOf(c)
	if !ok {
		return fmt.Errorf("no access resolved for route %s", c.Path())
	}
	if !a.streams.acquire(acc.rateKey) {
		return service.Errorf(service.CodeResourceExhausted,
			"this credential already holds %d live event streams, the most allowed: close one first", a.streams.limit)
	}
	defer a.streams.release(acc.rateKey)
	if err := awaitHub(c.Request().Context(), a.opts.Events.Ready()); err != nil {
		return err
	}
	// Subscribe before replaying: the hub hands the subscription every
	// event past its position, and the replay reads the log up to that
	// position (and maybe further: the position drops the copies).
	notes, through, cancel := a.opts.Events.Subscribe(caller.TenantID)
	defer cancel()

	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, mimeEventStream)
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	res.WriteHeader(http.StatusOK)
	// The first comment tells the client the subscription is in place.
	if err := writeEvent(c, fmt.Sprintf(": subscribed\nretry: %d\n\n", eventsRetryMillis)); err != nil {
		return err
	}
	if st.resumed {
		if done, err := st.replay(through); done || err != nil {
			return err
		}
	}
	return st.live(notes)
}

// hubStartBound is how long a stream waits for a starting hub (its first
// read of the database) before answering 503.
const hubStartBound = 30 * time.Second

// awaitHub waits until the hub knows where the event log stands
// (eventhub.Hub.Ready): a stream subscribed before that could miss the
// events written meanwhile, after telling its client it was subscribed.
func awaitHub(ctx context.Context, ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	default:
	}
	t := time.NewTimer(hubStartBound)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return service.Errorf(service.CodeUnavailable, "live events are starting (the event log cannot be read yet): retry shortly")
	}
}

// eventStream is one client's live event stream: where it is in the
// tenant's events and which of them it wants.
type eventStream struct {
	c       echo.Context
	events  *eventhub.Hub
	tenant  string
	filter  eventFilter
	pos     service.EventPos
	resumed bool // the client gave a position to resume after
}

// parseAfter reads the position to resume after: Last-Event-ID, which is
// what the client saw last on this stream, wins over ?after.
func (st *eventStream) parseAfter() error {
	after, field := st.c.QueryParam("after"), "after"
	if h := st.c.Request().Header.Get("Last-Event-ID"); h != "" {
		after, field = h, "Last-Event-ID"
	}
	if after == "" {
		return nil
	}
	p, ok, err := st.events.ParseEventID(st.c.Request().Context(), st.tenant, after)
	if err != nil {
		return err
	}
	if !ok {
		return fieldInvalid(field, "not the id of an event of this tenant")
	}
	st.pos, st.resumed = p, true
	return nil
}

// send writes one event the filter lets through; every event moves the
// position.
func (st *eventStream) send(n service.Notification) error {
	st.pos = n.Pos
	if !st.filter.match(n) {
		return nil
	}
	b, err := json.Marshal(n.Wire())
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	// Types come from a fixed list, so they never carry a line break
	// that would split the frame.
	return writeEvent(st.c, "id: "+n.EventID+"\nevent: "+n.Type+"\ndata: "+string(b)+"\n\n")
}

// replay sends the stored events after the position, at least up to
// through (where the subscription's channel starts), at most maxReplay;
// done reports that the stream ended (far behind, or the client went).
func (st *eventStream) replay(through service.EventPos) (done bool, err error) {
	ctx := st.c.Request().Context()
	for replayed := 0; ; {
		batch, err := st.events.ReplayThrough(ctx, st.tenant, st.pos, through, replayBatch)
		if err != nil {
			if ctx.Err() != nil {
				return true, nil
			}
			return true, fmt.Errorf("%w: replay events: %w", errWrite, err)
		}
		for _, n := range batch {
			if err := st.send(n); err != nil {
				return true, err
			}
		}
		replayed += len(batch)
		if len(batch) < replayBatch {
			return false, nil
		}
		if replayed >= maxReplay {
			// Far behind: end here, the id of the last event read
			// (filtered out or not) moving the client's position, and
			// the client reconnects for the rest.
			return true, writeEvent(st.c, "id: "+batch[len(batch)-1].EventID+"\n\n")
		}
	}
}

// live sends the events published from now on, with heartbeats, until
// the client goes or the hub ends the subscription.
func (st *eventStream) live(notes <-chan service.Notification) error {
	ctx := st.c.Request().Context()
	beat := time.NewTicker(eventsHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beat.C:
			if err := writeEvent(st.c, ": heartbeat\n\n"); err != nil {
				return err
			}
		case n, ok := <-notes:
			if !ok {
				// The hub stopped (server shutdown) or dropped this stream
				// for falling behind: end it, and the client reconnects
				// with its last id and misses nothing.
				return nil
			}
			if st.resumed && !n.Pos.After(st.pos) {
				continue // replayed already
			}
			if err := st.send(n); err != nil {
				return err
			}
		}
	}
}

// writeEvent writes one frame of the event stream and flushes it.
func writeEvent(c echo.Context, frame string) error {
	res := c.Response()
	if _, err := res.Write([]byte(frame)); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if err := http.NewResponseController(res.Writer).Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}
