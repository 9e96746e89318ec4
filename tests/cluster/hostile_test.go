package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/hostile"
	"github.com/holdpoint/holdpoint/internal/procstat"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/httptool"
)

// tenantBackend is the tenant's tool endpoints the hostile agent calls:
// fetchBig answers about 1 MB, transfer counts what it executed, slowTool
// holds each call until release is closed.
type tenantBackend struct {
	srv *httptest.Server
	// secrets verify calls to /verified-transfer, as the example
	// receiver does; captured is the last call to /quote (header, body).
	secrets   func() [][]byte
	mu        sync.Mutex
	captured  *http.Request
	body      []byte
	verified  atomic.Int64
	calls     sync.Map // path -> *atomic.Int64
	inSlow    atomic.Int64
	mostSlow  atomic.Int64
	release   chan struct{}
	releaseMu sync.Once
}

func newTenantBackend(t *testing.T) *tenantBackend {
	b := &tenantBackend{release: make(chan struct{})}
	big, _ := json.Marshal(map[string]any{"output": map[string]any{"page": strings.Repeat("x", 1_000_000)}})
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.count(r.URL.Path).Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/quote":
			b.mu.Lock()
			b.captured, b.body = r.Clone(context.Background()), body
			b.mu.Unlock()
			_, _ = w.Write([]byte(`{"output":{"fee":1}}`))
		case "/verified-transfer":
			want := httptool.Expect{Tool: "transfer", URL: b.srv.URL + "/verified-transfer"}
			if _, err := httptool.VerifyToolCall(b.secrets(), r, body, want); err != nil {
				http.Error(w, "refused", http.StatusForbidden)
				return
			}
			b.verified.Add(1)
			_, _ = w.Write([]byte(`{"output":{"executed":true}}`))
		case "/big":
			_, _ = w.Write(big)
		case "/slow":
			n := b.inSlow.Add(1)
			for m := b.mostSlow.Load(); n > m && !b.mostSlow.CompareAndSwap(m, n); m = b.mostSlow.Load() {
			}
			select {
			case <-b.release:
			case <-time.After(2 * time.Minute):
			}
			b.inSlow.Add(-1)
			_, _ = w.Write([]byte(`{"output":{"slow":"done"}}`))
		default:
			_, _ = w.Write([]byte(`{"output":{"executed":true}}`))
		}
	}))
	t.Cleanup(func() { b.open(); b.srv.Close() })
	return b
}

func (b *tenantBackend) count(path string) *atomic.Int64 {
	v, _ := b.calls.LoadOrStore(path, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (b *tenantBackend) open() { b.releaseMu.Do(func() { close(b.release) }) }

// hostilePrompt is a tenant agent on the attacker's model with a
// money-moving tool that needs approval, a tool that answers a megabyte
// and a slow one.
func hostilePrompt(backend string) string {
	return `---
name: steered
model: openai/gpt-4o-mini
holdpoint:
  maxToolRounds: 50
  interrupts:
    - name: userApproval
      input: {schema: {toAccount: string, amount: number}}
      output: {schema: {approved: boolean}}
  httpTools:
    - name: transfer
      url: ` + backend + `/transfer
      approval: true
      input: {schema: {toAccount: string, amount: number}}
      output: {schema: {}}
    - name: fetchBig
      url: ` + backend + `/big
      input: {schema: {toAccount: string, amount: number}}
      output: {schema: {}}
    - name: quoteFee
      url: ` + backend + `/quote
      input: {schema: {toAccount: string, amount: number}}
      output: {schema: {fee: number}}
    - name: slowTool
      url: ` + backend + `/slow
      timeout: 60s
      input: {schema: {toAccount: string, amount: number}}
      output: {schema: {}}
---
You are a careful assistant.
`
}

// leastPrivilegeURL is url logging in as a new login role that is only a
// member of holdpoint_app, dropped when the test ends.
func leastPrivilegeURL(t *testing.T, owner *pgxpool.Pool, url string) string {
	t.Helper()
	ctx := context.Background()
	name := "hpt_hostile_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ident := pgx.Identifier{name}.Sanitize()
	for _, stmt := range []string{"CREATE ROLE " + ident + " LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE", "GRANT holdpoint_app TO " + ident} {
		if _, err := owner.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = owner.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		_, _ = owner.Exec(ctx, "DROP OWNED BY "+ident)
		_, _ = owner.Exec(ctx, "DROP ROLE "+ident)
	})
	return strings.Replace(url, "://postgres@", "://"+name+"@", 1)
}

// hostileServer is a server as a least-privilege login role whose tenant
// agent "steered" runs on the attacker's model.
func hostileServer(t *testing.T) (*server, *pgxpool.Pool, *tenantBackend) {
	t.Helper()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	appURL := leastPrivilegeURL(t, pool, url)
	if appURL == url {
		t.Skip("DATABASE_URL does not log in as postgres@; the least-privilege role cannot be substituted")
	}
	model := httptest.NewServer(&hostile.Model{})
	t.Cleanup(model.Close)
	backend := newTenantBackend(t)
	backend.secrets = func() [][]byte {
		var out [][]byte
		rows, err := pool.Query(context.Background(), "SELECT secret FROM tenant_secrets WHERE tenant_id = 'default' AND purpose = 'tool'")
		if err != nil {
			return nil
		}
		defer rows.Close()
		for rows.Next() {
			var sec []byte
			if rows.Scan(&sec) == nil {
				out = append(out, sec)
			}
		}
		return out
	}
	s := startServer(t, "hostile", appURL, serverOpts{
		env:  []string{"OPENAI_API_KEY=attacker", "OPENAI_BASE_URL=" + model.URL + "/v1"},
		args: []string{"--migrate=false"},
	})
	req, _ := http.NewRequest(http.MethodPut, s.base+"/api/v1/agents/steered", strings.NewReader(hostilePrompt(backend.srv.URL)))
	req.Header.Set("Content-Type", "text/x-dotprompt")
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT the agent: %d %s", res.StatusCode, b)
	}
	return s, pool, backend
}

// steer sends the attacker's message to "steered" and returns the answer.
func (s *server) steer(message string, detach bool) answer {
	body, _ := json.Marshal(map[string]any{"data": service.AgentInput{Message: userMessage(message), Detach: detach}})
	res, err := httpClient.Post(s.base+"/api/agents/steered", "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, body: b, err: err}
	if res.StatusCode == http.StatusTooManyRequests {
		a.retryAfter = res.Header.Get("Retry-After")
	}
	return a
}

// mustFailExhausted checks a turn failed RESOURCE_EXHAUSTED, mentioning
// what.
func mustFailExhausted(t *testing.T, a answer, what string) *service.AgentOutput {
	t.Helper()
	out, err := a.output()
	if err != nil {
		t.Fatal(err)
	}
	if out.FinishReason != service.FinishFailed || out.Error == nil || out.Error.Status != service.CodeResourceExhausted || !strings.Contains(out.Error.Message, what) {
		t.Fatalf("turn ended %q %+v; want failed RESOURCE_EXHAUSTED mentioning %q", out.FinishReason, out.Error, what)
	}
	return out
}

// TestHostileModelFromOutside repeats the attacks of a prompt-injected
// model against serve running as a least-privilege login role, with the
// tenant's agent on an OpenAI-compatible model that requests whatever
// the user's message names.
func TestHostileModelFromOutside(t *testing.T) {
	t.Parallel()
	s, pool, backend := hostileServer(t)

	t.Run("thirty megabyte tool outputs", func(t *testing.T) {
		pid := s.cmd.Process.Pid
		base, _ := procstat.Bytes(pid, "VmRSS")
		var wg sync.WaitGroup
		outs := make([]answer, 3)
		for i := range outs {
			wg.Add(1)
			go func() { defer wg.Done(); outs[i] = s.steer("CALL fetchBig x15 rounds 2", false) }()
		}
		wg.Wait()
		for _, a := range outs {
			out := mustFailExhausted(t, a, "more than 4194304 bytes")
			// Every call that ran has its row; none past the bound ran.
			ran := count(t, pool, "SELECT count(*) FROM tool_calls WHERE session_id = $1", out.SessionID)
			if ran != 5 {
				t.Errorf("session %s: %d tool_calls rows; want 5 (the fifth call passed 4 MiB)", out.SessionID, ran)
			}
		}
		if n := backend.count("/big").Load(); n != 15 {
			t.Errorf("the backend answered %d calls; want 15", n)
		}
		peak, _ := procstat.Bytes(pid, "VmHWM")
		t.Logf("RSS %d MiB before the turns, peak %d MiB", base>>20, peak>>20)
		if raceEnabled {
			return // the race detector's shadow memory makes RSS no measure of the server's
		}
		if peak > 512<<20 {
			t.Errorf("peak RSS %d MiB; want under 512", peak>>20)
		}
		// The memory is given back: under 200 MiB, and near where it was.
		d := waitUntil(t, "RSS back under 200 MiB and within 32 MiB of where it was", time.Minute, func() bool {
			rss, err := procstat.Bytes(pid, "VmRSS")
			return err == nil && rss < 200<<20 && rss < base+32<<20
		})
		rss, _ := procstat.Bytes(pid, "VmRSS")
		t.Logf("RSS %d MiB %s after the turns", rss>>20, d.Round(time.Millisecond))
	})

	t.Run("thirty transfers in one answer", func(t *testing.T) {
		out := mustFailExhausted(t, s.steer("CALL transfer x30", false), "30 tool calls in one answer; at most 16")
		if n := backend.count("/transfer").Load(); n != 0 {
			t.Fatalf("the receiver executed %d transfers", n)
		}
		if n := count(t, pool, "SELECT count(*) FROM tool_calls WHERE session_id = $1", out.SessionID); n != 0 {
			t.Fatalf("%d tool_calls rows for calls that never ran", n)
		}
	})

	t.Run("an answer that floods the inbox", func(t *testing.T) {
		const events = "SELECT count(*) FROM interrupt_events WHERE interrupt_id IS NOT NULL"
		before := count(t, pool, events)
		// 400 calls, 25 times the bound: a race-built server parses 2,000
		// in 7-15 s alone, and past the client's 3-minute timeout on a
		// loaded machine (stress-ng beside make test), without testing
		// anything 400 does not.
		out := mustFailExhausted(t, s.steer("CALL userApproval x400", false), "400 tool calls in one answer")
		if n := count(t, pool, "SELECT count(*) FROM interrupts WHERE session_id = $1", out.SessionID); n != 0 {
			t.Fatalf("%d interrupts raised", n)
		}
		if n := count(t, pool, events) - before; n != 0 {
			t.Fatalf("%d interrupt events (each a webhook delivery) written", n)
		}
		// At the bound it pauses: the approvals it raises are exactly the
		// bound, and the session can be resumed through the protocol.
		a := s.steer("CALL transfer x16", false)
		paused, err := a.output()
		if err != nil || paused.FinishReason != service.FinishInterrupted {
			t.Fatalf("16 approvals: %v %+v", err, paused)
		}
		if n := count(t, pool, "SELECT count(*) FROM interrupts WHERE session_id = $1 AND status = 'pending'", paused.SessionID); n != 16 {
			t.Fatalf("%d approvals pending; want 16", n)
		}
		if n := backend.count("/transfer").Load(); n != 0 {
			t.Fatalf("%d transfers ran before approval", n)
		}
	})

	t.Run("a signed quoteFee call replayed to the transfer endpoint", func(t *testing.T) {
		out, err := s.steer(`CALL quoteFee x1 {"toAccount":"ATTACKER","amount":5000}`, false).output()
		if err != nil || out.FinishReason != service.FinishStop {
			t.Fatalf("quoteFee turn: %v %+v", err, out)
		}
		backend.mu.Lock()
		captured, body := backend.captured, backend.body
		backend.mu.Unlock()
		if captured == nil {
			t.Fatal("the platform never called quoteFee")
		}
		req, _ := http.NewRequest(http.MethodPost, backend.srv.URL+"/verified-transfer", bytes.NewReader(body))
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "Idempotency-Key", "Content-Type"} {
			req.Header.Set(h, captured.Header.Get(h))
		}
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || backend.verified.Load() != 0 {
			t.Fatalf("the replay answered %d and %d transfers were executed; want 403 and none", res.StatusCode, backend.verified.Load())
		}
	})

	t.Run("agent names another agent has", func(t *testing.T) {
		for _, name := range []string{"Steered", "BankingAgent", "bankingagent"} {
			req, _ := http.NewRequest(http.MethodPut, s.base+"/api/v1/agents/"+name, strings.NewReader(strings.Replace(hostilePrompt(backend.srv.URL), "name: steered", "name: "+name, 1)))
			req.Header.Set("Content-Type", "text/x-dotprompt")
			res, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusConflict {
				t.Errorf("PUT %s answered %d %s; want 409 (steered and the compiled bankingAgent have it)", name, res.StatusCode, b)
			}
		}
	})

	t.Run("forty detached turns from one key", func(t *testing.T) {
		var wg sync.WaitGroup
		answers := make([]answer, 40)
		for i := range answers {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = s.steer("CALL slowTool x1", true) }()
		}
		wg.Wait()
		accepted, refused := 0, 0
		for _, a := range answers {
			switch {
			case a.status == http.StatusOK:
				accepted++
			case a.status == http.StatusTooManyRequests && a.errorStatus() == service.CodeResourceExhausted && a.retryAfter != "":
				refused++
			default:
				t.Fatalf("detach answered %s", a)
			}
		}
		if accepted != 16 || refused != 24 {
			t.Fatalf("%d detaches accepted and %d refused; want 16 (the credential's bound) and 24", accepted, refused)
		}
		waitUntil(t, "eight slow calls running", time.Minute, func() bool { return backend.inSlow.Load() == 8 })
		backend.open()
		t.Cleanup(func() {
			if t.Failed() {
				rows, _ := pool.Query(context.Background(), "SELECT status, coalesce(finish_reason, ''), coalesce(error::text, ''), count(*) FROM snapshots WHERE agent = 'steered' GROUP BY 1, 2, 3")
				for rows.Next() {
					var st, fr, e string
					var n int
					_ = rows.Scan(&st, &fr, &e, &n)
					t.Logf("snapshots %s %s %s: %d", st, fr, e, n)
				}
				rows.Close()
			}
		})
		waitUntil(t, "every accepted turn done", 2*time.Minute, func() bool {
			return count(t, pool, "SELECT count(*) FROM tool_calls WHERE tool = 'slowTool' AND status = 'succeeded'") == 16 &&
				count(t, pool, "SELECT count(*) FROM snapshots WHERE agent = 'steered' AND status = 'pending'") == 0
		})
		if m := backend.mostSlow.Load(); m > 8 {
			t.Fatalf("%d detached turns ran at once; the instance runs at most 8", m)
		}
		if n := backend.count("/slow").Load(); n != 16 {
			t.Fatalf("the slow tool ran %d times; want once per accepted turn", n)
		}
	})
}
