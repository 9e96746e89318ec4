package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/tenantagents"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// attacker is a model under the attacker's control: it calls the tool the
// user's message names with the JSON input that follows.
type attacker struct{}

func (attacker) Name() string { return "attacker" }

func (attacker) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == service.RoleUser {
		tool, input, _ := strings.Cut(last.Text(), " ")
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: tool, Ref: "t1", Input: json.RawMessage(input)}}}}}, nil
	}
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("done")}}, FinishReason: "stop"}, nil
}

type models struct{}

func (models) Check(string) error { return nil }

func (models) Model(context.Context, string) (service.Model, error) { return attacker{}, nil }

var httpClient = &http.Client{Timeout: 30 * time.Second}

// captured is a request the platform made, as a man in the middle (or a
// compromised quoteFee backend) keeps it.
type captured struct {
	header http.Header
	body   []byte
}

// recorder keeps the POSTs a handler gets.
type recorder struct {
	mu   sync.Mutex
	reqs []captured
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, captured{header: req.Header.Clone(), body: body})
			rec.mu.Unlock()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
	})
}

func (rec *recorder) all() []captured {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]captured(nil), rec.reqs...)
}

// platform is the real platform path: a runtime serving a tenant's agent
// whose HTTP tools sign their calls with the tenant's tool secret.
type platform struct {
	rt     *service.Runtime
	m      *tenantagents.Manager
	tenant service.Caller
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	env := servicetest.New(t, servicetest.Options{})
	store, rt := env.Store, env.Runtime
	m := &tenantagents.Manager{Store: store, Runtime: rt, Models: models{}, AllowLoopback: true}
	rt.SetTenantAgents(m)
	if _, err := tenants.New(store).CreateTenant(context.Background(), "acme", "acme"); err != nil {
		t.Fatal(err)
	}
	return &platform{rt: rt, m: m, tenant: service.Caller{TenantID: "acme", Actor: "test:acme"}}
}

// put stores an agent of the tenant with a quoteFee tool (no approval) and
// transferMoney (approval: true), each at its URL.
func (p *platform) put(t *testing.T, quoteURL, transferURL string) {
	t.Helper()
	def := fmt.Sprintf(`---
name: bank
model: attacker
holdpoint:
  httpTools:
    - name: quoteFee
      url: %s
      input: {schema: {amount: number, toAccount: string}}
      output: {schema: {fee: number}}
    - name: transferMoney
      url: %s
      approval: true
      input: {schema: {amount: number, toAccount: string}}
      output: {schema: {success: boolean, transactionId: string}}
---
You bank.
`, quoteURL, transferURL)
	if _, err := p.m.Put(context.Background(), p.tenant, "bank", []byte(def)); err != nil {
		t.Fatal(err)
	}
}

// turn runs a turn of the tenant's agent in session.
func (p *platform) turn(t *testing.T, session string, in service.AgentInput) *service.AgentOutput {
	t.Helper()
	out, err := p.rt.InvokeOne(context.Background(), p.tenant, "bank", service.AgentInit{SessionID: session}, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func user(text string) service.AgentInput {
	return service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart(text)}}}
}

// start serves the example receiver with the tenant's tool secrets, at
// its transferMoney URL; the calls it gets go to *seen as well.
func (p *platform) start(t *testing.T, seen *recorder) (*httptest.Server, string) {
	t.Helper()
	secrets, err := p.rt.SigningSecrets(context.Background(), "acme", keys.PurposeTool)
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(secrets, httptool.Expect{Tool: "transferMoney", Tenant: "acme"})
	srv := httptest.NewServer(seen.wrap(r.routes()))
	t.Cleanup(srv.Close)
	r.want.URL = srv.URL + "/tools/transferMoney" // set before any request
	return srv, r.want.URL
}

// executedCalls is what GET /calls lists.
func executedCalls(t *testing.T, srv *httptest.Server) []executed {
	t.Helper()
	res, err := httpClient.Get(srv.URL + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Executed []executed }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Executed
}

// replay sends a captured call to url as it was sent, and returns the
// status.
func replay(t *testing.T, c captured, url string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// TestReplayedQuoteFeeCallMovesNoMoney is issue 25's attack: the model
// calls the tenant's quoteFee tool, which needs no approval, with
// {amount: 5000, toAccount: "ATTACKER"}; the platform signs that call with
// the tenant's one tool secret, and the attacker replays it to the
// transferMoney endpoint (approval: true). The example receiver refuses
// it (403) and executes nothing, while it still executes an approved
// transferMoney call, once however often it comes.
func TestReplayedQuoteFeeCallMovesNoMoney(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	var quotes, transfers recorder
	quote := httptest.NewServer(quotes.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"fee":1.5}}`))
	})))
	t.Cleanup(quote.Close)
	recv, transferURL := p.start(t, &transfers)
	p.put(t, quote.URL+"/tools/quoteFee", transferURL)

	out := p.turn(t, "attack", user(`quoteFee {"amount":5000,"toAccount":"ATTACKER"}`))
	got := quotes.all()
	if out.FinishReason != "stop" || len(got) != 1 {
		t.Fatalf("the quoteFee turn: %+v, %d calls", out, len(got))
	}
	if status := replay(t, got[0], transferURL); status != http.StatusForbidden {
		t.Errorf("the replayed quoteFee call answered %d, want 403", status)
	}
	// Retargeting the body at transferMoney breaks the signature.
	forged := captured{header: got[0].header, body: bytes.Replace(got[0].body, []byte(`"tool":"quoteFee"`), []byte(`"tool":"transferMoney"`), 1)}
	forged.body = bytes.Replace(forged.body, []byte(quote.URL+"/tools/quoteFee"), []byte(transferURL), 1)
	if status := replay(t, forged, transferURL); status != http.StatusUnauthorized {
		t.Errorf("the retargeted quoteFee call answered %d, want 401", status)
	}
	if calls := executedCalls(t, recv); len(calls) != 0 {
		t.Fatalf("the receiver executed %+v", calls)
	}

	// The approved transfer through the platform is executed, once.
	out = p.turn(t, "honest", user(`transferMoney {"amount":50,"toAccount":"12345"}`))
	if out.FinishReason != "interrupted" || len(executedCalls(t, recv)) != 0 {
		t.Fatalf("transferMoney before its approval: %+v", out)
	}
	var ask *service.ToolRequest
	for _, part := range out.Message.Content {
		if _, ok := part.Metadata["interrupt"]; ok && part.ToolRequest != nil {
			ask = part.ToolRequest
		}
	}
	done := p.turn(t, "honest", service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: ask}}}})
	calls := executedCalls(t, recv)
	if done.FinishReason != "stop" || len(calls) != 1 || calls[0].Amount != 50 || calls[0].ToAccount != "12345" || calls[0].SessionID != "honest" {
		t.Fatalf("approved transfer: %+v, executed %+v", done, calls)
	}
	// Its call again (a retry, a takeover, a replay) is the same call id:
	// the first answer, nothing executed again.
	sent := transfers.all() // the two replays above, then the platform's call
	if len(sent) != 3 {
		t.Fatalf("the receiver got %d calls, want 3", len(sent))
	}
	if status := replay(t, sent[2], transferURL); status != http.StatusOK {
		t.Errorf("the approved call again answered %d, want 200", status)
	}
	if again := executedCalls(t, recv); len(again) != 1 {
		t.Errorf("the approved call again executed %+v", again)
	}
}
