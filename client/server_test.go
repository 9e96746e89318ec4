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
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
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
	s := &testServer{}
	env := servicetest.New(t, servicetest.Options{
		Register: func(rt *service.Runtime) error { return demo.Register(rt, demo.NewModel()) },
		Tenant:   "acme",
		Events:   true,
		HTTP:     &httpapi.Options{},
		Wrap:     s.watchEvents,
	})
	s.srv, s.adminKey, s.clientKey = env.Server, env.AdminKey, env.ClientKey
	return s
}

// watchEvents records the Last-Event-ID of each event stream and, while
// eventsDown is set, refuses the stream as a restarting server would.
func (s *testServer) watchEvents(_ httpapi.Options, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	})
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
