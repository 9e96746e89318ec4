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
// replay exactly what it missed (Subscribe, ReplayThrough).
type Hub struct {
	src  store.EventSource
	log  *slog.Logger
	keys *keys.Ring

	mu   sync.Mutex
	next int
	subs map[int]subscriber
	// pos is where the hub is in the log: every event after it reaches
	// the subscribers of its tenant, none at or before it will. It moves
	// with the publication of each event, under mu, so a subscription
	// sees a position and every event past it (see Subscribe).
	pos    store.EventPos
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

// Subscribe returns a channel of the tenant's notifications, the hub's
// position, and a function that ends the subscription. Every event after
// the position comes on the channel; those at or before it are final in
// the log (ReplayThrough reads them), so a stream that replays up to the
// position and then takes the channel misses none. A subscriber that does
// not keep up is dropped (its channel closed) rather than slowing the
// others: a stream then ends, and its client reconnects and replays what
// it missed.
func (h *Hub) Subscribe(tenantID string) (<-chan store.Notification, store.EventPos, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan store.Notification, 64)
	if h.closed {
		close(ch)
		return ch, h.pos, func() {}
	}
	id := h.next
	h.next++
	h.subs[id] = subscriber{tenantID: tenantID, ch: ch}
	return ch, h.pos, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[id]; ok {
			delete(h.subs, id)
			close(ch)
		}
	}
}

// hasSubscriber reports whether anyone listens to the tenant's events.
// The caller holds mu.
func (h *Hub) hasSubscriber(tenantID string) bool {
	for _, s := range h.subs {
		if s.tenantID == tenantID {
			return true
		}
	}
	return false
}

// skip moves the position past n when no one listens to its tenant's
// events (so it needs no id), reporting whether it did. Checking and
// moving under one lock is what makes Subscribe's promise hold: a
// subscription made after the check sees the position past n.
func (h *Hub) skip(n store.Notification) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hasSubscriber(n.TenantID) {
		return false
	}
	h.pos = n.Pos
	return true
}

// publish hands n to its tenant's subscribers and moves the position past
// it.
func (h *Hub) publish(n store.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pos = n.Pos
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

// position is where the hub is in the log.
func (h *Hub) position() store.EventPos {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pos
}

// start sets the position the hub starts from.
func (h *Hub) start(pos store.EventPos) {
	h.mu.Lock()
	h.pos = pos
	h.mu.Unlock()
	h.markReady()
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
	started := false
	for {
		if !started {
			horizon, err := h.src.EventHorizon(ctx)
			if err == nil {
				h.start(store.EventPos{Xid: horizon})
				started = true
			} else if ctx.Err() == nil {
				h.log.Warn("reading the event horizon failed", "err", err)
			}
		}
		if started {
			h.deliver(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// deliver publishes the events past the hub's position, moving it. An
// event whose id cannot be encoded stops the read there, to be retried.
func (h *Hub) deliver(ctx context.Context) {
	for {
		events, err := h.src.EventsAfter(ctx, h.position(), eventBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("reading events failed", "err", err)
			}
			return
		}
		for _, ev := range events {
			if h.skip(ev) {
				continue
			}
			if ev.EventID, err = h.keys.EventID(ctx, ev.TenantID, ev.Pos); err != nil {
				h.log.Warn("encoding an event id failed", "tenant", ev.TenantID, "err", err)
				return
			}
			h.publish(ev)
		}
		if len(events) < eventBatch {
			return
		}
	}
}

// ReplayThrough returns the tenant's events after pos, oldest first, at
// most limit, with their ids: what a listener that reconnects missed. It
// returns every event up to through, the position a subscription started
// at (Subscribe), and past it those already final; the subscription's
// channel brings the rest.
func (h *Hub) ReplayThrough(ctx context.Context, tenantID string, pos, through store.EventPos, limit int) ([]store.Notification, error) {
	events, err := h.src.TenantEventsThrough(ctx, tenantID, pos, through, limit)
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
