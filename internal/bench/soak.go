package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
)

// SoakConfig is a long run at a fraction of the peak rate.
type SoakConfig struct {
	DatabaseURL string
	// Mode is "inprocess" (default) or "http", as Config's.
	Mode string
	// Sessions run the cycle concurrently (default 8), in the peak
	// measurement and in the soak.
	Sessions int
	Duration time.Duration
	// Rate is the fraction of the peak rate to hold (0 < Rate <= 1).
	Rate float64
	// PeakTime is how long the peak measurement runs (default 10 s).
	PeakTime time.Duration
	// Interval is how often a line is printed (default 1 minute).
	Interval time.Duration
	// SessionCycles is how many cycles a session runs before its worker
	// starts a new one (default 20), so conversations stay of a usual
	// length however long the soak.
	SessionCycles int
	Out           io.Writer
}

// SoakInterval is the figures of one interval of a soak.
type SoakInterval struct {
	Elapsed   time.Duration // since the soak started, at the interval's end
	Length    time.Duration
	Cycles    int
	PerSecond float64
	P50, P99  time.Duration // turn latency
	Footprint               // after a GC, at the interval's end
}

// SoakResult is a soak's figures.
type SoakResult struct {
	Mode      string
	Sessions  int
	Duration  time.Duration
	Rate      float64
	Peak      float64 // cycles/s of the peak measurement
	Target    float64 // Rate × Peak
	Intervals []SoakInterval
	Errors    int64
}

// First and Last are the first and last intervals (zero without any).
func (r *SoakResult) First() SoakInterval {
	if len(r.Intervals) == 0 {
		return SoakInterval{}
	}
	return r.Intervals[0]
}

// Last is the last interval.
func (r *SoakResult) Last() SoakInterval {
	if len(r.Intervals) == 0 {
		return SoakInterval{}
	}
	return r.Intervals[len(r.Intervals)-1]
}

// PerSecond is the cycles/s achieved over the whole soak.
func (r *SoakResult) PerSecond() float64 {
	var n int
	var d time.Duration
	for _, iv := range r.Intervals {
		n += iv.Cycles
		d += iv.Length
	}
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// RunSoak measures the peak cycle rate for a few seconds, then runs the
// cycle at cfg.Rate of it for cfg.Duration, each session paced on a
// schedule of its own (a cycle that runs late does not make the next ones
// hurry), and prints a line per interval: cycles/s, turn p50/p99, RSS,
// heap in use and goroutines; at the end the first interval against the
// last. It asserts nothing about the figures.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if cfg.Duration <= 0 || cfg.Rate <= 0 || cfg.Rate > 1 {
		return nil, fmt.Errorf("the soak needs a positive duration and a rate in (0, 1]")
	}
	cfg.setDefaults()
	r, err := startRig(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer r.close()
	sk := &soak{cfg: cfg, prefix: fmt.Sprintf("soak-%d", time.Now().UnixNano())}
	switch cfg.Mode {
	case "inprocess", "":
		sk.cfg.Mode = "inprocess"
		sk.cycle = inProcessCycle(r.rt)
	case "http":
		sk.cycle = httpCycle(r.base+httpapi.DefaultBasePath+"/"+Agent, cfg.Sessions, false)
	default:
		return nil, fmt.Errorf("--mode must be inprocess or http")
	}
	for i := range warmupCycles {
		if _, _, err := sk.cycle(ctx, "soak-warmup", i); err != nil {
			return nil, fmt.Errorf("warm-up cycle: %w", err)
		}
	}
	res := &SoakResult{Mode: sk.cfg.Mode, Sessions: cfg.Sessions, Duration: cfg.Duration, Rate: cfg.Rate}
	every, err := sk.peak(ctx, res)
	if err != nil {
		return res, err
	}
	stopVacuum, err := keepVacuumed(ctx, r.admin, sk.out())
	if err != nil {
		return nil, err
	}
	defer stopVacuum()
	sk.intervals(ctx, res, every)
	res.Errors = sk.errs.Load()
	printSoakSummary(sk.out(), res)
	if res.Errors > 0 {
		return res, fmt.Errorf("%d sessions failed", res.Errors)
	}
	return res, nil
}

// setDefaults fills the sizes left at zero.
func (cfg *SoakConfig) setDefaults() {
	if cfg.Sessions <= 0 {
		cfg.Sessions = 8
	}
	if cfg.PeakTime <= 0 {
		cfg.PeakTime = 10 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.SessionCycles <= 0 {
		cfg.SessionCycles = 20
	}
}

// soak is one soak run: its cycle and the sessions' shared record of the
// current interval.
type soak struct {
	cfg    SoakConfig
	cycle  cycleFunc
	prefix string
	mu     sync.Mutex
	lat    []time.Duration
	errs   atomic.Int64
}

func (sk *soak) out() io.Writer {
	if sk.cfg.Out == nil {
		return io.Discard
	}
	return sk.cfg.Out
}

// work runs session s's cycles until end, every interval apart (0: back
// to back).
func (sk *soak) work(ctx context.Context, s int, end time.Time, every time.Duration) {
	next := time.Now().Add(time.Duration(s) * every / time.Duration(sk.cfg.Sessions)) // staggered
	for n := 0; ; n++ {
		if every > 0 {
			time.Sleep(time.Until(next))
		}
		if !time.Now().Before(end) || ctx.Err() != nil {
			return
		}
		session := fmt.Sprintf("%s-%d-%d", sk.prefix, s, n/sk.cfg.SessionCycles)
		a, b, err := sk.cycle(ctx, session, n%sk.cfg.SessionCycles)
		if err != nil {
			if sk.errs.Add(1) == 1 {
				fmt.Fprintf(os.Stderr, "bench: cycle failed: %v\n", err)
			}
			return
		}
		sk.mu.Lock()
		sk.lat = append(sk.lat, a, b)
		sk.mu.Unlock()
		if every > 0 {
			// The next slot; slots already past are skipped, not caught
			// up on.
			next = next.Add(every)
			if now := time.Now(); next.Before(now) {
				next = next.Add((now.Sub(next)/every + 1) * every)
			}
		}
	}
}

// run starts every session's work for d and returns what to wait on.
func (sk *soak) run(ctx context.Context, d, every time.Duration) *sync.WaitGroup {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for s := range sk.cfg.Sessions {
		wg.Go(func() { sk.work(ctx, s, end, every) })
	}
	return &wg
}

// take returns the latencies recorded since the last take.
func (sk *soak) take() []time.Duration {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	l := sk.lat
	sk.lat = nil
	return l
}

// peak measures the back-to-back rate and returns the interval between a
// session's cycles that holds the soak's share of it.
func (sk *soak) peak(ctx context.Context, res *SoakResult) (time.Duration, error) {
	start := time.Now()
	sk.run(ctx, sk.cfg.PeakTime, 0).Wait()
	res.Peak = float64(len(sk.take())/2) / time.Since(start).Seconds()
	if sk.errs.Load() > 0 {
		return 0, fmt.Errorf("the peak measurement failed")
	}
	res.Target = sk.cfg.Rate * res.Peak
	if res.Target <= 0 {
		return 0, fmt.Errorf("no cycle completed in the peak measurement")
	}
	every := time.Duration(float64(sk.cfg.Sessions) / res.Target * float64(time.Second))
	fmt.Fprintf(sk.out(), "soak: peak %.0f cycles/s (%d sessions back to back, %s); now %.0f%% of it, %.0f cycles/s (a cycle every %s per session) for %s\n",
		res.Peak, sk.cfg.Sessions, sk.cfg.PeakTime, 100*sk.cfg.Rate, res.Target, every.Round(time.Microsecond), sk.cfg.Duration)
	return every, nil
}

// keepVacuumed: a server with autovacuum off (some CI configurations)
// never removes dead row versions nor gathers statistics, and a soak on it
// measures that instead; the soak then does what autovacuum would, a
// VACUUM ANALYZE of the database now (the peak run filled the tables) and
// every 30 s until stop is called.
func keepVacuumed(ctx context.Context, admin *pgxpool.Pool, out io.Writer) (stop func(), err error) {
	var autovacuum string
	if err := admin.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		return nil, err
	}
	if autovacuum == "on" {
		return func() {}, nil
	}
	fmt.Fprintln(out, "soak: autovacuum is off on this server; the soak runs VACUUM ANALYZE now and every 30 s in its place")
	if _, err := admin.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return nil, err
	}
	vctx, cancel := context.WithCancel(ctx)
	vdone := make(chan struct{})
	go func() {
		defer close(vdone)
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-vctx.Done():
				return
			case <-t.C:
				if _, err := admin.Exec(vctx, `VACUUM (ANALYZE)`); err != nil && vctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "bench: vacuum: %v\n", err)
				}
			}
		}
	}()
	return func() { cancel(); <-vdone }, nil
}

// soakLine is the format of an interval's line: fixed widths rather than a
// tabwriter, since each line is printed when its interval ends.
const soakLine = "%8s %9s %10s %10s %11s %12s %11s\n"

// intervals holds the rate for the soak's duration, recording and
// printing an interval's figures as each ends.
func (sk *soak) intervals(ctx context.Context, res *SoakResult, every time.Duration) {
	out := sk.out()
	fmt.Fprintf(out, soakLine, "elapsed", "cycles/s", "turn p50", "turn p99", "RSS", "heap in use", "goroutines")
	start := time.Now()
	wg := sk.run(ctx, sk.cfg.Duration, every)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	last := start
	for i := 1; ; i++ {
		finished := false
		select {
		case <-done:
			finished = true
		case <-time.After(time.Until(start.Add(time.Duration(i) * sk.cfg.Interval))):
		}
		now := time.Now()
		iv := sk.interval(now.Sub(start), now.Sub(last))
		last = now
		// A last sliver (the cycles that were running at the end) is no
		// interval of its own, nor is one that began after the soak's
		// duration (a loaded machine's late timer: only that drain in it).
		drain := iv.Length < sk.cfg.Interval/2 || iv.Elapsed-iv.Length >= sk.cfg.Duration
		if finished && len(res.Intervals) > 0 && drain {
			return
		}
		res.Intervals = append(res.Intervals, iv)
		fmt.Fprintf(out, soakLine, iv.Elapsed.Round(time.Second), fmt.Sprintf("%.0f", iv.PerSecond), ms(iv.P50), ms(iv.P99),
			mib(iv.RSS), mib(iv.Heap), fmt.Sprint(iv.Goroutines))
		if finished {
			return
		}
	}
}

// interval is the figures of the interval of length ending at elapsed.
func (sk *soak) interval(elapsed, length time.Duration) SoakInterval {
	l := sk.take()
	iv := SoakInterval{Elapsed: elapsed, Length: length, Cycles: len(l) / 2}
	iv.PerSecond = float64(iv.Cycles) / iv.Length.Seconds()
	slices.Sort(l)
	if len(l) > 0 {
		iv.P50, iv.P99 = l[len(l)/2], l[min(len(l)-1, len(l)*99/100)]
	}
	runtime.GC()
	iv.Footprint = measure(false)
	return iv
}

// printSoakSummary compares the first interval with the last.
func printSoakSummary(w io.Writer, r *SoakResult) {
	first, last := r.First(), r.Last()
	change := func(a, b float64) string {
		if a == 0 {
			return "-"
		}
		return fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
	}
	fmt.Fprintf(w, "soak: %.0f cycles/s over %s (target %.0f); first interval vs last: RSS %s -> %s (%s), heap in use %s -> %s (%s), turn p99 %s -> %s (%s)\n",
		r.PerSecond(), r.Duration, r.Target,
		mib(first.RSS), mib(last.RSS), change(float64(first.RSS), float64(last.RSS)),
		mib(first.Heap), mib(last.Heap), change(float64(first.Heap), float64(last.Heap)),
		ms(first.P99), ms(last.P99), change(float64(first.P99), float64(last.P99)))
}
