package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/store"
)

// DefaultSchedule is the wait before each retry of a failed delivery:
// eleven attempts over about 27 hours (each wait +-10%), then the delivery
// is dead.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour,
}

// Observer hears the dispatcher's attempts, for metrics; observe.Observer
// (service/telemetry's) is one.
type Observer interface {
	// WebhookAttempted: a delivery attempt ended with outcome (a Delivery*
	// status) after d.
	WebhookAttempted(outcome string, d time.Duration)
}

type nopObserver struct{}

func (nopObserver) WebhookAttempted(string, time.Duration) {}

// Dispatcher defaults.
const (
	DefaultLease       = time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 64
	DefaultPerEndpoint = 16
	// DefaultBatch is how many of an endpoint's new events a dispatcher
	// reads at once, attempting PerEndpoint of them at a time.
	DefaultBatch = 64
	defaultPoll  = time.Second
	// leaseGap is the least time between two looks for endpoints with new
	// events.
	leaseGap = 10 * time.Millisecond
	// maxErrorText bounds the last error kept with a delivery.
	maxErrorText = 500
)

// Dispatcher delivers the outbox, which is the event log itself. Every
// instance runs one, and each does two things:
//
//   - It reads new events for endpoints: it leases enabled endpoints of
//     every tenant that have events after their position in the log (SKIP
//     LOCKED, so no two instances read for one endpoint at once), attempts
//     the events each endpoint subscribes to, a batch at a time, and then
//     moves the endpoint's position past the batch and records each
//     attempt as a delivery row in one statement, only while it still
//     holds the lease. An instance that dies mid-batch moves nothing:
//     another takes the endpoint over when the lease runs out and attempts
//     the batch again, with the same webhook-ids.
//   - It retries: it claims due deliveries (failed first attempts and
//     redeliveries) with SKIP LOCKED, leasing them (the lease is the
//     delivery's next attempt time moved past now); an attempt records its
//     outcome only while it holds the lease (owner and attempt number
//     match).
type Dispatcher struct {
	Store Store
	// Ready, when set, says whether the instance may take work: while it
	// is false the dispatcher leases no deliveries (see readiness.Readiness).
	Ready func() bool
	IDs   *keys.EventIDs
	// Owner names this instance on its leases.
	Owner string
	// AllowLoopback lets endpoints on this machine be called (serve --dev
	// or --allow-loopback-webhooks).
	AllowLoopback bool
	// Client carries the settings of the calls (Resolver, RootCAs,
	// MaxBody); its Policy is set per tenant, and Run sets it to one
	// attempt per call (the schedule does the retrying).
	Client httptool.Client
	// Schedule is the wait before each retry (default DefaultSchedule);
	// after len(Schedule)+1 failed attempts a delivery is dead.
	Schedule []time.Duration
	// Lease is how long a claimed delivery is this instance's (default a
	// minute); it must exceed Timeout.
	Lease time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Concurrency bounds this instance's attempts in flight (default 64),
	// PerEndpoint those to one endpoint (default 16), so a receiver that
	// hangs holds at most PerEndpoint of them.
	Concurrency, PerEndpoint int
	// Batch is how many of an endpoint's new events are read, attempted
	// and recorded together (default DefaultBatch, at least PerEndpoint):
	// a batch costs the database two statements however many events it
	// holds. Its attempts start PerEndpoint at a time, in the log's order,
	// and stop starting once the batch has run for its budget (see
	// batchBudget), so that a batch is recorded within its lease however
	// slow the receiver is.
	Batch int
	// PublicURL is where this platform's API and dashboard are reached,
	// for the links in payloads ("" leaves them out).
	PublicURL string
	// Poll is how often due deliveries are looked for when no event wakes
	// the dispatcher (default 1s).
	Poll time.Duration
	Log  *slog.Logger
	// Observer hears each attempt's outcome (default: nothing), and
	// TracerProvider makes a span per attempt, whose trace the request
	// carries (traceparent; default: none).
	Observer       Observer
	TracerProvider trace.TracerProvider

	tracer    trace.Tracer
	mu        sync.Mutex
	inflight  map[uuid.UUID]int
	total     int
	clients   httptool.Clients
	finish    chan finishReq
	drained   bool                           // the last claim took all that was due
	reading   map[uuid.UUID]bool             // endpoints whose events this instance reads now
	kicks     uint64                         // Kick calls so far
	slots     chan struct{}                  // one per attempt in flight (Concurrency)
	secrets   map[uuid.UUID]cached[[][]byte] // by endpoint
	hosts     map[string]cached[[]string]    // by tenant
	kick      chan struct{}
	retryKick chan struct{}
	once      sync.Once
}

// cached is a value read from the database, kept for cacheTTL: secrets and
// allowed hosts change rarely, and a rotation keeps the old secret signing
// for its overlap anyway.
type cached[T any] struct {
	v  T
	at time.Time
}

const cacheTTL = 5 * time.Second

func (d *Dispatcher) init() {
	d.once.Do(func() {
		if d.Schedule == nil {
			d.Schedule = DefaultSchedule
		}
		if d.Lease <= 0 {
			d.Lease = DefaultLease
		}
		if d.Timeout <= 0 {
			d.Timeout = DefaultTimeout
		}
		if d.Concurrency <= 0 {
			d.Concurrency = DefaultConcurrency
		}
		if d.PerEndpoint <= 0 {
			d.PerEndpoint = DefaultPerEndpoint
		}
		if d.Batch <= 0 {
			d.Batch = DefaultBatch
		}
		d.Batch = max(d.Batch, d.PerEndpoint)
		if d.Poll <= 0 {
			d.Poll = defaultPoll
		}
		if d.Log == nil {
			d.Log = slog.Default()
		}
		if d.Observer == nil {
			d.Observer = nopObserver{}
		}
		if d.TracerProvider == nil {
			d.TracerProvider = noop.NewTracerProvider()
		}
		d.tracer = d.TracerProvider.Tracer("github.com/holdpoint/holdpoint/service/webhooks")
		d.inflight = map[uuid.UUID]int{}
		d.reading = map[uuid.UUID]bool{}
		d.slots = make(chan struct{}, d.Concurrency)
		// One attempt per call (the schedule retries), and as many pooled
		// connections to an endpoint as attempts may be in flight to it.
		d.Client.Attempts, d.Client.IdleConnsPerHost = 1, d.PerEndpoint
		d.clients.Base = &d.Client
		d.secrets = map[uuid.UUID]cached[[][]byte]{}
		d.hosts = map[string]cached[[]string]{}
		d.kick = make(chan struct{}, 1)
		d.retryKick = make(chan struct{}, 1)
	})
}

// Kick makes the dispatcher look for new events and due deliveries now.
func (d *Dispatcher) Kick() {
	d.init()
	d.mu.Lock()
	d.kicks++
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight (each
// bounded by Timeout) so their outcomes are recorded.
func (d *Dispatcher) Run(ctx context.Context) {
	d.init()
	d.finish = make(chan finishReq, d.Concurrency)
	finished := make(chan struct{})
	go func() { defer close(finished); d.finishLoop() }()
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(d.finish)
		<-finished
	}()
	go d.listen(ctx)
	t := time.NewTicker(d.Poll)
	defer t.Stop()
	// New events wake the dispatcher often; retries fall due on their own
	// schedule, so they are looked for on every poll, and between polls
	// when an attempt of a claim that left some due ends, or a first
	// attempt failed.
	retry := true
	var leased time.Time
	for {
		// Every new event of any tenant wakes the dispatcher, and the
		// endpoints it reads for already read on by themselves: it looks
		// for other endpoints with new events at most every leaseGap.
		if wait := leaseGap - time.Since(leased); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		leased = time.Now()
		if d.Ready == nil || d.Ready() {
			// Not ready, nothing is leased: the deliveries wait for this
			// instance or another to come back.
			d.read(ctx, &wg)
			if retry {
				d.claim(ctx, &wg)
				retry = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-d.retryKick:
			retry = true
		case <-t.C:
			retry = true
		}
	}
}

// kickRetry makes the dispatcher look for due retries now.
func (d *Dispatcher) kickRetry() {
	select {
	case d.retryKick <- struct{}{}:
	default:
	}
}

// finishReq is an attempt's outcome waiting to be recorded.
type finishReq struct {
	f     Finish
	reply chan<- finishReply
}

type finishReply struct {
	recorded bool
	err      error
}

// maxFinishBatch bounds the outcomes recorded by one statement.
const maxFinishBatch = 256

// finishLoop records attempts' outcomes: all those waiting at once go in
// one statement (per tenant), so a busy dispatcher writes a batch per round
// trip instead of a row.
func (d *Dispatcher) finishLoop() {
	for {
		r, ok := <-d.finish
		if !ok {
			return
		}
		batch := []finishReq{r}
	drain:
		for len(batch) < maxFinishBatch {
			select {
			case r, ok := <-d.finish:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		done := make([]Finish, len(batch))
		for i, r := range batch {
			done[i] = r.f
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recorded, err := d.Store.FinishWebhookDeliveries(ctx, d.Owner, done)
		cancel()
		for _, r := range batch {
			r.reply <- finishReply{recorded: recorded[r.f.Claim.ID], err: err}
		}
	}
}

// listen kicks the dispatcher whenever an instance announces new events
// (a delivery is written with its event), reconnecting after failures.
func (d *Dispatcher) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := d.Store.ListenEvents(ctx, func() { backoff = 100 * time.Millisecond }, d.Kick)
		if ctx.Err() != nil {
			return
		}
		d.Log.Warn("webhook dispatcher: listening for events failed; polling meanwhile", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// claim leases as many due deliveries as there is room for and starts
// their attempts.
func (d *Dispatcher) claim(ctx context.Context, wg *sync.WaitGroup) {
	for ctx.Err() == nil {
		d.mu.Lock()
		free := d.Concurrency - d.total
		var busy []uuid.UUID
		for id, n := range d.inflight {
			if n >= d.PerEndpoint {
				busy = append(busy, id)
			}
		}
		d.mu.Unlock()
		if free <= 0 {
			return
		}
		claims, err := d.Store.ClaimWebhookDeliveries(ctx, d.Owner, d.Lease, free, d.PerEndpoint, busy)
		if err != nil {
			if ctx.Err() == nil {
				d.Log.Warn("webhook dispatcher: claiming deliveries failed", "err", err)
			}
			return
		}
		// A claim that took less than it could, took no endpoint's full
		// share and left out no endpoint for having its share in flight,
		// drained what is due: the attempts that end meanwhile need not
		// look again (new events, and the poll for retries, will).
		perEndpoint := map[uuid.UUID]int{}
		capped := len(busy) > 0
		for _, c := range claims {
			if perEndpoint[c.WebhookID]++; perEndpoint[c.WebhookID] >= d.PerEndpoint {
				capped = true
			}
		}
		d.mu.Lock()
		d.drained = len(claims) < free && !capped
		d.mu.Unlock()
		d.start(ctx, wg, claims)
		if len(claims) < free {
			return
		}
	}
}

// start starts the attempts of claimed deliveries.
func (d *Dispatcher) start(ctx context.Context, wg *sync.WaitGroup, claims []Claim) {
	for _, c := range claims {
		if c.Event == nil {
			continue
		}
		d.begin(c.WebhookID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.attempt(ctx, c, c.Event)
			if more := d.end(c.WebhookID); more {
				d.kickRetry() // room for more of what is due
			}
		}()
	}
}

// begin takes a slot for an attempt to the endpoint, waiting for one while
// Concurrency attempts are in flight; end gives it back and reports
// whether the last claim left deliveries due.
func (d *Dispatcher) begin(webhookID uuid.UUID) {
	d.slots <- struct{}{}
	d.mu.Lock()
	d.inflight[webhookID]++
	d.total++
	d.mu.Unlock()
}

func (d *Dispatcher) end(webhookID uuid.UUID) (more bool) {
	d.mu.Lock()
	if d.inflight[webhookID]--; d.inflight[webhookID] <= 0 {
		delete(d.inflight, webhookID)
	}
	d.total--
	more = !d.drained
	d.mu.Unlock()
	<-d.slots
	return more
}

// read leases endpoints with new events, as many as it may read for at
// once (Concurrency), and starts reading for each.
func (d *Dispatcher) read(ctx context.Context, wg *sync.WaitGroup) {
	d.mu.Lock()
	room := d.Concurrency - len(d.reading)
	held := make([]uuid.UUID, 0, len(d.reading))
	for id := range d.reading {
		held = append(held, id)
	}
	d.mu.Unlock()
	if room <= 0 || ctx.Err() != nil {
		return
	}
	cursors, err := d.Store.LeaseWebhookCursors(ctx, d.Owner, d.Lease, room, held)
	if err != nil {
		if ctx.Err() == nil {
			d.Log.Warn("webhook dispatcher: leasing endpoints to read for failed", "err", err)
		}
		return
	}
	for _, c := range cursors {
		d.mu.Lock()
		d.reading[c.WebhookID] = true
		d.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.readEndpoint(ctx, c)
		}()
	}
}

// readEndpoint attempts the endpoint's new events a batch at a time
// (Batch events, PerEndpoint at a time, started within batchBudget, so a
// batch ends within its lease), moving its position past the events of
// each batch it attempted, until it has read all there is, the lease is
// lost, or ctx ends.
func (d *Dispatcher) readEndpoint(ctx context.Context, c Cursor) {
	var seen uint64
	defer func() {
		d.mu.Lock()
		delete(d.reading, c.WebhookID)
		again := d.kicks != seen
		d.mu.Unlock()
		if again {
			// Events may have come after the last read: look again.
			d.Kick()
		}
	}()
	for ctx.Err() == nil {
		d.mu.Lock()
		seen = d.kicks
		d.mu.Unlock()
		if !d.deliverBatch(ctx, &c, seen) {
			return
		}
	}
}

// deliverBatch attempts the endpoint's next batch of events and records
// it, moving c's position; it reports whether to read again (more events
// than a batch, a cut batch, or a kick since seen).
func (d *Dispatcher) deliverBatch(ctx context.Context, c *Cursor, seen uint64) bool {
	events, to, err := d.Store.WebhookCursorEvents(ctx, *c, d.Batch)
	if err != nil {
		if ctx.Err() == nil {
			d.Log.Warn("webhook dispatcher: reading events failed", "tenant", c.TenantID, "webhook", c.WebhookID, "err", err)
		}
		return false
	}
	if to == c.Pos {
		return false
	}
	attempts, cut := d.attemptEvents(ctx, *c, events)
	if cut {
		// The budget ran out before every event was attempted: the
		// position moves past the last one attempted, and the rest
		// are read again.
		to = attempts[len(attempts)-1].Pos
	}
	// A shutdown does not keep the batch from being recorded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	moved, err := d.Store.AdvanceWebhookCursor(rctx, d.Owner, *c, to, d.Lease, attempts)
	cancel()
	if err != nil {
		// The position stays: the batch is attempted again.
		d.Log.Warn("webhook dispatcher: recording a batch failed", "tenant", c.TenantID, "webhook", c.WebhookID, "err", err)
		return false
	}
	if !moved {
		d.Log.Info("webhook dispatcher: the lease on an endpoint ran out before its batch was recorded; another instance attempts it",
			"tenant", c.TenantID, "webhook", c.WebhookID)
		return false
	}
	c.Pos = to
	for _, a := range attempts {
		if a.Outcome.Status == DeliveryPending {
			d.kickRetry()
		}
		if a.Outcome.Status == DeliveryDead && a.Outcome.HTTPStatus == 410 {
			d.disable(ctx, c.TenantID, c.WebhookID)
			return false
		}
	}
	d.mu.Lock()
	idle := len(events) < d.Batch && !cut && d.kicks == seen
	d.mu.Unlock()
	return !idle
}

// batchBudget is how long a batch may go on starting attempts: the lease
// less the longest an attempt takes (Timeout, and the 10 s a send allows
// beyond it), halved for the time reading and recording the batch takes.
// A batch whose attempts all started within it is recorded before its
// lease runs out; zero means one wave of PerEndpoint attempts per batch.
func (d *Dispatcher) batchBudget() time.Duration {
	return max(0, (d.Lease-d.Timeout-10*time.Second)/2)
}

// attemptEvents attempts the events the endpoint subscribes to, in the
// log's order, PerEndpoint at a time, and returns the attempts made. It
// starts no attempt after the first once the batch has run for
// batchBudget, nor beyond the first PerEndpoint when the budget is zero,
// nor once ctx ends; cut reports that events were left unattempted (they follow the last
// attempt returned).
func (d *Dispatcher) attemptEvents(ctx context.Context, c Cursor, events []Event) (attempts []Attempt, cut bool) {
	attempts = make([]Attempt, 0, len(events))
	wanted := make([]*Event, 0, len(events))
	for i := range events {
		if ev := &events[i]; c.Wants(ev.Type) {
			attempts = append(attempts, Attempt{Pos: ev.Pos, OccurredAt: ev.OccurredAt})
			wanted = append(wanted, ev)
		}
	}
	// PerEndpoint workers take the events in order, so those attempted
	// are always the first ones: the position can move past them.
	start, budget := time.Now(), d.batchBudget()
	var mu sync.Mutex
	next, stopped := 0, false
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped || next >= len(wanted) {
			return 0, false
		}
		// The first always starts, so a batch moves the position; a
		// shutdown starts no more (the rest are read again).
		if next > 0 && (time.Since(start) > budget || (budget == 0 && next >= d.PerEndpoint) || ctx.Err() != nil) {
			stopped = true
			return 0, false
		}
		next++
		return next - 1, true
	}
	var wg sync.WaitGroup
	for range min(d.PerEndpoint, len(wanted)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				d.begin(c.WebhookID)
				a := &attempts[i]
				a.AttemptedAt = time.Now()
				out, ok := d.send(ctx, c.TenantID, c.WebhookID, uuid.Nil, 1, wanted[i])
				if !ok {
					// Not attempted (the database failed us): a delivery
					// row the retry schedule takes over.
					due := time.Now().Add(d.retryWait(1))
					out = Outcome{Status: DeliveryPending, NextAttemptAt: &due, Error: "not attempted: the platform could not prepare the request"}
				}
				a.Outcome = out
				a.AnsweredAt = time.Now()
				d.end(c.WebhookID)
			}
		}()
	}
	wg.Wait()
	return attempts[:next], next < len(wanted)
}

// disable turns an endpoint off after a 410 from its receiver.
func (d *Dispatcher) disable(ctx context.Context, tenantID string, webhookID uuid.UUID) {
	reason := fmt.Sprintf("the receiver answered 410 Gone at %s", time.Now().UTC().Format(time.RFC3339))
	if err := d.Store.DisableWebhook(context.WithoutCancel(ctx), tenantID, webhookID, reason); err != nil {
		d.Log.Warn("webhook: disabling the endpoint failed", "tenant", tenantID, "webhook", webhookID, "err", err)
	}
}

// attempt makes one attempt of a claimed delivery and records it. A
// failure to prepare it (the database) leaves the lease to run out: the
// delivery is then attempted again.
func (d *Dispatcher) attempt(parent context.Context, c Claim, ev *Event) {
	out, ok := d.send(parent, c.TenantID, c.WebhookID, c.ID, c.Attempts, ev)
	if !ok {
		return
	}
	// A shutdown does not keep the outcome from being recorded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 30*time.Second)
	defer cancel()
	log := attemptLog{d.Log, c.TenantID, c.WebhookID, c.ID, c.Attempts}
	reply := make(chan finishReply, 1)
	d.finish <- finishReq{f: Finish{Claim: c, Outcome: out}, reply: reply}
	res2 := <-reply
	recorded, err := res2.recorded, res2.err
	if err != nil {
		log.Warn("webhook: recording the attempt failed", "err", err)
		return
	}
	if !recorded {
		log.Info("webhook: the lease ran out before the attempt ended; another attempt records the delivery")
		return
	}
	if out.Status == DeliveryDead && out.HTTPStatus == 410 {
		d.disable(ctx, c.TenantID, c.WebhookID)
	}
}

// send makes attempt number n of the event to the endpoint and returns
// its outcome; ok is false when the attempt could not be made (reading
// its secrets or settings failed), which is logged. deliveryID is the
// delivery row being retried (uuid.Nil for a first attempt), for the log.
func (d *Dispatcher) send(parent context.Context, tenantID string, webhookID, deliveryID uuid.UUID, n int, ev *Event) (out Outcome, ok bool) {
	// A shutdown does not cut an attempt short: its outcome is recorded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), d.Timeout+10*time.Second)
	defer cancel()
	// The attempt's logger is built only when something is logged.
	log := attemptLog{d.Log, tenantID, webhookID, deliveryID, n}
	secrets, err := d.signingSecrets(ctx, tenantID, webhookID)
	if err != nil || len(secrets) == 0 {
		log.Warn("webhook: reading the signing secrets failed", "err", err, "secrets", len(secrets))
		return out, false
	}
	msgID, err := d.IDs.Encode(ctx, tenantID, ev.Pos)
	if err != nil {
		log.Warn("webhook: encoding the event id failed", "err", err)
		return out, false
	}
	body, err := json.Marshal(d.payload(tenantID, msgID, ev))
	if err != nil {
		log.Error("webhook: encoding the payload failed", "err", err)
		return out, false
	}
	client, err := d.client(ctx, tenantID)
	if err != nil {
		log.Warn("webhook: reading the tenant's allowed hosts failed", "err", err)
		return out, false
	}
	start := time.Now()
	sctx, span := d.tracer.Start(ctx, "holdpoint.webhook.deliver", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("holdpoint.webhook_id", webhookID.String()), attribute.Int("holdpoint.attempt", n)))
	res, callErr := client.Do(sctx, httptool.Request{URL: ev.URL, Timeout: d.Timeout, ID: msgID, Body: body, Secrets: secrets})
	var ce *httptool.CallError
	if errors.As(callErr, &ce) && ce.PolicyRefusal() {
		// The host and the address stay here: the delivery's lastError,
		// which the tenant reads, only names the policy.
		log.Warn("webhook: the address policy refused the endpoint's URL; the delivery is dead", "err", callErr)
	}
	out = d.outcome(n, res, callErr)
	d.Observer.WebhookAttempted(out.Status, time.Since(start))
	span.SetAttributes(attribute.String("holdpoint.outcome", out.Status), attribute.Int("http.response.status_code", out.HTTPStatus))
	if out.Status != DeliveryDelivered {
		span.SetStatus(codes.Error, out.Status)
	}
	span.End()
	return out, true
}

// attemptLog logs with the attempt's identity.
type attemptLog struct {
	log        *slog.Logger
	tenantID   string
	webhookID  uuid.UUID
	deliveryID uuid.UUID
	n          int
}

func (l attemptLog) with() *slog.Logger {
	return l.log.With("tenant", l.tenantID, "webhook", l.webhookID, "delivery", l.deliveryID, "attempt", l.n)
}

func (l attemptLog) Warn(msg string, args ...any)  { l.with().Warn(msg, args...) }
func (l attemptLog) Error(msg string, args ...any) { l.with().Error(msg, args...) }
func (l attemptLog) Info(msg string, args ...any)  { l.with().Info(msg, args...) }

// outcome classifies an attempt: delivered on a 2xx; dead on 410, when
// the address policy refused the URL (retrying would be refused again;
// once the operator allows the host, the delivery is redelivered) or when
// the schedule is used up; otherwise due again after the next wait.
func (d *Dispatcher) outcome(n int, res *httptool.Result, err error) Outcome {
	out := Outcome{HTTPStatus: res.Status}
	if err == nil {
		out.Status = DeliveryDelivered
		return out
	}
	out.Error = errorText(err)
	var ce *httptool.CallError
	if res.Status == 410 || (errors.As(err, &ce) && ce.PolicyRefusal()) {
		out.Status = DeliveryDead
		return out
	}
	if n > len(d.Schedule) {
		out.Status = DeliveryDead
		return out
	}
	next := time.Now().Add(d.retryWait(n))
	out.Status, out.NextAttemptAt = DeliveryPending, &next
	return out
}

// retryWait is the wait after failed attempt n (n <= len(Schedule), or
// the first wait of the schedule), +-10%.
func (d *Dispatcher) retryWait(n int) time.Duration {
	wait := 5 * time.Second
	if n >= 1 && n <= len(d.Schedule) {
		wait = d.Schedule[n-1]
	} else if len(d.Schedule) > 0 {
		wait = d.Schedule[0]
	}
	return wait + time.Duration((rand.Float64()*0.2-0.1)*float64(wait))
}

// errorText describes a failed attempt for the deliveries list, in the
// receiver's terms.
func errorText(err error) string {
	s := err.Error()
	var ce *httptool.CallError
	if errors.As(err, &ce) {
		cause := "unknown error"
		if ce.Err != nil {
			cause = ce.Err.Error()
		}
		switch ce.Kind {
		case httptool.KindStatus:
			s = fmt.Sprintf("the receiver answered HTTP %d", ce.Status)
		case httptool.KindRefused:
			// Not the cause: it names the host and the address it
			// resolved to, which the send logs for the operator.
			s = "refused: the URL is not allowed by the address policy"
			if !ce.PolicyRefusal() {
				s = fmt.Sprintf("refused: the receiver answered a redirect (HTTP %d), which is not followed", ce.Status)
			}
		case httptool.KindTimeout:
			s = "no answer in time: " + cause
		case httptool.KindTooLarge:
			s = "the receiver's answer was too large: " + cause
		default:
			s = "connection failed: " + cause
		}
	}
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return strings.ToValidUTF8(s, "?")
}

// cachedLoad returns the value m keeps for key while it is younger than
// cacheTTL, else load's, kept for next time (m is guarded by d.mu).
func cachedLoad[K comparable, V any](d *Dispatcher, m map[K]cached[V], key K, load func() (V, error)) (V, error) {
	d.mu.Lock()
	e, ok := m[key]
	d.mu.Unlock()
	if ok && time.Since(e.at) < cacheTTL {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	d.mu.Lock()
	if len(m) > 10000 {
		clear(m)
	}
	m[key] = cached[V]{v, time.Now()}
	d.mu.Unlock()
	return v, nil
}

// signingSecrets are the endpoint's secrets that sign (cached).
func (d *Dispatcher) signingSecrets(ctx context.Context, tenantID string, webhookID uuid.UUID) ([][]byte, error) {
	return cachedLoad(d, d.secrets, webhookID, func() ([][]byte, error) {
		return d.Store.WebhookSecrets(ctx, tenantID, webhookID)
	})
}

// client is the HTTP client of the tenant's address policy (its allowed
// hosts cached).
func (d *Dispatcher) client(ctx context.Context, tenantID string) (*httptool.Client, error) {
	hosts, err := cachedLoad(d, d.hosts, tenantID, func() ([]string, error) {
		hosts, err := d.Store.TenantToolHosts(ctx, tenantID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return hosts, err
	})
	if err != nil {
		return nil, err
	}
	return d.clients.For(httptool.Policy{AllowLoopback: d.AllowLoopback, AllowedHosts: hosts}), nil
}

// Payload is the JSON body of a webhook.
type Payload struct {
	// ID is the message id, the same as the webhook-id header and the
	// event's id in GET /api/v1/events: the same on every retry.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Timestamp and OccurredAt are when the event happened (the former is
	// the Standard Webhooks name).
	Timestamp  time.Time `json:"timestamp"`
	OccurredAt time.Time `json:"occurredAt"`
	TenantID   string    `json:"tenantId"`
	// Sequence numbers the events of one interrupt (1 for interrupt.created),
	// so a receiver can order them: deliveries may arrive out of order.
	Sequence int               `json:"sequence,omitempty"`
	Actor    string            `json:"actor,omitempty"`
	Data     PayloadData       `json:"data"`
	Links    map[string]string `json:"links,omitempty"`
}

// PayloadData is what the event is about.
type PayloadData struct {
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	Turn      *Turn      `json:"turn,omitempty"`
	ToolCall  *ToolCall  `json:"toolCall,omitempty"`
}

func (d *Dispatcher) payload(tenantID, id string, ev *Event) Payload {
	p := Payload{
		ID: id, Type: ev.Type, Timestamp: ev.OccurredAt.UTC(), OccurredAt: ev.OccurredAt.UTC(), TenantID: tenantID,
		Sequence: ev.Sequence, Actor: ev.Actor,
		Data: PayloadData{Interrupt: ev.Interrupt, Turn: ev.Turn, ToolCall: ev.ToolCall},
	}
	base := strings.TrimRight(d.PublicURL, "/")
	if base == "" {
		return p
	}
	p.Links = map[string]string{}
	session := ""
	switch {
	case ev.Interrupt != nil:
		id := ev.Interrupt.ID.String()
		p.Links["interrupt"] = base + "/api/v1/interrupts/" + id
		p.Links["ui"] = base + "/ui/interrupts/" + id
		session = ev.Interrupt.SessionID
	case ev.Turn != nil:
		session = ev.Turn.SessionID
	case ev.ToolCall != nil:
		session = ev.ToolCall.SessionID
	}
	if session != "" {
		p.Links["session"] = base + "/ui/sessions/" + url.PathEscape(session)
	}
	return p
}
