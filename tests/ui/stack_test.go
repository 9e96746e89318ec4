package ui

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// stack is what every browser test's server runs on: a fresh database, a
// store as the application role, a runtime (shut down when the test
// ends) and a running event hub.
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
	s := &stack{url: testdb.URL(t), log: testlog.Logger(t)}
	app, err := pgstore.NewAppPool(context.Background(), s.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	s.store = pgstore.New(app)
	t.Cleanup(s.store.Close)
	s.rt = service.NewRuntime(s.store, service.Options{Logger: s.log})
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.rt.Shutdown(c)
	})
	s.bg, s.stop = context.WithCancel(context.Background())
	s.hub = eventhub.New(s.store, s.log)
	s.run(t, s.hub.Run)
	return s
}

// run runs fn on the stack's background context until the test ends.
func (s *stack) run(t *testing.T, fn func(context.Context)) {
	done := make(chan struct{})
	go func() { defer close(done); fn(s.bg) }()
	t.Cleanup(func() { s.stop(); <-done })
}
