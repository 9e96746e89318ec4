package tenantagents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/store"
)

// gatedPrompt is an agent whose pay tool is gated above 1000, and whose
// lookup tool is not.
func (e *env) gatedPrompt(approval string) string {
	return fmt.Sprintf(`---
name: payer
model: scripted
holdpoint:
  httpTools:
    - name: pay
      url: %s/pay
%s
      input: {schema: {amount: number, to: string}}
      output: {schema: {ok: boolean}}
    - name: lookup
      url: %s/lookup
      input: {schema: {id: string}}
      output: {schema: {ok: boolean}}
---
You pay.
`, e.recv.srv.URL, approval, e.recv.srv.URL)
}

// TestHTTPToolApprovalPolicy checks the built agent's gated tool carries
// the definition's policy, whose condition sees the call's input.
func TestHTTPToolApprovalPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme := e.tenants["acme"]
	src := e.gatedPrompt(`      approval:
        when: "input.amount > 1000"
        scope: approve:payments
        approvals: 2
        allowEdit: true
        attempts: 4
        escalate: {after: 30m, scope: approve:payments-lead}`)
	if _, err := e.m.Put(ctx, acme, "payer", []byte(src)); err != nil {
		t.Fatal(err)
	}
	a, err := e.m.TenantAgent(ctx, "acme", "payer", 0)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*service.Tool{}
	for _, tool := range a.Tools {
		tools[tool.Name] = tool
	}
	pay, lookup := tools["pay"], tools["lookup"]
	if lookup == nil || lookup.Approval != nil || !lookup.Idempotent {
		t.Fatalf("lookup = %+v: want no policy, idempotent", lookup)
	}
	p := pay.Approval
	if p == nil || pay.Idempotent || p.Scope != "approve:payments" || p.Approvals != 2 || !p.AllowEdit || p.Attempts != 4 ||
		p.Escalate == nil || *p.Escalate != (approval.Escalation{After: 30 * time.Minute, Scope: "approve:payments-lead"}) || p.When == nil {
		t.Fatalf("pay = %+v, policy %+v: want the definition's policy, not idempotent", pay, p)
	}
	for in, want := range map[string]bool{`{"amount":500,"to":"a"}`: false, `{"amount":5000,"to":"a"}`: true} {
		if got, err := p.When(ctx, json.RawMessage(in)); err != nil || got != want {
			t.Errorf("When(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	// A failed condition is an error, never a call that runs unasked.
	if _, err := p.When(ctx, json.RawMessage(`{"to":"a"}`)); err == nil || !strings.Contains(err.Error(), "tool pay") {
		t.Errorf("When without amount: %v", err)
	}
	// The agent is built once per version: the same policy, compiled once.
	again, err := e.m.TenantAgent(ctx, "acme", "payer", 0)
	if err != nil || again.Tools[0].Approval != p {
		t.Errorf("second build: %v, policy %p != %p", err, again.Tools[0].Approval, p)
	}

	// approval: true is the empty policy: every call, one approval.
	if _, err := e.m.Put(ctx, acme, "payer", []byte(e.gatedPrompt("      approval: true"))); err != nil {
		t.Fatal(err)
	}
	a, err = e.m.TenantAgent(ctx, "acme", "payer", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Tools[0].Approval; p == nil || a.Tools[0].Idempotent || p.When != nil || p.Scope != "" || p.Approvals != 0 || p.Escalate != nil {
		t.Fatalf("approval: true: %+v", p)
	}
}

// TestBadApprovalPoliciesAreRefused checks a policy that does not hold is
// a 400 at apply naming the tool and the condition, and stores nothing.
func TestBadApprovalPoliciesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme := e.tenants["acme"]
	for _, tc := range []struct{ name, approval, field, want string }{
		{"syntax", `      approval: {when: "input.amount >"}`, "holdpoint.httpTools[0].approval.when", `tool pay: the condition "input.amount >" does not compile`},
		{"not a boolean", `      approval: {when: "input.amount * 2.0"}`, "holdpoint.httpTools[0].approval.when", `tool pay: the condition "input.amount * 2.0" is of type double: a condition must be a boolean`},
		{"unknown variable", `      approval: {when: "amount > 1"}`, "holdpoint.httpTools[0].approval.when", "undeclared reference to 'amount'"},
		{"too many approvals", `      approval: {approvals: 50}`, "holdpoint.httpTools[0].approval.approvals", "from 1 to 10"},
		{"bad scope", `      approval: {scope: "a b"}`, "holdpoint.httpTools[0].approval.scope", "letters, digits"},
	} {
		_, err := e.m.Put(ctx, acme, "payer", []byte(e.gatedPrompt(tc.approval)))
		var se *store.Error
		if !errors.As(err, &se) || se.Status != store.CodeInvalidArgument || !strings.Contains(se.Message, tc.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT with %q", tc.name, err, tc.want)
			continue
		}
		if d, _ := se.Details.(map[string]any); d["field"] != tc.field {
			t.Errorf("%s: details %v, want field %s", tc.name, se.Details, tc.field)
		}
	}
	var n int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM tenant_agent_versions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad policies stored %d versions (%v)", n, err)
	}
}
