package pgstore

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/store"
)

// EventHorizon implements store.EventSource.
func (s *PgStore) EventHorizon(ctx context.Context) (int64, error) {
	var h int64
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		h, err = q.EventHorizon(ctx)
		return err
	})
	return h, err
}

// HeldEvents reads the events held back by an older transaction still
// open, across tenants (the metrics endpoint: a system function).
func (s *PgStore) HeldEvents(ctx context.Context) (store.HeldEvents, error) {
	var r db.HeldEventsRow
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		r, err = q.HeldEvents(ctx)
		return err
	})
	if err != nil || r.Held == 0 {
		return store.HeldEvents{}, err
	}
	return store.HeldEvents{Held: r.Held, Oldest: r.Oldest}, nil
}

// EventsAfter implements store.EventSource: the events of every tenant
// (the reader feeds every tenant's subscribers: a system function).
func (s *PgStore) EventsAfter(ctx context.Context, after store.EventPos, limit int) ([]store.Notification, error) {
	var rows []db.EventLog
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		rows, err = q.ListEventsAfter(ctx, db.ListEventsAfterParams{AfterXid: after.Xid, AfterID: after.ID, Batch: int32(limit)})
		return err
	})
	out := make([]store.Notification, len(rows))
	for i, r := range rows {
		out[i] = notificationOf(r)
	}
	return out, err
}

// TenantEventsThrough implements store.EventSource.
func (s *PgStore) TenantEventsThrough(ctx context.Context, tenantID string, after, through store.EventPos, limit int) ([]store.Notification, error) {
	var rows []db.EventLog
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantEventsThrough(ctx, db.ListTenantEventsThroughParams{
			TenantID: tenantID, AfterXid: after.Xid, AfterID: after.ID,
			ThroughXid: through.Xid, ThroughID: through.ID, Batch: int32(limit)})
		return err
	})
	out := make([]store.Notification, len(rows))
	for i, r := range rows {
		out[i] = notificationOf(r)
	}
	return out, err
}

func notificationOf(r db.EventLog) store.Notification {
	n := store.Notification{
		TenantID: r.TenantID, Pos: store.EventPos{Xid: r.Xid, ID: r.ID}, Type: r.Type,
		Agent: r.Agent, Tool: r.Tool, SessionID: r.SessionID, SnapshotID: r.SnapshotID, Actor: r.Actor, At: r.CreatedAt,
	}
	if r.InterruptID.Valid {
		id := uuid.UUID(r.InterruptID.Bytes)
		n.InterruptID = &id
	}
	return n
}

// ListenEvents implements store.EventSource: it blocks on a connection
// of its own that LISTENs for the wake-ups writers send.
func (s *PgStore) ListenEvents(ctx context.Context, ready, wake func()) error {
	return s.listen(ctx, func(q *db.Queries) error { return q.ListenInterruptEvents(ctx) }, ready, func(string) { wake() })
}

// ListenThrough makes the store's LISTEN connections (abort and event
// wake-ups) connections of their own with cc, rather than connections
// taken out of the pool: for a pool behind a transaction pooler, where a
// LISTEN would stay on a server connection that the pooler hands to other
// clients, and the notifications would not come back. Call it before the
// store is used.
func (s *PgStore) ListenThrough(cc *pgx.ConnConfig) {
	s.listenConfig = cc
}

// DisableListen keeps the store from listening at all (behind a
// transaction pooler with no direct connection to listen on): ListenAborts
// and ListenEvents then wait for their context without reporting ready,
// and their callers poll. Call it before the store is used.
func (s *PgStore) DisableListen() {
	s.listenOff = true
}

// listen holds a connection (out of the pool, or of its own with
// ListenThrough) that carries the LISTEN until ctx ends or the connection
// fails, calling fn with each notification's payload.
func (s *PgStore) listen(ctx context.Context, subscribe func(q *db.Queries) error, ready func(), fn func(payload string)) error {
	conn, err := s.listenConn(ctx)
	if err != nil {
		return translate(err)
	}
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

// listenConn is a connection for a LISTEN: its own (ListenThrough), or
// one taken for good out of the pool. With DisableListen it waits for ctx.
func (s *PgStore) listenConn(ctx context.Context) (*pgx.Conn, error) {
	switch {
	case s.listenOff:
		<-ctx.Done()
		return nil, ctx.Err()
	case s.listenConfig != nil:
		return pgx.ConnectConfig(ctx, s.listenConfig.Copy())
	}
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pooled.Hijack(), nil
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
