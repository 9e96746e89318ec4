package pgstore

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

var _ webhooks.Store = (*PgStore)(nil)

func webhookOf(r db.Webhook) *webhooks.Webhook {
	return &webhooks.Webhook{
		ID: r.ID, URL: r.Url, Description: r.Description, EventTypes: r.EventTypes, Enabled: r.Enabled,
		DisabledReason: deref(r.DisabledReason), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// CreateWebhook implements webhooks.Store: the endpoint and its
// first secret in one transaction.
func (s *PgStore) CreateWebhook(ctx context.Context, tenantID string, w *webhooks.Webhook, secret []byte) (*webhooks.Webhook, error) {
	var row db.Webhook
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.CreateWebhook(ctx, db.CreateWebhookParams{
			TenantID: tenantID, Url: w.URL, Description: w.Description, EventTypes: w.EventTypes,
			Enabled: w.Enabled, CreatedBy: orSystem(w.CreatedBy),
		})
		if err != nil {
			return err
		}
		return q.InsertWebhookSecret(ctx, db.InsertWebhookSecretParams{TenantID: tenantID, WebhookID: row.ID, Secret: secret})
	})
	if err != nil {
		return nil, translateConflict(err, "url: the tenant already has an endpoint with this URL")
	}
	return webhookOf(row), nil
}

// ListWebhooks implements webhooks.Store.
func (s *PgStore) ListWebhooks(ctx context.Context, tenantID string) ([]webhooks.Webhook, error) {
	var rows []db.Webhook
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListWebhooks(ctx, tenantID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhooks.Webhook, len(rows))
	for i, r := range rows {
		out[i] = *webhookOf(r)
	}
	return out, nil
}

// GetWebhook implements webhooks.Store.
func (s *PgStore) GetWebhook(ctx context.Context, tenantID string, id uuid.UUID) (*webhooks.Webhook, error) {
	var row db.Webhook
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenantID, ID: id})
		return err
	})
	if err != nil {
		return nil, notFound(err)
	}
	return webhookOf(row), nil
}

// UpdateWebhook implements webhooks.Store.
func (s *PgStore) UpdateWebhook(ctx context.Context, tenantID string, id uuid.UUID, u webhooks.Update) (*webhooks.Webhook, error) {
	var row db.Webhook
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.UpdateWebhook(ctx, db.UpdateWebhookParams{
			TenantID: tenantID, ID: id, Url: u.URL, Description: u.Description, EventTypes: u.EventTypes, Enabled: u.Enabled,
		})
		return err
	})
	if err != nil {
		return nil, notFound(translateConflict(err, "url: the tenant already has an endpoint with this URL"))
	}
	return webhookOf(row), nil
}

// DeleteWebhook implements webhooks.Store.
func (s *PgStore) DeleteWebhook(ctx context.Context, tenantID string, id uuid.UUID) error {
	var n int64
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		n, err = q.DeleteWebhook(ctx, db.DeleteWebhookParams{TenantID: tenantID, ID: id})
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// RotateWebhookSecret implements webhooks.Store.
func (s *PgStore) RotateWebhookSecret(ctx context.Context, tenantID string, id uuid.UUID, secret []byte, overlap time.Duration) error {
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		if _, err := q.LockWebhook(ctx, db.LockWebhookParams{TenantID: tenantID, ID: id}); err != nil {
			return err
		}
		return q.InsertWebhookSecret(ctx, db.InsertWebhookSecretParams{
			TenantID: tenantID, WebhookID: id, Secret: secret, OverlapSeconds: overlap.Seconds(),
		})
	})
	return notFound(err)
}

// WebhookSecrets implements webhooks.Store.
func (s *PgStore) WebhookSecrets(ctx context.Context, tenantID string, id uuid.UUID) ([][]byte, error) {
	var rows []db.ListWebhookSecretsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListWebhookSecrets(ctx, db.ListWebhookSecretsParams{TenantID: tenantID, WebhookID: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(rows))
	for i, r := range rows {
		out[i] = r.Secret
	}
	return out, nil
}

// DisableWebhook implements webhooks.Store.
func (s *PgStore) DisableWebhook(ctx context.Context, tenantID string, id uuid.UUID, reason string) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return q.DisableWebhook(ctx, db.DisableWebhookParams{TenantID: tenantID, ID: id, Reason: &reason})
	})
}

// ClaimWebhookDeliveries implements webhooks.Store (a system
// function: the claim spans tenants).
func (s *PgStore) ClaimWebhookDeliveries(ctx context.Context, owner string, lease time.Duration, batch, perEndpoint int, busy []uuid.UUID) ([]webhooks.Claim, error) {
	if busy == nil {
		busy = []uuid.UUID{}
	}
	var rows []db.WebhookDeliveryContext
	err := s.piped(ctx, "", func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		rows, err = q.ClaimWebhookDeliveries(ctx, db.ClaimWebhookDeliveriesParams{
			Owner: owner, LeaseSeconds: lease.Seconds(), Batch: int32(batch), PerEndpoint: int32(perEndpoint), Busy: busy,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhooks.Claim, len(rows))
	for i, r := range rows {
		out[i] = webhooks.Claim{TenantID: r.TenantID, ID: r.ID, WebhookID: r.WebhookID, Attempts: int(r.Attempts), Event: webhookEventOf(r)}
	}
	return out, nil
}

func webhookEventOf(r db.WebhookDeliveryContext) *webhooks.Event {
	ev := eventContextOf(db.WebhookEventContext{
		TenantID: r.TenantID, EventID: r.EventID, EventXid: r.EventXid, EventType: r.EventType, OccurredAt: r.OccurredAt,
		Actor: r.Actor, InterruptID: r.InterruptID, InterruptAgent: r.InterruptAgent, InterruptTool: r.InterruptTool,
		InterruptInput: r.InterruptInput, ExpiresAt: r.ExpiresAt, InterruptSessionID: r.InterruptSessionID,
		InterruptSnapshotID: r.InterruptSnapshotID, InterruptStatus: r.InterruptStatus, Resolution: r.Resolution,
		ResolvedBy: r.ResolvedBy, ResolvedAt: r.ResolvedAt, InterruptCreatedAt: r.InterruptCreatedAt, Sequence: r.Sequence,
		TurnSnapshotID: r.TurnSnapshotID, TurnSessionID: r.TurnSessionID, TurnAgent: r.TurnAgent,
		TurnFinishReason: r.TurnFinishReason, TurnError: r.TurnError, CallKey: r.CallKey, CallTool: r.CallTool,
		CallStatus: r.CallStatus, CallRef: r.CallRef, CallSessionID: r.CallSessionID, CallHttpStatus: r.CallHttpStatus,
	})
	ev.URL, ev.Enabled = r.Url, r.Enabled
	return ev
}

// eventContextOf is what an attempt of the event sends (without the
// endpoint).
func eventContextOf(r db.WebhookEventContext) *webhooks.Event {
	ev := &webhooks.Event{
		Pos:  store.EventPos{Xid: r.EventXid, ID: r.EventID},
		Type: events.Name(r.EventType), OccurredAt: r.OccurredAt, Actor: r.Actor, Sequence: int(r.Sequence),
	}
	switch {
	case r.InterruptID.Valid && r.InterruptAgent != nil:
		ev.Interrupt = &webhooks.Interrupt{
			ID: r.InterruptID.Bytes, Agent: *r.InterruptAgent, Tool: deref(r.InterruptTool), Input: rawOrNilBytes(r.InterruptInput),
			Deadline: r.ExpiresAt, SessionID: deref(r.InterruptSessionID), SnapshotID: deref(r.InterruptSnapshotID),
			Status: deref(r.InterruptStatus), Resolution: rawOrNilBytes(r.Resolution), ResolvedBy: deref(r.ResolvedBy),
			ResolvedAt: r.ResolvedAt,
		}
		if r.InterruptCreatedAt != nil {
			ev.Interrupt.CreatedAt = *r.InterruptCreatedAt
		}
	case r.CallKey != nil:
		ev.ToolCall = &webhooks.ToolCall{
			SnapshotID: deref(r.TurnSnapshotID), SessionID: deref(r.CallSessionID), Agent: deref(r.TurnAgent),
			Key: *r.CallKey, Tool: deref(r.CallTool), Ref: deref(r.CallRef), Status: deref(r.CallStatus),
		}
		if r.CallHttpStatus != nil {
			ev.ToolCall.HTTPStatus = int(*r.CallHttpStatus)
		}
	case r.TurnSnapshotID != nil:
		ev.Turn = &webhooks.Turn{
			SnapshotID: *r.TurnSnapshotID, SessionID: deref(r.TurnSessionID), Agent: deref(r.TurnAgent),
			FinishReason: deref(r.TurnFinishReason), Error: rawOrNilBytes(r.TurnError),
		}
	}
	return ev
}

// LeaseWebhookCursors implements webhooks.Store (a system function:
// the lease spans tenants), committed without waiting for the WAL flush: a
// lease lost in a crash only lets another instance read sooner.
func (s *PgStore) LeaseWebhookCursors(ctx context.Context, owner string, lease time.Duration, limit int, held []uuid.UUID) ([]webhooks.Cursor, error) {
	if held == nil {
		held = []uuid.UUID{}
	}
	var rows []db.WebhookCursorLease
	err := s.piped(ctx, "", func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		rows, err = q.LeaseWebhookCursors(ctx, db.LeaseWebhookCursorsParams{
			Owner: owner, LeaseSeconds: lease.Seconds(), Batch: int32(limit), Held: held,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhooks.Cursor, len(rows))
	for i, r := range rows {
		out[i] = webhooks.Cursor{TenantID: r.TenantID, WebhookID: r.WebhookID, URL: r.Url, EventTypes: r.EventTypes,
			Pos: store.EventPos{Xid: r.Xid, ID: r.ID}}
	}
	return out, nil
}

// WebhookCursorEvents implements webhooks.Store.
func (s *PgStore) WebhookCursorEvents(ctx context.Context, c webhooks.Cursor, limit int) ([]webhooks.Event, store.EventPos, error) {
	var rows []db.WebhookEventContext
	err := s.piped(ctx, c.TenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.WebhookCursorEvents(ctx, db.WebhookCursorEventsParams{
			TenantID: c.TenantID, AfterXid: c.Pos.Xid, AfterID: c.Pos.ID, EventTypes: c.EventTypes, Batch: int32(limit),
		})
		return err
	})
	if err != nil {
		return nil, c.Pos, err
	}
	read := c.Pos
	out := make([]webhooks.Event, 0, len(rows))
	for _, r := range rows {
		read = store.EventPos{Xid: r.EventXid, ID: r.EventID}
		if r.EventType == "" {
			// Where the endpoint has read up to (see the function).
			continue
		}
		ev := eventContextOf(r)
		ev.URL, ev.Enabled = c.URL, true
		out = append(out, *ev)
	}
	return out, read, nil
}

// AdvanceWebhookCursor implements webhooks.Store, committed without
// waiting for the WAL flush: a position lost in a crash makes its events
// attempted again, and delivery is at least once anyway.
func (s *PgStore) AdvanceWebhookCursor(ctx context.Context, owner string, c webhooks.Cursor, to store.EventPos, lease time.Duration, attempts []webhooks.Attempt) (bool, error) {
	p := db.AdvanceWebhookCursorParams{
		TenantID: c.TenantID, WebhookID: c.WebhookID, Owner: owner, LeaseSeconds: lease.Seconds(),
		FromXid: c.Pos.Xid, FromID: c.Pos.ID, ToXid: to.Xid, ToID: to.ID,
	}
	for _, a := range attempts {
		o := a.Outcome
		next, status := outcomeColumns(o)
		p.Xids = append(p.Xids, a.Pos.Xid)
		p.Ids = append(p.Ids, a.Pos.ID)
		p.Statuses = append(p.Statuses, o.Status)
		p.NextAttemptAts = append(p.NextAttemptAts, next)
		p.AttemptedAts = append(p.AttemptedAts, a.AttemptedAt)
		p.AnsweredAts = append(p.AnsweredAts, a.AnsweredAt)
		p.LastStatuses = append(p.LastStatuses, status)
		p.LastErrors = append(p.LastErrors, o.Error)
		p.OccurredAts = append(p.OccurredAts, a.OccurredAt)
	}
	var moved bool
	err := s.piped(ctx, c.TenantID, func(q *db.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		var err error
		moved, err = q.AdvanceWebhookCursor(ctx, p)
		return err
	})
	return moved, err
}

// outcomeColumns are an attempt's next attempt time (zero: none) and HTTP
// status (0: no answer) as the statements take them.
func outcomeColumns(o webhooks.Outcome) (next time.Time, status int32) {
	if o.NextAttemptAt != nil {
		next = *o.NextAttemptAt
	}
	if o.HTTPStatus > 0 && o.HTTPStatus <= math.MaxInt32 {
		status = int32(o.HTTPStatus)
	}
	return next, status
}

// FinishWebhookDeliveries implements webhooks.Store: one statement
// per tenant, committed without waiting for the WAL flush (see
// CommitAsynchronously).
func (s *PgStore) FinishWebhookDeliveries(ctx context.Context, owner string, done []webhooks.Finish) (map[uuid.UUID]bool, error) {
	byTenant := map[string]*db.FinishDeliveryAttemptsParams{}
	for _, f := range done {
		p := byTenant[f.Claim.TenantID]
		if p == nil {
			p = &db.FinishDeliveryAttemptsParams{TenantID: f.Claim.TenantID, Owner: owner}
			byTenant[f.Claim.TenantID] = p
		}
		o := f.Outcome
		next, status := outcomeColumns(o)
		p.WebhookIds = append(p.WebhookIds, f.Claim.WebhookID)
		p.Ids = append(p.Ids, f.Claim.ID)
		p.Attempts = append(p.Attempts, int32(f.Claim.Attempts))
		p.Statuses = append(p.Statuses, o.Status)
		p.NextAttemptAts = append(p.NextAttemptAts, next)
		p.LastStatuses = append(p.LastStatuses, status)
		p.LastErrors = append(p.LastErrors, o.Error)
	}
	recorded := map[uuid.UUID]bool{}
	for tenant, p := range byTenant {
		var ids []uuid.UUID
		err := s.piped(ctx, tenant, func(q *db.Queries) error {
			if err := q.CommitAsynchronously(ctx); err != nil {
				return err
			}
			var err error
			ids, err = q.FinishDeliveryAttempts(ctx, *p)
			return err
		})
		if err != nil {
			return recorded, err
		}
		for _, id := range ids {
			recorded[id] = true
		}
	}
	return recorded, nil
}

func deliveryOf(r db.ListWebhookDeliveriesRow) webhooks.Delivery {
	d := webhooks.Delivery{
		ID: r.ID, WebhookID: r.WebhookID, EventType: events.Name(r.EventType), Status: r.Status, Attempts: int(r.Attempts),
		NextAttemptAt: r.NextAttemptAt, LastAttemptAt: r.LastAttemptAt, LastError: deref(r.LastError),
		DeliveredAt: r.DeliveredAt, CreatedAt: r.CreatedAt, Pos: store.EventPos{Xid: int64(r.EventXid.Uint64), ID: r.EventID},
	}
	if r.Status != webhooks.DeliveryPending {
		d.NextAttemptAt = nil
	}
	if r.LastStatus != nil {
		d.LastStatus = int(*r.LastStatus)
	}
	if r.InterruptID.Valid {
		id := uuid.UUID(r.InterruptID.Bytes)
		d.InterruptID = &id
	}
	return d
}

// ListWebhookDeliveries implements webhooks.Store.
func (s *PgStore) ListWebhookDeliveries(ctx context.Context, p webhooks.ListDeliveriesParams) ([]webhooks.Delivery, error) {
	params := db.ListWebhookDeliveriesParams{TenantID: p.TenantID, WebhookID: p.WebhookID, PageSize: int32(p.Limit)}
	if p.Status != "" {
		params.Status = &p.Status
	}
	if p.BeforeID != uuid.Nil {
		params.BeforeID = pgtype.UUID{Bytes: p.BeforeID, Valid: true}
	}
	var rows []db.ListWebhookDeliveriesRow
	err := s.piped(ctx, p.TenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListWebhookDeliveries(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhooks.Delivery, len(rows))
	for i, r := range rows {
		out[i] = deliveryOf(r)
	}
	return out, nil
}

// GetWebhookDelivery implements webhooks.Store.
func (s *PgStore) GetWebhookDelivery(ctx context.Context, tenantID string, webhookID, id uuid.UUID) (*webhooks.Delivery, error) {
	var r db.GetWebhookDeliveryRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		r, err = q.GetWebhookDelivery(ctx, db.GetWebhookDeliveryParams{TenantID: tenantID, WebhookID: webhookID, ID: id})
		return err
	})
	if err != nil {
		return nil, notFound(err)
	}
	d := deliveryOf(db.ListWebhookDeliveriesRow(r))
	return &d, nil
}

// RedeliverWebhookDelivery implements webhooks.Store.
func (s *PgStore) RedeliverWebhookDelivery(ctx context.Context, tenantID string, webhookID, id uuid.UUID) (*webhooks.Delivery, error) {
	var row db.RedeliverWebhookDeliveryRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.RedeliverWebhookDelivery(ctx, db.RedeliverWebhookDeliveryParams{TenantID: tenantID, WebhookID: webhookID, ID: id})
		return err
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, pgx.ErrNoRows) {
		// Missing, or still pending: tell which.
		d, gerr := s.GetWebhookDelivery(ctx, tenantID, webhookID, id)
		if gerr != nil {
			return nil, gerr
		}
		if d.Status == webhooks.DeliveryPending {
			return nil, store.Errorf(store.CodeFailedPrecondition, "delivery %s is still pending: it is attempted again without a redelivery", id)
		}
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	s.eventsWritten() // wakes the dispatchers
	d := deliveryOf(db.ListWebhookDeliveriesRow(row))
	return &d, nil
}

// WebhookHealth implements webhooks.Store.
func (s *PgStore) WebhookHealth(ctx context.Context, tenantID string) ([]webhooks.Health, error) {
	var rows []db.ListWebhookHealthRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListWebhookHealth(ctx, tenantID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]webhooks.Health, len(rows))
	for i, r := range rows {
		out[i] = webhooks.Health{
			WebhookID: r.WebhookID, Pending: r.Pending, Delivered: r.Delivered, Dead: r.Dead, Retrying: r.Retrying,
			OldestPendingAt: epochTime(r.OldestPendingEpoch), LastDeliveredAt: epochTime(r.LastDeliveredEpoch),
			LastFailureAt:      epochTime(r.LastFailureEpoch),
			DeliveryP50Seconds: nonNegative(r.DeliveryP50Seconds), DeliveryP90Seconds: nonNegative(r.DeliveryP90Seconds),
		}
	}
	return out, nil
}

func epochTime(sec float64) *time.Time {
	if sec < 0 {
		return nil
	}
	t := time.Unix(0, int64(sec*1e9)).UTC()
	return &t
}

func nonNegative(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return &v
}

// notFound maps a missing row to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
