package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// Notification announces an interrupt event to live dashboards.
type Notification struct {
	TenantID string `json:"tenantId"`
	// EventID is the event's opaque id (see eventids.go).
	EventID     string `json:"eventId"`
	seq         int64
	InterruptID uuid.UUID `json:"interruptId"`
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
}

// EventHub delivers interrupt events to subscribers of the same tenant, so a
// dashboard on any instance sees every instance's events within a second:
// it reads new rows of interrupt_events when another instance's NOTIFY wakes
// it, and every second in any case.
type EventHub struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu     sync.Mutex
	next   int
	subs   map[int]subscriber
	closed bool // Run returned: no more notifications will come
}

type subscriber struct {
	tenantID string
	ch       chan Notification
}

// NewEventHub returns a hub; Run must be started for it to deliver.
func NewEventHub(pool *pgxpool.Pool, log *slog.Logger) *EventHub {
	if log == nil {
		log = slog.Default()
	}
	return &EventHub{pool: pool, log: log, subs: map[int]subscriber{}}
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
	store := NewPostgresStore(h.pool)
	keys := newKeyring(store.SigningKeys)
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
		events, err := store.recentEvents(ctx, since)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("reading interrupt events failed", "err", err)
			}
			continue
		}
		for _, ev := range events {
			if _, ok := seen[ev.seq]; ok {
				continue
			}
			if !h.hasSubscriber(ev.TenantID) {
				seen[ev.seq] = ev.At
				continue
			}
			if ev.EventID, err = keys.eventID(ctx, ev.TenantID, ev.seq); err != nil {
				// Retried at the next read (the event is still recent).
				h.log.Warn("encoding an event id failed", "tenant", ev.TenantID, "err", err)
				continue
			}
			seen[ev.seq] = ev.At
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
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := h.listen(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		h.log.Warn("event listener lost its connection; polling until it is back", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
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

func (h *EventHub) listen(ctx context.Context, wake chan<- struct{}) error {
	pooled, err := h.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries the LISTEN: never hand it back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if err := db.New(conn).ListenInterruptEvents(ctx); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// recentEvents reads the events of every tenant created since a time.
func (s *PgStore) recentEvents(ctx context.Context, since time.Time) ([]Notification, error) {
	var rows []db.InterruptEvent
	// The reader feeds every tenant's subscribers: a system query.
	err := s.pipedAs(ctx, "", true, func(q *db.Queries) error {
		var err error
		rows, err = q.ListRecentInterruptEvents(ctx, since)
		return err
	})
	out := make([]Notification, len(rows))
	for i, r := range rows {
		out[i] = Notification{TenantID: r.TenantID, seq: r.ID, InterruptID: r.InterruptID, Type: r.Type, At: r.CreatedAt}
	}
	return out, err
}

// eventsWritten wakes the live-event readers of every instance. Calls are
// coalesced: at most one NOTIFY is in flight, sent outside the writing
// transaction (inside it, NOTIFY would serialize every writer's commit).
func (s *PgStore) eventsWritten() {
	s.notifyOnce.Do(func() {
		s.notifyCh = make(chan struct{}, 1)
		go s.notifyLoop()
	})
	select {
	case s.notifyCh <- struct{}{}:
	default:
	}
}

func (s *PgStore) notifyLoop() {
	for range s.notifyCh {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A lost wake-up only delays delivery to the next poll.
		_ = db.New(s.pool).NotifyInterruptEvents(ctx)
		cancel()
		// Coalesce bursts: writers within this pause share one NOTIFY.
		time.Sleep(20 * time.Millisecond)
	}
}
