package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// escalationEnv is a runtime with its store (for the webhook dispatcher)
// and an owner pool (for reading the rows' times).
type escalationEnv struct {
	rt    *service.Runtime
	store *pgstore.PgStore
	admin *pgxpool.Pool
}

func newEscalationEnv(t *testing.T) *escalationEnv {
	t.Helper()
	env := servicetest.New(t, servicetest.Options{})
	rt, store, admin := env.Runtime, env.Store, testdb.OwnerPool(t, env.URL)
	return &escalationEnv{rt: rt, store: store, admin: admin}
}

// waitPassed polls until the timestamp column of interrupt id is in the
// past by the database's clock (within a minute).
func (e *escalationEnv) waitPassed(t *testing.T, id uuid.UUID, column string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var passed bool
		err := e.admin.QueryRow(context.Background(),
			"SELECT coalesce("+column+" <= now(), false) FROM interrupts WHERE id = $1", id).Scan(&passed)
		if err != nil {
			t.Fatal(err)
		}
		if passed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of %s never passed", column, id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hookReceiver collects the payloads of the webhooks it gets.
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []webhooks.Payload
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p webhooks.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("webhook payload %s: %v", body, err)
		}
		r.mu.Lock()
		r.got = append(r.got, p)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the payloads once one of them has type typ (within a minute).
func (r *hookReceiver) wait(t *testing.T, typ string) webhooks.Payload {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r.mu.Lock()
		for _, p := range r.got {
			if p.Type == typ {
				r.mu.Unlock()
				return p
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s webhook within a minute", typ)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribe adds an endpoint of the default tenant for types and runs a
// dispatcher until the test ends.
func (e *escalationEnv) subscribe(t *testing.T, types ...string) *hookReceiver {
	t.Helper()
	r := newHookReceiver(t)
	u := r.srv.URL + "/hook"
	m := &webhooks.Manager{Store: e.store, AllowLoopback: true}
	if _, err := m.Create(context.Background(), approver("ops", "*"), webhooks.Input{URL: &u, EventTypes: types}); err != nil {
		t.Fatal(err)
	}
	d := &webhooks.Dispatcher{
		Store: e.store, IDs: keys.NewEventIDs(e.store.SigningKeys), Owner: "esc", AllowLoopback: true,
		Schedule: []time.Duration{50 * time.Millisecond}, Lease: 5 * time.Second, Timeout: 2 * time.Second,
		Poll: 20 * time.Millisecond, PublicURL: "https://holdpoint.example", Log: testlog.Logger(t),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// TestEscalationReassignsOnce: a pending approval of approve:payments
// goes to approve:lead once its policy's escalation is due: before, the
// lead neither lists nor decides it and payments does; after, the
// reverse, with an escalated event (from, to, by system) in the audit
// trail and as an interrupt.escalated webhook. A second sweep changes
// nothing, and an escalation not yet due waits.
func TestEscalationReassignsOnce(t *testing.T) {
	t.Parallel()
	e := newEscalationEnv(t)
	ctx := context.Background()
	tr := gatedAgent(t, e.rt, "escalating", &approval.Policy{
		Scope: "approve:payments", Escalate: &approval.Escalation{After: 50 * time.Millisecond, Scope: "approve:lead"},
	})
	gatedAgent(t, e.rt, "patient", &approval.Policy{
		Scope: "approve:payments", Escalate: &approval.Escalation{After: time.Hour, Scope: "approve:lead"},
	})
	hook := e.subscribe(t, "interrupt.escalated")
	_, it := pauseOnGate(t, e.rt, "escalating", "s-esc", "9000")
	_, later := pauseOnGate(t, e.rt, "patient", "s-later", "9000")
	lead, payments := approver("lead", "approve:lead"), approver("pay", "approve:payments")

	if it.Scope != "approve:payments" || it.EscalatedAt != nil {
		t.Fatalf("before the sweep: scope %q, escalated at %v", it.Scope, it.EscalatedAt)
	}
	if list, err := inbox.New(e.rt).ListInterrupts(ctx, lead, service.InterruptFilter{SessionID: "s-esc"}); err != nil || len(list) != 0 {
		t.Fatalf("the lead lists before the escalation: %v %+v", err, list)
	}
	_, err := inbox.New(e.rt).ApproveInterrupt(ctx, lead, it.ID, nil, "")
	wantCode(t, "the lead's approval before the escalation", err, service.CodePermissionDenied)
	if list, err := inbox.New(e.rt).ListInterrupts(ctx, payments, service.InterruptFilter{SessionID: "s-esc"}); err != nil || len(list) != 1 {
		t.Fatalf("payments lists before the escalation: %v %+v", err, list)
	}
	if _, err := inbox.New(e.rt).GetInterrupt(ctx, payments, it.ID, 0); err != nil {
		t.Fatalf("payments reads before the escalation: %v", err)
	}

	e.waitPassed(t, it.ID, "escalate_at")
	n, err := inbox.New(e.rt).SweepEscalations(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want 1 (the other is not due)", n, err)
	}
	if n, err := inbox.New(e.rt).SweepEscalations(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v; want nothing", n, err)
	}

	d, err := inbox.New(e.rt).GetInterrupt(ctx, lead, it.ID, 0)
	if err != nil || d.Scope != "approve:lead" || d.EscalatedAt == nil || d.Status != service.InterruptPending {
		t.Fatalf("the lead reads after the escalation: %v %+v", err, d)
	}
	if list, err := inbox.New(e.rt).ListInterrupts(ctx, lead, service.InterruptFilter{SessionID: "s-esc"}); err != nil || len(list) != 1 {
		t.Fatalf("the lead lists after the escalation: %v %+v", err, list)
	}
	if list, err := inbox.New(e.rt).ListInterrupts(ctx, payments, service.InterruptFilter{SessionID: "s-esc"}); err != nil || len(list) != 0 {
		t.Fatalf("payments lists after the escalation: %v %+v", err, list)
	}
	_, err = inbox.New(e.rt).GetInterrupt(ctx, payments, it.ID, 0)
	wantCode(t, "payments reads after the escalation", err, service.CodePermissionDenied)
	_, err = inbox.New(e.rt).ApproveInterrupt(ctx, payments, it.ID, nil, "")
	wantCode(t, "payments approves after the escalation", err, service.CodePermissionDenied)
	if w, err := inbox.New(e.rt).GetInterrupt(ctx, payments, later.ID, 0); err != nil || w.Scope != "approve:payments" || w.EscalatedAt != nil {
		t.Fatalf("the escalation not yet due: %v %+v", err, w)
	}

	trail, err := inbox.New(e.rt).InterruptEvents(ctx, lead, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	escalated := 0
	for _, ev := range trail {
		if ev.Type == events.Escalated {
			escalated++
			if ev.Actor != "system" || !jsonEq(ev.Payload, `{"from":"approve:payments","to":"approve:lead"}`) {
				t.Errorf("escalated event %+v (payload %s)", ev, ev.Payload)
			}
		}
	}
	if escalated != 1 {
		t.Fatalf("%d escalated events, want 1: %+v", escalated, trail)
	}

	p := hook.wait(t, "interrupt.escalated")
	if p.Actor != "system" || p.TenantID != "default" || p.Data.Interrupt == nil || p.Data.Interrupt.ID != it.ID {
		t.Fatalf("webhook %+v", p)
	}

	res, err := inbox.New(e.rt).ApproveInterrupt(ctx, lead, it.ID, nil, "escalated to me")
	if err != nil || res.Status != "resumed" {
		t.Fatalf("the lead's approval: %v %+v", err, res)
	}
	if got := tr.ran(); len(got) != 1 {
		t.Fatalf("ran %v, want once", got)
	}
}

// TestEscalationLeavesTheDeadline: escalation only reassigns; the tool's
// deadline stays where it was and expires the interrupt at its time, and
// an expired interrupt is never escalated.
func TestEscalationLeavesTheDeadline(t *testing.T) {
	t.Parallel()
	e := newEscalationEnv(t)
	ctx := context.Background()
	tool := gatedTool(&approval.Policy{
		Scope: "approve:payments", Escalate: &approval.Escalation{After: 50 * time.Millisecond, Scope: "approve:lead"},
	})
	tool.ExpiresAfter = 150 * time.Millisecond
	registerGated(t, e.rt, "deadline", tool)
	late := gatedTool(&approval.Policy{
		Scope: "approve:payments", Escalate: &approval.Escalation{After: time.Hour, Scope: "approve:lead"},
	})
	late.ExpiresAfter = 50 * time.Millisecond
	registerGated(t, e.rt, "tooLate", late)
	_, it := pauseOnGate(t, e.rt, "deadline", "s-deadline", "9000")
	_, gone := pauseOnGate(t, e.rt, "tooLate", "s-gone", "9000")
	if it.ExpiresAt == nil {
		t.Fatal("no deadline")
	}
	e.waitPassed(t, it.ID, "escalate_at")
	if n, err := inbox.New(e.rt).SweepEscalations(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	lead := approver("lead", "approve:lead")
	d, err := inbox.New(e.rt).GetInterrupt(ctx, lead, it.ID, 0)
	if err != nil || d.ExpiresAt == nil || !d.ExpiresAt.Equal(*it.ExpiresAt) || d.Status != service.InterruptPending {
		t.Fatalf("after the escalation: %v %+v, deadline was %v", err, d, it.ExpiresAt)
	}
	e.waitPassed(t, it.ID, "expires_at")
	e.waitPassed(t, gone.ID, "expires_at")
	if n, err := inbox.New(e.rt).SweepDeadlines(ctx); err != nil || n != 2 {
		t.Fatalf("deadline sweep: %d, %v; want both", n, err)
	}
	if d, err := inbox.New(e.rt).GetInterrupt(ctx, lead, it.ID, 0); err != nil || d.Status != service.InterruptExpired {
		t.Fatalf("the escalated interrupt at its deadline: %v %+v", err, d)
	}
	// Its escalation comes due after its expiry: nothing to escalate.
	if _, err := e.admin.Exec(ctx, "UPDATE interrupts SET escalate_at = now() WHERE id = $1", gone.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := inbox.New(e.rt).SweepEscalations(ctx); err != nil || n != 0 {
		t.Fatalf("sweep after the deadline: %d, %v; want nothing", n, err)
	}
	if g, err := inbox.New(e.rt).GetInterrupt(ctx, approver("pay", "approve:payments"), gone.ID, 0); err != nil || g.Scope != "approve:payments" || g.EscalatedAt != nil {
		t.Fatalf("an expired interrupt was escalated: %v %+v", err, g)
	}
}

// gatedTool is transferMoney under policy (see gatedAgent), whose runs
// are not recorded.
func gatedTool(policy *approval.Policy) *service.Tool {
	return &service.Tool{
		Name:        "transferMoney",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
		Approval:    policy,
		Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		},
	}
}

// registerGated registers an agent whose model calls tool as gatedAgent's
// does (pauseOnGate drives it).
func registerGated(t *testing.T, rt *service.Runtime, name string, tool *service.Tool) {
	t.Helper()
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleUser {
			amount := strings.TrimPrefix(*last.Content[0].Text, "pay ")
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: tool.Name, Ref: "t1", Input: json.RawMessage(`{"to":"mallory","amount":` + amount + `}`)}},
			}}
		}
		return text(service.RoleModel, "done")
	}}
	if err := rt.Register(&service.Agent{Name: name, ServerManaged: true, Model: model, Tools: []*service.Tool{tool}}); err != nil {
		t.Fatal(err)
	}
}

// TestDeadlineSweeperEscalates: the background sweeper escalates too.
func TestDeadlineSweeperEscalates(t *testing.T) {
	t.Parallel()
	e := newEscalationEnv(t)
	gatedAgent(t, e.rt, "swept", &approval.Policy{
		Scope: "approve:payments", Escalate: &approval.Escalation{After: 50 * time.Millisecond, Scope: "approve:lead"},
	})
	_, it := pauseOnGate(t, e.rt, "swept", "s-swept", "9000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inbox.New(e.rt).RunDeadlineSweeper(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitPassed(t, it.ID, "escalated_at")
	d, err := inbox.New(e.rt).GetInterrupt(context.Background(), approver("lead", "approve:lead"), it.ID, 0)
	if err != nil || d.Scope != "approve:lead" {
		t.Fatalf("after the sweeper: %v %+v", err, d)
	}
}
