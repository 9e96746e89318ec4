package eventhub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/store"
)

// Hub delivers events to subscribers of the same tenant, so a
// dashboard on any instance sees every instance's events, usually within a
// second (an event waits for every older transaction to end):
// it reads the log past its position when another instance's NOTIFY wakes
// it, and every second in any case. It reads events in log order (see
// store.EventPos), so a listener that reconnects with the last id it saw can
// replay exactly what it missed (Replay).
type Hub struct {
	src  store.EventSource
	log  *slog.Logger
	keys *keys.Ring

	mu     sync.Mutex
	next   int
	subs   map[int]subscriber
	closed bool // Run returned: no more notifications will come

	// ready is closed once Run has read its starting position (or has
	// returned): see Ready.
	ready     chan struct{}
	readyOnce sync.Once
}

type subscriber struct {
	tenantID string
	ch       chan store.Notification
}

// New returns a hub over src; Run must be started for it to
// deliver.
func New(src store.EventSource, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{src: src, log: log, keys: keys.NewRing(src.SigningKeys), subs: map[int]subscriber{}, ready: make(chan struct{})}
}

// Ready is closed once the hub knows where the log stands (Run has read
// the event horizon), or once Run has returned. A subscription made
// before that would miss the events written between it and the horizon
// read (the hub starts delivering after the horizon, not after the
// subscription), so a stream that promises its client every event from
// its subscription on waits for Ready first.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

func (h *Hub) markReady() { h.readyOnce.Do(func() { close(h.ready) }) }

// Subscribe returns a channel of the tenant's notifications and a function
// that ends the subscription. A subscriber that does not keep up is
// dropped (its channel closed) rather than slowing the others: a stream
// then ends, and its client reconnects and replays what it missed.
func (h *Hub) Subscribe(tenantID string) (<-chan store.Notification, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan store.Notification, 64)
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	id := h.next
	h.next++
	h.subs[id] = subscriber{tenantID: tenantID, ch: ch}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[id]; ok {
			delete(h.subs, id)
			close(ch)
		}
	}
}

// hasSubscriber reports whether anyone listens to the tenant's events.
func (h *Hub) hasSubscriber(tenantID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if s.tenantID == tenantID {
			return true
		}
	}
	return false
}

func (h *Hub) publish(n store.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.subs {
		if s.tenantID != n.TenantID {
			continue
		}
		select {
		case s.ch <- n:
		default:
			delete(h.subs, id)
			close(s.ch)
		}
	}
}

// eventPoll is the fallback: events are read at least this often even when
// no wake-up notification arrives.
const eventPoll = time.Second

// eventBatch is how many events one read takes.
const eventBatch = 1000

// Run delivers events until ctx ends: it reads the log past its position
// whenever a wake-up notification arrives (LISTEN, reconnecting with
// backoff) and at least every second. When it returns it closes every
// subscription, so the streams fed by the hub end (and do not hold up a
// graceful shutdown).
func (h *Hub) Run(ctx context.Context) {
	defer h.closeAll()
	wake := make(chan struct{}, 1)
	go h.listenLoop(ctx, wake)
	t := time.NewTicker(eventPoll)
	defer t.Stop()
	var pos store.EventPos
	started := false
	for {
		if !started {
			horizon, err := h.src.EventHorizon(ctx)
			if err == nil {
				pos, started = store.EventPos{Xid: horizon}, true
				h.markReady()
			} else if ctx.Err() == nil {
				h.log.Warn("reading the event horizon failed", "err", err)
			}
		}
		if started {
			pos = h.deliver(ctx, pos)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// deliver publishes the events past pos and returns the new position. An
// event whose id cannot be encoded stops the read there, to be retried.
func (h *Hub) deliver(ctx context.Context, pos store.EventPos) store.EventPos {
	for {
		events, err := h.src.EventsAfter(ctx, pos, eventBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("reading events failed", "err", err)
			}
			return pos
		}
		for _, ev := range events {
			if h.hasSubscriber(ev.TenantID) {
				if ev.EventID, err = h.keys.EventID(ctx, ev.TenantID, ev.Pos); err != nil {
					h.log.Warn("encoding an event id failed", "tenant", ev.TenantID, "err", err)
					return pos
				}
				h.publish(ev)
			}
			pos = ev.Pos
		}
		if len(events) < eventBatch {
			return pos
		}
	}
}

// Replay returns the tenant's events after the one whose id is after,
// oldest first, at most limit, with their ids: what a listener that
// reconnects missed. ok is false when after is not an id of the tenant's
// events.
func (h *Hub) Replay(ctx context.Context, tenantID, after string, limit int) (events []store.Notification, ok bool, err error) {
	pos, ok, err := h.keys.ParseEventID(ctx, tenantID, after)
	if err != nil || !ok {
		return nil, ok, err
	}
	events, err = h.ReplayFrom(ctx, tenantID, pos, limit)
	return events, true, err
}

// ReplayFrom is Replay from a position.
func (h *Hub) ReplayFrom(ctx context.Context, tenantID string, pos store.EventPos, limit int) ([]store.Notification, error) {
	events, err := h.src.TenantEventsAfter(ctx, tenantID, pos, limit)
	if err != nil {
		return nil, err
	}
	for i := range events {
		if events[i].EventID, err = h.keys.EventID(ctx, tenantID, events[i].Pos); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// ParseEventID returns the position of one of the tenant's event ids; ok
// is false when id is not one.
func (h *Hub) ParseEventID(ctx context.Context, tenantID, id string) (store.EventPos, bool, error) {
	return h.keys.ParseEventID(ctx, tenantID, id)
}

func (h *Hub) listenLoop(ctx context.Context, wake chan<- struct{}) {
	wait.KeepListening(ctx, h.log, "event listener", func(ctx context.Context) error {
		return h.src.ListenEvents(ctx, func() {}, func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	}, func() {})
}

func (h *Hub) closeAll() {
	defer h.markReady()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, s := range h.subs {
		delete(h.subs, id)
		close(s.ch)
	}
}
