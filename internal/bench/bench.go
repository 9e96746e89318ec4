package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/faultproxy"
	"github.com/holdpoint/holdpoint/internal/procstat"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/streams"
)

// Config is what to run.
type Config struct {
	// DatabaseURL is the database to run in (migrated, empty).
	DatabaseURL string
	// DBRTT adds this round-trip time between the server and PostgreSQL
	// (through a delaying loopback proxy): a database on another host.
	DBRTT time.Duration
	// Mode is "inprocess" (runtime calls) or "http" (the protocol over
	// loopback HTTP).
	Mode     string
	Sessions int
	Cycles   int
	// Flat additionally runs one long session of FlatCycles cycles and
	// compares the bytes written by its first and last 20 cycles.
	FlatCycles int
	// CPUSplit additionally runs one long session of CPUSplitCycles
	// cycles (default 2000) and prints the CPU per cycle of its first and
	// last CPUSplit cycles.
	CPUSplit       int
	CPUSplitCycles int
	Out            io.Writer
	// Webhooks adds webhook endpoints and a dispatcher to the run.
	Webhooks WebhookConfig
	// Prune seeds prunable rows, and prunes them during the run.
	Prune PruneConfig
	// Calibrate first measures the server's commit ceiling (Calibrate),
	// and the result says what fraction of it the run's commits reached.
	Calibrate bool
	// EarlyClaims makes every resume claim before its turn goes on
	// (service.Options.EarlyClaims): one commit more per cycle.
	EarlyClaims bool
	// Stream makes the HTTP cycles streaming turns (Accept:
	// text/event-stream), whose frames are kept as durable streams.
	Stream bool
	// Waits samples where turns wait during the run (run queue, GC
	// pauses, pool, PostgreSQL wait events) and prints it after the table.
	Waits bool
	// Detach makes both turns of an inprocess cycle detached: each runs
	// as a detached job (the runtime's job runner takes those no slot was
	// free for) and the client polls its snapshot every DetachPoll
	// (default DefaultDetachPoll) until it ends.
	Detach     bool
	DetachPoll time.Duration
	// Slowest prints the run's slowest turns, this many, with when each
	// started and which it was, and the ANALYZEs of the store's statistics
	// keeper during the run: to see whether the tail is a few turns that
	// ran together (and beside what) or spread over the run.
	Slowest int
	// ColdPool skips pgstore.WarmPool: the pool opens its connections as
	// turns need them, each first turn on one paying for the connection,
	// its statements' preparation and its backend's cold caches (as before
	// round 3; to show the difference).
	ColdPool bool
}

// extras names what cfg adds to the plain cycle.
func (cfg Config) extras() []string {
	var x []string
	if cfg.Webhooks.Subscribe {
		x = append(x, "webhook")
		switch {
		case cfg.Webhooks.Drain:
			x = append(x, "delivered after the run")
		case cfg.Webhooks.NoDispatch:
			x = append(x, "no dispatch")
		}
	}
	if cfg.Webhooks.Backlog > 0 {
		x = append(x, fmt.Sprintf("webhook backlog %d", cfg.Webhooks.Backlog))
	}
	if cfg.DBRTT > 0 {
		x = append(x, fmt.Sprintf("--db-rtt %s", cfg.DBRTT))
	}
	if cfg.Prune.Seed > 0 {
		x = append(x, fmt.Sprintf("%d prunable rows", cfg.Prune.Seed))
	}
	if cfg.Prune.Run {
		x = append(x, "prune")
	}
	if cfg.EarlyClaims {
		x = append(x, "early claims")
	}
	if cfg.Detach {
		x = append(x, "detached")
	}
	if cfg.ColdPool {
		x = append(x, "cold pool")
	}
	return x
}

// Agent is the name of the benchmark agent.
const Agent = "benchApproval"

// Result holds the figures of one run.
type Result struct {
	Mode       string
	Sessions   int
	Cycles     int
	Elapsed    time.Duration
	TurnP50    time.Duration
	TurnP99    time.Duration
	TurnP999   time.Duration
	RoundTrips float64 // database round trips per cycle
	// Commits is the writing transactions the server committed per cycle
	// (transaction ids it assigned: every process on the server counts).
	Commits float64
	// CPU is this process's CPU time per cycle (the runtime, the HTTP
	// server and clients in http mode, the webhook receiver if any; not
	// PostgreSQL's).
	CPU time.Duration
	// MachineCPU is the CPU time every process on the machine used per
	// cycle (this one, PostgreSQL, a webhook receiver, anything else
	// running): on a machine that runs nothing else, what a cycle costs
	// in all. Steadier than cycles/s on a shared, noisy machine.
	MachineCPU time.Duration
	// Ceiling is the server's calibrated commit rate with 32 clients
	// (0: not calibrated).
	Ceiling       float64
	BytesPerCycle float64 // growth per cycle of the tables' data files (relationSizes)
	// Relations is BytesPerCycle by relation, largest first.
	Relations []RelationBytes
	PeakRSS   int64 // bytes
	Errors    int64
	FlatFirst float64 // row bytes per cycle, cycles 1-20 of the long session
	FlatLast  float64 // same, last 20 cycles
	// CPUSplit is the long session's first and last cycles' cost
	// (Config.CPUSplit; nil without).
	CPUSplit *CPUSplit
	// Slowest is the run's slowest turns, slowest first, and Analyses the
	// statistics keeper's ANALYZEs during the run (Config.Slowest).
	Slowest  []SlowTurn
	Analyses []KeeperAnalysis
	// FirstTurns is the latencies of the server's first turns, in the
	// order they started: the warm-up's, then the run's first. A cold
	// start shows here; the percentiles cover the measured turns only.
	FirstTurns []time.Duration
	// RestP50 and RestMax are the latencies of the measured turns after
	// those in FirstTurns, to set a cold start beside the warm turns.
	RestP50, RestMax time.Duration
	// Extras names what the run added to the plain cycle (webhook, early
	// claims, prune), for the markdown row.
	Extras []string
}

// FirstTurnsP50Max is the p50 and the max of FirstTurns (0 without).
func (r *Result) FirstTurnsP50Max() (p50, max time.Duration) {
	if len(r.FirstTurns) == 0 {
		return 0, 0
	}
	sorted := slices.Sorted(slices.Values(r.FirstTurns))
	return sorted[len(sorted)/2], sorted[len(sorted)-1]
}

// CyclesPerSecond is the throughput.
func (r *Result) CyclesPerSecond() float64 {
	return float64(r.Sessions*r.Cycles) / r.Elapsed.Seconds()
}

// stubModel answers instantly: a user message gets an approval request, an
// approval gets a short answer.
type stubModel struct{}

func (stubModel) Name() string { return "stub" }

func (stubModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == service.RoleUser {
		ref := "a" + strconv.Itoa(len(req.Messages))
		return &service.ModelResponse{FinishReason: "stop", Message: service.Message{Role: service.RoleModel, Content: []service.Part{{
			ToolRequest: &service.ToolRequest{Name: "userApproval", Ref: ref, Input: json.RawMessage(`{"action":"transferMoney","details":"Transfer $50.00 to account 12345"}`)},
		}}}}, nil
	}
	return &service.ModelResponse{FinishReason: "stop", Message: service.Message{Role: service.RoleModel, Content: []service.Part{
		service.TextPart("Done: transferred $50.00 to account 12345."),
	}}}, nil
}

// Register adds the benchmark agent to rt.
func Register(rt *service.Runtime) error {
	return rt.Register(&service.Agent{
		Name:          Agent,
		ServerManaged: true,
		System:        "You are a banking assistant. ALWAYS use the userApproval interrupt to confirm before executing transferMoney.",
		Model:         stubModel{},
		Tools: []*service.Tool{{
			Name:         "userApproval",
			Description:  "Ask the user to approve an action.",
			Interrupt:    true,
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"action":{"type":"string"},"details":{"type":"string"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"}},"required":["approved"]}`),
		}},
	})
}

// counter counts database round trips: every query and every batch.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// cycleFunc runs one approval cycle of a session: it returns the two turn
// latencies.
type cycleFunc func(ctx context.Context, session string, i int) (time.Duration, time.Duration, error)

// Run runs the benchmark and prints its table.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Sessions <= 0 || cfg.Cycles <= 0 {
		return nil, fmt.Errorf("sessions and cycles must be positive")
	}
	r := &run{cfg: cfg}
	defer r.close()
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	res, err := r.measure(ctx)
	if err != nil {
		return nil, err
	}
	return res, r.report(ctx, res)
}

// run is one benchmark run: the server under test (a runtime on its own
// pool, maybe behind a delaying proxy or HTTP) and what it measures with.
type run struct {
	cfg     Config
	admin   *pgxpool.Pool // the owner's pool: sizes, counters, seeding
	pool    *pgxpool.Pool // the runtime's
	store   *pgstore.PgStore
	rt      *service.Runtime
	cnt     *counter
	proxy   *faultproxy.Proxy
	cycle   cycleFunc
	rig     *webhookRig
	wt      *waits
	ceiling float64
	first   []time.Duration // the latencies of the runtime's first turns
	closers []func()
}

func (r *run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// open connects, starts the runtime with the bench agent and picks the
// cycle of the mode.
func (r *run) open(ctx context.Context) error {
	poolCfg, err := pgxpool.ParseConfig(r.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	if r.admin, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return err
	}
	r.closers = append(r.closers, r.admin.Close)
	r.cnt = &counter{}
	if r.cfg.DBRTT > 0 {
		target := net.JoinHostPort(poolCfg.ConnConfig.Host, strconv.Itoa(int(poolCfg.ConnConfig.Port)))
		// Half a round trip each way.
		if r.proxy, err = faultproxy.StartDelayed(target, r.cfg.DBRTT/2); err != nil {
			return err
		}
		r.closers = append(r.closers, r.proxy.Close)
	}
	r.pool, err = pgstore.NewAppPoolWith(ctx, r.cfg.DatabaseURL, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = r.cnt
		if r.proxy != nil {
			c.ConnConfig.DialFunc = dialer(r.proxy.Addr())
		}
	})
	if err != nil {
		return err
	}
	r.closers = append(r.closers, r.pool.Close)
	r.store = pgstore.New(r.pool)
	r.rt = service.NewRuntime(r.store, service.Options{Logger: quietLog(), EarlyClaims: r.cfg.EarlyClaims})
	r.closers = append(r.closers, func() { _ = r.rt.Shutdown(context.Background()) })
	if err := Register(r.rt); err != nil {
		return err
	}
	return r.pickCycle()
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pickCycle sets the cycle of the mode: runtime calls, or the protocol
// over loopback HTTP.
func (r *run) pickCycle() error {
	switch r.cfg.Mode {
	case "inprocess", "":
		r.cfg.Mode = "inprocess"
		r.cycle = inProcessCycle(r.rt)
		if r.cfg.Detach {
			r.startJobRunner()
			r.cycle = detachedCycle(r.rt, cmp.Or(r.cfg.DetachPoll, DefaultDetachPoll))
		}
	case "http":
		if r.cfg.Detach {
			return fmt.Errorf("--detach runs with --mode inprocess only")
		}
		hub := streams.New(r.store, quietLog(), 0)
		srv, url, err := serveHTTP(r.rt, httpapi.Options{Logger: quietLog(), Streams: hub})
		if err != nil {
			return err
		}
		r.closers = append(r.closers, func() { srv.Close() })
		url += httpapi.DefaultBasePath + "/" + Agent
		r.cycle = httpCycle(url, r.cfg.Sessions, r.cfg.Stream)
	default:
		return fmt.Errorf("--mode must be inprocess or http")
	}
	return nil
}

// prepare sets up what the run adds (webhooks, rows to prune), warms up,
// and measures the round trip and the commit ceiling when asked to.
func (r *run) prepare(ctx context.Context) error {
	rig, err := startWebhooks(ctx, r.store, r.admin, r.cfg.Webhooks, quietLog())
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if r.rig = rig; rig != nil {
		rig.trips = r.cnt.n.Load
	}
	if r.cfg.Prune.Seed > 0 {
		if err := seedPrunable(ctx, r.admin, r.cfg.Prune.Seed); err != nil {
			return err
		}
	}
	if err := r.warm(ctx); err != nil {
		return err
	}
	if r.proxy != nil {
		// The proxy's delay is at least the timer granularity of the
		// machine (about 1.1 ms a direction on some VMs): report the round
		// trip measured, not the one asked for.
		rtt, err := measureRTT(ctx, r.pool)
		if err != nil {
			return err
		}
		if r.cfg.Out != nil {
			fmt.Fprintf(r.cfg.Out, "database round trip through the --db-rtt %s proxy: %s p50 (SELECT 1, 50 times)\n", r.cfg.DBRTT, ms(rtt))
		}
	}
	if r.cfg.Calibrate {
		c, err := Calibrate(ctx, r.admin, r.cfg.Out)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		r.ceiling = c[len(c)-1].PerSecond
	}
	return nil
}

// warm readies the server as platform serve does before it listens (its
// pool's connections opened and warm: pgstore.WarmPool), then runs the
// warm-up cycles, whose turns are the server's first, reported apart
// (Result.FirstTurns).
func (r *run) warm(ctx context.Context) error {
	if !r.cfg.ColdPool {
		start := time.Now()
		n, err := r.store.WarmPool(ctx)
		if err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
		if r.cfg.Out != nil {
			fmt.Fprintf(r.cfg.Out, "warmed %d pool connections in %s\n", n, ms(time.Since(start)))
		}
	}
	for i := 0; i < warmupCycles; i++ {
		a, b, err := r.cycle(ctx, "warmup", i)
		if err != nil {
			return fmt.Errorf("warm-up cycle: %w", err)
		}
		r.first = append(r.first, a, b)
	}
	return nil
}

// warmupCycles is how many cycles run before the measured ones.
const warmupCycles = 3

// firstTurns is how many of the server's first turns Result.FirstTurns
// keeps: the warm-up's, then the run's first in the order they started.
const firstTurns = 10

// counters is what measure reads before and after the sessions run.
type counters struct {
	sizes       map[string]int64
	trips, xids int64
	cpu, busy   time.Duration
}

// counters reads them. The CPU counters are read next to the run, last
// before it and first after it, so that the scans that measure the tables
// (which take longer as the run grows them) are not charged to its cycles.
func (r *run) counters(ctx context.Context, after bool) (counters, error) {
	var c counters
	var err error
	cpu := func() { c.trips, c.cpu, c.busy = r.cnt.n.Load(), processCPU(), machineBusy() }
	if after {
		cpu()
	}
	if c.sizes, err = relationSizes(ctx, r.admin); err != nil {
		return c, err
	}
	if c.xids, err = assignedXids(ctx, r.admin); err != nil {
		return c, err
	}
	if !after {
		cpu()
	}
	return c, nil
}

// measure runs the sessions and turns the counters into a Result.
func (r *run) measure(ctx context.Context) (*Result, error) {
	var err error
	if r.cfg.Waits {
		if r.wt, err = startWaits(ctx, r.admin, r.pool); err != nil {
			return nil, fmt.Errorf("waits: %w", err)
		}
	}
	before, err := r.counters(ctx, false)
	if err != nil {
		return nil, err
	}
	res := &Result{Mode: r.cfg.Mode, Sessions: r.cfg.Sessions, Cycles: r.cfg.Cycles, Extras: r.cfg.extras(), Ceiling: r.ceiling}
	var pruned func() error
	if r.cfg.Prune.Run {
		pruned = startPrune(ctx, r.store, r.cfg.Prune, r.cfg.Out)
	}
	start := time.Now()
	turns := r.sessions(ctx, res)
	res.Elapsed = time.Since(start)
	after, err := r.counters(ctx, true)
	if err != nil {
		return nil, err
	}
	if pruned != nil {
		if err := pruned(); err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
	}
	total := float64(r.cfg.Sessions * r.cfg.Cycles)
	res.RoundTrips = float64(after.trips-before.trips) / total
	res.Commits = float64(after.xids-before.xids) / total
	res.CPU = time.Duration(float64(after.cpu-before.cpu) / total)
	res.MachineCPU = time.Duration(float64(after.busy-before.busy) / total)
	res.Relations, res.BytesPerCycle = relationGrowth(before.sizes, after.sizes, r.cfg.Sessions*r.cfg.Cycles)
	res.setLatencies(turns, r.first)
	if r.cfg.Slowest > 0 {
		res.setSlowest(turns, start, r.cfg.Slowest, r.store.StatsAnalyses())
	}
	return res, nil
}

// timedTurn is one measured turn: when it ended and how long it took
// (it started d before end).
type timedTurn struct {
	end     time.Time
	d       time.Duration
	session int  // the session's index
	cycle   int  // the cycle's index in the session
	resume  bool // the cycle's second turn
}

// sessions runs the concurrent sessions' cycles and returns their turns.
func (r *run) sessions(ctx context.Context, res *Result) []timedTurn {
	var mu sync.Mutex
	var turns []timedTurn
	var errs atomic.Int64
	var wg sync.WaitGroup
	tag := time.Now().UnixNano()
	for s := 0; s < r.cfg.Sessions; s++ {
		wg.Go(func() {
			session := fmt.Sprintf("bench-%d-%d", tag, s)
			local := make([]timedTurn, 0, 2*r.cfg.Cycles)
			for i := 0; i < r.cfg.Cycles; i++ {
				a, b, err := r.cycle(ctx, session, i)
				if err != nil {
					if errs.Add(1) == 1 {
						fmt.Fprintf(os.Stderr, "bench: cycle failed: %v\n", err)
					}
					return
				}
				now := time.Now()
				local = append(local, timedTurn{now.Add(-b), a, s, i, false}, timedTurn{now, b, s, i, true})
			}
			mu.Lock()
			turns = append(turns, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Errors = errs.Load()
	return turns
}

// setLatencies sets the turn percentiles, and FirstTurns from the warm-up's
// turns followed by the run's first to start (the first to end would
// leave out the slow ones among turns that started together).
func (res *Result) setLatencies(turns []timedTurn, warmup []time.Duration) {
	slices.SortFunc(turns, func(a, b timedTurn) int { return a.end.Add(-a.d).Compare(b.end.Add(-b.d)) })
	first := slices.Clone(warmup)
	taken := 0
	for _, t := range turns {
		if len(first) >= firstTurns {
			break
		}
		first = append(first, t.d)
		taken++
	}
	res.FirstTurns = first[:min(len(first), firstTurns)]
	if rest := turns[taken:]; len(rest) > 0 {
		d := make([]time.Duration, len(rest))
		for i, t := range rest {
			d[i] = t.d
		}
		slices.Sort(d)
		res.RestP50, res.RestMax = d[len(d)/2], d[len(d)-1]
	}
	lat := make([]time.Duration, len(turns))
	for i, t := range turns {
		lat[i] = t.d
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.TurnP50 = lat[len(lat)/2]
		res.TurnP99 = lat[min(len(lat)-1, len(lat)*99/100)]
		res.TurnP999 = lat[min(len(lat)-1, len(lat)*999/1000)]
	}
}

// report adds the long session's flatness and the peak RSS, and prints.
func (r *run) report(ctx context.Context, res *Result) error {
	var err error
	if r.cfg.FlatCycles > 0 {
		if res.FlatFirst, res.FlatLast, err = flatness(ctx, r.admin, r.cycle, r.cfg.FlatCycles); err != nil {
			return err
		}
	}
	if r.cfg.CPUSplit > 0 {
		cycles := r.cfg.CPUSplitCycles
		if cycles <= 0 {
			cycles = 2000
		}
		if res.CPUSplit, err = cpuSplit(ctx, r.cycle, cycles, r.cfg.CPUSplit); err != nil {
			return err
		}
	}
	res.PeakRSS = peakRSS()
	out := r.cfg.Out
	if out != nil {
		Print(out, res)
	}
	if r.wt != nil && out != nil {
		r.wt.finish(out, r.cfg.Sessions*r.cfg.Cycles, res.Elapsed)
	}
	if r.rig != nil {
		if err := r.rig.finish(ctx, r.admin, out, r.cfg.Sessions*r.cfg.Cycles); err != nil {
			return err
		}
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d sessions failed", res.Errors)
	}
	return nil
}

// Print writes the result table.
func Print(w io.Writer, r *Result) {
	// Before the table, whose last line (the figures) make bench keeps.
	if len(r.FirstTurns) > 0 {
		p50, max := r.FirstTurnsP50Max()
		fmt.Fprintf(w, "first %d turns of the server (%d of them warm-up): p50 %s, max %s",
			len(r.FirstTurns), min(len(r.FirstTurns), 2*warmupCycles), ms(p50), ms(max))
		if r.RestMax > 0 {
			fmt.Fprintf(w, "; the other turns: p50 %s, max %s", ms(r.RestP50), ms(r.RestMax))
		}
		fmt.Fprintln(w)
	}
	printRelations(w, r.Relations)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tsessions\tcycles/session\tcycles/s\tturn p50\tturn p99\tturn p99.9\tdb round trips/cycle\tcommits/cycle\tbytes/cycle\tCPU ms/cycle\tmachine CPU ms/cycle\tof ceiling\tpeak RSS\t")
	ceiling := "-"
	if r.Ceiling > 0 {
		ceiling = fmt.Sprintf("%.0f%%", 100*r.Commits*r.CyclesPerSecond()/r.Ceiling)
	}
	fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%s\t%.0f MiB\t\n",
		r.Mode, r.Sessions, r.Cycles, r.CyclesPerSecond(), ms(r.TurnP50), ms(r.TurnP99), ms(r.TurnP999),
		r.RoundTrips, r.Commits, r.BytesPerCycle, float64(r.CPU)/float64(time.Millisecond),
		float64(r.MachineCPU)/float64(time.Millisecond), ceiling,
		float64(r.PeakRSS)/(1<<20))
	tw.Flush()
	if r.FlatFirst > 0 {
		fmt.Fprintf(w, "row bytes per cycle of one long session: cycles 1-20 %.0f, last 20 %.0f (%+.1f%%)\n",
			r.FlatFirst, r.FlatLast, 100*(r.FlatLast-r.FlatFirst)/r.FlatFirst)
	}
	if r.CPUSplit != nil {
		r.CPUSplit.print(w)
	}
	printSlowest(w, r)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// flatness runs one session of n cycles and returns the row bytes written
// per cycle by its first and last 20 cycles (logical row sizes: pages are
// too coarse for 20 cycles).
func flatness(ctx context.Context, admin *pgxpool.Pool, cycle cycleFunc, n int) (float64, float64, error) {
	session := fmt.Sprintf("flat-%d", time.Now().UnixNano())
	var marks []time.Time
	for i := 0; i < n; i++ {
		if i == 0 || i == 20 || i == n-20 {
			marks = append(marks, time.Now())
		}
		if _, _, err := cycle(ctx, session, i); err != nil {
			return 0, 0, err
		}
	}
	marks = append(marks, time.Now())
	bytesBetween := func(from, to time.Time) (float64, error) {
		var total int64
		for _, q := range []string{
			// A snapshot's row holds the messages its turn wrote.
			`SELECT coalesce(sum(pg_column_size(t.*)), 0)::bigint FROM snapshots t WHERE session_id = $1 AND created_at >= $2 AND created_at < $3`,
			`SELECT coalesce(sum(pg_column_size(i.*)), 0)::bigint FROM interrupts i WHERE session_id = $1 AND created_at >= $2 AND created_at < $3`,
			`SELECT coalesce(sum(pg_column_size(e.*)), 0)::bigint FROM interrupt_events e JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id WHERE i.session_id = $1 AND e.created_at >= $2 AND e.created_at < $3`,
		} {
			var b int64
			if err := admin.QueryRow(ctx, q, session, from, to).Scan(&b); err != nil {
				return 0, err
			}
			total += b
		}
		return float64(total) / 20, nil
	}
	first, err := bytesBetween(marks[0], marks[1])
	if err != nil {
		return 0, 0, err
	}
	last, err := bytesBetween(marks[2], marks[3])
	return first, last, err
}

func inProcessCycle(rt *service.Runtime) cycleFunc {
	caller := service.Caller{TenantID: "default", Actor: "bench"}
	return func(ctx context.Context, session string, i int) (time.Duration, time.Duration, error) {
		msg := service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("Transfer $50 to account 12345")}}
		t0 := time.Now()
		out, err := rt.InvokeOne(ctx, caller, Agent, service.AgentInit{SessionID: session}, service.AgentInput{Message: &msg}, nil)
		if err != nil {
			return 0, 0, err
		}
		if out.FinishReason != service.FinishInterrupted {
			return 0, 0, fmt.Errorf("first turn: finish %s %+v", out.FinishReason, out.Error)
		}
		t1 := time.Now()
		req := out.Message.Content[0].ToolRequest
		resume := &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(`{"approved":true}`)}}}}
		out, err = rt.InvokeOne(ctx, caller, Agent, service.AgentInit{SnapshotID: out.SnapshotID}, service.AgentInput{Resume: resume}, nil)
		if err != nil {
			return 0, 0, err
		}
		if out.FinishReason != service.FinishStop {
			return 0, 0, fmt.Errorf("second turn: finish %s %+v", out.FinishReason, out.Error)
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// serveHTTP serves the platform's HTTP API over rt with opts on a loopback
// port and returns the server's base URL (http://127.0.0.1:port).
func serveHTTP(rt *service.Runtime, opts httpapi.Options) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: httpapi.New(rt, opts), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

func httpCycle(url string, clients int, stream bool) cycleFunc {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients + 4, MaxConnsPerHost: clients + 4}}
	post := func(ctx context.Context, body string) (map[string]any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
		}
		if stream {
			// The last frame of the stream is the result.
			frames := bytes.Split(bytes.TrimSpace(raw), []byte("\n\n"))
			raw = bytes.TrimPrefix(frames[len(frames)-1], []byte("data: "))
		}
		var env struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, err
		}
		return env.Result, nil
	}
	return func(ctx context.Context, session string, i int) (time.Duration, time.Duration, error) {
		t0 := time.Now()
		out, err := post(ctx, fmt.Sprintf(`{"init":{"sessionId":%q},"data":{"message":{"role":"user","content":[{"text":"Transfer $50 to account 12345"}]}}}`, session))
		if err != nil {
			return 0, 0, err
		}
		if out["finishReason"] != service.FinishInterrupted {
			return 0, 0, fmt.Errorf("first turn: %v", out)
		}
		t1 := time.Now()
		msg := out["message"].(map[string]any)
		req := msg["content"].([]any)[0].(map[string]any)["toolRequest"].(map[string]any)
		body := fmt.Sprintf(`{"init":{"snapshotId":%q},"data":{"resume":{"respond":[{"toolResponse":{"name":%q,"ref":%q,"output":{"approved":true}}}]}}}`,
			out["snapshotId"], req["name"], req["ref"])
		out, err = post(ctx, body)
		if err != nil {
			return 0, 0, err
		}
		if out["finishReason"] != service.FinishStop {
			return 0, 0, fmt.Errorf("second turn: %v", out)
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS() int64 { return procStatus("VmHWM") }

// procStatus is a size field of this process's status (VmHWM, VmRSS), in
// bytes; 0 where /proc does not tell it.
func procStatus(field string) int64 {
	b, _ := procstat.Bytes(0, field)
	return b
}
