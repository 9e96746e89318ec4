package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// WebhookConfig adds webhooks to a run.
type WebhookConfig struct {
	// Subscribe creates an endpoint subscribed to every event, on a
	// loopback receiver that answers at once, and runs a dispatcher.
	Subscribe bool
	// Backlog queues this many deliveries, before the run, to a second
	// endpoint whose receiver takes Slow to answer each.
	Backlog int
	Slow    time.Duration
	// NoDispatch runs no dispatcher: the endpoint's events wait in the
	// log, and the run measures what an endpoint costs the turns without
	// delivering (nothing since endpoints read the log from a cursor).
	NoDispatch bool
	// Drain runs no dispatcher while the turns run, then starts one and
	// measures how fast and at what CPU cost it delivers the events the
	// run left in the log: the cost of a delivery alone, without the
	// noise of turns competing for the same cores.
	Drain bool
}

// webhookRig is the receivers and the dispatcher of a run.
type webhookRig struct {
	srv        *http.Server
	stop       context.CancelFunc
	done       chan struct{}
	mu         sync.Mutex
	delays     []time.Duration // arrival minus occurredAt, fast endpoint
	arrived    int             // requests to the fast endpoint
	fastID     string
	noDispatch bool
	drain      bool
	dispatcher *webhooks.Dispatcher
	dctx       context.Context
	// trips counts the application pool's round trips.
	trips func() int64
}

// receiver is the endpoints' server: /fast records the delay of each
// event, /slow answers after slow.
func (rig *webhookRig) receiver(slow time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) {
		// The receiver stands for a system on another machine: it reads
		// the body and takes only occurredAt from it, so its CPU (which
		// this machine's cores pay for here) is little beyond HTTP's.
		body, _ := io.ReadAll(r.Body)
		at, ok := occurredAt(body)
		rig.mu.Lock()
		rig.arrived++
		if ok {
			rig.delays = append(rig.delays, time.Since(at))
		}
		rig.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// subscribe creates the run's endpoints: /fast for every event, and /slow
// with a backlog of due deliveries when cfg asks for one.
func (rig *webhookRig) subscribe(ctx context.Context, store *pgstore.PgStore, admin *pgxpool.Pool, cfg WebhookConfig, base string) error {
	m := &webhooks.Manager{Store: store, AllowLoopback: true}
	caller := service.Caller{TenantID: "default", Actor: "bench"}
	if cfg.Subscribe {
		u := base + "/fast"
		w, err := m.Create(ctx, caller, webhooks.Input{URL: &u})
		if err != nil {
			return err
		}
		rig.fastID = w.ID.String()
	}
	if cfg.Backlog == 0 {
		return nil
	}
	u := base + "/slow"
	only := []string{"interrupt.expired"} // no new deliveries: only the backlog
	w, err := m.Create(ctx, caller, webhooks.Input{URL: &u, EventTypes: only})
	if err != nil {
		return err
	}
	// The backlog is one event delivered many times over: a queue of due
	// deliveries like an outage leaves behind.
	if _, err := admin.Exec(ctx, `INSERT INTO interrupt_events (tenant_id, type, actor, payload)
		VALUES ('default', 'turn.failed', 'bench', '{"snapshotId":"none"}')`); err != nil {
		return err
	}
	_, err = admin.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, webhook_id, event_xid, event_id, next_attempt_at)
		SELECT 'default', $1, e.xid, e.id, now()
		FROM (SELECT xid, id FROM interrupt_events ORDER BY id DESC LIMIT 1) e, generate_series(1, $2)`, w.ID, cfg.Backlog)
	return err
}

// startWebhooks sets up cfg's endpoints in the default tenant and starts a
// dispatcher; nil when cfg asks for nothing.
func startWebhooks(ctx context.Context, store *pgstore.PgStore, admin *pgxpool.Pool, cfg WebhookConfig, log *slog.Logger) (*webhookRig, error) {
	if !cfg.Subscribe && cfg.Backlog == 0 {
		return nil, nil
	}
	rig := &webhookRig{done: make(chan struct{}), noDispatch: cfg.NoDispatch && !cfg.Drain, drain: cfg.Drain}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rig.srv = &http.Server{Handler: rig.receiver(cfg.Slow), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rig.srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	if err := rig.subscribe(ctx, store, admin, cfg, base); err != nil {
		return nil, err
	}
	dctx, stop := context.WithCancel(context.Background())
	rig.stop, rig.dctx = stop, dctx
	rig.dispatcher = &webhooks.Dispatcher{
		Store: store, IDs: keys.NewEventIDs(store.SigningKeys), Owner: "bench", AllowLoopback: true,
		Timeout: max(10*time.Second, 2*cfg.Slow), Lease: max(time.Minute, 4*cfg.Slow), Log: log,
	}
	if cfg.NoDispatch || cfg.Drain {
		return rig, nil
	}
	rig.run()
	return rig, nil
}

// run starts the dispatcher.
func (rig *webhookRig) run() {
	go func() { defer close(rig.done); rig.dispatcher.Run(rig.dctx) }()
}

// unreadEvents counts the events after an endpoint's position in the log:
// those its dispatcher has yet to attempt.
const unreadEvents = `SELECT count(*) FROM webhook_cursors c
	JOIN interrupt_events e ON e.tenant_id = c.tenant_id AND (e.xid, e.id) > (c.xid, c.id)
	WHERE c.webhook_id = $1`

// finish waits (up to a minute) for the fast endpoint's deliveries to be
// delivered, stops the dispatcher and the receivers, and prints the
// figures.
func (rig *webhookRig) finish(ctx context.Context, admin *pgxpool.Pool, out io.Writer, cycles int) error {
	started := !rig.noDispatch && !rig.drain
	defer func() {
		rig.stop()
		if started {
			<-rig.done
		}
		_ = rig.srv.Close()
	}()
	if rig.fastID == "" {
		return nil
	}
	if rig.noDispatch {
		var n int
		if err := admin.QueryRow(ctx, unreadEvents, rig.fastID).Scan(&n); err != nil {
			return err
		}
		fmt.Fprintf(out, "webhooks: %d events (%.1f per cycle) wait in the log for the endpoint, not delivered (--webhook-dispatch=false)\n", n, float64(n)/float64(cycles))
		return nil
	}
	if rig.drain {
		started = true
		return rig.measureDrain(ctx, admin, out)
	}
	start := time.Now()
	var pending, total int
	for {
		var unread int
		if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'delivered'), count(*) FROM webhook_deliveries WHERE webhook_id = $1`,
			rig.fastID).Scan(&pending, &total); err != nil {
			return err
		}
		if err := admin.QueryRow(ctx, unreadEvents, rig.fastID).Scan(&unread); err != nil {
			return err
		}
		pending += unread
		if pending == 0 || time.Since(start) > time.Minute {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rig.mu.Lock()
	delays := slices.Clone(rig.delays)
	rig.mu.Unlock()
	slices.Sort(delays)
	if out == nil || len(delays) == 0 {
		return nil
	}
	fmt.Fprintf(out, "webhooks: %d deliveries (%.1f per cycle), %d undelivered; event to receiver p50 %s, p99 %s, max %s; drained %s after the last cycle\n",
		total, float64(total)/float64(cycles), pending, ms(delays[len(delays)/2]), ms(delays[len(delays)*99/100]),
		ms(delays[len(delays)-1]), ms(time.Since(start)))
	return nil
}

// measureDrain starts the dispatcher on the events the run left in the
// log, waits until the receiver has had them all and the endpoint's
// position is past them, and prints the rate and the CPU per delivery: of
// this process (the dispatcher and the receiver) and of the rest of the
// machine (PostgreSQL, on a machine that runs nothing else). It watches
// the receiver rather than polling the database, so the measurement adds
// no queries of its own until the end.
func (rig *webhookRig) measureDrain(ctx context.Context, admin *pgxpool.Pool, out io.Writer) error {
	var queued int
	if err := admin.QueryRow(ctx, unreadEvents, rig.fastID).Scan(&queued); err != nil {
		return err
	}
	cpu0, busy0, trips0 := processCPU(), machineBusy(), rig.trips()
	start := time.Now()
	rig.run()
	for {
		rig.mu.Lock()
		got := rig.arrived
		rig.mu.Unlock()
		if got >= queued || time.Since(start) > 5*time.Minute {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The last batch is recorded after its attempts are answered.
	var unread int
	for {
		if err := admin.QueryRow(ctx, unreadEvents, rig.fastID).Scan(&unread); err != nil {
			return err
		}
		if unread == 0 || time.Since(start) > 5*time.Minute {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	cpu, busy, trips := processCPU()-cpu0, machineBusy()-busy0, rig.trips()-trips0
	var delivered int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'delivered'`,
		rig.fastID).Scan(&delivered); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	n := float64(max(delivered, 1))
	fmt.Fprintf(out, "webhooks drained: %d events left in the log by the run, %d delivered in %s (%.0f/s), %d unread; per delivery: %.1f µs CPU of this process (dispatcher and receiver), %.1f µs of the rest of the machine (PostgreSQL), %.2f database round trips\n",
		queued, delivered, ms(took), n/took.Seconds(), unread,
		float64(cpu.Nanoseconds())/1e3/n, float64((busy-cpu).Nanoseconds())/1e3/n, float64(trips)/n)
	if delivered < queued {
		return fmt.Errorf("webhooks: %d of %d events delivered", delivered, queued)
	}
	return nil
}

// occurredAt is a payload's occurredAt, found without decoding the rest.
func occurredAt(body []byte) (time.Time, bool) {
	const key = `"occurredAt":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := body[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	return at, err == nil
}
