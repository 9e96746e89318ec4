package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// EventPos is an event's position in the log: its writing transaction's
// id, then its number. Readers take events in this order, and only those
// whose transaction is older than every transaction still running, so
// nothing can appear at or before a position a reader has passed (see the
// migration 00019_webhooks.sql).
type EventPos struct {
	Xid int64
	ID  int64
}

// After reports whether p comes after q.
func (p EventPos) After(q EventPos) bool {
	return p.Xid > q.Xid || (p.Xid == q.Xid && p.ID > q.ID)
}

// Notification announces an event to live listeners; Wire is the form
// streams send.
type Notification struct {
	TenantID string
	// EventID is the event's opaque id (see eventids.go): what a listener
	// resumes from.
	EventID string
	// Pos is the event's position in the log, never shown.
	Pos EventPos
	// Type is the event's public name, e.g. interrupt.created.
	Type        string
	InterruptID *uuid.UUID
	Agent       string
	Tool        string
	SessionID   string
	SnapshotID  string
	Actor       string
	At          time.Time
}

// Wire returns the event as GET /api/v1/events sends it.
func (n Notification) Wire() protocol.Event {
	w := protocol.Event{
		TenantID: n.TenantID, ID: n.EventID, Type: n.Type, Agent: n.Agent, Tool: n.Tool,
		SessionID: n.SessionID, SnapshotID: n.SnapshotID, Actor: n.Actor, At: n.At,
	}
	if n.InterruptID != nil {
		w.InterruptID = n.InterruptID.String()
	}
	return w
}

// EventSource is where the hub reads events from.
type EventSource interface {
	// EventHorizon returns the position where a reader starting now
	// starts: every event before it is final.
	EventHorizon(ctx context.Context) (int64, error)
	// EventsAfter returns events of every tenant after a position, oldest
	// first, at most limit, all final.
	EventsAfter(ctx context.Context, after EventPos, limit int) ([]Notification, error)
	// TenantEventsThrough returns one tenant's events after a position,
	// oldest first, at most limit: all those up to through, a position
	// every event at or before which is final (one a reader of the log
	// has passed), and past it those the horizon shows final.
	TenantEventsThrough(ctx context.Context, tenantID string, after, through EventPos, limit int) ([]Notification, error)
	// ListenEvents blocks until ctx ends or the connection fails, calling
	// ready once listening and wake whenever an instance announces new
	// events.
	ListenEvents(ctx context.Context, ready, wake func()) error
	// SigningKeys returns a tenant's keys of a purpose (the event id key).
	SigningKeys(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)
}
