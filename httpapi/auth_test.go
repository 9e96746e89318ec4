package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// authServer is the API with authentication on, over a fresh database that
// the server reaches as the application role (row-level security on), as
// `platform serve` runs it.
type authServer struct {
	srv   *httptest.Server
	owner *pgxpool.Pool // the tables' owner, for the tests' own assertions
	acc   *tenants.Tenants
	logs  *testproc.Output
	rt    *service.Runtime
	store *pgstore.PgStore
	app   *pgxpool.Pool // the server's pool
}

// newAuthServer starts the API with authentication, the base agents, the
// demo banking agent and extra ones; configure may change the options.
func newAuthServer(t *testing.T, configure func(*httpapi.Options), extra ...*service.Agent) *authServer {
	t.Helper()
	return newAuthServerWith(t, nil, configure, extra...)
}

// newAuthServerWith is newAuthServer with a hook on the application pool's
// configuration (another role, a proxy between it and the database).
func newAuthServerWith(t *testing.T, pool func(*pgxpool.Config), configure func(*httpapi.Options), extra ...*service.Agent) *authServer {
	t.Helper()
	logs := new(testproc.Output)
	var opts httpapi.Options // Auth and Events: the environment's tenants and hub
	if configure != nil {
		configure(&opts)
	}
	env := servicetest.New(t, servicetest.Options{
		Pool:     pool,
		Runtime:  service.Options{Logger: testlog.Tee(t, logs)},
		Register: register(append(append(baseAgents(), demo.BankingAgent(demo.NewModel())), extra...)...),
		Events:   true,
		HTTP:     &opts,
		Wrap:     checkedAgainstContract(t),
	})
	return &authServer{srv: env.Server, owner: testdb.OwnerPool(t, env.URL), acc: env.Tenants, logs: logs, rt: env.Runtime, store: env.Store, app: env.Pool}
}

// tenant creates a tenant.
func (s *authServer) tenant(t *testing.T, id string) {
	t.Helper()
	if _, err := s.acc.CreateTenant(context.Background(), id, "Tenant "+id); err != nil {
		t.Fatal(err)
	}
}

// key creates an API key and returns it with its id.
func (s *authServer) key(t *testing.T, tenant, role string) (string, uuid.UUID) {
	t.Helper()
	plain, k, err := s.acc.CreateKey(context.Background(), tenant, role, role+" key")
	if err != nil {
		t.Fatal(err)
	}
	return plain, k.ID
}

// token mints a user token.
func (s *authServer) token(t *testing.T, tenant, user string) string {
	t.Helper()
	tok, err := s.acc.MintUserToken(context.Background(), tenant, user, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// call sends a request with a bearer credential (none when cred is empty)
// and a JSON body (none when body is nil; a string is sent as is); headers
// are name, value pairs.
func (s *authServer) call(t *testing.T, method, path, cred string, body any, headers ...string) response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// send runs a turn of agent as cred and returns its output.
func (s *authServer) send(t *testing.T, cred, agent, text string, init map[string]any, headers ...string) service.AgentOutput {
	t.Helper()
	body := map[string]any{"data": userMessage(text)}
	if init != nil {
		body["init"] = init
	}
	var out service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+agent, cred, body, headers...), &out)
	return out
}

// unauthenticated checks a 401 answer with its challenge.
func unauthenticated(t *testing.T, r response) {
	t.Helper()
	errorOf(t, r, http.StatusUnauthorized, service.CodeUnauthenticated)
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q, want a Bearer challenge", r.header.Get("WWW-Authenticate"))
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	revoked, revokedID := s.key(t, "acme", tenants.RoleClient)
	if err := s.acc.RevokeKey(context.Background(), "acme", revokedID); err != nil {
		t.Fatal(err)
	}
	msg := map[string]any{"data": userMessage("hi")}

	for _, path := range []string{"/healthz", "/readyz"} {
		if r := s.call(t, http.MethodGet, path, "", nil); r.status != http.StatusOK {
			t.Errorf("GET %s without credential = %d, want 200", path, r.status)
		}
	}
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"no header", nil},
		{"basic scheme", []string{"Authorization", "Basic YWRtaW46YWRtaW4="}},
		{"bearer without credential", []string{"Authorization", "Bearer "}},
		{"two headers", []string{"Authorization", "Bearer " + admin, "Authorization", "Bearer " + admin}},
		{"unknown key", []string{"Authorization", "Bearer hp_" + strings.Repeat("A", 43)}},
		{"revoked key", []string{"Authorization", "Bearer " + revoked}},
		{"key with a suffix", []string{"Authorization", "Bearer " + admin + "x"}},
		{"not a token", []string{"Authorization", "Bearer eyJhbGciOiJub25lIn0.e30."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			unauthenticated(t, s.call(t, http.MethodPost, "/api/agents/echoAgent", "", msg, tc.headers...))
			unauthenticated(t, s.call(t, http.MethodGet, "/api/v1/interrupts", "", nil, tc.headers...))
			// Unknown routes too: nothing is learned without a credential.
			unauthenticated(t, s.call(t, http.MethodGet, "/nowhere", "", nil, tc.headers...))
		})
	}
	// The scheme is case-insensitive (RFC 7235).
	if r := s.call(t, http.MethodGet, "/api/agents", "", nil, "Authorization", "bearer "+admin); r.status != http.StatusOK {
		t.Errorf("lower-case scheme: %d %s", r.status, r.body)
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	admin, adminID := s.key(t, "acme", tenants.RoleAdmin)
	client, clientID := s.key(t, "acme", tenants.RoleClient)
	alice := s.token(t, "acme", "alice")

	// Every credential may use the protocol routes.
	for name, cred := range map[string]string{"admin": admin, "client": client, "user token": alice} {
		if r := s.call(t, http.MethodGet, "/api/agents", cred, nil); r.status != http.StatusOK {
			t.Errorf("%s lists agents: %d %s", name, r.status, r.body)
		}
		s.send(t, cred, "echoAgent", "hi", nil)
	}
	// Only admin keys may use /api/v1.
	v1 := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/interrupts"},
		{http.MethodGet, "/api/v1/interrupts/" + uuid.NewString()},
		{http.MethodGet, "/api/v1/interrupts/" + uuid.NewString() + "/events"},
		{http.MethodPost, "/api/v1/interrupts/" + uuid.NewString() + "/respond"},
		{http.MethodPost, "/api/v1/interrupts/" + uuid.NewString() + "/restart"},
		{http.MethodGet, "/api/v1/tool-calls/" + uuid.NewString()},
		{http.MethodPost, "/api/v1/tool-calls/" + uuid.NewString() + "/confirm"},
		{http.MethodPost, "/api/v1/tool-calls/" + uuid.NewString() + "/cancel"},
		{http.MethodPost, "/api/v1/tool-calls/" + uuid.NewString() + "/retry"},
		{http.MethodGet, "/api/v1/reports/interrupts"},
		{http.MethodGet, "/api/v1/events"},
		{http.MethodPost, "/api/v1/tokens"},
	}
	for _, rt := range v1 {
		for name, cred := range map[string]string{"client": client, "user token": alice} {
			r := s.call(t, rt.method, rt.path, cred, `{}`)
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s as %s = %d, want 403", rt.method, rt.path, name, r.status)
				continue
			}
			errorOf(t, r, http.StatusForbidden, service.CodePermissionDenied)
		}
	}
	if r := s.call(t, http.MethodGet, "/api/v1/interrupts", admin, nil); r.status != http.StatusOK {
		t.Errorf("admin lists interrupts: %d %s", r.status, r.body)
	}

	// The actor of every audit row names the credential.
	for cred, actor := range map[string]string{admin: "key:admin key/" + adminID.String(), client: "key:client key/" + clientID.String(), alice: "user:alice"} {
		out := s.send(t, cred, demo.BankingAgentName, "Transfer $50 to account 12345", nil)
		if out.FinishReason != service.FinishInterrupted {
			t.Fatalf("banking turn %+v, want interrupted", out)
		}
		var got string
		err := s.owner.QueryRow(context.Background(), `SELECT e.actor FROM interrupt_events e JOIN interrupts i
			ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id WHERE i.snapshot_id = $1`, out.SnapshotID).Scan(&got)
		if err != nil || got != actor {
			t.Errorf("actor %q (%v), want %q", got, err, actor)
		}
	}
}

func TestEndUsers(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	alice := s.token(t, "acme", "alice")
	bob := s.token(t, "acme", "bob")

	// A backend acts for alice with her id; her own token sees the session.
	out := s.send(t, client, "chatAgent", "hi", map[string]any{"sessionId": "alice-chat"}, "X-End-User", "alice")
	get := func(cred string, headers ...string) response {
		return s.call(t, http.MethodPost, "/api/agents/chatAgent/getSnapshot", cred,
			map[string]any{"data": map[string]any{"sessionId": "alice-chat"}}, headers...)
	}
	var snap service.Snapshot
	resultOf(t, get(alice), &snap)
	if snap.SnapshotID != out.SnapshotID {
		t.Errorf("alice's token sees snapshot %s, want %s", snap.SnapshotID, out.SnapshotID)
	}
	resultOf(t, get(client, "X-End-User", "alice"), &snap)
	// The backend acting as no user does not see a user's session: it acts
	// for her by naming her.
	errorOf(t, get(client), http.StatusNotFound, service.CodeNotFound)
	errorOf(t, get(bob), http.StatusNotFound, service.CodeNotFound)
	errorOf(t, get(client, "X-End-User", "bob"), http.StatusNotFound, service.CodeNotFound)

	// A token acts for its own user only.
	errorOf(t, get(bob, "X-End-User", "alice"), http.StatusForbidden, service.CodePermissionDenied)
	resultOf(t, get(alice, "X-End-User", "alice"), &snap)

	for name, value := range map[string]string{
		"control character": "al\x01ice",
		"too long":          strings.Repeat("u", 257),
		"invalid UTF-8":     "\xff\xfe",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/agents", nil)
			req.Header.Set("Authorization", "Bearer "+client)
			req.Header["X-End-User"] = []string{value}
			res, err := s.srv.Client().Do(req)
			if err != nil {
				t.Skipf("the HTTP client refuses the value itself: %v", err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			errorOf(t, response{status: res.StatusCode, header: res.Header, body: b}, http.StatusBadRequest, service.CodeInvalidArgument)
		})
	}
	errorOf(t, s.call(t, http.MethodGet, "/api/agents", client, nil, "X-End-User", "a", "X-End-User", "b"), http.StatusBadRequest, service.CodeInvalidArgument)
}

func TestMintTokenRoute(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)

	r := s.call(t, http.MethodPost, "/api/v1/tokens", admin, map[string]any{"userId": "carol", "ttlSeconds": 60})
	var tok tenants.UserToken
	if r.status != http.StatusOK || json.Unmarshal(r.body, &tok) != nil || tok.Token == "" {
		t.Fatalf("mint = %d %s", r.status, r.body)
	}
	if d := time.Until(tok.ExpiresAt); d <= 0 || d > time.Minute {
		t.Errorf("expiresAt %s, want within a minute", tok.ExpiresAt)
	}
	out := s.send(t, tok.Token, "chatAgent", "hi", nil)
	var owner string
	if err := s.owner.QueryRow(context.Background(), "SELECT end_user FROM sessions WHERE tenant_id = 'acme' AND id = $1", out.SessionID).Scan(&owner); err != nil || owner != "carol" {
		t.Errorf("session owner %q (%v), want carol", owner, err)
	}

	for _, tc := range []struct {
		name string
		body any
	}{
		{"no body", nil},
		{"not JSON", "{"},
		{"an array", "[]"},
		{"no userId", map[string]any{"ttlSeconds": 60}},
		{"userId a number", map[string]any{"userId": 5}},
		{"ttl over 24h", map[string]any{"userId": "u", "ttlSeconds": 86401}},
		{"negative ttl", map[string]any{"userId": "u", "ttlSeconds": -1}},
		{"huge ttl", `{"userId": "u", "ttlSeconds": 9223372036854775807}`},
		{"unprintable user", map[string]any{"userId": "a\u0000b"}},
	} {
		errorOf(t, s.call(t, http.MethodPost, "/api/v1/tokens", admin, tc.body), http.StatusBadRequest, service.CodeInvalidArgument)
	}
}

// TestRevokeTokensRoute revokes one token, then every token of a user,
// through POST /api/v1/tokens/revoke: refused from the next request on,
// by an admin key of the same tenant only.
func TestRevokeTokensRoute(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	s.tenant(t, "rival")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	client, _ := s.key(t, "acme", tenants.RoleClient)
	rivalAdmin, _ := s.key(t, "rival", tenants.RoleAdmin)
	mint := func(user string) tenants.UserToken {
		var tok tenants.UserToken
		r := s.call(t, http.MethodPost, "/api/v1/tokens", admin, map[string]any{"userId": user})
		if r.status != http.StatusOK || json.Unmarshal(r.body, &tok) != nil || tok.TokenID == "" {
			t.Fatalf("mint = %d %s", r.status, r.body)
		}
		return tok
	}
	works := func(tok tenants.UserToken) int {
		return s.call(t, http.MethodPost, "/api/agents/chatAgent", tok.Token, map[string]any{"data": userMessage("hi")}).status
	}
	one, two := mint("erin"), mint("erin")
	errorOf(t, s.call(t, http.MethodPost, "/api/v1/tokens/revoke", client, map[string]any{"tokenId": one.TokenID}), http.StatusForbidden, service.CodePermissionDenied)
	r := s.call(t, http.MethodPost, "/api/v1/tokens/revoke", rivalAdmin, map[string]any{"tokenId": one.TokenID})
	if r.status != http.StatusOK || works(one) != http.StatusOK {
		t.Fatalf("another tenant's revocation touched acme's token: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodPost, "/api/v1/tokens/revoke", admin, map[string]any{"tokenId": one.TokenID}); r.status != http.StatusOK {
		t.Fatalf("revoke = %d %s", r.status, r.body)
	}
	unauthenticated(t, s.call(t, http.MethodPost, "/api/agents/chatAgent", one.Token, map[string]any{"data": userMessage("hi")}))
	if works(two) != http.StatusOK {
		t.Fatal("the user's other token was refused")
	}
	if r := s.call(t, http.MethodPost, "/api/v1/tokens/revoke", admin, map[string]any{"userId": "erin"}); r.status != http.StatusOK {
		t.Fatalf("revoke all = %d %s", r.status, r.body)
	}
	unauthenticated(t, s.call(t, http.MethodPost, "/api/agents/chatAgent", two.Token, map[string]any{"data": userMessage("hi")}))
	for _, body := range []any{nil, "{", map[string]any{}, map[string]any{"tokenId": "a", "userId": "b"}, map[string]any{"tokenId": 5},
		map[string]any{"userId": "a\u0000b"}, map[string]any{"tokenId": strings.Repeat("x", 300)}} {
		errorOf(t, s.call(t, http.MethodPost, "/api/v1/tokens/revoke", admin, body), http.StatusBadRequest, service.CodeInvalidArgument)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, func(o *httpapi.Options) { o.RateLimit = 0.5; o.RateBurst = 3 })
	s.tenant(t, "acme")
	first, _ := s.key(t, "acme", tenants.RoleClient)
	second, _ := s.key(t, "acme", tenants.RoleClient)
	alice := s.token(t, "acme", "alice")

	for _, cred := range []string{first, alice} {
		for i := 0; i < 3; i++ {
			if r := s.call(t, http.MethodGet, "/api/agents", cred, nil); r.status != http.StatusOK {
				t.Fatalf("request %d within the burst: %d %s", i, r.status, r.body)
			}
		}
		r := s.call(t, http.MethodGet, "/api/agents", cred, nil)
		errorOf(t, r, http.StatusTooManyRequests, service.CodeResourceExhausted)
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || secs > 2 {
			t.Errorf("Retry-After %q, want 1-2 seconds", r.header.Get("Retry-After"))
		}
	}
	// Buckets are per credential.
	if r := s.call(t, http.MethodGet, "/api/agents", second, nil); r.status != http.StatusOK {
		t.Errorf("another key is limited too: %d", r.status)
	}
	// Health checks are never limited.
	if r := s.call(t, http.MethodGet, "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("healthz: %d", r.status)
	}
}

func TestRateLimitDevMode(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *httpapi.Options) { o.RateLimit = 0.5; o.RateBurst = 2 })
	get := func() response {
		req, _ := http.NewRequest(http.MethodGet, s.base, nil)
		return s.do(t, req)
	}
	for i := 0; i < 2; i++ {
		if r := get(); r.status != http.StatusOK {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	errorOf(t, get(), http.StatusTooManyRequests, service.CodeResourceExhausted)
}

func TestJSONDepth(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	nested := func(depth int) string {
		// The body, data, message, content and the part are five levels;
		// arrays in the part's data member make the rest.
		return `{"data": {"message": {"role": "user", "content": [{"data": ` +
			strings.Repeat("[", depth-5) + strings.Repeat("]", depth-5) + `}]}}}`
	}
	r := s.post(t, s.base+"/echoAgent", strings.NewReader(nested(httpapi.MaxJSONDepth)), false)
	if r.status != http.StatusOK {
		t.Errorf("depth %d: %d %s", httpapi.MaxJSONDepth, r.status, r.body)
	}
	e := errorOf(t, s.post(t, s.base+"/echoAgent", strings.NewReader(nested(httpapi.MaxJSONDepth+1)), false), http.StatusBadRequest, service.CodeInvalidArgument)
	if !strings.Contains(e.Message, "nested deeper than 64") {
		t.Errorf("message %q", e.Message)
	}
	// Brackets inside strings do not count.
	inString := `{"data": {"message": {"role": "user", "content": [{"text": "` + strings.Repeat("[{", 500) + `\"` + `"}]}}}`
	if r := s.post(t, s.base+"/echoAgent", strings.NewReader(inString), false); r.status != http.StatusOK {
		t.Errorf("brackets in a string: %d %s", r.status, r.body)
	}
	// Deep nesting cannot hide in an unlimited chunked body either.
	errorOf(t, s.post(t, s.base+"/echoAgent", io.MultiReader(strings.NewReader(strings.Repeat("[", 100000))), false), http.StatusBadRequest, service.CodeInvalidArgument)
}

func TestBodyLimitOption(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *httpapi.Options) { o.BodyLimit = 1000 })
	body := `{"data": {"message": {"role": "user", "content": [{"text": "` + strings.Repeat("x", 1000) + `"}]}}}`
	e := errorOf(t, s.post(t, s.base+"/echoAgent", strings.NewReader(body), false), http.StatusRequestEntityTooLarge, service.CodeResourceExhausted)
	if !strings.Contains(e.Message, "1000") {
		t.Errorf("message %q", e.Message)
	}
}

func TestBasePathDoesNotOpenAdminRoutes(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, func(o *httpapi.Options) { o.BasePath = "/api" })
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	if r := s.call(t, http.MethodPost, "/api/echoAgent", client, map[string]any{"data": userMessage("hi")}); r.status != http.StatusOK {
		t.Fatalf("protocol route under /api: %d %s", r.status, r.body)
	}
	errorOf(t, s.call(t, http.MethodGet, "/api/v1/interrupts", client, nil), http.StatusForbidden, service.CodePermissionDenied)
	errorOf(t, s.call(t, http.MethodPost, "/api/v1/tokens", client, map[string]any{"userId": "u"}), http.StatusForbidden, service.CodePermissionDenied)
}
