package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/limits"
)

// gateModel's model asks for the tool "work" on a user message, then
// waits in its next call until the test opens the gate named by that
// message's text; it records the order in which turns reached it and how
// many wait at once.
type gateModel struct {
	mu       sync.Mutex
	gates    map[string]chan struct{}
	started  []string
	waiting  int
	mostWait int
}

func newGateModel() *gateModel { return &gateModel{gates: map[string]chan struct{}{}} }

func (m *gateModel) gate(name string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gates[name]
	if !ok {
		g = make(chan struct{})
		m.gates[name] = g
	}
	return g
}

func (m *gateModel) Name() string { return "gate" }

func (m *gateModel) Generate(ctx context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: "work", Ref: "w", Input: json.RawMessage(`{}`)}}}}}, nil
	}
	name := *req.Messages[len(req.Messages)-3].Content[0].Text
	m.mu.Lock()
	m.started = append(m.started, name)
	m.waiting++
	m.mostWait = max(m.mostWait, m.waiting)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.waiting--
		m.mu.Unlock()
	}()
	select {
	case <-m.gate(name):
		return &service.ModelResponse{Message: text(service.RoleModel, "done "+name), FinishReason: "stop"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startedOrder is the order turns reached the gate.
func (m *gateModel) startedOrder() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.started...)
}

// slotAgent registers "gated" on rt with model m.
func slotAgent(rt *service.Runtime, m *gateModel) {
	err := rt.Register(&service.Agent{Name: "gated", ServerManaged: true, Model: m, Tools: []*service.Tool{
		{Name: "work", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }},
	}})
	if err != nil {
		panic(err)
	}
}

// detachAs starts a detached turn whose message is name, for caller c.
func detachAs(rt *service.Runtime, c service.Caller, name string) (*service.AgentOutput, error) {
	return rt.InvokeOne(context.Background(), c, "gated", service.AgentInit{},
		service.AgentInput{Message: ptr(text(service.RoleUser, name)), Detach: true}, nil)
}

// TestDetachedTurnsQueueBeyondTheInstance: one credential starts six
// detached turns against a slow model on an instance with two slots; two
// run at once, the rest wait in the database and each runs once its turn
// comes.
func TestDetachedTurnsQueueBeyondTheInstance(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	m := newGateModel()
	in := startInstance(t, url, service.Options{Detach: limits.Detach{PerInstance: 2}}, func(rt *service.Runtime) { slotAgent(rt, m) })
	names := []string{"t1", "t2", "t3", "t4", "t5", "t6"}
	for _, n := range names {
		if out, err := detachAs(in.rt, testCaller, n); err != nil || out.FinishReason != service.FinishDetached {
			t.Fatalf("detach %s: %v %+v", n, err, out)
		}
	}
	waitFor(t, "two turns at the gate", 30*time.Second, func() bool { return len(m.startedOrder()) == 2 })
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs WHERE owner IS NULL`); n != 4 {
		t.Fatalf("%d jobs queued; want 4", n)
	}
	for _, n := range names {
		close(m.gate(n))
	}
	waitFor(t, "every turn done", 60*time.Second, func() bool {
		return count(t, admin, `SELECT count(*) FROM snapshots WHERE status = 'completed' AND parent_id IS NULL`) == len(names)
	})
	if m.mostWait > 2 {
		t.Fatalf("%d turns ran at once; the instance has 2 slots", m.mostWait)
	}
	if got := len(m.startedOrder()); got != len(names) {
		t.Fatalf("%d turns reached the model; want each once", got)
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls`); n != len(names) {
		t.Fatalf("%d tool calls; want one per turn", n)
	}
}

// TestDetachedTurnsPerCredentialAndTenantAreCapped: past its credential's
// bound a detach answers RESOURCE_EXHAUSTED with a Retry-After and writes
// nothing; another credential of the tenant goes on until the tenant's
// bound.
func TestDetachedTurnsPerCredentialAndTenantAreCapped(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	m := newGateModel()
	// One slot, held by a1 at the gate: nothing leaves the queue, so the
	// counts stay as the detaches leave them.
	in := startInstance(t, url, service.Options{Detach: limits.Detach{PerInstance: 1, PerTenant: 5, PerCredential: 3}},
		func(rt *service.Runtime) { slotAgent(rt, m) })
	t.Cleanup(func() {
		for _, n := range []string{"a1", "a2", "a3", "b1", "b2"} {
			close(m.gate(n))
		}
	})
	mallory := service.Caller{TenantID: "default", Actor: "key:mallory"}
	other := service.Caller{TenantID: "default", Actor: "key:other"}
	for _, n := range []string{"a1", "a2", "a3"} {
		if _, err := detachAs(in.rt, mallory, n); err != nil {
			t.Fatalf("detach %s: %v", n, err)
		}
	}
	refused := func(c service.Caller, name string) {
		t.Helper()
		before := count(t, admin, `SELECT count(*) FROM snapshots`)
		_, err := detachAs(in.rt, c, name)
		var e *service.Error
		if !errors.As(err, &e) || e.Status != service.CodeResourceExhausted || e.RetryAfter <= 0 {
			t.Fatalf("detach %s: %v; want RESOURCE_EXHAUSTED with a Retry-After", name, err)
		}
		if after := count(t, admin, `SELECT count(*) FROM snapshots`); after != before {
			t.Fatalf("a refused detach wrote %d snapshots", after-before)
		}
	}
	refused(mallory, "a4")
	for _, n := range []string{"b1", "b2"} {
		if _, err := detachAs(in.rt, other, n); err != nil {
			t.Fatalf("detach %s: %v", n, err)
		}
	}
	refused(other, "b3")
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs`); n != 5 {
		t.Fatalf("%d jobs; want the tenant's bound, 5", n)
	}
}

// TestQueuedTurnsAreTakenFairly: with one tenant's burst queued before
// another tenant's single turn, the freed slot goes to the tenant with
// fewer turns running.
func TestQueuedTurnsAreTakenFairly(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	if _, err := admin.Exec(context.Background(), `INSERT INTO tenants (id, name) VALUES ('bravo', 'Bravo')`); err != nil {
		t.Fatal(err)
	}
	m := newGateModel()
	in := startInstance(t, url, service.Options{Detach: limits.Detach{PerInstance: 2}}, func(rt *service.Runtime) { slotAgent(rt, m) })
	t.Cleanup(func() {
		for _, n := range []string{"a3", "a4", "b1"} {
			select {
			case <-m.gate(n):
			default:
				close(m.gate(n))
			}
		}
	})
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		if _, err := detachAs(in.rt, testCaller, n); err != nil {
			t.Fatalf("detach %s: %v", n, err)
		}
	}
	waitFor(t, "a1 and a2 running", 30*time.Second, func() bool { return len(m.startedOrder()) == 2 })
	if _, err := detachAs(in.rt, service.Caller{TenantID: "bravo", Actor: "key:b"}, "b1"); err != nil {
		t.Fatal(err)
	}
	close(m.gate("a1"))
	waitFor(t, "a third turn running", 30*time.Second, func() bool { return len(m.startedOrder()) == 3 })
	if got := m.startedOrder()[2]; got != "b1" {
		t.Fatalf("the freed slot went to %s; want b1 (tenant default still runs a2)", got)
	}
	close(m.gate("a2"))
}
