package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/faultproxy"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/readiness"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// outageRequest is one request a database outage must answer 503.
type outageRequest struct {
	name, method, path string
	body               any
	// fresh sends a credential never used before, so its lookup reaches
	// the database rather than a cache.
	fresh bool
	// turn accepts a turn's own failure too: once agent code ran, the
	// protocol answers 200 with the turn failed UNAVAILABLE.
	turn bool
}

// outageRequests reach the database by different paths: a turn on a new
// session, a snapshot read, the inbox list, an inbox decision, and a
// credential lookup.
var outageRequests = []outageRequest{
	{name: "turn", method: http.MethodPost, path: "/api/agents/echoAgent", body: map[string]any{"data": userMessage("hi")}, turn: true},
	{name: "snapshot", method: http.MethodPost, path: "/api/agents/echoAgent/getSnapshot",
		body: map[string]any{"data": map[string]any{"snapshotId": "0197a000-0000-7000-8000-000000000000"}}},
	{name: "inbox", method: http.MethodGet, path: "/api/v1/interrupts"},
	{name: "decision", method: http.MethodPost, path: "/api/v1/interrupts/0197a000-0000-7000-8000-000000000000/respond",
		body: map[string]any{"output": map[string]any{"ok": true}}},
	{name: "fresh key", method: http.MethodGet, path: "/api/v1/interrupts", fresh: true},
}

// outageLeaks are internal texts of an outage that must stay in the log.
var outageLeaks = []string{"53300", "57P01", "too many connections", "127.0.0.1", "connect", "EOF", "reset", "hpt_role_"}

// checkUnavailable fails unless r is a 503 UNAVAILABLE answer with a
// Retry-After and no internal text.
func checkUnavailable(t *testing.T, name string, r response) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("%s: HTTP %d, want 503; body %s", name, r.status, r.body)
		return
	}
	errorOf(t, r, http.StatusServiceUnavailable, service.CodeUnavailable)
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("%s: Retry-After %q, want a positive number of seconds", name, r.header.Get("Retry-After"))
	}
	// The request id is random text and may spell anything.
	body := strings.ToLower(strings.ReplaceAll(string(r.body), r.header.Get("X-Request-Id"), ""))
	for _, l := range outageLeaks {
		if strings.Contains(body, strings.ToLower(l)) {
			t.Errorf("%s: answer leaks %q: %s", name, l, r.body)
		}
	}
}

// outageKeys makes the admin key the requests use and one fresh key per
// fresh request, while the database is still there.
func outageKeys(t *testing.T, s *authServer) (string, func() string) {
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	var fresh []string
	for range outageRequests {
		k, _ := s.key(t, "acme", tenants.RoleAdmin)
		fresh = append(fresh, k)
	}
	return admin, func() string {
		k := fresh[0]
		fresh = fresh[1:]
		return k
	}
}

// checkOutage sends every outage request; each must be answered 503.
func checkOutage(t *testing.T, s *authServer, key string, fresh func() string) {
	t.Helper()
	for _, rq := range outageRequests {
		cred := key
		if rq.fresh {
			cred = fresh()
		}
		r := s.call(t, rq.method, rq.path, cred, rq.body)
		if rq.turn && r.status == http.StatusOK {
			checkFailedUnavailable(t, rq.name, r)
			continue
		}
		checkUnavailable(t, rq.name, r)
	}
}

// checkFailedUnavailable fails unless r is a turn that failed UNAVAILABLE,
// with a Retry-After.
func checkFailedUnavailable(t *testing.T, name string, r response) {
	t.Helper()
	var out struct {
		Result struct {
			FinishReason string                `json:"finishReason"`
			Error        *service.ErrorDetails `json:"error"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.Result.Error == nil ||
		out.Result.FinishReason != service.FinishFailed || out.Result.Error.Status != service.CodeUnavailable {
		t.Errorf("%s: %d %s, want 503 or a turn failed UNAVAILABLE", name, r.status, r.body)
	}
	if r.header.Get("Retry-After") == "" {
		t.Errorf("%s: a turn failed UNAVAILABLE carries no Retry-After", name)
	}
	checkNoLeak(t, r.body)
}

// waitServing sends turns until one succeeds, within a bound: the server
// comes back by itself once the database does.
func waitServing(t *testing.T, s *authServer, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.call(t, http.MethodPost, "/api/agents/echoAgent", key, map[string]any{"data": userMessage("back?")})
		if r.status == http.StatusOK && !strings.Contains(string(r.body), `"error"`) {
			return
		}
		notInternal(t, "recovering turn", r)
		if time.Now().After(deadline) {
			t.Fatalf("no successful turn 30s after the database came back; last %d %s", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notInternal fails on a 500, or on a turn that failed INTERNAL: an outage
// must never read as a server fault.
func notInternal(t *testing.T, name string, r response) {
	t.Helper()
	if r.status == http.StatusServiceUnavailable {
		checkUnavailable(t, name, r)
		return
	}
	if r.status >= 500 {
		t.Errorf("%s: HTTP %d during an outage, want 503; body %s", name, r.status, r.body)
		return
	}
	var out struct {
		Result struct {
			Error *service.ErrorDetails `json:"error"`
		} `json:"result"`
	}
	if json.Unmarshal(r.body, &out) == nil && out.Result.Error != nil && out.Result.Error.Status != service.CodeUnavailable {
		t.Errorf("%s: the turn failed %s, want UNAVAILABLE: %s", name, out.Result.Error.Status, r.body)
	}
}

// TestOutageConnectionsExhausted runs the server as a role whose
// connection slots are all taken: CONNECTION LIMIT 1, the one slot held
// by the test. Every new connection is refused with SQLSTATE 53300 (too
// many connections for role), as when the cluster's max_connections is
// reached.
func TestOutageConnectionsExhausted(t *testing.T) {
	t.Parallel()
	role := "hpt_role_" + strings.ToLower(rand.Text()[:12])
	var owner, asRole *pgx.ConnConfig
	s := newAuthServerWith(t, func(cfg *pgxpool.Config) {
		owner = cfg.ConnConfig.Copy()
		createLoginRole(t, owner, role)
		cfg.ConnConfig.User = role
		asRole = cfg.ConnConfig.Copy()
	}, nil)
	admin, fresh := outageKeys(t, s)
	s.send(t, admin, "echoAgent", "before", nil)

	// The limit comes after the set-up, which needs several connections
	// at once (the event listener holds one). Then the role's sessions
	// end, and every new one is refused (53300, too many connections for
	// the role), whoever asks first: a limit of one left to be taken by
	// the test raced the server's own reconnects, and failed once.
	ident := pgx.Identifier{role}.Sanitize()
	ownerExec(t, owner, "ALTER ROLE "+ident+" CONNECTION LIMIT 0")
	s.app.Reset()
	waitNoSessions(t, owner, asRole.User)
	checkOutage(t, s, admin, fresh)
	if !strings.Contains(s.logs.String(), "53300") {
		t.Errorf("the log does not name SQLSTATE 53300:\n%s", s.logs.String())
	}
	ownerExec(t, owner, "ALTER ROLE "+ident+" CONNECTION LIMIT -1")
	waitServing(t, s, admin)
}

// waitNoSessions ends the role's sessions (with its limit at 0, none
// comes back) and waits until they are gone.
func waitNoSessions(t *testing.T, owner *pgx.ConnConfig, role string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		ownerExec(t, owner, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = "+quoteLiteral(role))
		if roleSessions(t, owner, role) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sessions of %s did not end", role)
		}
	}
}

// roleSessions counts the role's live sessions.
func roleSessions(t *testing.T, owner *pgx.ConnConfig, role string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.ConnectConfig(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ownerExec runs statements on a connection of the database's owner.
func ownerExec(t *testing.T, owner *pgx.ConnConfig, sqls ...string) {
	t.Helper()
	if err := ownerExecErr(owner, sqls...); err != nil {
		t.Fatal(err)
	}
}

func ownerExecErr(owner *pgx.ConnConfig, sqls ...string) error {
	ctx := context.Background()
	c, err := pgx.ConnectConfig(ctx, owner)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, q := range sqls {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// createLoginRole creates a login role, a member of holdpoint_app, dropped
// when the test ends (after the server's pool is closed).
func createLoginRole(t *testing.T, owner *pgx.ConnConfig, role string) {
	t.Helper()
	ident := pgx.Identifier{role}.Sanitize()
	ownerExec(t, owner, "CREATE ROLE "+ident+" LOGIN", "GRANT holdpoint_app TO "+ident)
	t.Cleanup(func() {
		err := ownerExecErr(owner, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = "+quoteLiteral(role),
			"DROP OWNED BY "+ident, "DROP ROLE "+ident)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// viaProxy puts a fault proxy between the server's pool and its database.
func viaProxy(t *testing.T, p **faultproxy.Proxy) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		proxy, err := faultproxy.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		host, port, _ := net.SplitHostPort(proxy.Addr())
		n, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(n), nil
		*p = proxy
	}
}

// TestOutageDatabaseCut cuts the network between the server and its
// database mid-run: the pooled connections are reset and new ones
// refused. Every request is answered 503 while it lasts, and the server
// serves again once the network is back, with no restart.
func TestOutageDatabaseCut(t *testing.T) {
	t.Parallel()
	var proxy *faultproxy.Proxy
	s := newAuthServerWith(t, viaProxy(t, &proxy), nil)
	admin, fresh := outageKeys(t, s)
	// A session with a history, so that the cut also meets a turn that
	// continues one.
	sessionID := s.send(t, admin, "echoAgent", "before", nil).SessionID
	_, uiToken, err := s.acc.SignInUI(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	checkOutage(t, s, admin, fresh)
	// The dashboard's session lookup, from its cookie.
	checkUnavailable(t, "dashboard", s.call(t, http.MethodGet, "/ui/", "", nil, "Cookie", "holdpoint_ui="+uiToken))
	r := s.call(t, http.MethodPost, "/api/agents/echoAgent", admin,
		map[string]any{"data": userMessage("during"), "init": map[string]any{"sessionId": sessionID}})
	if r.status == http.StatusOK {
		checkFailedUnavailable(t, "continued turn", r)
	} else {
		checkUnavailable(t, "continued turn", r)
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, s, admin)
	s.send(t, admin, "echoAgent", "after", map[string]any{"sessionId": sessionID})
}

// TestOutageBackendsTerminated ends the server's database sessions with
// pg_terminate_backend (the app's connections then fail with 57P01, admin
// shutdown, or as closed): the next requests are answered or refused 503,
// never 500, and the pool recovers by itself.
func TestOutageBackendsTerminated(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	admin, _ := outageKeys(t, s)
	sessionID := s.send(t, admin, "echoAgent", "before", nil).SessionID
	ctx := context.Background()
	for round := range 3 {
		_, err := s.owner.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
		if err != nil {
			t.Fatal(err)
		}
		for i, rq := range outageRequests {
			if rq.fresh {
				continue
			}
			notInternal(t, rq.name+" round "+strconv.Itoa(round)+"."+strconv.Itoa(i), s.call(t, rq.method, rq.path, admin, rq.body))
		}
		notInternal(t, "continued turn", s.call(t, http.MethodPost, "/api/agents/echoAgent", admin,
			map[string]any{"data": userMessage("during"), "init": map[string]any{"sessionId": sessionID}}))
	}
	waitServing(t, s, admin)
}

// switchProbe is a readiness probe the test turns on and off, counting
// its calls.
type switchProbe struct {
	down  atomic.Bool
	calls atomic.Int32
}

func (p *switchProbe) probe(context.Context) error {
	p.calls.Add(1)
	if p.down.Load() {
		return errors.New("ping: dial tcp 10.9.8.7:5432: connect: connection refused")
	}
	return nil
}

// TestNotReadyRefusesWork: an instance whose probe fails refuses turns,
// decisions and event streams at once with 503 and a Retry-After, writing
// nothing, while reads and the health check still answer; /readyz reports
// the probed state without probing. Once the probe passes it serves again.
func TestNotReadyRefusesWork(t *testing.T) {
	t.Parallel()
	p := &switchProbe{}
	ready := readiness.New(p.probe, readiness.Options{})
	s := newServer(t, func(o *httpapi.Options) { o.Readiness = ready })
	get := func(path string) response {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
		return s.do(t, req)
	}
	turn := map[string]any{"data": userMessage("hi")}
	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/echoAgent", turn, false), &out)

	p.down.Store(true)
	ctx := context.Background()
	ready.Check(ctx)
	ready.Check(ctx)
	sessions := s.countRows(t, "sessions")
	calls := p.calls.Load()
	start := time.Now()
	checkUnavailable(t, "turn", s.postJSON(t, s.base+"/echoAgent", turn, false))
	streamed := s.postJSON(t, s.base+"/echoAgent", turn, true)
	errorOf(t, streamed, http.StatusServiceUnavailable, service.CodeUnavailable)
	if streamed.header.Get("Retry-After") == "" {
		t.Error("a refused streamed turn carries no Retry-After")
	}
	checkUnavailable(t, "decision", s.postJSON(t, s.srv.URL+"/api/v1/interrupts/0197a000-0000-7000-8000-000000000000/respond",
		map[string]any{"output": map[string]any{}}, false))
	checkUnavailable(t, "event stream", get("/api/v1/events"))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing took %s, want at once", d)
	}
	if n := s.countRows(t, "sessions"); n != sessions {
		t.Errorf("refused turns wrote %d sessions", n-sessions)
	}
	if r := get("/api/v1/interrupts"); r.status != http.StatusOK {
		t.Errorf("inbox list while not ready: %d %s, want 200", r.status, r.body)
	}
	errorOf(t, get("/readyz"), http.StatusServiceUnavailable, service.CodeUnavailable)
	if r := get("/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz %d while not ready, want 200", r.status)
	}
	if n := p.calls.Load(); n != calls {
		t.Errorf("requests ran the probe %d times; only the periodic check may", n-calls)
	}

	p.down.Store(false)
	ready.Check(ctx)
	ready.Check(ctx)
	resultOf(t, s.postJSON(t, s.base+"/echoAgent", turn, false), &out)
	if r := get("/readyz"); r.status != http.StatusOK {
		t.Errorf("readyz %d once ready again, want 200", r.status)
	}
}
