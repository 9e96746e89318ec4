package webhooks_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// TestNotReadyDispatcherLeasesNothing: while its instance is not ready the
// dispatcher delivers nothing, however many rounds it makes; once ready it
// delivers what waited.
func TestNotReadyDispatcherLeasesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReceiver(t, ok)
	e.create(e.acme, r, "interrupt.created")
	var ready atomic.Bool
	var asked atomic.Int32
	e.dispatcher("one", func(d *webhooks.Dispatcher) {
		d.Ready = func() bool { asked.Add(1); return ready.Load() }
	})
	e.pause(e.acme, "Transfer $50 to account 12345")
	// Each round asks; ten rounds after the event, nothing went out.
	from := asked.Load()
	waitfor.Until(t, "ten rounds of the dispatcher", 30*time.Second, func() bool { return asked.Load() >= from+10 })
	if n := r.count(); n != 0 {
		t.Fatalf("a dispatcher that is not ready delivered %d webhooks", n)
	}
	ready.Store(true)
	r.wait(1)
}
