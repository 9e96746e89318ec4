package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Notification announces an interrupt event to live dashboards.
type Notification struct {
	TenantID string `json:"tenantId"`
	// EventID is the event's opaque id (see eventids.go).
	EventID string `json:"eventId"`
	// Seq is the event's place in the global sequence, never shown.
	Seq         int64     `json:"-"`
	InterruptID uuid.UUID `json:"interruptId"`
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
}

// EventHub delivers interrupt events to subscribers of the same tenant, so a
// dashboard on any instance sees every instance's events within a second:
// it reads new rows of interrupt_events when another instance's NOTIFY wakes
// it, and every second in any case.
type EventHub struct {
	src EventSource
	log *slog.Logger

	mu     sync.Mutex
	next   int
	subs   map[int]subscriber
	closed bool // Run returned: no more notifications will come
}

type subscriber struct {
	tenantID string
	ch       chan Notification
}

// EventSource is where the hub reads interrupt events from.
type EventSource interface {
	// RecentEvents returns the events of every tenant created since a
	// time, oldest first (a bounded number).
	RecentEvents(ctx context.Context, since time.Time) ([]Notification, error)
	// ListenEvents blocks until ctx ends or the connection fails, calling
	// ready once listening and wake whenever an instance announces new
	// events.
	ListenEvents(ctx context.Context, ready, wake func()) error
	// SigningKeys returns a tenant's keys of a purpose (the event id key).
	SigningKeys(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)
}

// NewEventHub returns a hub over src; Run must be started for it to
// deliver.
func NewEventHub(src EventSource, log *slog.Logger) *EventHub {
	if log == nil {
		log = slog.Default()
	}
	return &EventHub{src: src, log: log, subs: map[int]subscriber{}}
}

// Subscribe returns a channel of the tenant's notifications and a function
// that ends the subscription. A subscriber that does not keep up loses
// notifications rather than slowing the others.
func (h *EventHub) Subscribe(tenantID string) (<-chan Notification, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan Notification, 64)
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
func (h *EventHub) hasSubscriber(tenantID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if s.tenantID == tenantID {
			return true
		}
	}
	return false
}

func (h *EventHub) publish(n Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if s.tenantID != n.TenantID {
			continue
		}
		select {
		case s.ch <- n:
		default:
		}
	}
}

// eventLookback is how far back the reader looks each time: events are
// found by creation time, and a transaction may commit a little after its
// events were stamped, so recent ones are read again (and deduplicated).
const eventLookback = 3 * time.Second

// eventPoll is the fallback: events are read at least this often even when
// no wake-up notification arrives.
const eventPoll = time.Second

// Run delivers events until ctx ends: it reads the events table whenever a
// wake-up notification arrives (LISTEN, reconnecting with backoff) and at
// least every second. When it returns it closes every subscription, so the
// streams fed by the hub end (and do not hold up a graceful shutdown).
func (h *EventHub) Run(ctx context.Context) {
	defer h.closeAll()
	wake := make(chan struct{}, 1)
	go h.listenLoop(ctx, wake)
	keys := newKeyring(h.src.SigningKeys)
	seen := map[int64]time.Time{}
	since := time.Now().Add(-eventLookback)
	t := time.NewTicker(eventPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		now := time.Now()
		events, err := h.src.RecentEvents(ctx, since)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("reading interrupt events failed", "err", err)
			}
			continue
		}
		for _, ev := range events {
			if _, ok := seen[ev.Seq]; ok {
				continue
			}
			if !h.hasSubscriber(ev.TenantID) {
				seen[ev.Seq] = ev.At
				continue
			}
			if ev.EventID, err = keys.eventID(ctx, ev.TenantID, ev.Seq); err != nil {
				// Retried at the next read (the event is still recent).
				h.log.Warn("encoding an event id failed", "tenant", ev.TenantID, "err", err)
				continue
			}
			seen[ev.Seq] = ev.At
			h.publish(ev)
		}
		since = now.Add(-eventLookback)
		for id, at := range seen {
			if at.Before(since.Add(-eventLookback)) {
				delete(seen, id)
			}
		}
	}
}

func (h *EventHub) listenLoop(ctx context.Context, wake chan<- struct{}) {
	keepListening(ctx, h.log, "event listener", func(ctx context.Context) error {
		return h.src.ListenEvents(ctx, func() {}, func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	}, func() {})
}

func (h *EventHub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, s := range h.subs {
		delete(h.subs, id)
		close(s.ch)
	}
}
