package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdpoint/holdpoint/client"
	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is the platform (the demo agents, live events,
// authentication) on a loopback HTTP server over a fresh database, with a
// tenant and its keys.
type testServer struct {
	srv       *httptest.Server
	adminKey  string
	clientKey string

	// eventsDown makes GET /api/v1/events answer 503, as a server that is
	// restarting would; refused counts those answers.
	eventsDown atomic.Bool
	refused    atomic.Int32

	mu sync.Mutex
	// lastEventIDs are the Last-Event-ID headers of the event stream's
	// connections, in order ("" for none).
	lastEventIDs []string
}

func newServer(t *testing.T) *testServer {
	t.Helper()
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := pgstore.NewAppPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := pgstore.New(pool)
	t.Cleanup(store.Close)

	log := testlog.Logger(t)
	rt := service.NewRuntime(store, service.Options{Logger: log})
	if err := demo.Register(rt, demo.NewModel()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("runtime shutdown: %v", err)
		}
	})
	acc := service.NewTenants(store)
	if _, err := acc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	s := &testServer{}
	if s.adminKey, _, err = acc.CreateKey(ctx, "acme", service.RoleAdmin, "ops"); err != nil {
		t.Fatal(err)
	}
	if s.clientKey, _, err = acc.CreateKey(ctx, "acme", service.RoleClient, "backend"); err != nil {
		t.Fatal(err)
	}

	bg, stop := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	hub := service.NewEventHub(store, log)
	workers.Go(func() { hub.Run(bg) })
	api := httpapi.New(rt, httpapi.Options{Logger: log, Auth: acc, Events: hub})
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" {
			s.mu.Lock()
			s.lastEventIDs = append(s.lastEventIDs, r.Header.Get("Last-Event-ID"))
			s.mu.Unlock()
			if s.eventsDown.Load() {
				s.refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"status":"UNAVAILABLE","message":"restarting"}`))
				return
			}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	// Runs first: stopping the hub ends the event streams, which
	// srv.Close would otherwise wait for.
	t.Cleanup(func() { stop(); workers.Wait() })
	return s
}

// client returns a client of the server with the admin key and opts.
func (s *testServer) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(s.srv.URL, append([]client.Option{client.WithAPIKey(s.adminKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventConnections returns the Last-Event-ID headers seen so far.
func (s *testServer) eventConnections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lastEventIDs...)
}

// testContext is a context bounded so that a hung server fails the test
// instead of hanging it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
