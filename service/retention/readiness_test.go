package retention_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/retention"
)

// TestNotReadyPrunerSkipsRounds: while its instance is not ready the
// sweeper's rounds prune nothing; once ready the next round does.
func TestNotReadyPrunerSkipsRounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cycle("acme", "done")
	e.age("acme", []string{"done"}, 3*time.Hour, true)
	var ready atomic.Bool
	var asked atomic.Int32
	p := &retention.Pruner{Store: e.store, Batch: 10, Pause: -1,
		Defaults: retention.Policy{Completed: time.Hour, Failed: time.Hour, Events: time.Hour},
		Ready:    func() bool { asked.Add(1); return ready.Load() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(2 * time.Minute); asked.Load() < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pruner asked for readiness %d times in 20s", asked.Load())
		}
	}
	if got := e.rows("acme", "done"); got["sessions"] != 1 {
		t.Fatalf("a pruner that is not ready pruned: %v", got)
	}
	ready.Store(true)
	for deadline := time.Now().Add(2 * time.Minute); e.rows("acme", "done")["sessions"] != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session was not pruned within 20s of the instance being ready")
		}
	}
}
