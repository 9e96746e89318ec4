package webhooks_test

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// watchedStore is the dispatchers' store, noting each look they take for
// work: a test that must show a webhook is not sent waits for the looks
// that would have sent it, then asserts, instead of sleeping.
type watchedStore struct {
	webhooks.Store
	mu     sync.Mutex
	looks  []look
	notify chan struct{} // closed and replaced at each look
}

// look is one lease of endpoints to read for (lease) or one claim of due
// deliveries (claim): when it started, and the endpoints it returned.
type look struct {
	claim     bool
	started   time.Time
	endpoints []uuid.UUID
}

func newWatchedStore(s webhooks.Store) *watchedStore {
	return &watchedStore{Store: s, notify: make(chan struct{})}
}

func (w *watchedStore) note(l look) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.looks = append(w.looks, l)
	close(w.notify)
	w.notify = make(chan struct{})
}

func (w *watchedStore) LeaseWebhookCursors(ctx context.Context, owner string, lease time.Duration, limit int, held []uuid.UUID) ([]webhooks.Cursor, error) {
	l := look{started: time.Now()}
	cs, err := w.Store.LeaseWebhookCursors(ctx, owner, lease, limit, held)
	for _, c := range cs {
		l.endpoints = append(l.endpoints, c.WebhookID)
	}
	if err == nil {
		w.note(l)
	}
	return cs, err
}

func (w *watchedStore) ClaimWebhookDeliveries(ctx context.Context, owner string, lease time.Duration, batch, perEndpoint int, busy []uuid.UUID) ([]webhooks.Claim, error) {
	l := look{claim: true, started: time.Now()}
	cs, err := w.Store.ClaimWebhookDeliveries(ctx, owner, lease, batch, perEndpoint, busy)
	for _, c := range cs {
		l.endpoints = append(l.endpoints, c.WebhookID)
	}
	if err == nil {
		w.note(l)
	}
	return cs, err
}

// since returns the looks that started after t.
func (w *watchedStore) since(t time.Time) (leases, claims []look) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.looks {
		if !l.started.After(t) {
			continue
		}
		if l.claim {
			claims = append(claims, l)
		} else {
			leases = append(leases, l)
		}
	}
	return leases, claims
}

// looked waits until the dispatchers have leased endpoints to read for
// and claimed due deliveries, each n times, starting after t.
func (e *env) looked(t time.Time, n int) {
	e.t.Helper()
	waitfor.Until(e.t, "the dispatcher to look for work", 30*time.Second, func() bool {
		leases, claims := e.watch.since(t)
		return len(leases) >= n && len(claims) >= n
	})
}

// untouched fails the test if a look of the dispatchers that started
// after t returned the endpoint: a lease to read its events, or (when
// leases is false, only) a claim of its due deliveries.
func (e *env) untouched(t time.Time, id uuid.UUID, leases bool) {
	e.t.Helper()
	ls, cs := e.watch.since(t)
	if !leases {
		ls = nil
	}
	for _, l := range append(ls, cs...) {
		if slices.Contains(l.endpoints, id) {
			e.t.Errorf("the dispatcher took endpoint %s (claim %v) at %s, after %s", id, l.claim, l.started.Format(time.StampMicro), t.Format(time.StampMicro))
		}
	}
}

// caughtUp waits until each endpoint's position has reached the end of
// its tenant's event log: every event up to now was read, and those of
// its types attempted (an endpoint's position moves past a batch once the
// batch's attempts ended).
func (e *env) caughtUp(ids ...uuid.UUID) {
	e.t.Helper()
	for _, id := range ids {
		waitfor.Until(e.t, "endpoint "+id.String()+" to read the whole log", 30*time.Second, func() bool {
			var behind int
			e.queryRow([]any{&behind}, `SELECT count(*) FROM webhook_cursors c
				JOIN interrupt_events e ON e.tenant_id = c.tenant_id AND (e.xid, e.id) > (c.xid, c.id)
				WHERE c.webhook_id = $1`, id)
			return behind == 0
		})
	}
}
