package agentdef_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/agentdef"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/store"
)

func TestParseApprovalPolicy(t *testing.T) {
	t.Parallel()
	d := mustParse(t, readFile(t, "testdata/payments.prompt"))
	if len(d.HTTPTools) != 2 {
		t.Fatalf("HTTPTools = %+v", d.HTTPTools)
	}
	want := agentdef.Approval{When: "input.amount > 1000 || input.currency != 'EUR'", Scope: "approve:payments", Approvals: 2,
		AllowEdit: true, Attempts: 3, Escalate: &approval.Escalation{After: 30 * time.Minute, Scope: "approve:payments-lead"}}
	got := d.HTTPTools[0].Approval
	if got == nil || got.When != want.When || got.Scope != want.Scope || got.Approvals != want.Approvals || !got.AllowEdit ||
		got.Attempts != want.Attempts || got.Escalate == nil || *got.Escalate != *want.Escalate {
		t.Errorf("payInvoice approval = %+v, want %+v", got, want)
	}
	if d.HTTPTools[1].Approval != nil {
		t.Errorf("lookupInvoice (approval: false) approval = %+v, want none", d.HTTPTools[1].Approval)
	}

	// The JSON form writes the mapping, and true for the empty policy.
	out, err := agentdef.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var form struct {
		Holdpoint struct {
			HTTPTools []struct {
				Approval json.RawMessage `json:"approval"`
			} `json:"httpTools"`
		} `json:"holdpoint"`
	}
	if err := json.Unmarshal(out, &form); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "payInvoice approval", form.Holdpoint.HTTPTools[0].Approval, `{"when": "input.amount > 1000 || input.currency != 'EUR'",
		"scope": "approve:payments", "approvals": 2, "allowEdit": true, "attempts": 3,
		"escalate": {"after": "30m", "scope": "approve:payments-lead"}}`)
	if form.Holdpoint.HTTPTools[1].Approval != nil {
		t.Errorf("lookupInvoice approval written as %s", form.Holdpoint.HTTPTools[1].Approval)
	}
	d.HTTPTools[1].Approval = &agentdef.Approval{}
	if out, err = agentdef.Marshal(d); err != nil || !strings.Contains(string(out), `"approval":true`) {
		t.Errorf("the empty policy: %v\n%s", err, out)
	}
	for _, src := range []string{`true`, `{}`} {
		back, err := agentdef.ParseJSON([]byte(`{"model": "demo", "holdpoint": {"httpTools": [{"name": "t", "url": "https://x.example/t", "approval": ` + src +
			`, "input": {"schema": {"a": "string"}}, "output": {"schema": {"b": "string"}}}]}}`))
		if err != nil || back.HTTPTools[0].Approval == nil || *back.HTTPTools[0].Approval != (agentdef.Approval{}) {
			t.Errorf("approval %s: %v, %+v", src, err, back)
		}
	}
}

func TestApprovalPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := &agentdef.Approval{When: "input.amount > 1000", Scope: "approve:payments", Approvals: 2, AllowEdit: true, Attempts: 5,
		Escalate: &approval.Escalation{After: time.Hour, Scope: "approve:lead"}}
	p, err := a.Policy("pay")
	if err != nil {
		t.Fatal(err)
	}
	if p.Scope != a.Scope || p.Approvals != 2 || !p.AllowEdit || p.Attempts != 5 || p.Escalate == nil ||
		*p.Escalate != (approval.Escalation{After: time.Hour, Scope: "approve:lead"}) || p.When == nil {
		t.Fatalf("policy = %+v", p)
	}
	for in, want := range map[string]bool{`{"amount": 500}`: false, `{"amount": 5000}`: true, `{"amount": 1000.5}`: true, `{"amount": 1000}`: false} {
		if got, err := p.When(ctx, json.RawMessage(in)); err != nil || got != want {
			t.Errorf("When(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Whatever fails is an error (the engine then runs nothing).
	for _, tc := range []struct{ when, input, msg string }{
		{"input.amount > 1000", `{}`, "no such key: amount"},
		{"input.amount > 1000", `not json`, "not JSON"},
		{"input.amount > 1000", ``, "amount"},
		{"input.flag", `{"flag": "yes"}`, "gave a string, not a boolean"},
		{"input.items.all(a, input.items.all(b, a <= b || a > b))", `{"items": [` + strings.TrimSuffix(strings.Repeat("1,", 500), ",") + `]}`, "cost limit exceeded"},
	} {
		p, err := (&agentdef.Approval{When: tc.when}).Policy("pay")
		if err != nil {
			t.Fatalf("%s: %v", tc.when, err)
		}
		_, err = p.When(ctx, json.RawMessage(tc.input))
		var se *store.Error
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "tool pay") || !errors.As(err, &se) {
			t.Errorf("When %q on %s: %v, want a service error with %q", tc.when, tc.input, err, tc.msg)
		}
	}
	// No condition: every call (When nil).
	if p, err := (&agentdef.Approval{}).Policy("pay"); err != nil || p.When != nil {
		t.Errorf("empty policy = %+v, %v", p, err)
	}
	if _, err := (&agentdef.Approval{Approvals: 11}).Policy("pay"); err == nil || !strings.Contains(err.Error(), "tool pay: approval: approvals") {
		t.Errorf("11 approvals: %v", err)
	}
	if _, err := (&agentdef.Approval{When: "input +"}).Policy("pay"); err == nil || !strings.Contains(err.Error(), `tool pay: approval.when: the condition "input +" does not compile`) {
		t.Errorf("bad condition: %v", err)
	}
}

func TestCompileCondition(t *testing.T) {
	t.Parallel()
	for expr, ok := range map[string]bool{
		"input.amount > 1000": true,
		"input":               true, // dyn: checked when it runs
		"has(input.to) && input.to.startsWith('DE')":    true,
		"input.amount > 1000 && size(input.lines) < 10": true,
		"input.amount":         true,
		"input.amount + 1 > 2": true,
		"1 + 1":                false,
		"'yes'":                false,
		"size(input)":          false,
		"input.":               false,
		"":                     false,
		"env.secret == 1":      false,
	} {
		_, err := agentdef.CompileCondition(expr)
		if (err == nil) != ok {
			t.Errorf("CompileCondition(%q) = %v, want ok %v", expr, err, ok)
		}
	}
	_, err := agentdef.CompileCondition(strings.Repeat("x", 1001))
	if err == nil || !strings.Contains(err.Error(), "more than the 1000 allowed") {
		t.Errorf("long condition: %v", err)
	}
}
