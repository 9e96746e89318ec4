package agentkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestToolApprovalPolicy checks a tool's Approval becomes the runtime
// tool's policy, whose When sees the typed input.
func TestToolApprovalPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen []Transfer
	tool, err := agentkit.Tool[Transfer, Receipt]{
		Name: "transferMoney",
		Run:  func(context.Context, Transfer) (Receipt, error) { return Receipt{Success: true}, nil },
		Approval: &agentkit.Approval[Transfer]{
			When: func(_ context.Context, in Transfer) bool {
				seen = append(seen, in)
				return in.Amount > 1000
			},
			Scope: "approve:payments", Approvals: 2, AllowEdit: true, Attempts: 4,
			Escalate: &approval.Escalation{After: time.Hour, Scope: "approve:payments-lead"},
		},
	}.ServiceTool()
	if err != nil {
		t.Fatal(err)
	}
	p := tool.Approval
	if p == nil || p.Scope != "approve:payments" || p.Approvals != 2 || !p.AllowEdit || p.Attempts != 4 || p.When == nil ||
		p.Escalate == nil || *p.Escalate != (approval.Escalation{After: time.Hour, Scope: "approve:payments-lead"}) {
		t.Fatalf("policy = %+v", p)
	}
	for in, want := range map[string]bool{`{"amount":500,"toAccount":"1"}`: false, `{"amount":5000,"toAccount":"2"}`: true} {
		if got, err := p.When(ctx, json.RawMessage(in)); err != nil || got != want {
			t.Errorf("When(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	if len(seen) != 2 || (seen[0].ToAccount != "1" && seen[1].ToAccount != "1") {
		t.Errorf("When saw %+v, want the typed inputs", seen)
	}
	// An input that does not decode into In is an error, not a decision.
	_, err = p.When(ctx, json.RawMessage(`{"amount":"lots"}`))
	var se *store.Error
	if !errors.As(err, &se) || se.Status != store.CodeInvalidArgument || !strings.Contains(se.Message, "tool transferMoney: input") {
		t.Errorf("When on a bad input: %v", err)
	}

	// No When: every call; no Approval: no policy.
	every, err := agentkit.Tool[Transfer, Receipt]{Name: "t", Run: func(context.Context, Transfer) (Receipt, error) { return Receipt{}, nil },
		Approval: &agentkit.Approval[Transfer]{}}.ServiceTool()
	if err != nil || every.Approval == nil || every.Approval.When != nil || every.Approval.MakerChecker() {
		t.Errorf("the zero Approval: %v %+v", err, every)
	}
	free, err := agentkit.Tool[Transfer, Receipt]{Name: "t", Run: func(context.Context, Transfer) (Receipt, error) { return Receipt{}, nil }}.ServiceTool()
	if err != nil || free.Approval != nil {
		t.Errorf("no Approval: %v %+v", err, free.Approval)
	}
}

// TestBadApprovalPolicyIsRefused checks ServiceTool, and so the agent,
// refuses a policy that does not validate, naming the agent and the tool.
func TestBadApprovalPolicyIsRefused(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, Transfer) (Receipt, error) { return Receipt{}, nil }
	for _, tc := range []struct {
		approval agentkit.Approval[Transfer]
		want     string
	}{
		{agentkit.Approval[Transfer]{Approvals: 11}, "approvals must be between 1 and 10"},
		{agentkit.Approval[Transfer]{Approvals: -1}, "approvals must be between"},
		{agentkit.Approval[Transfer]{Attempts: 21}, "attempts must be between 1 and 20"},
		{agentkit.Approval[Transfer]{Scope: "approve payments"}, "must be 1-64 letters"},
		{agentkit.Approval[Transfer]{Escalate: &approval.Escalation{Scope: "lead"}}, "escalate.after must be a positive duration"},
		{agentkit.Approval[Transfer]{Escalate: &approval.Escalation{After: time.Minute}}, "escalate.scope"},
	} {
		a := tc.approval
		def := agentkit.Agent{Name: "payer", Tools: []agentkit.ToolDef{agentkit.Tool[Transfer, Receipt]{Name: "pay", Run: noop, Approval: &a}}}
		_, err := def.ServiceAgent(func(string) protocol.Model { return nil })
		if err == nil || !strings.Contains(err.Error(), "agent payer") || !strings.Contains(err.Error(), "tool pay: approval: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.approval, err, tc.want)
		}
	}
}
