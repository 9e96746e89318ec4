package webhooks_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// env is a runtime with the demo banking agent over a fresh database, the
// webhook manager, and a dispatcher with a short retry schedule.
type env struct {
	t     *testing.T
	url   string
	rt    *service.Runtime
	store *pgstore.PgStore
	watch *watchedStore // the dispatchers' store
	m     *webhooks.Manager
	ids   *keys.EventIDs
	acme  auth.Caller
	rival auth.Caller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	te := servicetest.New(t, servicetest.Options{
		Register: func(rt *service.Runtime) error { return rt.Register(demo.BankingAgent(demo.NewModel())) },
	})
	url, store, rt := te.URL, te.Store, te.Runtime
	for _, id := range []string{"acme", "rival"} {
		if _, err := te.Tenants.CreateTenant(context.Background(), id, id); err != nil {
			t.Fatal(err)
		}
	}
	return &env{
		t: t, url: url, rt: rt, store: store, watch: newWatchedStore(store), m: &webhooks.Manager{Store: store, AllowLoopback: true},
		ids:  keys.NewEventIDs(store.SigningKeys),
		acme: auth.Caller{TenantID: "acme", Actor: "test:acme"}, rival: auth.Caller{TenantID: "rival", Actor: "test:rival"},
	}
}

// exec runs SQL as the database's owner.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatal(err)
	}
}

// queryRow runs a query as the database's owner and scans its one row
// into dest.
func (e *env) queryRow(dest []any, sql string, args ...any) {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(dest...); err != nil {
		e.t.Fatal(err)
	}
}

// dispatcher starts a dispatcher named owner until the test ends, or
// until the function it returns is called.
func (e *env) dispatcher(owner string, tune func(d *webhooks.Dispatcher)) (stop func()) {
	d := &webhooks.Dispatcher{
		Store: e.watch, IDs: e.ids, Owner: owner, AllowLoopback: true,
		Schedule: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		Lease:    5 * time.Second, Timeout: 2 * time.Second, Poll: 50 * time.Millisecond,
		PublicURL: "https://holdpoint.example", Log: testlog.Logger(e.t),
	}
	if tune != nil {
		tune(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

// pause sends a transfer request to the demo agent, which pauses on its
// approval interrupt; it returns the output and when the turn ended.
func (e *env) pause(c auth.Caller, text string) (*protocol.AgentOutput, time.Time) {
	e.t.Helper()
	out, err := e.rt.InvokeOne(context.Background(), c, demo.BankingAgentName, protocol.AgentInit{},
		protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(text)}}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if out.FinishReason != "interrupted" {
		e.t.Fatalf("turn finished %q, want interrupted", out.FinishReason)
	}
	return out, time.Now()
}

func (e *env) pending(c auth.Caller) []store.Interrupt {
	e.t.Helper()
	items, err := inbox.New(e.rt).ListInterrupts(context.Background(), c, store.InterruptFilter{Status: "pending", Limit: 50})
	if err != nil {
		e.t.Fatal(err)
	}
	return items
}

// call is one request a receiver got.
type call struct {
	at      time.Time
	header  http.Header
	body    []byte
	payload webhooks.Payload
}

// receiver is a tenant's endpoint. answer decides each response (by the
// 1-based number of the request); it verifies signatures with secrets.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	secret [][]byte
	answer func(n int, w http.ResponseWriter)
	got    chan struct{}
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	r := &receiver{t: t, answer: answer, got: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		secrets := r.secret
		r.mu.Unlock()
		if err := httptool.Verify(secrets, req.Header, body, time.Now(), time.Minute); err != nil {
			t.Errorf("signature: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		c := call{at: time.Now(), header: req.Header.Clone(), body: body}
		if err := json.Unmarshal(body, &c.payload); err != nil {
			t.Errorf("payload: %v", err)
		}
		r.mu.Lock()
		r.calls = append(r.calls, c)
		n := len(r.calls)
		r.mu.Unlock()
		r.got <- struct{}{}
		if r.answer != nil {
			r.answer(n, w)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) setSecret(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = nil
	for _, s := range secrets {
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhooks.SecretPrefix))
		if err != nil {
			r.t.Fatal(err)
		}
		r.secret = append(r.secret, b)
	}
}

// wait returns the calls once there are n of them (within 10 s).
func (r *receiver) wait(n int) []call {
	r.t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		if len(r.calls) >= n {
			out := append([]call(nil), r.calls...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-deadline:
			r.t.Fatalf("receiver got %d calls within a minute, want %d", len(r.calls), n)
		}
	}
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (e *env) create(c auth.Caller, r *receiver, types ...string) *webhooks.Created {
	e.t.Helper()
	u := r.url()
	w, err := e.m.Create(context.Background(), c, webhooks.Input{URL: &u, EventTypes: types})
	if err != nil {
		e.t.Fatal(err)
	}
	r.setSecret(w.Secret)
	return w
}

// deliveries returns an endpoint's deliveries once cond holds for them.
func (e *env) deliveries(c auth.Caller, id uuid.UUID, cond func([]webhooks.Delivery) bool) []webhooks.Delivery {
	e.t.Helper()
	var items []webhooks.Delivery
	waitfor.Until(e.t, "the deliveries to reach the wanted state", 30*time.Second, func() bool {
		page, err := e.m.Deliveries(context.Background(), c, e.ids, id, "", "", 100)
		if err != nil {
			e.t.Fatal(err)
		}
		items = page.Items
		return cond(items)
	})
	return items
}

func ok(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

func TestPendingApprovalSendsSignedWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	hook := e.create(e.acme, r, "interrupt.created")
	e.dispatcher("one", nil)

	out, ended := e.pause(e.acme, "Transfer $50 to account 12345")
	c := r.wait(1)[0]
	took := c.at.Sub(ended)
	// A figure, not an assertion: delivery latency is measured by platform
	// bench --webhook; on a loaded machine it can take seconds.
	t.Logf("webhook arrived %s after the turn ended", took)
	irq := e.pending(e.acme)[0]
	p := c.payload
	if p.Type != "interrupt.created" || p.Sequence != 1 || p.TenantID != "acme" {
		t.Errorf("payload %+v", p)
	}
	if p.ID == "" || p.ID != c.header.Get("webhook-id") || !strings.HasPrefix(p.ID, "ev_") {
		t.Errorf("payload id %q, webhook-id %q", p.ID, c.header.Get("webhook-id"))
	}
	d := p.Data.Interrupt
	if d == nil || d.ID != irq.ID || d.Agent != demo.BankingAgentName || d.Tool != "userApproval" ||
		d.SessionID != out.SessionID || d.SnapshotID != out.SnapshotID || d.Deadline == nil || len(d.Input) == 0 {
		t.Errorf("payload interrupt %+v, want %s of session %s", d, irq.ID, out.SessionID)
	}
	if p.Links["interrupt"] != "https://holdpoint.example/api/v1/interrupts/"+irq.ID.String() ||
		p.Links["ui"] != "https://holdpoint.example/ui/interrupts/"+irq.ID.String() {
		t.Errorf("links %v", p.Links)
	}
	if !strings.Contains(string(c.body), `"details":"Transfer $50.00 to account 12345"`) {
		t.Errorf("payload lacks the interrupt's input: %s", c.body)
	}
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDelivered
	})
	if ds[0].EventID != p.ID || ds[0].Attempts != 1 || ds[0].LastStatus != http.StatusNoContent || ds[0].InterruptID == nil {
		t.Errorf("delivery %+v", ds[0])
	}
	// Only the subscribed type: the turn's own event went nowhere, though
	// the endpoint read it.
	e.caughtUp(hook.ID)
	if n := r.count(); n != 1 {
		t.Errorf("receiver got %d calls, want 1", n)
	}
}

func TestRetriesKeepTheWebhookID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n <= 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	hook := e.create(e.acme, r, "interrupt.created")
	e.dispatcher("one", nil)
	e.pause(e.acme, "Transfer $50 to account 12345")
	calls := r.wait(3)
	for _, c := range calls[1:] {
		if c.header.Get("webhook-id") != calls[0].header.Get("webhook-id") || c.payload.ID != calls[0].payload.ID {
			t.Errorf("retry changed the id: %q then %q", calls[0].header.Get("webhook-id"), c.header.Get("webhook-id"))
		}
	}
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDelivered
	})
	if ds[0].Attempts != 3 {
		t.Errorf("delivered after %d attempts, want 3", ds[0].Attempts)
	}
}

func TestDeadLetterThenRedeliver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	status := http.StatusInternalServerError
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
	})
	hook := e.create(e.acme, r, "interrupt.created")
	e.dispatcher("one", nil)
	e.pause(e.acme, "Transfer $50 to account 12345")
	// Two retries in the schedule: three attempts, then dead.
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDead
	})
	if ds[0].Attempts != 3 || ds[0].LastStatus != http.StatusInternalServerError || ds[0].LastError == "" || ds[0].NextAttemptAt != nil {
		t.Errorf("dead delivery %+v", ds[0])
	}
	if n := r.count(); n != 3 {
		t.Errorf("receiver got %d attempts, want 3", n)
	}
	health, err := e.m.Health(context.Background(), e.acme)
	if err != nil || len(health) != 1 || health[0].Dead != 1 || health[0].LastFailureAt == nil {
		t.Errorf("health %+v %v", health, err)
	}
	// A pending delivery cannot be redelivered; a dead one can.
	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	d, err := e.m.Redeliver(context.Background(), e.acme, e.ids, hook.ID, ds[0].ID)
	if err != nil || d.Status != webhooks.DeliveryPending || d.EventID != ds[0].EventID {
		t.Fatalf("redeliver: %+v %v", d, err)
	}
	calls := r.wait(4)
	if calls[3].header.Get("webhook-id") != calls[0].header.Get("webhook-id") {
		t.Errorf("redelivery has webhook-id %q, want %q", calls[3].header.Get("webhook-id"), calls[0].header.Get("webhook-id"))
	}
	e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDelivered && ds[0].Attempts == 1
	})
	if _, err := e.m.Redeliver(context.Background(), e.rival, e.ids, hook.ID, ds[0].ID); store.AsError(err).Status != store.CodeNotFound {
		t.Errorf("rival redelivered acme's delivery: %v", err)
	}
}

func TestGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	hook := e.create(e.acme, r, "interrupt.created")
	e.dispatcher("one", nil)
	e.pause(e.acme, "Transfer $50 to account 12345")
	e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDead && ds[0].Attempts == 1
	})
	var w *webhooks.Webhook
	waitfor.Until(t, "the endpoint to be disabled after a 410", 30*time.Second, func() bool {
		var err error
		if w, err = e.m.Get(context.Background(), e.acme, hook.ID); err != nil {
			t.Fatal(err)
		}
		return !w.Enabled
	})
	if !strings.Contains(w.DisabledReason, "410") {
		t.Errorf("disabled reason %q", w.DisabledReason)
	}
	// A disabled endpoint gets no new deliveries: the dispatcher looks
	// for work twice after the new event and takes nothing of it.
	disabled := time.Now()
	_, ended := e.pause(e.acme, "Transfer $60 to account 12345")
	e.looked(ended, 2)
	e.untouched(disabled, hook.ID, true)
	if n := r.count(); n != 1 {
		t.Errorf("a disabled endpoint got %d calls, want 1", n)
	}
}

func TestTurnAndToolEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	e.create(e.acme, r, "turn.completed", "tool.called", "interrupt.resolved")
	e.dispatcher("one", nil)
	out, _ := e.pause(e.acme, "Transfer $50 to account 12345")
	irq := e.pending(e.acme)[0]
	if _, err := inbox.New(e.rt).RespondInterrupt(context.Background(), e.acme, irq.ID, json.RawMessage(`{"approved":true}`), "ok"); err != nil {
		t.Fatal(err)
	}
	// The paused turn, the decision, the tool call, the continued turn:
	// order is not promised, the set is.
	var seen map[string]webhooks.Payload
	waitfor.Until(t, "the four events", 30*time.Second, func() bool {
		seen = map[string]webhooks.Payload{}
		for _, c := range r.wait(1) {
			key := c.payload.Type
			if c.payload.Type == "turn.completed" && c.payload.Data.Turn != nil {
				key += "/" + c.payload.Data.Turn.FinishReason
			}
			seen[key] = c.payload
		}
		return len(seen) >= 4
	})
	paused := seen["turn.completed/interrupted"].Data.Turn
	if paused == nil || paused.SnapshotID != out.SnapshotID || paused.SessionID != out.SessionID || paused.Agent != demo.BankingAgentName {
		t.Errorf("paused turn %+v", paused)
	}
	tool := seen["tool.called"].Data.ToolCall
	if tool == nil || tool.Tool != "transferMoney" || tool.Status == "" || tool.SessionID != out.SessionID {
		t.Errorf("tool call %+v", tool)
	}
	res := seen["interrupt.resolved"]
	if res.Data.Interrupt == nil || res.Data.Interrupt.ID != irq.ID || res.Sequence < 2 ||
		!strings.Contains(string(res.Data.Interrupt.Resolution), "approved") || res.Data.Interrupt.ResolvedBy != "test:acme" {
		t.Errorf("resolved %+v", res)
	}
	if _, ok := seen["turn.completed/stop"]; !ok || len(seen) != 4 {
		t.Errorf("no completed continued turn in %v", mapKeys(seen))
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestHangingReceiverBlocksNoOtherEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	hang := newReceiver(t, func(_ int, w http.ResponseWriter) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	})
	defer close(release)
	fast := newReceiver(t, ok)
	e.create(e.acme, hang, "interrupt.created")
	e.create(e.acme, fast, "interrupt.created")
	e.dispatcher("one", func(d *webhooks.Dispatcher) {
		// Long enough that the hanging receiver's handler is reached on a
		// loaded machine (a call cut off before is not counted), shorter
		// than its hang.
		d.Timeout = 2 * time.Second
		d.Concurrency, d.PerEndpoint = 4, 2
		d.Schedule = []time.Duration{time.Hour}
	})
	for i := 0; i < 6; i++ {
		e.pause(e.acme, "Transfer $50 to account 12345")
	}
	// Every delivery to the fast endpoint arrives while the hanging one
	// holds its share of the workers, and the hanging one was called.
	fast.wait(6)
	hang.wait(1)
}

func TestLeaseRunsOutAndAnotherInstanceDelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	hook := e.create(e.acme, r, "interrupt.created")
	e.pause(e.acme, "Transfer $50 to account 12345")
	// An instance leases the endpoint, reads its event and dies before
	// attempting it.
	ctx := context.Background()
	var leased []webhooks.Cursor
	// The dead instance's lease is short, as the alive one waits it out;
	// leasedAt is taken before each lease, so a check made while
	// time.Since(leasedAt) < lease is surely within it.
	const lease = 2 * time.Second
	var leasedAt time.Time
	waitfor.Until(t, "an endpoint to read for", 30*time.Second, func() bool {
		var err error
		leasedAt = time.Now()
		if leased, err = e.store.LeaseWebhookCursors(ctx, "dead", lease, 10, nil); err != nil {
			t.Fatal(err)
		}
		return len(leased) > 0
	})
	if len(leased) != 1 || leased[0].WebhookID != hook.ID {
		t.Fatalf("leased %+v", leased)
	}
	// Only its type comes back; the position read up to passes the
	// turn's other events.
	events, read, err := e.store.WebhookCursorEvents(ctx, leased[0], 10)
	if err != nil || len(events) != 1 || events[0].Type != "interrupt.created" || events[0].Pos.After(read) || !read.After(leased[0].Pos) {
		t.Fatalf("events after the position: %+v up to %+v, %v", events, read, err)
	}
	// While its lease holds, nobody else reads for the endpoint. (A
	// machine that stalled past the lease before the check makes it
	// moot: the check is made only within the lease, and the late lease
	// is given back to the dispatcher below by running out.)
	checkedAt := time.Now()
	more, err := e.store.LeaseWebhookCursors(ctx, "other", lease, 10, nil)
	if err != nil || (len(more) != 0 && time.Since(leasedAt) < lease) {
		t.Fatalf("leased a leased endpoint: %v %v", more, err)
	}
	if len(more) != 0 {
		t.Logf("the check came %v after the lease, past it: not made", checkedAt.Sub(leasedAt))
	}
	e.dispatcher("alive", nil)
	c := r.wait(1)[0]
	msgID := c.header.Get("webhook-id")
	e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDelivered && ds[0].EventID == msgID && ds[0].Attempts == 1
	})
	// The dead instance's late batch is fenced off: it moves nothing and
	// records nothing.
	last := events[len(events)-1]
	moved, err := e.store.AdvanceWebhookCursor(ctx, "dead", leased[0], read, time.Minute, []webhooks.Attempt{{
		Pos: last.Pos, OccurredAt: last.OccurredAt, AttemptedAt: time.Now(), AnsweredAt: time.Now(),
		Outcome: webhooks.Outcome{Status: webhooks.DeliveryDead, Error: "late"}}})
	if err != nil || moved {
		t.Errorf("a stale lease moved the position: %v %v", moved, err)
	}
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool { return true })
	if len(ds) != 1 || ds[0].Status != webhooks.DeliveryDelivered {
		t.Errorf("deliveries after the stale batch: %+v", ds)
	}
	if n := len(r.wait(0)); n != 1 {
		t.Errorf("the receiver got %d calls, want 1", n)
	}
}

func TestRetryLeaseRunsOutAndAnotherInstanceRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	hook := e.create(e.acme, r, "interrupt.created")
	// The first attempt fails; its retry is due in an hour.
	stop := e.dispatcher("first", func(d *webhooks.Dispatcher) { d.Schedule = []time.Duration{time.Hour} })
	e.pause(e.acme, "Transfer $50 to account 12345")
	failed := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Attempts == 1 && ds[0].Status == webhooks.DeliveryPending
	})[0]
	stop()
	if _, err := e.m.Redeliver(context.Background(), e.acme, e.ids, hook.ID, failed.ID); err == nil {
		t.Fatal("redelivered a pending delivery")
	}
	e.exec(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1`, failed.ID)
	// An instance claims the retry and dies before attempting it.
	ctx := context.Background()
	// The dead instance's lease is short, as the alive one waits it out;
	// claimedAt is taken before the claim, so a check made while
	// time.Since(claimedAt) < lease is surely within it.
	const lease = 2 * time.Second
	claimedAt := time.Now()
	claims, err := e.store.ClaimWebhookDeliveries(ctx, "dead", lease, 10, 4, nil)
	if err != nil || len(claims) != 1 || claims[0].Attempts != 2 {
		t.Fatalf("claim: %+v %v", claims, err)
	}
	// While its lease holds, nobody else takes it. (A machine that
	// stalled past the lease before the check makes it moot: the check
	// is made only within the lease. A late claim by "other" dies too,
	// its short lease runs out as well, and the retry counts one more
	// attempt.)
	wantAttempts := 3
	more, err := e.store.ClaimWebhookDeliveries(ctx, "other", lease, 10, 4, nil)
	if err != nil || (len(more) != 0 && time.Since(claimedAt) < lease) {
		t.Fatalf("claimed a leased delivery: %v %v", more, err)
	}
	if len(more) != 0 {
		t.Logf("the check came %v after the claim, past its lease: not made", time.Since(claimedAt))
		wantAttempts = 4
	}
	e.dispatcher("alive", nil)
	calls := r.wait(2)
	if calls[0].header.Get("webhook-id") != calls[1].header.Get("webhook-id") || calls[1].header.Get("webhook-id") != failed.EventID {
		t.Errorf("the retry's webhook-id differs: %q, %q, want %q", calls[0].header.Get("webhook-id"), calls[1].header.Get("webhook-id"), failed.EventID)
	}
	e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status == webhooks.DeliveryDelivered && ds[0].Attempts == wantAttempts
	})
	// The dead instance's late outcome is fenced off.
	recorded, err := e.store.FinishWebhookDeliveries(ctx, "dead", []webhooks.Finish{
		{Claim: claims[0], Outcome: webhooks.Outcome{Status: webhooks.DeliveryDead, Error: "late"}}})
	if err != nil || len(recorded) != 0 {
		t.Errorf("a stale lease recorded an outcome: %v %v", recorded, err)
	}
}

func TestRotatedSecretSignsAlongsideTheOld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	hook := e.create(e.acme, r, "interrupt.created")
	first := hook.Secret
	second, err := e.m.RotateSecret(context.Background(), e.acme, hook.ID, time.Hour)
	if err != nil || second == first || !strings.HasPrefix(second, webhooks.SecretPrefix) {
		t.Fatalf("rotate: %q %v", second, err)
	}
	e.dispatcher("one", nil)
	// A receiver still on the old secret verifies; so does one on the new.
	r.setSecret(first)
	e.pause(e.acme, "Transfer $50 to account 12345")
	c := r.wait(1)[0]
	if sigs := strings.Fields(c.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("signatures %q, want two during the overlap", sigs)
	}
	r.setSecret(second)
	e.pause(e.acme, "Transfer $60 to account 12345")
	r.wait(2)
	if _, err := e.m.RotateSecret(context.Background(), e.rival, hook.ID, 0); store.AsError(err).Status != store.CodeNotFound {
		t.Errorf("rival rotated acme's secret: %v", err)
	}
}

func TestBadEndpointsAreRefusedWithTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	strict := &webhooks.Manager{Store: e.store} // no loopback
	str := func(s string) *string { return &s }
	r := newReceiver(t, ok)
	e.create(e.acme, r)
	cases := []struct {
		name  string
		m     *webhooks.Manager
		in    webhooks.Input
		field string
	}{
		{"no url", e.m, webhooks.Input{}, "url"},
		{"not a url", e.m, webhooks.Input{URL: str("::not a url")}, "url"},
		{"plain http", strict, webhooks.Input{URL: str("http://hooks.example.com/x")}, "url"},
		{"loopback", strict, webhooks.Input{URL: str("https://127.0.0.1/x")}, "url"},
		{"private address", strict, webhooks.Input{URL: str("https://10.1.2.3/x")}, "url"},
		{"metadata address", strict, webhooks.Input{URL: str("https://169.254.169.254/latest")}, "url"},
		{"credentials in url", strict, webhooks.Input{URL: str("https://user:pw@hooks.example.com/x")}, "url"},
		{"unknown event type", e.m, webhooks.Input{URL: str("https://hooks.example.com/x"), EventTypes: []string{"interrupt.eaten"}}, "eventTypes"},
		{"duplicate endpoint", e.m, webhooks.Input{URL: str(r.url())}, "url"},
		{"long description", e.m, webhooks.Input{URL: str("https://hooks.example.com/y"), Description: str(strings.Repeat("x", 501))}, "description"},
	}
	for _, tc := range cases {
		_, err := tc.m.Create(context.Background(), e.acme, tc.in)
		se := store.AsError(err)
		details, _ := se.Details.(map[string]any)
		if se.Status != store.CodeInvalidArgument || details["field"] != tc.field {
			t.Errorf("%s: %v (details %v), want INVALID_ARGUMENT on %s", tc.name, err, se.Details, tc.field)
		}
	}
	list, err := e.m.List(context.Background(), e.acme)
	if err != nil || len(list) != 1 {
		t.Errorf("endpoints after the refusals: %d %v, want the one created", len(list), err)
	}
}

func TestEndpointsAreTenantScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acmeRecv, rivalRecv := newReceiver(t, ok), newReceiver(t, ok)
	hook := e.create(e.acme, acmeRecv, "interrupt.created")
	rivalHook := e.create(e.rival, rivalRecv, "interrupt.created")
	e.dispatcher("one", nil)
	ctx := context.Background()
	off := false
	for name, err := range map[string]error{
		"get":    func() error { _, err := e.m.Get(ctx, e.rival, hook.ID); return err }(),
		"update": func() error { _, err := e.m.Update(ctx, e.rival, hook.ID, webhooks.Input{Enabled: &off}); return err }(),
		"list":   func() error { _, err := e.m.Deliveries(ctx, e.rival, e.ids, hook.ID, "", "", 10); return err }(),
		"delete": e.m.Delete(ctx, e.rival, hook.ID),
	} {
		if store.AsError(err).Status != store.CodeNotFound {
			t.Errorf("rival %s of acme's endpoint: %v", name, err)
		}
	}
	if list, _ := e.m.List(ctx, e.rival); len(list) != 1 || list[0].ID == hook.ID {
		t.Errorf("rival lists %+v", list)
	}
	e.pause(e.rival, "Transfer $50 to account 12345")
	rivalRecv.wait(1)
	e.pause(e.acme, "Transfer $50 to account 12345")
	got := acmeRecv.wait(1)
	e.caughtUp(hook.ID, rivalHook.ID) // each endpoint read all its tenant's events
	if acmeRecv.count() != 1 || rivalRecv.count() != 1 || got[0].payload.TenantID != "acme" {
		t.Errorf("acme got %d, rival %d", acmeRecv.count(), rivalRecv.count())
	}
	if w, err := e.m.Get(ctx, e.acme, hook.ID); err != nil || !w.Enabled {
		t.Errorf("acme's endpoint after rival's attempts: %+v %v", w, err)
	}
}

func TestRedirectsAndHugeBodiesAreFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	redirect := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		w.WriteHeader(http.StatusFound)
	})
	huge := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 64; i++ { // 4 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	a := e.create(e.acme, redirect, "interrupt.created")
	b := e.create(e.acme, huge, "interrupt.created")
	e.dispatcher("one", func(d *webhooks.Dispatcher) { d.Schedule = []time.Duration{time.Hour} })
	e.pause(e.acme, "Transfer $50 to account 12345")
	for _, id := range []uuid.UUID{a.ID, b.ID} {
		ds := e.deliveries(e.acme, id, func(ds []webhooks.Delivery) bool {
			return len(ds) == 1 && ds[0].Attempts == 1 && ds[0].LastError != ""
		})
		if ds[0].Status != webhooks.DeliveryPending || ds[0].NextAttemptAt == nil || time.Until(*ds[0].NextAttemptAt) < 30*time.Minute {
			t.Errorf("delivery after a failed attempt: %+v", ds[0])
		}
	}
}

func TestDeletedEndpointStopsDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	hook := e.create(e.acme, r, "interrupt.created")
	e.dispatcher("one", func(d *webhooks.Dispatcher) {
		d.Schedule = []time.Duration{200 * time.Millisecond, 200 * time.Millisecond}
	})
	e.pause(e.acme, "Transfer $50 to account 12345")
	r.wait(1)
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool { return len(ds) == 1 })
	if err := e.m.Delete(context.Background(), e.acme, hook.ID); err != nil {
		t.Fatal(err)
	}
	n, deleted := r.count(), time.Now()
	// Once the retry is due, the dispatcher claims due deliveries twice
	// and takes nothing of the deleted endpoint's.
	due := deleted
	if ds[0].NextAttemptAt != nil {
		due = later(due, *ds[0].NextAttemptAt)
	}
	e.looked(due, 2)
	e.untouched(deleted, hook.ID, true)
	if r.count() > n+1 { // one attempt may have been in flight
		t.Errorf("deliveries went on after the endpoint was deleted: %d then %d", n, r.count())
	}
	if _, err := e.m.Get(context.Background(), e.acme, hook.ID); !errors.Is(err, store.ErrNotFound) && store.AsError(err).Status != store.CodeNotFound {
		t.Errorf("deleted endpoint: %v", err)
	}
}

// TestEndpointReadsPastEventsOfOtherTypes: an endpoint that subscribes to
// one type reads past the others without attempting them or writing a
// row, so its position keeps up with the log.
func TestEndpointReadsPastEventsOfOtherTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	narrow := newReceiver(t, ok)
	all := newReceiver(t, ok)
	expired := e.create(e.acme, narrow, "interrupt.expired")
	e.create(e.acme, all, "interrupt.created", "turn.completed", "tool.called")
	e.dispatcher("one", nil)
	for range 3 {
		e.pause(e.acme, "Transfer $50 to account 12345")
	}
	all.wait(6) // each pause: interrupt.created and turn.completed
	e.caughtUp(expired.ID)
	if n := len(narrow.wait(0)); n != 0 {
		t.Errorf("the interrupt.expired endpoint got %d calls", n)
	}
	if ds := e.deliveries(e.acme, expired.ID, func([]webhooks.Delivery) bool { return true }); len(ds) != 0 {
		t.Errorf("the interrupt.expired endpoint has deliveries: %+v", ds)
	}
}

// TestBatchStopsStartingAttemptsAtItsBudget: an endpoint's events are read
// a batch at a time (Batch) and attempted PerEndpoint at a time; a batch
// stops starting attempts once it has run for its budget (half of what
// its lease leaves beyond an attempt's longest time), so it is recorded
// within its lease however slow the receiver, and the events it left are
// read again by the next batch: each is attempted once, none is lost.
func TestBatchStopsStartingAttemptsAtItsBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	inFlight, most := 0, 0
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(40 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	hook := e.create(e.acme, r, "interrupt.created")
	const events = 12
	for i := range events {
		e.pause(e.acme, fmt.Sprintf("Transfer $%d to account 12345", 10+i))
	}
	// Budget: (11.1 s lease - 1 s timeout - 10 s)/2 = 50 ms. Waves of two
	// attempts take 40 ms each (more on a loaded machine, which only cuts
	// sooner), so the first batch starts four attempts (at 0, 0, 40 and
	// 40 ms) and none at 80 ms.
	e.dispatcher("one", func(d *webhooks.Dispatcher) {
		d.PerEndpoint, d.Batch, d.Lease, d.Timeout = 2, events, 11100*time.Millisecond, time.Second
	})
	first := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool { return len(ds) > 0 })
	if len(first) >= events {
		t.Errorf("the first batch recorded %d deliveries: it attempted all %d events in one batch, past its budget", len(first), events)
	}
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool { return len(ds) == events })
	calls := r.wait(events)
	e.caughtUp(hook.ID) // and nothing is left to attempt again
	ids := map[string]bool{}
	for _, c := range r.wait(events) {
		ids[c.payload.ID] = true
	}
	if n := r.count(); n != events || len(ids) != events {
		t.Errorf("receiver got %d calls of %d events, want each of %d once", n, len(ids), events)
	}
	for _, d := range ds {
		if d.Status != webhooks.DeliveryDelivered || d.Attempts != 1 || !ids[d.EventID] {
			t.Errorf("delivery %+v", d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Errorf("%d attempts in flight to the endpoint at once, want at most PerEndpoint (2)", most)
	}
	t.Logf("first batch recorded %d of %d deliveries; %d calls", len(first), events, len(calls))
}

// privateResolver resolves every name to a private address, as an
// internal name would.
type privateResolver struct{}

func (privateResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP("10.9.8.7")}}, nil
}

// TestRefusedEndpointIsDeadAtOnceAndHidesTheAddress: an endpoint whose
// host resolves to an address the policy refuses is not retried (the
// delivery is dead after one attempt), and its lastError names the
// policy, not the host or the address, which only the server's log shows.
func TestRefusedEndpointIsDeadAtOnceAndHidesTheAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := "https://hooks.intranet.example/holdpoint"
	hook, err := e.m.Create(context.Background(), e.acme, webhooks.Input{URL: &u, EventTypes: []string{"interrupt.created"}})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	var mu sync.Mutex
	e.dispatcher("one", func(d *webhooks.Dispatcher) {
		d.Client.Resolver = privateResolver{}
		d.Log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logged.Write(p)
		}), nil))
	})
	e.pause(e.acme, "Transfer $50 to account 12345")
	ds := e.deliveries(e.acme, hook.ID, func(ds []webhooks.Delivery) bool {
		return len(ds) == 1 && ds[0].Status != webhooks.DeliveryPending
	})
	d := ds[0]
	if d.Status != webhooks.DeliveryDead || d.Attempts != 1 || d.NextAttemptAt != nil {
		t.Errorf("refused delivery %+v, want dead after one attempt", d)
	}
	if !strings.Contains(d.LastError, "not allowed by the address policy") || strings.Contains(d.LastError, "intranet") || strings.Contains(d.LastError, "10.9.8.7") {
		t.Errorf("lastError %q: want the policy named, not the host or the address", d.LastError)
	}
	// No retry comes later either: the dispatcher claims due deliveries
	// twice after the attempt and takes nothing of the endpoint's.
	dead := time.Now()
	e.looked(dead, 2)
	e.untouched(dead, hook.ID, false)
	ds = e.deliveries(e.acme, hook.ID, func([]webhooks.Delivery) bool { return true })
	if ds[0].Attempts != 1 || ds[0].Status != webhooks.DeliveryDead {
		t.Errorf("the refused delivery was retried: %+v", ds[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "hooks.intranet.example") || !strings.Contains(logged.String(), "10.9.8.7") {
		t.Errorf("the server's log does not say what was refused: %s", logged.String())
	}
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// writerFunc is an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestTenRotationsSignThreeTimes rotates an endpoint's secret ten times,
// each with an hour's overlap: a delivery carries three signatures (the
// newest secret and the two before it), and the oldest no longer verifies.
func TestTenRotationsSignThreeTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	hook := e.create(e.acme, r, "interrupt.created")
	secrets := []string{hook.Secret}
	for range 10 {
		s, err := e.m.RotateSecret(context.Background(), e.acme, hook.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, s)
	}
	r.setSecret(secrets[len(secrets)-3:]...) // the receiver keeps the three newest
	e.dispatcher("one", nil)
	e.pause(e.acme, "Transfer $50 to account 12345")
	c := r.wait(1)[0]
	sigs := strings.Fields(c.header.Get("webhook-signature"))
	if len(sigs) != 3 {
		t.Fatalf("%d signatures after ten rotations, want 3", len(sigs))
	}
	for i, s := range secrets {
		r.setSecret(s)
		r.mu.Lock()
		err := httptool.Verify(r.secret, c.header, c.body, time.Now(), time.Minute)
		r.mu.Unlock()
		if live := i >= len(secrets)-3; (err == nil) != live {
			t.Errorf("secret %d of %d verifies: %v, want %v", i+1, len(secrets), err == nil, live)
		}
	}
}
