package webhooks

// The webhook records and the store interface the dispatcher and the
// Manager call, which service/pgstore implements.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/store"
)

// Webhook delivery statuses.
const (
	DeliveryPending   = "pending"   // to be attempted at NextAttemptAt
	DeliveryDelivered = "delivered" // a 2xx came back
	DeliveryDead      = "dead"      // every attempt failed, or the receiver answered 410
)

// Webhook is a tenant's webhook endpoint.
type Webhook struct {
	ID          uuid.UUID `json:"id"`
	URL         string    `json:"url"`
	Description string    `json:"description,omitempty"`
	EventTypes  []string  `json:"eventTypes"`
	Enabled     bool      `json:"enabled"`
	// DisabledReason says why the platform turned the endpoint off (a 410
	// from the receiver).
	DisabledReason string    `json:"disabledReason,omitempty"`
	CreatedBy      string    `json:"createdBy"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// Update changes the fields that are set.
type Update struct {
	URL         *string
	Description *string
	EventTypes  []string
	Enabled     *bool
}

// Delivery is one event's delivery to one endpoint.
type Delivery struct {
	ID        uuid.UUID `json:"id"`
	WebhookID uuid.UUID `json:"webhookId"`
	// EventID is the event's opaque id, sent as webhook-id.
	EventID     string     `json:"eventId"`
	EventType   string     `json:"eventType"`
	InterruptID *uuid.UUID `json:"interruptId,omitempty"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	// NextAttemptAt is when a pending delivery is (re)tried.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	// LastStatus is the HTTP status of the last attempt (none when no
	// answer came).
	LastStatus  int        `json:"lastStatus,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`

	// Pos is the event's position (EventID before encoding).
	Pos store.EventPos `json:"-"`
}

// Health is an endpoint's delivery figures (the webhook_health
// view).
type Health struct {
	WebhookID       uuid.UUID  `json:"webhookId"`
	Pending         int64      `json:"pending"`
	Delivered       int64      `json:"delivered"`
	Dead            int64      `json:"dead"`
	Retrying        int64      `json:"retrying"`
	OldestPendingAt *time.Time `json:"oldestPendingAt,omitempty"`
	LastDeliveredAt *time.Time `json:"lastDeliveredAt,omitempty"`
	LastFailureAt   *time.Time `json:"lastFailureAt,omitempty"`
	// DeliveryP50Seconds is the median time from event to delivery.
	DeliveryP50Seconds *float64 `json:"deliveryP50Seconds,omitempty"`
	DeliveryP90Seconds *float64 `json:"deliveryP90Seconds,omitempty"`
}

// Claim is a delivery a dispatcher leased for one attempt.
type Claim struct {
	TenantID  string
	ID        uuid.UUID
	WebhookID uuid.UUID
	// Attempts counts this attempt; with the owner it fences the outcome.
	Attempts int
	// Event is what the attempt sends.
	Event *Event
}

// Finish is the outcome of a claimed delivery's attempt.
type Finish struct {
	Claim   Claim
	Outcome Outcome
}

// Event is what one delivery attempt sends: the endpoint and the
// event with what it is about.
type Event struct {
	URL        string
	Enabled    bool
	Pos        store.EventPos
	Type       string // the public name, e.g. interrupt.created
	OccurredAt time.Time
	Actor      string
	// Sequence numbers the events of one interrupt (1 for its creation);
	// 0 for other events.
	Sequence  int
	Interrupt *Interrupt
	Turn      *Turn
	ToolCall  *ToolCall
}

// Interrupt is the interrupt an event is about.
type Interrupt struct {
	ID         uuid.UUID       `json:"id"`
	Agent      string          `json:"agent"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input,omitempty"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	SessionID  string          `json:"sessionId"`
	SnapshotID string          `json:"snapshotId"`
	Status     string          `json:"status"`
	Resolution json.RawMessage `json:"resolution,omitempty"`
	ResolvedBy string          `json:"resolvedBy,omitempty"`
	ResolvedAt *time.Time      `json:"resolvedAt,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// Turn is the turn a turn.* event is about.
type Turn struct {
	SnapshotID   string          `json:"snapshotId"`
	SessionID    string          `json:"sessionId"`
	Agent        string          `json:"agent"`
	FinishReason string          `json:"finishReason,omitempty"`
	Error        json.RawMessage `json:"error,omitempty"`
}

// ToolCall is the call a tool.called event is about.
type ToolCall struct {
	SnapshotID string `json:"snapshotId"`
	SessionID  string `json:"sessionId"`
	Agent      string `json:"agent"`
	Key        string `json:"key"`
	Tool       string `json:"tool"`
	Ref        string `json:"ref,omitempty"`
	Status     string `json:"status"`
	HTTPStatus int    `json:"httpStatus,omitempty"`
}

// Cursor is an endpoint a dispatcher leased to read the event log
// for: its position, and what it subscribes to.
type Cursor struct {
	TenantID   string
	WebhookID  uuid.UUID
	URL        string
	EventTypes []string
	// Pos is the position read up to: the events after it are to attempt.
	Pos store.EventPos
}

// Wants reports whether the endpoint subscribes to the event type (its
// public name).
func (c Cursor) Wants(eventType string) bool {
	for _, t := range c.EventTypes {
		if t == eventType {
			return true
		}
	}
	return false
}

// Attempt is the first attempt of an event read from an
// endpoint's cursor, recorded as the event's delivery to the endpoint.
type Attempt struct {
	Pos        store.EventPos
	OccurredAt time.Time
	// AttemptedAt is when the attempt started, AnsweredAt when it ended.
	AttemptedAt, AnsweredAt time.Time
	Outcome                 Outcome
}

// Outcome is the result of one delivery attempt.
type Outcome struct {
	Status        string     // DeliveryPending (retry), DeliveryDelivered or DeliveryDead
	NextAttemptAt *time.Time // when Status is DeliveryPending
	HTTPStatus    int
	Error         string
}

// Store is the persistence of webhook endpoints and their
// deliveries. Tenant-scoped methods are scoped in the SQL itself; the
// dispatcher's claim spans tenants.
type Store interface {
	// CreateWebhook stores an endpoint with its first signing secret
	// (ALREADY_EXISTS when the tenant has one with that URL).
	CreateWebhook(ctx context.Context, tenantID string, w *Webhook, secret []byte) (*Webhook, error)
	ListWebhooks(ctx context.Context, tenantID string) ([]Webhook, error)
	// GetWebhook returns an endpoint (ErrNotFound when none).
	GetWebhook(ctx context.Context, tenantID string, id uuid.UUID) (*Webhook, error)
	// UpdateWebhook changes an endpoint (ErrNotFound, ALREADY_EXISTS).
	UpdateWebhook(ctx context.Context, tenantID string, id uuid.UUID, u Update) (*Webhook, error)
	// DeleteWebhook removes an endpoint with its secrets and deliveries.
	DeleteWebhook(ctx context.Context, tenantID string, id uuid.UUID) error
	// RotateWebhookSecret adds the signing secret that signs from now on;
	// the older ones keep signing for overlap.
	RotateWebhookSecret(ctx context.Context, tenantID string, id uuid.UUID, secret []byte, overlap time.Duration) error
	// WebhookSecrets returns the secrets that sign, newest first.
	WebhookSecrets(ctx context.Context, tenantID string, id uuid.UUID) ([][]byte, error)
	// DisableWebhook turns an endpoint off, saying why.
	DisableWebhook(ctx context.Context, tenantID string, id uuid.UUID, reason string) error
	// LeaseWebhookCursors leases to owner, for lease, at most limit
	// enabled endpoints of every tenant that have events to read, leaving
	// out those in held (which owner reads already).
	LeaseWebhookCursors(ctx context.Context, owner string, lease time.Duration, limit int, held []uuid.UUID) ([]Cursor, error)
	// WebhookCursorEvents returns at most limit events of the endpoint's
	// tenant after its position, up to the horizon, of the types it
	// subscribes to, in log order, with what an attempt sends; and the
	// position the endpoint has read up to with them (the last event
	// returned, or past events of other types; c.Pos when there is
	// nothing new).
	WebhookCursorEvents(ctx context.Context, c Cursor, limit int) ([]Event, store.EventPos, error)
	// AdvanceWebhookCursor moves the endpoint's position from c.Pos to to
	// and records the attempts as its deliveries, in one statement, only
	// while owner holds the endpoint's lease (which it renews for lease)
	// and the position is still c.Pos; it reports whether it did.
	AdvanceWebhookCursor(ctx context.Context, owner string, c Cursor, to store.EventPos, lease time.Duration, attempts []Attempt) (bool, error)
	// ClaimWebhookDeliveries leases due deliveries (retries and
	// redeliveries) of every tenant to owner, with what they send: at
	// most batch, at most perEndpoint of one endpoint, none of busy's
	// endpoints.
	ClaimWebhookDeliveries(ctx context.Context, owner string, lease time.Duration, batch, perEndpoint int, busy []uuid.UUID) ([]Claim, error)
	// FinishWebhookDeliveries records attempts' outcomes, each only if its
	// attempt still holds the delivery's lease; it returns the ids
	// recorded.
	FinishWebhookDeliveries(ctx context.Context, owner string, done []Finish) (map[uuid.UUID]bool, error)
	// ListWebhookDeliveries returns an endpoint's deliveries, newest first,
	// before the cursor (created at, id) when one is given.
	ListWebhookDeliveries(ctx context.Context, p ListDeliveriesParams) ([]Delivery, error)
	// GetWebhookDelivery returns one delivery of an endpoint.
	GetWebhookDelivery(ctx context.Context, tenantID string, webhookID, id uuid.UUID) (*Delivery, error)
	// RedeliverWebhookDelivery queues a finished delivery again, due now
	// (FAILED_PRECONDITION when it is still pending).
	RedeliverWebhookDelivery(ctx context.Context, tenantID string, webhookID, id uuid.UUID) (*Delivery, error)
	// Health returns the delivery figures of the tenant's endpoints.
	WebhookHealth(ctx context.Context, tenantID string) ([]Health, error)
	// TenantToolHosts are the non-public hosts the operator allowed the
	// tenant (for HTTP tools and webhooks alike).
	TenantToolHosts(ctx context.Context, tenantID string) ([]string, error)
	// ListenEvents blocks until ctx ends or the connection fails, calling
	// wake whenever an instance announces new events.
	ListenEvents(ctx context.Context, ready, wake func()) error
}

// ListDeliveriesParams select a page of an endpoint's deliveries.
type ListDeliveriesParams struct {
	TenantID  string
	WebhookID uuid.UUID
	Status    string // "" for any
	// BeforeID is the cursor (the last item of the previous page: ids are
	// time-ordered); zero for the first page.
	BeforeID uuid.UUID
	Limit    int
}
