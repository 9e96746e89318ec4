package tenantagents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/tenantagents"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// models resolves "demo" and "scripted" (a model that calls the tool the
// user names with the JSON input that follows), and knows no provider.
type models struct{}

func (models) Check(name string) error {
	if name == "demo" || name == "scripted" {
		return nil
	}
	return fmt.Errorf("model %q is not available here", name)
}

func (models) Model(_ context.Context, name string) (protocol.Model, error) {
	if name == "demo" {
		return demo.NewModel(), nil
	}
	return scripted{}, nil
}

type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) Generate(_ context.Context, req *protocol.ModelRequest, _ func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == protocol.RoleUser {
		tool, input, _ := strings.Cut(last.Text(), " ")
		return &protocol.ModelResponse{Message: protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{
			{ToolRequest: &protocol.ToolRequest{Name: tool, Ref: "t1", Input: json.RawMessage(input)}}}}}, nil
	}
	out, _ := json.Marshal(last.Content[0].ToolResponse.Output)
	return &protocol.ModelResponse{Message: protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{protocol.TextPart("got " + string(out))}}, FinishReason: "stop"}, nil
}

// env is a runtime serving tenants' agents over a fresh database, with a
// receiver for their HTTP tools.
type env struct {
	url     string // the database
	rt      *service.Runtime
	store   *pgstore.PgStore
	m       *tenantagents.Manager
	admin   *pgxpool.Pool
	recv    *receiver
	tenants map[string]auth.Caller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	te := servicetest.New(t, servicetest.Options{})
	rt, store := te.Runtime, te.Store
	admin := testdb.OwnerPool(t, te.URL)
	m := &tenantagents.Manager{Store: store, Runtime: rt, Models: models{}, AllowLoopback: true,
		Client: httptool.Client{Backoff: 10 * time.Millisecond}}
	rt.SetTenantAgents(m)
	// A compiled agent, whose name tenants may not take.
	if err := rt.Register(demo.BankingAgentClient(demo.NewModel())); err != nil {
		t.Fatal(err)
	}
	e := &env{url: te.URL, rt: rt, store: store, m: m, admin: admin, tenants: map[string]auth.Caller{}}
	acc := tenants.New(store)
	for _, id := range []string{"acme", "rival"} {
		if _, err := acc.CreateTenant(context.Background(), id, id); err != nil {
			t.Fatal(err)
		}
		e.tenants[id] = auth.Caller{TenantID: id, Actor: "test:" + id}
	}
	e.recv = newReceiver(t, func(tenant string) [][]byte {
		s, err := rt.SigningSecrets(context.Background(), tenant, keys.PurposeTool)
		if err != nil {
			t.Error(err)
		}
		return s
	})
	return e
}

// receiver is a tenant's backend: it checks signatures (of tenant acme)
// and records the calls; answer says what it answers.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []map[string]any
	hits   atomic.Int32
	answer atomic.Value // func(w http.ResponseWriter, call map[string]any)
}

func newReceiver(t *testing.T, secrets func(tenant string) [][]byte) *receiver {
	r := &receiver{}
	r.answer.Store(func(w http.ResponseWriter, call map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"output":{"success":true,"transactionId":"txn-%v"}}`, call["callId"])
	})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		body, _ := io.ReadAll(req.Body)
		if err := httptool.Verify(secrets("acme"), req.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, "bad signature: "+err.Error(), http.StatusUnauthorized)
			return
		}
		var call map[string]any
		_ = json.Unmarshal(body, &call)
		if call["callId"] != req.Header.Get("webhook-id") || call["callId"] != req.Header.Get("Idempotency-Key") {
			http.Error(w, "callId differs from webhook-id or Idempotency-Key", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.calls = append(r.calls, call)
		r.mu.Unlock()
		r.answer.Load().(func(http.ResponseWriter, map[string]any))(w, call)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) recorded() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.calls...)
}

// bankingPrompt is examples/tenant/banking.prompt with its tool URL on the
// receiver.
func (e *env) bankingPrompt(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../../examples/tenant/banking.prompt")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(src), "http://127.0.0.1:8090", e.recv.srv.URL, 1))
}

func user(text string) protocol.AgentInput {
	return protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(text)}}}
}

func interrupted(out *protocol.AgentOutput) []*protocol.ToolRequest {
	var reqs []*protocol.ToolRequest
	for _, p := range out.Message.Content {
		if _, ok := p.Metadata["interrupt"]; ok && p.ToolRequest != nil {
			reqs = append(reqs, p.ToolRequest)
		}
	}
	return reqs
}

func respond(req *protocol.ToolRequest, output string) protocol.AgentInput {
	return protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{{ToolResponse: &protocol.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(output)}}}}}
}

// TestTenantBankingAgent runs the seed's flow on a tenant's banking agent
// whose transferMoney is an HTTP tool on the tenant's backend.
func TestTenantBankingAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme, rival := e.tenants["acme"], e.tenants["rival"]
	v, err := e.m.Put(ctx, acme, "bankingAgent", e.bankingPrompt(t))
	if err != nil || v.Version != 1 {
		t.Fatalf("put: %v %+v", err, v)
	}
	init := protocol.AgentInit{SessionID: "s1"}
	out, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", init, user("Transfer $50 to account 12345"), nil)
	if err != nil || out.FinishReason != "interrupted" || len(interrupted(out)) != 1 {
		t.Fatalf("send: %v %+v", err, out)
	}
	if len(e.recv.recorded()) != 0 {
		t.Fatal("the backend was called before the approval")
	}
	done, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", init, respond(interrupted(out)[0], `{"approved":true}`), nil)
	if err != nil || done.FinishReason != "stop" || !strings.HasPrefix(done.Message.Text(), "Done: transferred $50.00 to account 12345 (transaction txn-") {
		t.Fatalf("approve: %v %+v", err, done)
	}
	calls := e.recv.recorded()
	if len(calls) != 1 || calls[0]["tool"] != "transferMoney" || calls[0]["sessionId"] != "s1" || calls[0]["snapshotId"] != done.SnapshotID {
		t.Fatalf("backend calls %v", calls)
	}
	// The signed body binds the call to the tenant, the agent and the tool
	// at its URL.
	if c := calls[0]; c["tenant"] != "acme" || c["agent"] != "bankingAgent" || c["agentVersion"] != 1.0 || c["url"] != e.recv.srv.URL+"/tools/transferMoney" {
		t.Fatalf("backend call %v does not name the tenant, agent, version and URL", c)
	}
	var status, attempts int
	if err := e.admin.QueryRow(ctx, `SELECT http_status, attempts FROM tool_calls WHERE tenant_id = 'acme' AND tool = 'transferMoney'`).Scan(&status, &attempts); err != nil || status != 200 || attempts != 1 {
		t.Fatalf("tool call row: %v %d %d", err, status, attempts)
	}
	var version int
	if err := e.admin.QueryRow(ctx, `SELECT agent_version FROM snapshots WHERE id = $1`, done.SnapshotID).Scan(&version); err != nil || version != 1 {
		t.Fatalf("snapshot's agent version: %v %d", err, version)
	}

	// Deny: the backend is not called.
	deny := protocol.AgentInit{SessionID: "s2"}
	out, _ = e.rt.InvokeOne(ctx, acme, "bankingAgent", deny, user("Transfer $70 to account 9"), nil)
	if d, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", deny, respond(interrupted(out)[0], `{"approved":false}`), nil); err != nil || !strings.HasPrefix(d.Message.Text(), "Cancelled") {
		t.Fatalf("deny: %v %+v", err, d)
	}
	if len(e.recv.recorded()) != 1 {
		t.Fatal("a denied transfer reached the backend")
	}

	// Another tenant neither sees nor calls it, nor reads its sessions.
	var se *store.Error
	if _, err := e.rt.InvokeOne(ctx, rival, "bankingAgent", protocol.AgentInit{}, user("Transfer $1 to account 1"), nil); !errors.As(err, &se) || se.Status != store.CodeNotFound {
		t.Fatalf("rival's turn: %v", err)
	}
	if _, err := e.m.Get(ctx, rival, "bankingAgent", 0); !errors.As(err, &se) || se.Status != store.CodeNotFound {
		t.Fatalf("rival's get: %v", err)
	}
	if names, _ := e.rt.AgentNamesFor(ctx, rival); strings.Contains(strings.Join(names, ","), "bankingAgent,") || contains(names, "bankingAgent") {
		t.Fatalf("rival's agents: %v", names)
	}

	// A new version: new sessions use it, s1 goes on with version 1.
	if v, err := e.m.Put(ctx, acme, "bankingAgent", e.bankingPrompt(t)); err != nil || v.Version != 2 {
		t.Fatalf("second version: %v %+v", err, v)
	}
	again, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", init, user("Transfer $5 to account 5"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admin.QueryRow(ctx, `SELECT agent_version FROM snapshots WHERE id = $1`, again.SnapshotID).Scan(&version); err != nil || version != 1 {
		t.Fatalf("an old session's version: %v %d", err, version)
	}
	fresh, _ := e.rt.InvokeOne(ctx, acme, "bankingAgent", protocol.AgentInit{}, user("Transfer $6 to account 6"), nil)
	if err := e.admin.QueryRow(ctx, `SELECT agent_version FROM snapshots WHERE id = $1`, fresh.SnapshotID).Scan(&version); err != nil || version != 2 {
		t.Fatalf("a new session's version: %v %d", err, version)
	}
	info, err := e.m.Get(ctx, acme, "bankingAgent", 0)
	if err != nil || info.CurrentVersion != 2 || len(info.Versions) != 2 {
		t.Fatalf("get: %v %+v", err, info)
	}

	// Disabled: new turns 404, sessions stay readable.
	if err := e.m.Disable(ctx, acme, "bankingAgent"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", init, user("hi"), nil); !errors.As(err, &se) || se.Status != store.CodeNotFound {
		t.Fatalf("turn of a disabled agent: %v", err)
	}
	if snap, err := e.rt.GetSnapshot(ctx, acme, "bankingAgent", protocol.SnapshotLookup{SessionID: "s1"}); err != nil || snap.State == nil {
		t.Fatalf("reading a disabled agent's session: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestBadDefinitionsChangeNothing checks every refused definition is a
// 400 naming what is wrong, and stores no version.
func TestBadDefinitionsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme := e.tenants["acme"]
	good := string(e.bankingPrompt(t))
	strict := &tenantagents.Manager{Store: e.m.Store, Runtime: e.rt, Models: models{}}
	cases := []struct {
		name, src string
		m         *tenantagents.Manager
		status    string
		want      string
	}{
		{"not a prompt", "---\nname: [\n---\nhi", nil, store.CodeInvalidArgument, "line"},
		{"unknown model", strings.Replace(good, "model: demo", "model: nowhere/x", 1), nil, store.CodeInvalidArgument, "model"},
		{"two tools one name", strings.Replace(good, "- name: transferMoney", "- name: userApproval", 1), nil, store.CodeInvalidArgument, "userApproval"},
		{"bad schema", strings.Replace(good, "amount: number", "amount: numbr", 1), nil, store.CodeInvalidArgument, "schema"},
		{"loopback not allowed", good, strict, store.CodeInvalidArgument, "url"},
		{"private address", strings.Replace(good, e.recv.srv.URL, "https://10.0.0.7", 1), strict, store.CodeInvalidArgument, "private"},
		{"metadata address", strings.Replace(good, e.recv.srv.URL, "https://169.254.169.254", 1), strict, store.CodeInvalidArgument, "url"},
		{"plain http", strings.Replace(good, e.recv.srv.URL, "http://bank.example.com", 1), strict, store.CodeInvalidArgument, "https"},
		{"config names a model", strings.Replace(good, "model: demo", "model: demo\nconfig:\n  temperature: 0.2\n  model: openai/gpt-4o", 1), nil, store.CodeInvalidArgument, "field:config.model"},
		{"config names a Model", strings.Replace(good, "model: demo", "model: demo\nconfig: {Model: x}", 1), nil, store.CodeInvalidArgument, "field:config.Model"},
		{"model id climbs out", strings.Replace(good, "model: demo", "model: openai/../../x", 1), nil, store.CodeInvalidArgument, `".."`},
		{"model id with a control character", strings.Replace(good, "model: demo", `model: "openai/gpt\u0007"`, 1), nil, store.CodeInvalidArgument, "field:model"},
		{"name of a compiled agent", strings.Replace(good, "name: bankingAgent", "name: bankingAgentClient", 1), nil, store.CodeAlreadyExists, "own agents"},
	}
	for _, tc := range cases {
		m := e.m
		if tc.m != nil {
			m = tc.m
		}
		name := "bankingAgent"
		if tc.status == store.CodeAlreadyExists {
			name = "bankingAgentClient"
		}
		_, err := m.Put(ctx, acme, name, []byte(tc.src))
		var se *store.Error
		if !errors.As(err, &se) || se.Status != tc.status || !strings.Contains(strings.ToLower(se.Error()+fmt.Sprint(se.Details)), strings.ToLower(tc.want)) {
			t.Errorf("%s: %v (details %v)", tc.name, err, detailsOf(err))
		}
	}
	var n int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM tenant_agent_versions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad definitions stored %d versions (%v)", n, err)
	}
}

func detailsOf(err error) any {
	var se *store.Error
	if errors.As(err, &se) {
		return se.Details
	}
	return nil
}

// TestHTTPToolFailures checks a tool endpoint that answers garbage, too
// much, an error or the wrong schema fails the turn gracefully, retries
// only what may be retried, and leaves a row saying why.
func TestHTTPToolFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme := e.tenants["acme"]
	// pay's timeout is the most allowed: a timed-out attempt is retried,
	// and on a loaded machine 2 s turned the "too much" case's 2 MB answer
	// into 2 attempts where the case counts 1.
	def := fmt.Sprintf(`---
name: payer
model: scripted
holdpoint:
  httpTools:
    - name: pay
      url: %s/pay
      timeout: 60s
      input: {schema: {amount: number}}
      output: {schema: {ok: boolean}}
    - name: guarded
      url: %s/guarded
      approval: true
      input: {schema: {amount: number}}
      output: {schema: {ok: boolean}}
---
You pay.
`, e.recv.srv.URL, e.recv.srv.URL)
	if _, err := e.m.Put(ctx, acme, "payer", []byte(def)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		answer   func(w http.ResponseWriter, call map[string]any)
		status   string
		want     string
		attempts int
	}{
		{"garbage", func(w http.ResponseWriter, _ map[string]any) { fmt.Fprint(w, "<html>") }, store.CodeFailedPrecondition, "not {\"output\"", 1},
		{"wrong schema", func(w http.ResponseWriter, _ map[string]any) { fmt.Fprint(w, `{"output":{"ok":"yes"}}`) }, store.CodeFailedPrecondition, "output schema", 1},
		{"too much", func(w http.ResponseWriter, _ map[string]any) { w.Write(make([]byte, 2<<20)) }, store.CodeFailedPrecondition, "too large", 1},
		{"4xx never retried", func(w http.ResponseWriter, _ map[string]any) { http.Error(w, "no", http.StatusUnprocessableEntity) }, store.CodeFailedPrecondition, "422", 1},
		{"5xx retried then given up", func(w http.ResponseWriter, _ map[string]any) { http.Error(w, "down", http.StatusBadGateway) }, store.CodeUnavailable, "502", 3},
	}
	for i, tc := range cases {
		e.recv.answer.Store(tc.answer)
		before := e.recv.hits.Load()
		session := fmt.Sprintf("f%d", i)
		out, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: session}, user(`pay {"amount":5}`), nil)
		if err != nil || out.FinishReason != "failed" || out.Error.Status != tc.status || !strings.Contains(out.Error.Message, tc.want) {
			t.Errorf("%s: %v %+v", tc.name, err, out.Error)
			continue
		}
		if strings.Contains(out.Error.Message, e.recv.srv.URL) {
			t.Errorf("%s: the error shows the tenant's URL: %s", tc.name, out.Error.Message)
		}
		if got := int(e.recv.hits.Load() - before); got != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.name, got, tc.attempts)
		}
		var status, attempts int
		var rowErr []byte
		if err := e.admin.QueryRow(ctx, `SELECT coalesce(http_status, 0), coalesce(attempts, 0), error FROM tool_calls WHERE tenant_id = 'acme' AND session_id = $1`, session).Scan(&status, &attempts, &rowErr); err != nil || attempts != tc.attempts || !strings.Contains(string(rowErr), tc.status) {
			t.Errorf("%s: row %v status %d attempts %d error %s", tc.name, err, status, attempts, rowErr)
		}
	}

	// An endpoint that asks for confirmation pauses the turn; the restart
	// tells it so.
	e.recv.answer.Store(func(w http.ResponseWriter, call map[string]any) {
		if call["resumed"] == nil {
			fmt.Fprint(w, `{"interrupt":{"confirm":"really pay?"}}`)
			return
		}
		fmt.Fprint(w, `{"output":{"ok":true}}`)
	})
	out, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: "confirm"}, user(`pay {"amount":5}`), nil)
	if err != nil || out.FinishReason != "interrupted" || string(out.Message.Content[0].Metadata["interrupt"]) != `{"confirm":"really pay?"}` {
		t.Fatalf("confirmation: %v %+v", err, out)
	}
	// A restart tells it only with `resumed` metadata (as the reference).
	restart := protocol.AgentInput{Resume: &protocol.Resume{Restart: []protocol.Part{{ToolRequest: interrupted(out)[0],
		Metadata: protocol.Metadata{"resumed": json.RawMessage(`true`)}}}}}
	if done, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: "confirm"}, restart, nil); err != nil || done.Message.Text() != `got {"ok":true}` {
		t.Fatalf("confirmed: %v %+v", err, done)
	}

	// A tool that needs approval is not called until the client approves
	// (restarts) it; its endpoint then answers.
	e.recv.answer.Store(func(w http.ResponseWriter, _ map[string]any) { fmt.Fprint(w, `{"output":{"ok":true}}`) })
	before := e.recv.hits.Load()
	out, err = e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: "guard"}, user(`guarded {"amount":5}`), nil)
	if err != nil || out.FinishReason != "interrupted" || e.recv.hits.Load() != before {
		t.Fatalf("guarded: %v %+v (%d calls)", err, out, e.recv.hits.Load()-before)
	}
	restart = protocol.AgentInput{Resume: &protocol.Resume{Restart: []protocol.Part{{ToolRequest: interrupted(out)[0]}}}}
	if done, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: "guard"}, restart, nil); err != nil || done.Message.Text() != `got {"ok":true}` || e.recv.hits.Load() != before+1 {
		t.Fatalf("approved: %v %+v", err, done)
	}
	approvedCallMayHaveRun(t, e)
}

// approvedCallMayHaveRun: an approved call the endpoint received and never
// answered (it cut the connection) may have run. The call is unknown, the
// approval stays taken, and approving again runs nothing: a human decides.
func approvedCallMayHaveRun(t *testing.T, e *env) {
	ctx := context.Background()
	acme := e.tenants["acme"]
	e.recv.answer.Store(func(w http.ResponseWriter, _ map[string]any) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	out, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SessionID: "cut"}, user(`guarded {"amount":7}`), nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("guarded: %v %+v", err, out)
	}
	restart := protocol.AgentInput{Resume: &protocol.Resume{Restart: []protocol.Part{{ToolRequest: interrupted(out)[0]}}}}
	before := e.recv.hits.Load()
	done, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SnapshotID: out.SnapshotID}, restart, nil)
	if err != nil || done.FinishReason != "failed" || done.Error.Status != store.CodeAborted || !strings.Contains(done.Error.Message, "may have run") {
		t.Fatalf("approved call cut off: %v %+v", err, done)
	}
	sent := e.recv.hits.Load() - before
	var status string
	if err := e.admin.QueryRow(ctx, `SELECT status FROM tool_calls WHERE tenant_id = 'acme' AND session_id = 'cut' AND call_key LIKE 'restart:%'`).Scan(&status); err != nil || status != store.ToolCallUnknown {
		t.Fatalf("the cut-off call's row: %q, %v; want unknown", status, err)
	}
	// The same approval again answers the first outcome, running nothing.
	if again, err := e.rt.InvokeOne(ctx, acme, "payer", protocol.AgentInit{SnapshotID: out.SnapshotID}, restart, nil); err == nil && again.FinishReason != "failed" {
		t.Fatalf("approving the call again: %+v", again)
	}
	if n := e.recv.hits.Load() - before; n != sent {
		t.Fatalf("approving again reached the endpoint (%d requests, %d before)", n, sent)
	}
}

// fakeResolver resolves every name to one address, without DNS.
type fakeResolver string

func (r fakeResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP(string(r))}}, nil
}

// TestRefusedToolURLHidesTheAddress calls a tool whose host resolves to a
// private address: the turn fails saying the address policy refused it,
// without the host or the address, which only the server's log shows.
func TestRefusedToolURLHidesTheAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var logged strings.Builder
	var logMu sync.Mutex
	m := &tenantagents.Manager{Store: e.m.Store, Runtime: e.rt, Models: models{},
		Client: httptool.Client{Resolver: fakeResolver("10.1.2.3")},
		Log:    slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &logMu}, nil))}
	e.rt.SetTenantAgents(m)
	def := `---
name: prober
model: scripted
holdpoint:
  httpTools:
    - name: probe
      url: https://intranet.corp.example/admin
      input: {schema: {x: number}}
      output: {schema: {ok: boolean}}
---
You probe.
`
	if _, err := m.Put(ctx, e.tenants["acme"], "prober", []byte(def)); err != nil {
		t.Fatal(err)
	}
	out, err := e.rt.InvokeOne(ctx, e.tenants["acme"], "prober", protocol.AgentInit{SessionID: "p"}, user(`probe {"x":1}`), nil)
	if err != nil || out.FinishReason != "failed" || out.Error.Status != store.CodeFailedPrecondition {
		t.Fatalf("turn: %v %+v", err, out)
	}
	var rowErr []byte
	if err := e.admin.QueryRow(ctx, `SELECT error FROM tool_calls WHERE tenant_id = 'acme' AND session_id = 'p'`).Scan(&rowErr); err != nil {
		t.Fatal(err)
	}
	for _, public := range []string{out.Error.Message, string(rowErr)} {
		if !strings.Contains(public, "not allowed by the address policy") || strings.Contains(public, "intranet") || strings.Contains(public, "10.1.2.3") {
			t.Errorf("public error %q: want the policy named, not the host or the address", public)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logged.String(), "intranet.corp.example") || !strings.Contains(logged.String(), "10.1.2.3") {
		t.Errorf("the server's log does not say what was refused: %s", logged.String())
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTenToolSecretRotationsSignThreeTimes rotates the tenant's tool
// secret ten times, each with a day's grace: a call carries three
// signatures (the newest key and the two before it), not eleven.
func TestTenToolSecretRotationsSignThreeTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acc := tenants.New(e.m.Store.(store.TenantStore))
	for range 10 {
		if _, err := acc.RotateSecret(ctx, "acme", keys.PurposeTool, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	sigs := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sigs <- req.Header.Get("webhook-signature")
		fmt.Fprint(w, `{"output":{"ok":true}}`)
	}))
	t.Cleanup(srv.Close)
	def := fmt.Sprintf("---\nname: signer\nmodel: scripted\nholdpoint:\n  httpTools:\n    - name: sign\n      url: %s/sign\n      input: {schema: {x: number}}\n      output: {schema: {ok: boolean}}\n---\nYou sign.\n", srv.URL)
	if _, err := e.m.Put(ctx, e.tenants["acme"], "signer", []byte(def)); err != nil {
		t.Fatal(err)
	}
	if out, err := e.rt.InvokeOne(ctx, e.tenants["acme"], "signer", protocol.AgentInit{}, user(`sign {"x":1}`), nil); err != nil || out.FinishReason != "stop" {
		t.Fatalf("turn: %v %+v", err, out)
	}
	if got := strings.Fields(<-sigs); len(got) != 3 {
		t.Errorf("%d signatures after ten rotations, want 3: %q", len(got), got)
	}
	var live int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM tenant_secrets WHERE tenant_id = 'acme' AND purpose = 'tool' AND (expires_at IS NULL OR expires_at > now())`).Scan(&live); err != nil || live != 3 {
		t.Errorf("%d live tool keys (%v), want 3", live, err)
	}
}
