package ui

import (
	"context"
	"log/slog"
	"testing"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// stack is what every browser test's server runs on: a fresh database, a
// store as the application role, a runtime (shut down when the test
// ends) and a running event hub, as servicetest.New starts them.
type stack struct {
	url   string
	store *pgstore.PgStore
	log   *slog.Logger
	rt    *service.Runtime
	hub   *eventhub.Hub
	// bg is cancelled when the test ends, after the server it registers
	// later is closed (cleanups run last first).
	bg   context.Context
	stop context.CancelFunc
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{log: testlog.Logger(t)}
	env := servicetest.New(t, servicetest.Options{Runtime: service.Options{Logger: s.log}, Events: true})
	s.url, s.store, s.rt, s.hub = env.URL, env.Store, env.Runtime, env.Hub
	s.bg, s.stop = context.WithCancel(context.Background())
	t.Cleanup(s.stop)
	return s
}

// run runs fn on the stack's background context until the test ends.
func (s *stack) run(t *testing.T, fn func(context.Context)) {
	done := make(chan struct{})
	go func() { defer close(done); fn(s.bg) }()
	t.Cleanup(func() { s.stop(); <-done })
}
