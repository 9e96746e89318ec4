package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// Webhook and event stream tests: deliveries survive a receiver outage
// across a restart and the death (kill -9) of the delivering instance, and
// a listener that reconnects to another instance with Last-Event-ID misses
// nothing and gets nothing twice.

const (
	typeInterruptCreated = "interrupt.created"
	typeTurnCompleted    = "turn.completed"
)

// api sends a JSON request to the server's /api/v1 routes.
func (s *server) api(method, path string, body any, header http.Header) answer {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+"/api/v1"+path, rd)
	if err != nil {
		return answer{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b, err: err}
}

// createWebhook adds an endpoint of the default tenant and returns its id
// and decoded signing secret.
func createWebhook(t *testing.T, s *server, url string, types ...string) (string, []byte) {
	t.Helper()
	a := s.api(http.MethodPost, "/webhooks", map[string]any{"url": url, "eventTypes": types}, nil)
	if a.err != nil || a.status != http.StatusCreated {
		t.Fatalf("%s: create webhook: %s", s.name, a)
	}
	var w struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(a.body, &w); err != nil || w.ID == "" {
		t.Fatalf("%s: create webhook answered %s: %v", s.name, a, err)
	}
	enc, ok := strings.CutPrefix(w.Secret, "whsec_")
	if !ok {
		t.Fatalf("webhook secret %q does not start with whsec_", w.Secret)
	}
	secret, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(secret) == 0 {
		t.Fatalf("webhook secret %q: %v", w.Secret, err)
	}
	return w.ID, secret
}

// deliveryView is a delivery as GET /api/v1/webhooks/{id}/deliveries
// answers it.
type deliveryView struct {
	ID          string     `json:"id"`
	EventID     string     `json:"eventId"`
	EventType   string     `json:"eventType"`
	InterruptID string     `json:"interruptId"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	LastStatus  int        `json:"lastStatus"`
	LastError   string     `json:"lastError"`
	DeliveredAt *time.Time `json:"deliveredAt"`
	CreatedAt   time.Time  `json:"createdAt"`
}

func (d deliveryView) String() string {
	return fmt.Sprintf("%s %s irq=%s %s attempts=%d last=%d %q", d.EventID, d.EventType, d.InterruptID, d.Status, d.Attempts, d.LastStatus, d.LastError)
}

// listDeliveries returns the endpoint's deliveries (a single page: the
// tests make fewer than 50).
func listDeliveries(t *testing.T, s *server, webhookID string) []deliveryView {
	t.Helper()
	a := s.api(http.MethodGet, "/webhooks/"+webhookID+"/deliveries?limit=200", nil, nil)
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("%s: list deliveries: %s", s.name, a)
	}
	var page struct {
		Items      []deliveryView `json:"items"`
		NextCursor string         `json:"nextCursor"`
	}
	if err := json.Unmarshal(a.body, &page); err != nil {
		t.Fatalf("%s: deliveries answer %s: %v", s.name, a, err)
	}
	if page.NextCursor != "" {
		t.Fatalf("%s: more than one page of deliveries", s.name)
	}
	return page.Items
}

// pauseTurn asks the banking agent for a transfer, which pauses on a
// userApproval interrupt, and returns the snapshot and interrupt ids.
func pauseTurn(t *testing.T, s *server, pool *pgxpool.Pool) (snapshotID, interruptID string) {
	t.Helper()
	account := strconv.Itoa(100000 + rand.IntN(900000))
	out := s.invoke(t, service.AgentInit{}, service.AgentInput{Message: userMessage("Transfer $50 to account " + account)})
	if out.FinishReason != service.FinishInterrupted || out.SnapshotID == "" {
		t.Fatalf("%s: transfer request answered %+v, want an interrupt", s.name, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.QueryRow(ctx, "SELECT id::text FROM interrupts WHERE snapshot_id = $1 AND tool = $2",
		out.SnapshotID, demo.ToolUserApproval).Scan(&interruptID); err != nil {
		t.Fatalf("interrupt of %s: %v", out.SnapshotID, err)
	}
	return out.SnapshotID, interruptID
}

// hookPayload is what the tests read of a webhook's body.
type hookPayload struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurredAt"`
	Sequence   int       `json:"sequence"`
	Data       struct {
		Interrupt *struct {
			ID         string `json:"id"`
			SnapshotID string `json:"snapshotId"`
		} `json:"interrupt"`
	} `json:"data"`
}

// interruptID is the payload's data.interrupt.id ("" if none).
func (p hookPayload) interruptID() string {
	if p.Data.Interrupt == nil {
		return ""
	}
	return p.Data.Interrupt.ID
}

// Statuses of a hookRequest besides the HTTP status it was answered.
const (
	hookArrived   = -2 // being verified and decided
	hookAbandoned = -1 // the sender went away while it was held
	hookHeld      = 0  // the receiver holds it open
)

// hookRequest is one call the receiver got.
type hookRequest struct {
	at        time.Time
	webhookID string // the webhook-id header
	payload   hookPayload
	err       error // a bad signature or body
	status    int   // answered status, or hookArrived, hookHeld, hookAbandoned
}

// hookReceiver is a tenant's webhook receiver: it verifies every call's
// signature against the endpoint's secret and records it.
type hookReceiver struct {
	mu     sync.Mutex
	secret []byte
	reqs   []hookRequest
	// decide returns the status of a verified call; it may block, after
	// calling holding (the call is then recorded as held). Nil answers 200.
	decide func(r *http.Request, holding func()) int
}

func (h *hookReceiver) setSecret(s []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secret = s
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r := hookRequest{at: time.Now(), webhookID: req.Header.Get("webhook-id"), status: hookArrived}
	body, err := io.ReadAll(req.Body)
	h.mu.Lock()
	secret := h.secret
	h.mu.Unlock()
	if err == nil {
		err = httptool.Verify([][]byte{secret}, req.Header, body, time.Now(), time.Minute)
	}
	if err == nil {
		err = json.Unmarshal(body, &r.payload)
	}
	if err == nil && r.payload.ID != r.webhookID {
		err = fmt.Errorf("payload id %q differs from the webhook-id header %q", r.payload.ID, r.webhookID)
	}
	r.err = err
	if err != nil {
		r.status = http.StatusUnauthorized
	}
	h.mu.Lock()
	i := len(h.reqs)
	h.reqs = append(h.reqs, r)
	h.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	setStatus := func(status int) {
		h.mu.Lock()
		h.reqs[i].status = status
		h.mu.Unlock()
	}
	status := http.StatusOK
	if h.decide != nil {
		status = h.decide(req, func() { setStatus(hookHeld) })
	}
	setStatus(status)
	if status > 0 {
		w.WriteHeader(status)
	}
}

// requests returns a copy of what the receiver got so far.
func (h *hookReceiver) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reqs)
}

// checkRequests fails the test on a call with a bad signature or body, or
// of another type than interrupt.created, and returns the webhook-ids seen
// per interrupt id.
func checkRequests(t *testing.T, reqs []hookRequest) map[string][]string {
	t.Helper()
	ids := map[string][]string{}
	for _, r := range reqs {
		if r.err != nil {
			t.Errorf("receiver rejected a call (webhook-id %q): %v", r.webhookID, r.err)
			continue
		}
		if r.payload.Type != typeInterruptCreated || r.payload.Sequence != 1 || r.payload.interruptID() == "" {
			t.Errorf("webhook %s: type %q, sequence %d, interrupt %q; want interrupt.created, 1, an id",
				r.webhookID, r.payload.Type, r.payload.Sequence, r.payload.interruptID())
			continue
		}
		irq := r.payload.interruptID()
		if !slices.Contains(ids[irq], r.webhookID) {
			ids[irq] = append(ids[irq], r.webhookID)
		}
	}
	return ids
}

// firstAnswered returns, per interrupt id, when its first call answered
// status arrived.
func firstAnswered(reqs []hookRequest, status int) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range reqs {
		if r.err == nil && r.status == status {
			if _, ok := out[r.payload.interruptID()]; !ok {
				out[r.payload.interruptID()] = r.at
			}
		}
	}
	return out
}

// serveReceiver serves h on ln until the test ends.
func serveReceiver(t *testing.T, ln net.Listener, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// listenOn listens on a loopback port freePort returned earlier, retrying
// briefly in case a connection of this machine holds it for a moment.
func listenOn(t *testing.T, port int) net.Listener {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on the receiver's reserved port %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retrySchedule is n waits of d, comma-separated for --webhook-retries.
func retrySchedule(d time.Duration, n int) string {
	return strings.TrimSuffix(strings.Repeat(d.String()+",", n), ",")
}

// TestWebhookDeliveredAfterReceiverOutageAcrossRestart: the receiver is
// down while five interrupts are created; A retries, is stopped (SIGTERM),
// B starts on the same database, and only then does the receiver come up.
// B delivers every event, signed, each with the webhook-id A was using.
func TestWebhookDeliveredAfterReceiverOutageAcrossRestart(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	// Short waits first, then 2 s ones: more than 35 s before a delivery
	// is dead, and the receiver is called within ~2 s once it is up.
	retries := "300ms,300ms,500ms,1s,1s,2s," + retrySchedule(2*time.Second, 15)
	o := serverOpts{args: []string{"--webhook-retries", retries}}

	// The receiver's port, reserved and left without a listener: every
	// attempt is refused.
	port := freePort(t)
	hookURL := fmt.Sprintf("http://127.0.0.1:%d/hooks/holdpoint", port)

	a := startServer(t, "A", url, o)
	hookID, secret := createWebhook(t, a, hookURL, typeInterruptCreated)
	const n = 5
	snapOf := map[string]string{} // interrupt id -> snapshot id
	for range n {
		snap, irq := pauseTurn(t, a, pool)
		snapOf[irq] = snap
	}

	// A attempts every delivery and fails; each stays pending, retrying.
	var onA []deliveryView
	waitUntil(t, "A to attempt every delivery at least twice", 2*time.Minute, func() bool {
		time.Sleep(50 * time.Millisecond)
		onA = listDeliveries(t, a, hookID)
		if len(onA) != n {
			return false
		}
		for _, d := range onA {
			if d.Status != webhooks.DeliveryPending {
				t.Fatalf("delivery %s while the receiver is down, want pending", d)
			}
			if d.Attempts < 2 {
				return false
			}
		}
		return true
	})
	eventOf := map[string]string{} // interrupt id -> event id (the webhook-id)
	for _, d := range onA {
		if _, ok := snapOf[d.InterruptID]; !ok || d.EventType != typeInterruptCreated || d.EventID == "" {
			t.Fatalf("unexpected delivery %s", d)
		}
		eventOf[d.InterruptID] = d.EventID
	}
	if len(eventOf) != n {
		t.Fatalf("deliveries %v do not cover the %d interrupts", onA, n)
	}

	// Every attempt A makes fails: the one that delivers, B's, comes
	// after all of them.
	attemptsOnA := map[string]int{}
	for _, d := range listDeliveries(t, a, hookID) {
		attemptsOnA[d.InterruptID] = d.Attempts
	}
	a.stop(t)
	if code := a.exitCode(t, time.Second); code != 0 {
		t.Errorf("A exited with code %d after SIGTERM, want 0", code)
	}
	stoppedAt := time.Now()
	b := startServer(t, "B", url, o)
	bReady := time.Since(stoppedAt)
	for _, d := range listDeliveries(t, b, hookID) {
		if d.Status != webhooks.DeliveryPending || d.EventID != eventOf[d.InterruptID] {
			t.Fatalf("delivery on B before the receiver is up: %s; want pending with event id %s", d, eventOf[d.InterruptID])
		}
	}

	recv := &hookReceiver{}
	recv.setSecret(secret)
	serveReceiver(t, listenOn(t, port), recv)
	upAt := time.Now()

	waitUntil(t, "every interrupt.created to reach the receiver", 2*time.Minute, func() bool {
		return len(firstAnswered(recv.requests(), http.StatusOK)) >= n
	})
	reqs := recv.requests()
	got := firstAnswered(reqs, http.StatusOK)
	var slowest time.Duration
	for irq := range snapOf {
		at, ok := got[irq]
		if !ok {
			t.Errorf("interrupt %s was never delivered", irq)
			continue
		}
		slowest = max(slowest, at.Sub(upAt))
	}
	for irq := range got {
		if _, ok := snapOf[irq]; !ok {
			t.Errorf("the receiver got interrupt %s, not one of the test's", irq)
		}
	}
	for irq, ids := range checkRequests(t, reqs) {
		if len(ids) != 1 || ids[0] != eventOf[irq] {
			t.Errorf("interrupt %s arrived with webhook-ids %v, want only %s (the id A was delivering)", irq, ids, eventOf[irq])
		}
	}

	var final []deliveryView
	waitUntil(t, "B to record every delivery delivered", time.Minute, func() bool {
		time.Sleep(50 * time.Millisecond) // polls gently
		final = listDeliveries(t, b, hookID)
		for _, d := range final {
			if d.Status == webhooks.DeliveryDead {
				t.Fatalf("delivery %s is dead", d)
			}
			if d.Status != webhooks.DeliveryDelivered {
				return false
			}
		}
		return len(final) == n
	})
	attempts := make([]int, 0, n)
	for _, d := range final {
		if d.Attempts <= attemptsOnA[d.InterruptID] || d.DeliveredAt == nil || d.EventID != eventOf[d.InterruptID] {
			t.Errorf("delivered %s: A had attempted it %d times; want more attempts now, a delivery time, event id %s",
				d, attemptsOnA[d.InterruptID], eventOf[d.InterruptID])
		}
		attempts = append(attempts, d.Attempts)
	}
	t.Logf("FIGURE receiver outage across a restart: B ready %s after A stopped; all %d events delivered %s after the receiver came up (retry waits up to 2s); %d calls received; attempts per delivery %v",
		ms(bReady), n, ms(slowest), len(reqs), attempts)
}

// TestWebhookRedeliveredAfterKillMidDelivery: A is killed (-9) while the
// receiver holds its calls open; once A's leases run out, B delivers the
// same events again with the same webhook-ids, and none is lost.
func TestWebhookRedeliveredAfterKillMidDelivery(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	// The timeout leaves time to gather the three held calls and kill A
	// before any of them times out, also on a loaded machine; the lease
	// must exceed it, and the retries outlast the gathering. (3 s, 8 s and
	// 20 s once failed with two test runs on two cores; the cause was not
	// the load but a first attempt held in a batch with the refusals of
	// the others, which the wait for the recorded first attempts below
	// removed.)
	const lease, timeout = 25 * time.Second, 20 * time.Second
	o := serverOpts{args: []string{
		"--webhook-retries", retrySchedule(200*time.Millisecond, 10) + "," + retrySchedule(time.Second, 100),
		"--webhook-lease", lease.String(), "--webhook-timeout", timeout.String(),
	}}

	// The receiver first refuses (503) while the turns pause, then holds
	// every call open until A is dead, then accepts.
	const (
		modeReject = iota
		modeHold
		modeAccept
	)
	var mode atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseHeld := func() { releaseOnce.Do(func() { close(release) }) }
	recv := &hookReceiver{decide: func(req *http.Request, holding func()) int {
		switch mode.Load() {
		case modeReject:
			return http.StatusServiceUnavailable
		case modeHold:
			holding()
			select {
			case <-release:
				return http.StatusServiceUnavailable // its sender is dead
			case <-req.Context().Done():
				return hookAbandoned
			case <-time.After(time.Minute):
				return http.StatusServiceUnavailable
			}
		}
		return http.StatusOK
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hooks := serveReceiver(t, ln, recv)
	t.Cleanup(releaseHeld) // before the receiver's Close, which waits for held calls

	a := startServer(t, "A", url, o)
	hookID, secret := createWebhook(t, a, hooks.URL+"/hooks/holdpoint", typeInterruptCreated)
	recv.setSecret(secret)
	const n = 3
	snapOf := map[string]string{}
	for range n {
		snap, irq := pauseTurn(t, a, pool)
		snapOf[irq] = snap
	}

	// Each event's first attempt is refused and recorded before any call
	// is held: a first attempt is recorded with the rest of its batch, so
	// one held in a batch would keep the others' refusals, and so their
	// retries, unrecorded until it ends.
	waitUntil(t, "A's first attempt of every event to be refused and recorded", time.Minute, func() bool {
		ds := listDeliveries(t, a, hookID)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if d.Attempts < 1 {
				return false
			}
		}
		return true
	})
	mode.Store(modeHold)
	// held returns the interrupt ids whose calls the receiver holds open
	// now, and when the earliest of those calls arrived.
	held := func() (map[string]bool, time.Time) {
		out := map[string]bool{}
		var first time.Time
		for _, r := range recv.requests() {
			if r.err == nil && r.status == hookHeld {
				out[r.payload.interruptID()] = true
				if first.IsZero() || r.at.Before(first) {
					first = r.at
				}
			}
		}
		return out, first
	}
	waitUntil(t, "A's calls of all three events to be held open", time.Minute, func() bool {
		h, _ := held()
		return len(h) == n
	})
	heldAt := map[string]time.Time{}
	for _, r := range recv.requests() {
		if r.err == nil && r.status == hookHeld {
			heldAt[r.payload.interruptID()] = r.at
		}
	}
	_, firstHeld := held()
	// Each held call's lease, as A's claim recorded it: B may claim the
	// delivery only after it runs out (the database's clock, this
	// machine's).
	leaseEnd := map[string]time.Time{}
	rows, err := pool.Query(context.Background(), `
		SELECT e.interrupt_id::text, d.next_attempt_at
		FROM webhook_deliveries d
		JOIN interrupt_events e ON e.tenant_id = d.tenant_id AND e.xid = d.event_xid AND e.id = d.event_id
		WHERE d.status = 'pending' AND d.lease_owner IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var irq string
		var until time.Time
		if err := rows.Scan(&irq, &until); err != nil {
			t.Fatal(err)
		}
		leaseEnd[irq] = until
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	a.kill(t)
	killedAt := time.Now()
	if len(heldAt) != n {
		t.Fatalf("%d calls held when A was killed, want %d", len(heldAt), n)
	}
	if age := killedAt.Sub(firstHeld); age >= timeout {
		t.Fatalf("a call was held %s before the kill, past the %s timeout: raise --webhook-timeout", age, timeout)
	}
	mode.Store(modeAccept)
	releaseHeld()

	b := startServer(t, "B", url, o)
	bReady := time.Since(killedAt)
	waitUntil(t, "B to deliver every event again", 4*time.Minute, func() bool {
		return len(firstAnswered(recv.requests(), http.StatusOK)) >= n
	})
	reqs := recv.requests()
	delivered := firstAnswered(reqs, http.StatusOK)
	var gaps []string
	var slowest time.Duration
	for irq := range snapOf {
		at, ok := delivered[irq]
		if !ok {
			t.Errorf("interrupt %s was never delivered", irq)
			continue
		}
		// B may claim it only when A's lease runs out. (Measured from the
		// held call instead, the gap fell short of the lease by the time
		// from A's claim to its call: 330 ms once on a loaded machine.)
		gap := at.Sub(heldAt[irq])
		if end, ok := leaseEnd[irq]; !ok {
			t.Errorf("interrupt %s: no lease of A's recorded while its call was held", irq)
		} else if at.Before(end) {
			t.Errorf("interrupt %s: delivered again at %s, before A's lease ran out at %s", irq, at.Format(time.StampMicro), end.Format(time.StampMicro))
		}
		gaps = append(gaps, ms(gap))
		slowest = max(slowest, at.Sub(killedAt))
	}
	answered := map[string]int{}
	for _, r := range reqs {
		if r.err == nil && r.status == http.StatusOK {
			answered[r.payload.interruptID()]++
		}
	}
	ids := checkRequests(t, reqs)
	for irq := range snapOf {
		if len(ids[irq]) != 1 {
			t.Errorf("interrupt %s arrived with webhook-ids %v, want one id on every attempt", irq, ids[irq])
		}
	}
	if len(ids) != n {
		t.Errorf("the receiver got calls for %d interrupts, want %d: %v", len(ids), n, ids)
	}

	var final []deliveryView
	waitUntil(t, "B to record every delivery delivered", time.Minute, func() bool {
		time.Sleep(50 * time.Millisecond) // polls gently
		final = listDeliveries(t, b, hookID)
		for _, d := range final {
			if d.Status == webhooks.DeliveryDead {
				t.Fatalf("delivery %s is dead", d)
			}
			if d.Status != webhooks.DeliveryDelivered {
				return false
			}
		}
		return len(final) == n
	})
	for _, d := range final {
		if want := ids[d.InterruptID]; len(want) != 1 || d.EventID != want[0] {
			t.Errorf("delivery %s: event id differs from the webhook-id %v the receiver saw", d, want)
		}
	}
	t.Logf("FIGURE kill -9 mid-delivery (lease %s, timeout %s): B ready %s after the kill; every event delivered again %s after the kill; held call -> redelivery %v; 200 answers per interrupt %v (at least once)",
		lease, timeout, ms(bReady), ms(slowest), gaps, answered)
}

// eventFrame is one frame of GET /api/v1/events.
type eventFrame struct {
	id, event, data string
	comment         string // a ": ..." line, for frames of comments only
	note            struct {
		EventID     string `json:"eventId"`
		Type        string `json:"type"`
		InterruptID string `json:"interruptId"`
		SnapshotID  string `json:"snapshotId"`
	}
}

func (f eventFrame) String() string {
	return fmt.Sprintf("%s %s snapshot=%s interrupt=%s", f.id, f.event, f.note.SnapshotID, f.note.InterruptID)
}

// eventStream reads server-sent events in the background.
type eventStream struct {
	name   string
	body   io.ReadCloser
	cancel context.CancelFunc
	frames chan eventFrame
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	err    error // why reading ended; valid once frames is closed
}

// streamClient has no overall timeout: a stream lasts until it is closed.
var streamClient = &http.Client{}

// openEvents opens the event stream of s (resuming after lastEventID
// unless it is empty) and waits until the server has subscribed it.
func openEvents(t *testing.T, s *server, lastEventID string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/v1/events", nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := streamClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s: open the event stream: %v", s.name, err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		t.Fatalf("%s: event stream answered %d %s: %s", s.name, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	es := &eventStream{name: s.name, body: res.Body, cancel: cancel, frames: make(chan eventFrame), done: make(chan struct{})}
	es.wg.Add(1)
	go es.read()
	t.Cleanup(es.close)
	select {
	case f, ok := <-es.frames:
		if !ok || f.comment != "subscribed" {
			t.Fatalf("%s: the event stream began with %+v (open %v, err %v), want the subscribed comment", s.name, f, ok, es.err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: the event stream sent nothing within a minute", s.name)
	}
	return es
}

func (es *eventStream) read() {
	defer es.wg.Done()
	defer close(es.frames)
	r := bufio.NewReader(es.body)
	var f eventFrame
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			es.err = err
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "":
				if f.comment == "" {
					f.comment = value
				}
			case "id":
				f.id = value
			case "event":
				f.event = value
			case "data":
				data = append(data, value)
			}
			continue
		}
		if f.id == "" && f.event == "" && len(data) == 0 && f.comment == "" {
			continue
		}
		f.data = strings.Join(data, "\n")
		if f.data != "" {
			if err := json.Unmarshal([]byte(f.data), &f.note); err != nil {
				es.err = fmt.Errorf("frame %q: data is not JSON: %w", f.id, err)
				return
			}
		}
		select {
		case es.frames <- f:
		case <-es.done:
			return
		}
		f, data = eventFrame{}, nil
	}
}

// next returns the next event frame (comments skipped), ok false if none
// came within wait. It fails the test if the stream ended.
func (es *eventStream) next(t *testing.T, wait time.Duration) (eventFrame, bool) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-es.frames:
			if !ok {
				t.Fatalf("%s: the event stream ended: %v", es.name, es.err)
			}
			if f.event == "" && f.id == "" {
				continue // a comment (heartbeat)
			}
			return f, true
		case <-timer.C:
			return eventFrame{}, false
		}
	}
}

func (es *eventStream) close() {
	es.once.Do(func() {
		es.cancel()
		close(es.done)
		es.body.Close()
		es.wg.Wait()
	})
}

// readTurns reads frames until each of the snapshots has had its
// interrupt.created and turn.completed events, then until the stream has
// been quiet for half a second, and returns every frame read, in order.
func readTurns(t *testing.T, es *eventStream, within time.Duration, snapshots ...string) []eventFrame {
	t.Helper()
	need := map[string]bool{}
	for _, s := range snapshots {
		need[s+" "+typeInterruptCreated] = true
		need[s+" "+typeTurnCompleted] = true
	}
	var frames []eventFrame
	deadline := time.Now().Add(within)
	for len(need) > 0 {
		f, ok := es.next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("%s: within %s the stream sent %v; still missing %v", es.name, within, frames, need)
		}
		frames = append(frames, f)
		delete(need, f.note.SnapshotID+" "+f.event)
	}
	for {
		f, ok := es.next(t, 500*time.Millisecond)
		if !ok {
			return frames
		}
		frames = append(frames, f)
	}
}

// typesOf returns the event types of the frames about snapshot, in order.
func typesOf(frames []eventFrame, snapshot string) []string {
	var out []string
	for _, f := range frames {
		if f.note.SnapshotID == snapshot {
			out = append(out, f.event)
		}
	}
	return out
}

// TestEventStreamResumesAfterRestartWithLastEventID: a listener of A
// disconnects, two more turns pause, A stops and B starts; reconnecting to
// B with the last id it saw, the listener gets exactly the events it
// missed, in order, and then live ones on the same stream.
func TestEventStreamResumesAfterRestartWithLastEventID(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	a := startServer(t, "A", url, serverOpts{})

	first := openEvents(t, a, "")
	snaps := make([]string, 5)
	irqs := make([]string, 5)
	for i := range 2 {
		snaps[i], irqs[i] = pauseTurn(t, a, pool)
	}
	// Each read below is timed from when the events are final (past the
	// horizon, which a transaction of this database still open holds
	// back), so its 15 s bound times the delivery alone.
	testdb.WaitForEventHorizon(t, pool)
	seen := readTurns(t, first, 15*time.Second, snaps[0], snaps[1])
	first.close()
	lastID := seen[len(seen)-1].id
	// The shape of one paused turn, as a live listener saw it.
	pattern := typesOf(seen, snaps[0])
	if !slices.Contains(pattern, typeInterruptCreated) || !slices.Contains(pattern, typeTurnCompleted) {
		t.Fatalf("turn 1 sent %v", pattern)
	}
	if p := typesOf(seen, snaps[1]); !slices.Equal(p, pattern) {
		t.Fatalf("turn 2 sent %v, turn 1 %v", p, pattern)
	}
	seenIDs := map[string]bool{}
	for _, f := range seen {
		if f.id == "" || f.id != f.note.EventID || seenIDs[f.id] {
			t.Errorf("frame %s: id missing, differing from data.eventId %q, or repeated", f, f.note.EventID)
		}
		seenIDs[f.id] = true
		if f.note.SnapshotID != snaps[0] && f.note.SnapshotID != snaps[1] {
			t.Errorf("unexpected frame %s", f)
		}
	}

	for i := 2; i < 4; i++ {
		snaps[i], irqs[i] = pauseTurn(t, a, pool)
	}
	a.stop(t)
	b := startServer(t, "B", url, serverOpts{})

	for _, tc := range []struct{ path, header string }{
		{"/events", "garbage"},
		{"/events?after=garbage", ""},
		{"/events", "ev_" + strings.Repeat("A", 40)},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Last-Event-ID", tc.header)
		}
		if ans := b.api(http.MethodGet, tc.path, nil, h); ans.err != nil || ans.status != http.StatusBadRequest {
			t.Errorf("GET %s with Last-Event-ID %q answered %s, want 400", tc.path, tc.header, ans)
		}
	}

	testdb.WaitForEventHorizon(t, pool)
	reconnectAt := time.Now()
	resumed := openEvents(t, b, lastID)
	replayed := readTurns(t, resumed, 15*time.Second, snaps[2], snaps[3])
	replayTook := time.Since(reconnectAt)
	for i := 2; i < 4; i++ {
		if p := typesOf(replayed, snaps[i]); !slices.Equal(p, pattern) {
			t.Errorf("turn %d replayed as %v, want %v", i+1, p, pattern)
		}
	}
	seen4 := false
	for _, f := range replayed {
		if seenIDs[f.id] {
			t.Errorf("frame %s was sent again after Last-Event-ID %s", f, lastID)
		}
		if f.id == "" || f.id != f.note.EventID {
			t.Errorf("frame %s: id differs from data.eventId %q", f, f.note.EventID)
		}
		seenIDs[f.id] = true
		switch f.note.SnapshotID {
		case snaps[2]:
			if seen4 {
				t.Errorf("turn 3's frame %s came after turn 4's events", f)
			}
		case snaps[3]:
			seen4 = true
		default:
			t.Errorf("replayed frame %s is about none of the missed turns", f)
		}
		if f.event == typeInterruptCreated && f.note.InterruptID != irqs[2] && f.note.InterruptID != irqs[3] {
			t.Errorf("replayed %s names interrupt %s, want %s or %s", f, f.note.InterruptID, irqs[2], irqs[3])
		}
	}
	if len(replayed) != 2*len(pattern) {
		t.Errorf("replayed %d frames, want %d: %v", len(replayed), 2*len(pattern), replayed)
	}
	if t.Failed() {
		t.Logf("frames seen live on A: %v", seen)
		t.Logf("frames replayed by B: %v", replayed)
		t.FailNow()
	}

	// The same stream carries live events after the replay.
	snaps[4], irqs[4] = pauseTurn(t, b, pool)
	testdb.WaitForEventHorizon(t, pool)
	live := readTurns(t, resumed, 15*time.Second, snaps[4])
	if p := typesOf(live, snaps[4]); !slices.Equal(p, pattern) || len(live) != len(pattern) {
		t.Errorf("live after the replay: %v, want only turn 5's %v", live, pattern)
	}
	for _, f := range live {
		if seenIDs[f.id] {
			t.Errorf("live frame %s repeats an id", f)
		}
		seenIDs[f.id] = true
		if f.event == typeInterruptCreated && f.note.InterruptID != irqs[4] {
			t.Errorf("live %s names interrupt %s, want %s", f, f.note.InterruptID, irqs[4])
		}
	}
	resumed.close()
	t.Logf("FIGURE event stream resumption across a restart: %d missed frames replayed by B (of turns 3-4, %v each) in %s including 0.5 s of quiet; then %d live frame(s) of turn 5",
		len(replayed), pattern, ms(replayTook), len(live))
}
