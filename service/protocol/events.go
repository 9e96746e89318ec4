package protocol

import (
	"encoding/json"
	"time"
)

// Event is one event of a tenant's live stream (GET /api/v1/events), in
// the form the server writes (store.Notification.Wire) and the Go client
// reads.
type Event struct {
	TenantID string `json:"tenantId"`
	// ID is the event's opaque id: what a stream resumes after, the same
	// id the audit trail and webhooks carry.
	ID          string    `json:"eventId"`
	Type        string    `json:"type"`
	InterruptID string    `json:"interruptId,omitempty"`
	Agent       string    `json:"agent,omitempty"`
	Tool        string    `json:"tool,omitempty"`
	SessionID   string    `json:"sessionId,omitempty"`
	SnapshotID  string    `json:"snapshotId,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	At          time.Time `json:"at"`
}

// AuditEvent is one entry of an interrupt's audit trail
// (GET /api/v1/interrupts/{id}/events), in the form the server writes
// (store.InterruptEvent.Wire) and the Go client reads.
type AuditEvent struct {
	// ID is the event's opaque id, the same as Event.ID.
	ID          string          `json:"id"`
	InterruptID string          `json:"interruptId"`
	Type        string          `json:"type"`
	Actor       string          `json:"actor"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
}
