// Package readiness decides whether this instance may take work (Readiness),
// which /readyz, the work routes, the engine's background workers, the
// webhook dispatcher and the pruner all read.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdpoint/holdpoint/service/store"
)

// Readiness is whether this instance may take work: its database answers
// and its schema is current. One periodic probe decides it, so that
// /readyz, the work routes and the background workers all read one state
// and a load balancer's polling costs the database nothing. The state
// changes only after several probes agree (hysteresis), so one slow ping
// does not flap the instance out of service, nor one lucky ping back in.
//
// A nil *Readiness is always ready.
type Readiness struct {
	probe func(ctx context.Context) error
	opts  Options

	ready atomic.Bool
	mu    sync.Mutex
	// fails and oks count the consecutive probes that failed and passed.
	fails, oks int
	// cause is why the instance is not ready (nil when it is); logged,
	// never sent.
	cause error
}

// Options tune a Readiness; zero fields take the defaults.
type Options struct {
	// Interval is the time between probes while ready (default 2s).
	Interval time.Duration
	// RecheckInterval is the time between probes while not ready
	// (default 500ms): a database that is back is noticed soon, and a
	// probe of a dead one fails fast, so probing more often costs little.
	RecheckInterval time.Duration
	// Timeout bounds one probe (default 3s): a database that does not
	// answer within it, or a pool with no connection free for that
	// long, counts as a failure.
	Timeout time.Duration
	// FailAfter is how many failed probes in a row make the instance not
	// ready (default 2).
	FailAfter int
	// RecoverAfter is how many passed probes in a row make it ready
	// again (default 2).
	RecoverAfter int
	// Logger hears the changes and their causes.
	Logger *slog.Logger
}

// DefaultOptions are the defaults of Options.
var DefaultOptions = Options{Interval: 2 * time.Second, RecheckInterval: 500 * time.Millisecond,
	Timeout: 3 * time.Second, FailAfter: 2, RecoverAfter: 2}

// New returns a readiness decided by probe, ready until probes
// say otherwise: the server checked its database before it started.
func New(probe func(ctx context.Context) error, opts Options) *Readiness {
	d := DefaultOptions
	if opts.Interval <= 0 {
		opts.Interval = d.Interval
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = min(d.RecheckInterval, opts.Interval)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = d.Timeout
	}
	if opts.FailAfter <= 0 {
		opts.FailAfter = d.FailAfter
	}
	if opts.RecoverAfter <= 0 {
		opts.RecoverAfter = d.RecoverAfter
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Readiness{probe: probe, opts: opts}
	r.ready.Store(true)
	return r
}

// Ready reports whether the instance may take work now.
func (r *Readiness) Ready() bool { return r == nil || r.ready.Load() }

// Err is nil when the instance is ready, else an UNAVAILABLE error with a
// Retry-After whose cause is the last failed probe's.
func (r *Readiness) Err() error {
	cause := r.Cause()
	if cause == nil {
		return nil
	}
	return store.UnavailableError(fmt.Errorf("%w: this instance is not ready: %w", store.ErrUnavailable, cause))
}

// Check runs one probe and updates the state; Run calls it periodically,
// tests call it directly.
func (r *Readiness) Check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	err := r.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: the probe's failure says nothing
	}
	r.record(err)
}

// record counts one probe's outcome and flips the state once enough agree.
func (r *Readiness) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.fails, r.oks = r.fails+1, 0
		r.cause = err
		if r.ready.Load() && r.fails >= r.opts.FailAfter {
			r.ready.Store(false)
			r.opts.Logger.Warn("not ready: refusing new work until the database is back", "err", err, "failed_probes", r.fails)
		}
		return
	}
	r.oks, r.fails = r.oks+1, 0
	if !r.ready.Load() && r.oks >= r.opts.RecoverAfter {
		r.ready.Store(true)
		r.cause = nil
		r.opts.Logger.Info("ready again", "passed_probes", r.oks)
	}
}

// Run probes every Interval, or RecheckInterval while not ready, until
// ctx ends.
func (r *Readiness) Run(ctx context.Context) {
	for {
		wait := r.opts.Interval
		if !r.Ready() {
			wait = r.opts.RecheckInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r.Check(ctx)
	}
}

// errNoProbe is the cause reported for a Readiness whose cause was lost.
var errNoProbe = errors.New("no probe result")

// Cause is why the instance is not ready, for logs (nil when ready).
func (r *Readiness) Cause() error {
	if r.Ready() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cause == nil {
		return errNoProbe
	}
	return r.cause
}
