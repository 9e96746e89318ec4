package pgstore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service"
)

// EventHorizon implements service.EventSource.
func (s *PgStore) EventHorizon(ctx context.Context) (int64, error) {
	var h int64
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		h, err = q.EventHorizon(ctx)
		return err
	})
	return h, err
}

// EventsAfter implements service.EventSource: the events of every tenant
// (the reader feeds every tenant's subscribers: a system function).
func (s *PgStore) EventsAfter(ctx context.Context, after service.EventPos, limit int) ([]service.Notification, error) {
	var rows []db.EventLog
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		rows, err = q.ListEventsAfter(ctx, db.ListEventsAfterParams{AfterXid: after.Xid, AfterID: after.ID, Batch: int32(limit)})
		return err
	})
	out := make([]service.Notification, len(rows))
	for i, r := range rows {
		out[i] = notificationOf(r)
	}
	return out, err
}

// TenantEventsAfter implements service.EventSource.
func (s *PgStore) TenantEventsAfter(ctx context.Context, tenantID string, after service.EventPos, limit int) ([]service.Notification, error) {
	var rows []db.EventLog
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantEventsAfter(ctx, db.ListTenantEventsAfterParams{
			TenantID: tenantID, AfterXid: after.Xid, AfterID: after.ID, Batch: int32(limit)})
		return err
	})
	out := make([]service.Notification, len(rows))
	for i, r := range rows {
		out[i] = notificationOf(r)
	}
	return out, err
}

func notificationOf(r db.EventLog) service.Notification {
	n := service.Notification{
		TenantID: r.TenantID, Pos: service.EventPos{Xid: r.Xid, ID: r.ID}, Type: r.Type,
		Agent: r.Agent, Tool: r.Tool, SessionID: r.SessionID, SnapshotID: r.SnapshotID, Actor: r.Actor, At: r.CreatedAt,
	}
	if r.InterruptID.Valid {
		id := uuid.UUID(r.InterruptID.Bytes)
		n.InterruptID = &id
	}
	return n
}

// ListenEvents implements service.EventSource: it blocks on a connection
// of its own that LISTENs for the wake-ups writers send.
func (s *PgStore) ListenEvents(ctx context.Context, ready, wake func()) error {
	return s.listen(ctx, func(q *db.Queries) error { return q.ListenInterruptEvents(ctx) }, ready, func(string) { wake() })
}

// listen holds a connection out of the pool (it carries the LISTEN) until
// ctx ends or the connection fails, calling fn with each notification's
// payload.
func (s *PgStore) listen(ctx context.Context, subscribe func(q *db.Queries) error, ready func(), fn func(payload string)) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return translate(err)
	}
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if err := subscribe(db.New(conn)); err != nil {
		return translate(err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return translate(err)
		}
		fn(n.Payload)
	}
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

// notifyLoop sends the wake-ups until Close.
func (s *PgStore) notifyLoop() {
	for {
		select {
		case <-s.closed:
			return
		case <-s.notifyCh:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A lost wake-up only delays delivery to the next poll.
		_ = db.New(s.pool).NotifyInterruptEvents(ctx)
		cancel()
		// Coalesce bursts: writers within this pause share one NOTIFY.
		select {
		case <-s.closed:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
