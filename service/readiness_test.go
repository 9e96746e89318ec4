package service_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/readiness"
)

// drivenProbe is a readiness probe the test sets the outcome of.
type drivenProbe struct {
	mu    sync.Mutex
	err   error
	calls atomic.Int32
}

func (p *drivenProbe) set(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

func (p *drivenProbe) probe(context.Context) error {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// TestReadinessHysteresis: one failed probe does not take the instance out
// of service, two do; one passed probe does not bring it back, two do.
// Not ready, it answers UNAVAILABLE with a Retry-After.
func TestReadinessHysteresis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &drivenProbe{}
	r := readiness.New(p.probe, readiness.Options{Logger: testlog.Logger(t)})
	if !r.Ready() || r.Err() != nil {
		t.Fatal("a new readiness is not ready")
	}
	down := errors.New("dial tcp 10.1.2.3:5432: connect: connection refused")
	p.set(down)
	r.Check(ctx)
	if !r.Ready() {
		t.Fatal("one failed probe made the instance not ready")
	}
	r.Check(ctx)
	if r.Ready() {
		t.Fatal("two failed probes left the instance ready")
	}
	e := service.AsError(r.Err())
	if e.Status != service.CodeUnavailable || e.RetryAfter <= 0 || !errors.Is(r.Err(), down) {
		t.Errorf("not ready: %+v, want UNAVAILABLE with a Retry-After, caused by the probe's error", e)
	}
	p.set(nil)
	r.Check(ctx)
	if r.Ready() {
		t.Fatal("one passed probe made the instance ready again")
	}
	p.set(down)
	r.Check(ctx) // a failure between successes starts the count again
	p.set(nil)
	r.Check(ctx)
	if r.Ready() {
		t.Fatal("passed probes that were not consecutive made the instance ready")
	}
	r.Check(ctx)
	if !r.Ready() || r.Err() != nil {
		t.Fatal("two passed probes left the instance not ready")
	}
	var nilReadiness *readiness.Readiness
	if !nilReadiness.Ready() || nilReadiness.Err() != nil {
		t.Error("a nil readiness is not ready")
	}
}

// TestReadinessRun: the periodic probe takes the instance out of service
// and back by itself.
func TestReadinessRun(t *testing.T) {
	t.Parallel()
	p := &drivenProbe{}
	r := readiness.New(p.probe, readiness.Options{Interval: 10 * time.Millisecond, Logger: testlog.Logger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	p.set(errors.New("down"))
	waitFor(t, "not ready", 5*time.Second, func() bool { return !r.Ready() })
	p.set(nil)
	waitFor(t, "ready again", 5*time.Second, func() bool { return r.Ready() })
}

// TestJobsWaitForReadiness: an instance that is not ready leaves a dead
// instance's detached turn queued; once ready it takes it over.
func TestJobsWaitForReadiness(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 600 * time.Millisecond}
	admin, snap, rtA, _ := crashedAfterTool(t, url, opts)
	p := &drivenProbe{}
	p.set(errors.New("database down"))
	ready := readiness.New(p.probe, readiness.Options{Logger: opts.Logger})
	ready.Check(context.Background())
	ready.Check(context.Background())
	var paidB atomic.Int32
	release := make(chan struct{})
	close(release)
	optsB := opts
	optsB.Readiness = ready
	b := startInstance(t, url, optsB, func(rt *service.Runtime) { slowPayAgent(rt, &paidB, release, nil) })
	// The job is claimable from the start (crashedAfterTool made its
	// heartbeat an hour old), so a runner that asked would take it on its
	// first round: over three rounds, the job stays with the dead instance.
	from := service.JobRounds(b.rt)
	waitFor(t, "three rounds of B's job runner", 30*time.Second, func() bool { return service.JobRounds(b.rt) >= from+3 })
	owner := func() int {
		return count(t, admin, `SELECT count(*) FROM turn_jobs WHERE snapshot_id = $1 AND owner = 'dead-instance'`, snap)
	}
	if owner() != 1 {
		t.Fatal("an instance that is not ready claimed a job")
	}
	p.set(nil)
	ready.Check(context.Background())
	ready.Check(context.Background())
	waitFor(t, "B to complete the snapshot once ready", 10*time.Second, func() bool {
		return snapshotStatus(t, rtA, snap) == service.StatusCompleted
	})
}
