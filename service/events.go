package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// Notification announces an interrupt event to live dashboards.
type Notification struct {
	TenantID    string    `json:"tenantId"`
	EventID     int64     `json:"eventId"`
	InterruptID uuid.UUID `json:"interruptId"`
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
}

// EventHub fans the database's interrupt notifications (LISTEN on the
// channel the interrupt_events trigger notifies) out to subscribers of the
// same tenant, so a dashboard on any instance sees every instance's events.
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

// Run listens until ctx ends, reconnecting with backoff when the listening
// connection drops. When it returns it closes every subscription, so the
// streams fed by the hub end (and do not hold up a graceful shutdown).
func (h *EventHub) Run(ctx context.Context) {
	defer h.closeAll()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		h.log.Warn("event listener lost its connection; reconnecting", "err", err, "in", backoff)
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

func (h *EventHub) listen(ctx context.Context) error {
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
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var note Notification
		if err := json.Unmarshal([]byte(n.Payload), &note); err != nil {
			h.log.Warn("bad event notification", "payload", n.Payload, "err", err)
			continue
		}
		h.publish(note)
	}
}
