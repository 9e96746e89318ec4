package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
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

// streamEvents pushes the caller's tenant's interrupt events as server-sent
// events until the client goes away: GET /api/v1/events. Each event is
// `event: interrupt.<type>` with the notification as data; the hub delivers
// every instance's events through LISTEN/NOTIFY.
func (a *api) streamEvents(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if a.opts.Events == nil {
		return service.Errorf(codeUnimplemented, "live events are not enabled on this server")
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
	notes, cancel := a.opts.Events.Subscribe(caller.TenantID)
	defer cancel()

	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, mimeEventStream)
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	res.WriteHeader(http.StatusOK)
	// The first comment tells the client the subscription is in place.
	if err := writeEvent(c, ": subscribed\n\n"); err != nil {
		return err
	}

	ctx := c.Request().Context()
	beat := time.NewTicker(eventsHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beat.C:
			if err := writeEvent(c, ": heartbeat\n\n"); err != nil {
				return err
			}
		case n, ok := <-notes:
			if !ok {
				// The hub stopped (server shutdown): end the stream so the
				// client reconnects to an instance that is still serving.
				return nil
			}
			b, err := json.Marshal(n)
			if err != nil {
				return fmt.Errorf("encode event: %w", err)
			}
			// Types come from the interrupt_events CHECK constraint, so they
			// never carry a line break that would split the frame.
			frame := "id: " + n.EventID + "\nevent: interrupt." + n.Type + "\ndata: " + string(b) + "\n\n"
			if err := writeEvent(c, frame); err != nil {
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
