package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// rig is the runtime over a benchmark database with the HTTP server in front
// of it, as `platform serve --dev` runs them (no authentication, the default
// tenant), and the event hub behind GET /api/v1/events.
type rig struct {
	admin *pgxpool.Pool // the URL's role: the tables' owner
	pool  *pgxpool.Pool
	rt    *service.Runtime
	srv   *http.Server
	base  string // http://127.0.0.1:port
	stop  context.CancelFunc
	done  chan struct{} // the hub returned
}

// startRig starts a rig; close stops everything it started.
func startRig(ctx context.Context, databaseURL string) (*rig, error) {
	r := &rig{done: make(chan struct{})}
	close(r.done) // until the hub runs
	var err error
	if r.admin, err = pgxpool.New(ctx, databaseURL); err != nil {
		return nil, err
	}
	if r.pool, err = pgstore.NewAppPool(ctx, databaseURL); err != nil {
		r.close()
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := pgstore.New(r.pool)
	r.rt = service.NewRuntime(store, service.Options{Logger: quiet})
	if err := Register(r.rt); err != nil {
		r.close()
		return nil, err
	}
	hub := eventhub.New(store, quiet)
	hubCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop, r.done = stop, make(chan struct{})
	go func() {
		defer close(r.done)
		hub.Run(hubCtx)
	}()
	if r.srv, r.base, err = serveHTTP(r.rt, httpapi.Options{Logger: quiet, Events: hub}); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// close stops the HTTP server (ending its connections), the hub, the
// runtime and the pools.
func (r *rig) close() {
	if r.srv != nil {
		_ = r.srv.Close()
	}
	if r.stop != nil {
		r.stop()
	}
	<-r.done
	if r.rt != nil {
		_ = r.rt.Shutdown(context.Background())
	}
	if r.pool != nil {
		r.pool.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
}

// Footprint is the process's memory and goroutines at one moment.
type Footprint struct {
	Heap       uint64 // heap in use: /memory/classes/heap/objects:bytes
	RSS        int64  // resident set, VmRSS
	Goroutines int
}

// measure reads the process's footprint; settle first collects garbage and
// returns freed memory to the system, so that two footprints compare what is
// live rather than when the collector last ran.
func measure(settle bool) Footprint {
	if settle {
		runtime.GC()
		debug.FreeOSMemory()
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	var heap uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	return Footprint{Heap: heap, RSS: procStatus("VmRSS"), Goroutines: runtime.NumGoroutine()}
}

// perUnit is (after - before) / n, signed.
func perUnit[T int | int64 | uint64](before, after T, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

func mib[T int64 | uint64](b T) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// snapshotCacheBound describes the store's snapshot cache bound (service/
// pgstore cache.go: DefaultSnapshotCacheSize entries, and 64 messages an
// entry on average across all of them).
func snapshotCacheBound() string {
	return fmt.Sprintf("%d snapshots and %d messages", pgstore.DefaultSnapshotCacheSize, 64*pgstore.DefaultSnapshotCacheSize)
}

// IdleConfig sizes the idle-sessions run.
type IdleConfig struct {
	DatabaseURL string
	Sessions    int // sessions to leave paused
	Out         io.Writer
}

// IdleResult is what paused sessions cost the process.
type IdleResult struct {
	Sessions      int
	Before, After Footprint // settled, before and after the sessions paused
	Paused        int       // pending interrupts of the sessions, counted in the database
	Elapsed       time.Duration
}

// HeapPerSession is the heap the paused sessions hold, per session.
func (r *IdleResult) HeapPerSession() float64 {
	return perUnit(r.Before.Heap, r.After.Heap, r.Sessions)
}

// idleWorkers is how many first turns run at once while pausing sessions.
const idleWorkers = 8

// pauseSessions runs the first turns of n sessions named prefix-i,
// idleWorkers at a time; each pauses on its approval.
func pauseSessions(ctx context.Context, rt *service.Runtime, prefix string, n int) error {
	caller := service.Caller{TenantID: "default", Actor: "bench"}
	firstTurn := func(session string) error {
		msg := service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("Transfer $50 to account 12345")}}
		out, err := rt.InvokeOne(ctx, caller, Agent, service.AgentInit{SessionID: session}, service.AgentInput{Message: &msg}, nil)
		if err != nil {
			return err
		}
		if out.FinishReason != service.FinishInterrupted {
			return fmt.Errorf("first turn of %s: finish %s %+v", session, out.FinishReason, out.Error)
		}
		return nil
	}
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(idleWorkers, n) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && failed.Load() == nil; i = next.Add(1) - 1 {
				if err := firstTurn(fmt.Sprintf("%s-%d", prefix, i)); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// RunIdle starts the runtime and the HTTP server, pauses cfg.Sessions
// sessions on an approval (one first turn each, through the runtime) and
// measures what the process holds for them: nothing should remain but what
// PostgreSQL stores.
func RunIdle(ctx context.Context, cfg IdleConfig) (*IdleResult, error) {
	if cfg.Sessions <= 0 {
		return nil, fmt.Errorf("idle sessions must be positive")
	}
	r, err := startRig(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer r.close()
	pause := func(prefix string, n int) error { return pauseSessions(ctx, r.rt, prefix, n) }
	// Warm up with as many concurrent turns (connections, prepared
	// statements, code paths), so the baseline holds what they hold.
	if err := pause("idle-warmup", 2*idleWorkers); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	res := &IdleResult{Sessions: cfg.Sessions, Before: measure(true)}
	prefix := fmt.Sprintf("idle-%d", time.Now().UnixNano())
	start := time.Now()
	if err := pause(prefix, cfg.Sessions); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	res.After = measure(true)
	if err := r.admin.QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending' AND session_id LIKE $1`,
		prefix+"-%").Scan(&res.Paused); err != nil {
		return nil, err
	}
	if cfg.Out != nil {
		PrintIdle(cfg.Out, res)
	}
	if res.Paused != cfg.Sessions {
		return res, fmt.Errorf("%d sessions paused, %d pending interrupts in the database", cfg.Sessions, res.Paused)
	}
	return res, nil
}

// PrintIdle writes the idle-sessions figures.
func PrintIdle(w io.Writer, r *IdleResult) {
	fmt.Fprintf(w, "idle sessions: %d paused on an approval in %s (%d pending interrupts in the database)\n",
		r.Sessions, r.Elapsed.Round(time.Millisecond), r.Paused)
	fmt.Fprintf(w, "  after GC      heap in use   RSS         goroutines\n")
	fmt.Fprintf(w, "  before        %-12s  %-10s  %d\n", mib(r.Before.Heap), mib(r.Before.RSS), r.Before.Goroutines)
	fmt.Fprintf(w, "  after         %-12s  %-10s  %d\n", mib(r.After.Heap), mib(r.After.RSS), r.After.Goroutines)
	fmt.Fprintf(w, "  heap per idle session: %.0f bytes (heap after minus before, / %d)\n", r.HeapPerSession(), r.Sessions)
	bound := pgstore.DefaultSnapshotCacheSize
	atBound := perUnit(r.Before.Heap, r.After.Heap, min(r.Sessions, bound)) * float64(bound)
	fmt.Fprintf(w, "  a paused session lives in PostgreSQL; its last snapshot (completed, finish reason interrupted)\n")
	fmt.Fprintf(w, "  stays in the store's snapshot cache until newer ones push it out. The cache is bounded (%s):\n", snapshotCacheBound())
	fmt.Fprintf(w, "  past %d idle sessions the heap stops growing, at about %s more than before them\n", bound, mib(int64(atBound)))
}

// StreamsConfig sizes the event-streams run.
type StreamsConfig struct {
	DatabaseURL string
	Streams     int // concurrent GET /api/v1/events connections
	Out         io.Writer
	// Wait is how long every stream has to receive the event (default 5 s).
	Wait time.Duration
}

// StreamsResult is what open event streams cost the process (the server's
// side and the client's: both run in it), and how fast an event reached
// them.
type StreamsResult struct {
	Streams int
	// Before: settled, before the streams; Open: settled, all open.
	Before, Open Footprint
	// Received is how many streams got the event within the wait.
	Received               int
	LatencyP50, LatencyMax time.Duration // from the cycle's start
	// GoroutinesAfter is the goroutine count once the streams closed.
	GoroutinesAfter int
	OpenTime        time.Duration // to open them all
	Wait            time.Duration // the wait for the event
}

// GoroutinesBack reports whether the goroutine count returned to within
// 10% of the start.
func (r *StreamsResult) GoroutinesBack() bool {
	return float64(r.GoroutinesAfter) <= 1.1*float64(r.Before.Goroutines)
}

// openers bounds the streams being opened at once.
const openers = 64

// RunStreams opens cfg.Streams event streams over loopback HTTP, measures
// what they hold, sends one approval cycle through the runtime and checks
// every stream gets its interrupt.created event, then closes them and
// checks the goroutines they held are gone.
func RunStreams(ctx context.Context, cfg StreamsConfig) (*StreamsResult, error) {
	n := cfg.Streams
	if n <= 0 {
		return nil, fmt.Errorf("streams must be positive")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Second
	}
	// Each stream is two sockets of this process (client and server);
	// the rest is the pools, the listener and slack.
	if err := ensureFiles(uint64(2*n + 256)); err != nil {
		return nil, fmt.Errorf("%d streams: %w", n, err)
	}
	r, err := startRig(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer r.close()
	cycle := inProcessCycle(r.rt)
	for i := range warmupCycles {
		if _, _, err := cycle(ctx, "streams-warmup", i); err != nil {
			return nil, fmt.Errorf("warm-up cycle: %w", err)
		}
	}
	transport := &http.Transport{MaxIdleConns: n + 4, MaxIdleConnsPerHost: n + 4, MaxConnsPerHost: n + 4, DisableCompression: true}
	defer transport.CloseIdleConnections()
	res := &StreamsResult{Streams: n, Wait: cfg.Wait, Before: measure(true)}
	st := newStreamsRun(ctx, n, &http.Client{Transport: transport}, r.base+"/api/v1/events")
	defer st.close()
	start := time.Now()
	if err := st.open(); err != nil {
		return nil, fmt.Errorf("opening %d event streams: %w", n, err)
	}
	res.OpenTime = time.Since(start)
	res.Open = measure(true)
	if err := st.deliver(ctx, cycle, cfg.Wait, res); err != nil {
		return nil, err
	}
	// The server's side of each stream ends when it notices its client
	// went away.
	transport.CloseIdleConnections()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res.GoroutinesAfter = runtime.NumGoroutine()
		if res.GoroutinesBack() || time.Now().After(deadline) {
			break
		}
	}
	if cfg.Out != nil {
		PrintStreams(cfg.Out, res)
	}
	if res.Received < n {
		return res, fmt.Errorf("%d of %d streams received the event within %s", res.Received, n, cfg.Wait)
	}
	if !res.GoroutinesBack() {
		return res, fmt.Errorf("goroutines %d after closing the streams, %d before: not within 10%%", res.GoroutinesAfter, res.Before.Goroutines)
	}
	return res, nil
}

// streamsRun is n event streams of one tenant, each waiting for the
// interrupt.created event of one session.
type streamsRun struct {
	n            int
	client       *http.Client
	url          string
	session      string
	cycleStart   atomic.Int64    // unix nanoseconds; 0 until the cycle starts
	got          []time.Duration // per stream: the event's latency, 0 if none
	ctx          context.Context
	closeStreams context.CancelFunc
	opened       chan error
	received     sync.WaitGroup
	ended        sync.WaitGroup
}

func newStreamsRun(ctx context.Context, n int, client *http.Client, url string) *streamsRun {
	st := &streamsRun{n: n, client: client, url: url, session: fmt.Sprintf("streams-%d", time.Now().UnixNano()),
		got: make([]time.Duration, n), opened: make(chan error, n)}
	st.ctx, st.closeStreams = context.WithCancel(ctx)
	return st
}

// close ends every stream and waits for their readers.
func (st *streamsRun) close() {
	st.closeStreams()
	st.ended.Wait()
}

// open opens the streams, openers at a time, and waits until all did.
func (st *streamsRun) open() error {
	st.received.Add(st.n)
	sem := make(chan struct{}, openers)
	for i := range st.n {
		st.ended.Go(func() { st.read(i, sem) })
	}
	timeout := time.After(30*time.Second + time.Duration(st.n)*10*time.Millisecond)
	for range st.n {
		select {
		case err := <-st.opened:
			if err != nil {
				return err
			}
		case <-timeout:
			return fmt.Errorf("the streams did not all open in time")
		}
	}
	return nil
}

// read opens stream i and notes when the session's event arrives on it.
func (st *streamsRun) read(i int, sem chan struct{}) {
	gotIt := false
	defer func() {
		if !gotIt {
			st.received.Done()
		}
	}()
	sem <- struct{}{}
	body, err := openStream(st.ctx, st.client, st.url)
	<-sem
	st.opened <- err
	if err != nil {
		return
	}
	defer body.Close()
	rd := bufio.NewReader(body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || gotIt {
			continue
		}
		var ev struct{ Type, SessionID string }
		if json.Unmarshal([]byte(data), &ev) == nil && ev.SessionID == st.session && ev.Type == "interrupt.created" {
			st.got[i] = time.Duration(time.Now().UnixNano() - st.cycleStart.Load())
			gotIt = true
			st.received.Done()
		}
	}
}

// deliver runs one approval cycle, whose first turn creates the interrupt,
// waits up to wait for every stream to see it, and records the latencies.
func (st *streamsRun) deliver(ctx context.Context, cycle cycleFunc, wait time.Duration, res *StreamsResult) error {
	t0 := time.Now()
	st.cycleStart.Store(t0.UnixNano())
	if _, _, err := cycle(ctx, st.session, 0); err != nil {
		return fmt.Errorf("cycle: %w", err)
	}
	all := make(chan struct{})
	go func() { st.received.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(time.Until(t0.Add(wait))):
	}
	st.close()
	<-all // every stream ended, so every count is in
	var lat []time.Duration
	for _, d := range st.got {
		if d > 0 && d <= wait {
			lat = append(lat, d)
		}
	}
	res.Received = len(lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		res.LatencyP50, res.LatencyMax = lat[len(lat)/2], lat[len(lat)-1]
	}
	return nil
}

// openStream opens one event stream and reads until its first frame (the
// subscription comment), so the subscription is in place when it returns.
func openStream(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var first [1]byte
	if _, err := io.ReadFull(resp.Body, first[:]); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// ensureFiles raises the soft limit on open files to need if it is lower,
// up to the hard limit; it fails when the hard limit is lower.
func ensureFiles(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the open files limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("need about %d open files, and the hard limit is %d (ulimit -Hn): raise it or open fewer streams", need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open files limit to %d: %w", need, err)
	}
	return nil
}

// PrintStreams writes the event-streams figures.
func PrintStreams(w io.Writer, r *StreamsResult) {
	fmt.Fprintf(w, "event streams: %d concurrent GET /api/v1/events over loopback, opened in %s (client and server in this process)\n",
		r.Streams, r.OpenTime.Round(time.Millisecond))
	fmt.Fprintf(w, "  after GC      heap in use   RSS         goroutines\n")
	fmt.Fprintf(w, "  before        %-12s  %-10s  %d\n", mib(r.Before.Heap), mib(r.Before.RSS), r.Before.Goroutines)
	fmt.Fprintf(w, "  streams open  %-12s  %-10s  %d\n", mib(r.Open.Heap), mib(r.Open.RSS), r.Open.Goroutines)
	fmt.Fprintf(w, "  per stream    %-12s  %-10s  %.1f\n",
		fmt.Sprintf("%.0f B", perUnit(r.Before.Heap, r.Open.Heap, r.Streams)),
		fmt.Sprintf("%.0f B", perUnit(r.Before.RSS, r.Open.RSS, r.Streams)),
		perUnit(r.Before.Goroutines, r.Open.Goroutines, r.Streams))
	fmt.Fprintf(w, "  one approval cycle: %d of %d streams got its interrupt.created within %s; latency from the cycle's start p50 %s, max %s\n",
		r.Received, r.Streams, r.Wait, ms(r.LatencyP50), ms(r.LatencyMax))
	back := "within 10%"
	if !r.GoroutinesBack() {
		back = "NOT within 10%"
	}
	fmt.Fprintf(w, "  goroutines: %d before the streams, %d after closing them (%s)\n", r.Before.Goroutines, r.GoroutinesAfter, back)
}
