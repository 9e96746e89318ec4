// Package webhooks tells tenants' own systems what happens, as signed
// webhooks that are never lost: endpoints per tenant (Manager), and a
// Dispatcher that delivers the outbox (webhook_deliveries, written in the
// same transaction as the event it delivers) with retries over more than a
// day, under the same address rules as HTTP tools (package httptool).
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/cursor"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/store"
)

// Bounds of an endpoint's fields.
const (
	maxURLLength         = 2048
	maxDescriptionLength = 500
	secretBytes          = 32
	// SecretPrefix starts a signing secret as Standard Webhooks libraries
	// expect it: whsec_ then the key in base64.
	SecretPrefix = "whsec_"
	// DefaultOverlap is how long a rotated-out secret keeps signing.
	DefaultOverlap = 24 * time.Hour
	// MaxOverlap bounds it.
	MaxOverlap = 7 * 24 * time.Hour
)

// Manager is how the API and the CLI change a tenant's endpoints.
type Manager struct {
	Store Store
	// AllowLoopback lets endpoints point at this machine (serve --dev or
	// --allow-loopback-webhooks; tests).
	AllowLoopback bool
}

// Input is an endpoint as a client sends it.
type Input struct {
	URL         *string  `json:"url"`
	Description *string  `json:"description"`
	EventTypes  []string `json:"eventTypes"`
	Enabled     *bool    `json:"enabled"`
}

// Created is a new endpoint with its signing secret, shown this once.
type Created struct {
	Webhook
	Secret string `json:"secret"`
}

func fieldError(field, format string, args ...any) error {
	e := store.Errorf(store.CodeInvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
	e.Details = map[string]any{"field": field}
	return e
}

// policy is the tenant's address policy: the same as its HTTP tools'.
func (m *Manager) policy(ctx context.Context, tenantID string) (httptool.Policy, error) {
	hosts, err := m.Store.TenantToolHosts(ctx, tenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return httptool.Policy{}, err
	}
	return httptool.Policy{AllowLoopback: m.AllowLoopback, AllowedHosts: hosts}, nil
}

func (m *Manager) checkURL(ctx context.Context, tenantID, raw string) error {
	if raw == "" {
		return fieldError("url", "required")
	}
	if len(raw) > maxURLLength {
		return fieldError("url", "longer than %d bytes", maxURLLength)
	}
	p, err := m.policy(ctx, tenantID)
	if err != nil {
		return err
	}
	if err := httptool.CheckURL(raw, p); err != nil {
		return fieldError("url", "%v", err)
	}
	return nil
}

func checkDescription(d string) error {
	if utf8.RuneCountInString(d) > maxDescriptionLength || !utf8.ValidString(d) || strings.ContainsRune(d, 0) {
		return fieldError("description", "at most %d characters of text", maxDescriptionLength)
	}
	return nil
}

// checkTypes validates event types, sorted and without duplicates in the
// result; none means every type.
func checkTypes(types []string) ([]string, error) {
	if len(types) == 0 {
		return events.Names(), nil
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		if !events.Known(t) {
			return nil, fieldError("eventTypes", "unknown event type %q: want one of %s", t, strings.Join(events.Names(), ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// newSecret returns a fresh signing secret and its text form.
func newSecret() ([]byte, string) {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b)
	return b, SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Create adds an endpoint for the caller's tenant. Its secret is in the
// answer and never shown again.
func (m *Manager) Create(ctx context.Context, c auth.Caller, in Input) (*Created, error) {
	if in.URL == nil {
		return nil, fieldError("url", "required")
	}
	if err := m.checkURL(ctx, c.TenantID, *in.URL); err != nil {
		return nil, err
	}
	w := &Webhook{URL: *in.URL, Enabled: true, CreatedBy: c.Actor}
	if in.Description != nil {
		if err := checkDescription(*in.Description); err != nil {
			return nil, err
		}
		w.Description = *in.Description
	}
	types, err := checkTypes(in.EventTypes)
	if err != nil {
		return nil, err
	}
	w.EventTypes = types
	if in.Enabled != nil {
		w.Enabled = *in.Enabled
	}
	secret, text := newSecret()
	out, err := m.Store.CreateWebhook(ctx, c.TenantID, w, secret)
	if err != nil {
		return nil, asFieldConflict(err)
	}
	return &Created{Webhook: *out, Secret: text}, nil
}

// asFieldConflict turns a duplicate URL into the 400 of the url field.
func asFieldConflict(err error) error {
	var e *store.Error
	if errors.As(err, &e) && e.Status == store.CodeAlreadyExists {
		return fieldError("url", "the tenant already has an endpoint with this URL")
	}
	return err
}

// List returns the caller's tenant's endpoints.
func (m *Manager) List(ctx context.Context, c auth.Caller) ([]Webhook, error) {
	return m.Store.ListWebhooks(ctx, c.TenantID)
}

func notFound(err error, id uuid.UUID) error {
	if errors.Is(err, store.ErrNotFound) {
		return store.Errorf(store.CodeNotFound, "webhook %s not found", id)
	}
	return err
}

// Get returns one endpoint.
func (m *Manager) Get(ctx context.Context, c auth.Caller, id uuid.UUID) (*Webhook, error) {
	w, err := m.Store.GetWebhook(ctx, c.TenantID, id)
	return w, notFound(err, id)
}

// Update changes the fields in is given.
func (m *Manager) Update(ctx context.Context, c auth.Caller, id uuid.UUID, in Input) (*Webhook, error) {
	u := Update{URL: in.URL, Description: in.Description, Enabled: in.Enabled}
	if in.URL != nil {
		if err := m.checkURL(ctx, c.TenantID, *in.URL); err != nil {
			return nil, err
		}
	}
	if in.Description != nil {
		if err := checkDescription(*in.Description); err != nil {
			return nil, err
		}
	}
	if in.EventTypes != nil {
		if len(in.EventTypes) == 0 {
			return nil, fieldError("eventTypes", "at least one event type (omit the field to keep them)")
		}
		types, err := checkTypes(in.EventTypes)
		if err != nil {
			return nil, err
		}
		u.EventTypes = types
	}
	w, err := m.Store.UpdateWebhook(ctx, c.TenantID, id, u)
	return w, notFound(asFieldConflict(err), id)
}

// Delete removes an endpoint with its deliveries.
func (m *Manager) Delete(ctx context.Context, c auth.Caller, id uuid.UUID) error {
	return notFound(m.Store.DeleteWebhook(ctx, c.TenantID, id), id)
}

// RotateSecret gives the endpoint a new signing secret, returned this
// once; the old ones keep signing (every request then carries both
// signatures) for overlap, so the receiver can switch without losing a
// delivery. Zero overlap means DefaultOverlap. At most three secrets sign
// (migration 00033): a rotation past that ends the oldest one's overlap
// at once, so rotating often cannot pile signatures up.
func (m *Manager) RotateSecret(ctx context.Context, c auth.Caller, id uuid.UUID, overlap time.Duration) (string, error) {
	if overlap < 0 || overlap > MaxOverlap {
		return "", fieldError("overlap", "between 0s and %s", MaxOverlap)
	}
	if overlap == 0 {
		overlap = DefaultOverlap
	}
	secret, text := newSecret()
	if err := m.Store.RotateWebhookSecret(ctx, c.TenantID, id, secret, overlap); err != nil {
		return "", notFound(err, id)
	}
	return text, nil
}

// DeliveryPage is one page of an endpoint's deliveries.
type DeliveryPage struct {
	Items      []Delivery `json:"items"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// Deliveries lists an endpoint's deliveries, newest first.
func (m *Manager) Deliveries(ctx context.Context, c auth.Caller, ids *keys.EventIDs, id uuid.UUID, status, cursor string, limit int) (*DeliveryPage, error) {
	if _, err := m.Get(ctx, c, id); err != nil {
		return nil, err
	}
	switch status {
	case "", DeliveryPending, DeliveryDelivered, DeliveryDead:
	default:
		return nil, fieldError("status", "want pending, delivered or dead")
	}
	p := ListDeliveriesParams{TenantID: c.TenantID, WebhookID: id, Status: status, Limit: limit + 1}
	if cursor != "" {
		did, err := decodeCursor(cursor)
		if err != nil {
			return nil, fieldError("cursor", "not a cursor of this list")
		}
		p.BeforeID = did
	}
	items, err := m.Store.ListWebhookDeliveries(ctx, p)
	if err != nil {
		return nil, err
	}
	page := &DeliveryPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		last := page.Items[limit-1]
		page.NextCursor = encodeCursor(last.ID)
	}
	for i := range page.Items {
		if err := fillEventID(ctx, ids, c.TenantID, &page.Items[i]); err != nil {
			return nil, err
		}
	}
	return page, nil
}

func fillEventID(ctx context.Context, ids *keys.EventIDs, tenantID string, d *Delivery) error {
	var err error
	d.EventID, err = ids.Encode(ctx, tenantID, d.Pos)
	return err
}

// Delivery returns one delivery of an endpoint.
func (m *Manager) Delivery(ctx context.Context, c auth.Caller, ids *keys.EventIDs, webhookID, id uuid.UUID) (*Delivery, error) {
	d, err := m.Store.GetWebhookDelivery(ctx, c.TenantID, webhookID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "delivery %s of webhook %s not found", id, webhookID)
	}
	if err != nil {
		return nil, err
	}
	return d, fillEventID(ctx, ids, c.TenantID, d)
}

// Redeliver queues a delivered or dead delivery again with a fresh retry
// schedule. It keeps its webhook-id: a receiver that deduplicates sees it
// as the same message.
func (m *Manager) Redeliver(ctx context.Context, c auth.Caller, ids *keys.EventIDs, webhookID, id uuid.UUID) (*Delivery, error) {
	d, err := m.Store.RedeliverWebhookDelivery(ctx, c.TenantID, webhookID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "delivery %s of webhook %s not found", id, webhookID)
	}
	if err != nil {
		return nil, err
	}
	return d, fillEventID(ctx, ids, c.TenantID, d)
}

// Health returns the delivery figures of the tenant's endpoints.
func (m *Manager) Health(ctx context.Context, c auth.Caller) ([]Health, error) {
	return m.Store.WebhookHealth(ctx, c.TenantID)
}

// A cursor is the last delivery's id (ids are time-ordered), opaque.
func encodeCursor(id uuid.UUID) string { return cursor.Encode(id.String()) }

func decodeCursor(s string) (uuid.UUID, error) {
	f, err := cursor.Decode(s, 1)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.Parse(f[0])
}
