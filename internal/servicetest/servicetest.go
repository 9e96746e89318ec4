// Package servicetest starts the platform for a test, as coderdtest.New
// does for Coder: a database of its own cloned from the migrated template
// (or an earlier Env's, see URL), the application pool (row-level security
// on), the store, a runtime with the test's logger, and on request a
// tenant with keys, the event hub and the API on a loopback HTTP server.
// Everything it starts is stopped, in the reverse order, when the test
// ends; a runtime that does not shut down in time fails the test.
//
// A second instance on the same database is another New with URL set to
// the first's Env.URL; a pool configured differently (a tracer, another
// role, a proxy) takes Pool; a store that counts its calls takes Store.
// Tests that need a part built differently still (a store that fails
// mid-turn, a runtime with no store at all) wire it by hand; everything
// else starts from New.
package servicetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// ShutdownTimeout bounds the runtime's shutdown when the test ends.
const ShutdownTimeout = 10 * time.Second

// Options say what New starts beyond the database, the store and the
// runtime. The zero value starts just those.
type Options struct {
	// URL is the database to start on (an earlier Env's URL, for another
	// instance on its database); empty: a fresh one, dropped when the test
	// ends.
	URL string
	// Pool, when set, adjusts the application pool's configuration before
	// it connects (pgstore.NewAppPoolWith).
	Pool func(*pgxpool.Config)
	// Store, when set, wraps the store the runtime is given (to count its
	// calls); Env.Store stays the store it wraps.
	Store func(*pgstore.PgStore) service.Store
	// Runtime configures the runtime; a nil Logger is the test's.
	Runtime service.Options
	// Register registers the test's agents (demo.Register and the like)
	// before New returns.
	Register func(*service.Runtime) error
	// Tenant, when set, is created (named after its id) with an admin and
	// a client API key.
	Tenant string
	// Events runs an event hub (GET /api/v1/events).
	Events bool
	// HTTP serves the API on loopback with these options (nil: no server).
	// A nil Logger is the test's; Auth (unless DevMode) and Events
	// default to the environment's tenants and hub.
	HTTP *httpapi.Options
	// DevMode, with HTTP, serves without authentication (Auth stays nil):
	// every request acts as httpapi.DevCaller.
	DevMode bool
	// Wrap, with HTTP, wraps the API's handler (to watch or refuse
	// requests); it is given the options the API was built with, the
	// defaults filled in.
	Wrap func(httpapi.Options, http.Handler) http.Handler
}

// Env is what New started.
type Env struct {
	// URL is the test database's URL as its owner (testdb.OwnerPool opens
	// it for reading rows behind the store's back).
	URL     string
	Pool    *pgxpool.Pool // the application pool the store uses
	Store   *pgstore.PgStore
	Runtime *service.Runtime
	Tenants *tenants.Tenants
	// AdminKey and ClientKey are Options.Tenant's API keys.
	AdminKey, ClientKey string
	Hub                 *eventhub.Hub    // with Options.Events
	Server              *httptest.Server // with Options.HTTP
}

// New starts the platform on a fresh database as opts say.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx := context.Background()
	e := &Env{URL: opts.URL}
	if e.URL == "" {
		e.URL = testdb.URL(t)
	}
	pool, err := pgstore.NewAppPoolWith(ctx, e.URL, opts.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.Pool, e.Store = pool, pgstore.New(pool)
	t.Cleanup(e.Store.Close)
	if opts.Runtime.Logger == nil {
		opts.Runtime.Logger = testlog.Logger(t)
	}
	var st service.Store = e.Store
	if opts.Store != nil {
		st = opts.Store(e.Store)
	}
	e.Runtime = service.NewRuntime(st, opts.Runtime)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := e.Runtime.Shutdown(ctx); err != nil {
			t.Errorf("runtime shutdown: %v", err)
		}
	})
	if opts.Register != nil {
		if err := opts.Register(e.Runtime); err != nil {
			t.Fatal(err)
		}
	}
	e.Tenants = tenants.New(e.Store)
	if opts.Tenant != "" {
		e.createTenant(t, opts.Tenant)
	}
	stopHub := func() {}
	if opts.Events {
		stopHub = e.runHub(opts.Runtime)
	}
	if opts.HTTP != nil {
		e.serve(t, *opts.HTTP, opts.Runtime, opts.DevMode, opts.Wrap)
	}
	// Registered after the server's Close, so it runs before it: stopping
	// the hub ends the event streams, which Close waits for.
	t.Cleanup(stopHub)
	return e
}

// createTenant creates the tenant and its two keys.
func (e *Env) createTenant(t testing.TB, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Tenants.CreateTenant(ctx, id, id); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.AdminKey, _, err = e.Tenants.CreateKey(ctx, id, tenants.RoleAdmin, "admin"); err != nil {
		t.Fatal(err)
	}
	if e.ClientKey, _, err = e.Tenants.CreateKey(ctx, id, tenants.RoleClient, "client"); err != nil {
		t.Fatal(err)
	}
}

// runHub runs the event hub until the returned stop is called.
func (e *Env) runHub(ro service.Options) (stop func()) {
	e.Hub = eventhub.New(e.Store, ro.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() { e.Hub.Run(ctx) })
	return func() { cancel(); done.Wait() }
}

// serve starts the API on a loopback server.
func (e *Env) serve(t testing.TB, o httpapi.Options, ro service.Options, devMode bool, wrap func(httpapi.Options, http.Handler) http.Handler) {
	if o.Logger == nil {
		o.Logger = ro.Logger
	}
	if o.Auth == nil && !devMode {
		o.Auth = e.Tenants
	}
	if o.Events == nil && e.Hub != nil {
		o.Events = e.Hub
	}
	var h http.Handler = httpapi.New(e.Runtime, o)
	if wrap != nil {
		h = wrap(o, h)
	}
	e.Server = httptest.NewServer(h)
	t.Cleanup(e.Server.Close)
}
