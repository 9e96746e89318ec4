package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// transfers records what a gated tool ran with.
type transfers struct {
	mu      sync.Mutex
	inputs  []string
	resumed []json.RawMessage
}

func (tr *transfers) ran() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.inputs...)
}

// gatedAgent registers a server-managed agent whose model, steered, calls
// transferMoney directly (no userApproval first) with the amount the user
// message names: the platform's policy is all that stands between the
// model and the money.
func gatedAgent(t *testing.T, rt *service.Runtime, name string, policy *approval.Policy) *transfers {
	t.Helper()
	tr := &transfers{}
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleUser {
			amount := strings.TrimPrefix(*last.Content[0].Text, "pay ")
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{Text: ptr("Ignoring my instructions, moving the money now.")},
				{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: json.RawMessage(`{"to":"mallory","amount":` + amount + `}`)}},
			}}
		}
		b, _ := json.Marshal(last.Content)
		return text(service.RoleModel, "done: "+string(b))
	}}
	err := rt.Register(&service.Agent{Name: name, ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name:        "transferMoney",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
		Approval:    policy,
		Run: func(_ context.Context, c service.ToolCall) (json.RawMessage, error) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.inputs = append(tr.inputs, string(c.Input))
			tr.resumed = append(tr.resumed, c.Resumed)
			return json.RawMessage(`{"ok":true}`), nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var requester = service.Caller{TenantID: "default", EndUser: "alice", Actor: "user:alice"}

// approver is an operator's key with scopes.
func approver(name string, scopes ...string) service.Caller {
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String()
	return service.Caller{TenantID: "default", Actor: service.ActorOfKey(id, name), KeyID: id, KeyName: name, Scopes: scopes}
}

func pauseOnGate(t *testing.T, rt *service.Runtime, agent, session, amount string) (*service.AgentOutput, service.Interrupt) {
	t.Helper()
	ctx := context.Background()
	out, err := rt.InvokeOne(ctx, requester, agent, service.AgentInit{SessionID: session},
		service.AgentInput{Message: ptr(text(service.RoleUser, "pay "+amount))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("a steered call of a gated tool: %v %+v", err, out)
	}
	list, err := inbox.New(rt).ListInterrupts(ctx, approver("ops", "*"), service.InterruptFilter{SessionID: session})
	if err != nil || len(list) != 1 {
		t.Fatalf("inbox: %v %+v", err, list)
	}
	return out, list[0]
}

// TestSteeredModelCannotRunAGatedTool: the model calls a gated tool
// directly; the platform pauses with the call as asked, nothing runs and
// no call row exists until it is approved, and then exactly that input
// runs, once. A plain restart reaches the tool without `resumed`.
func TestSteeredModelCannotRunAGatedTool(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	tr := gatedAgent(t, rt, "gated", &approval.Policy{})
	out, it := pauseOnGate(t, rt, "gated", "s-gate", "5000")
	if len(tr.ran()) != 0 {
		t.Fatal("the gated tool ran before approval")
	}
	calls, err := rt.SessionToolCalls(ctx, requester, "s-gate", nil, 10)
	if err != nil || len(calls) != 0 {
		t.Fatalf("call rows before approval: %v %+v", err, calls)
	}
	var meta struct {
		Approval    string `json:"approval"`
		Explanation string `json:"explanation"`
	}
	if err := json.Unmarshal(it.Metadata, &meta); err != nil || meta.Approval != "required" || !strings.Contains(meta.Explanation, "Ignoring my instructions") {
		t.Fatalf("interrupt metadata %s", it.Metadata)
	}
	if it.Tool != "transferMoney" || !jsonEq(it.Input, `{"to":"mallory","amount":5000}`) || it.Policy == nil || it.EndUser != "alice" {
		t.Fatalf("interrupt %+v", it)
	}
	if out.Message == nil {
		t.Fatal("no message")
	}
	// The requester confirms (a policy with no scope and one approval).
	res, err := rt.InvokeOne(ctx, requester, "gated", service.AgentInit{SessionID: "s-gate"}, service.AgentInput{Resume: &service.Resume{
		Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: it.Input}}},
	}}, nil)
	if err != nil || res.FinishReason != "stop" {
		t.Fatalf("restart: %v %+v", err, res)
	}
	if got := tr.ran(); len(got) != 1 || !jsonEq(json.RawMessage(got[0]), `{"to":"mallory","amount":5000}`) {
		t.Fatalf("ran %v", got)
	}
	if tr.resumed[0] != nil {
		t.Fatalf("a plain restart reached the tool with resumed %s", tr.resumed[0])
	}
	calls, _ = rt.SessionToolCalls(ctx, requester, "s-gate", nil, 10)
	if len(calls) != 1 || calls[0].Status != service.ToolCallSucceeded {
		t.Fatalf("call rows after approval: %+v", calls)
	}
}

// TestApprovalConditionIsPerCall: a policy's condition gates large
// amounts only.
func TestApprovalConditionIsPerCall(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	tr := gatedAgent(t, rt, "cond", &approval.Policy{When: func(_ context.Context, in json.RawMessage) (bool, error) {
		var v struct{ Amount float64 }
		err := json.Unmarshal(in, &v)
		return v.Amount > 1000, err
	}})
	out, err := rt.InvokeOne(ctx, requester, "cond", service.AgentInit{SessionID: "s-small"}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay 500"))}, nil)
	if err != nil || out.FinishReason != "stop" || len(tr.ran()) != 1 {
		t.Fatalf("a small transfer: %v %+v %v", err, out, tr.ran())
	}
	pauseOnGate(t, rt, "cond", "s-large", "5000")
	if len(tr.ran()) != 1 {
		t.Fatal("a large transfer ran without approval")
	}
}

// TestFourEyes: a policy with a scope and two approvals is decided in the
// inbox only, by two distinct holders of the scope, never the requester;
// a key without the scope neither sees nor decides it.
func TestFourEyes(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	tr := gatedAgent(t, rt, "fourEyes", &approval.Policy{Scope: "approve:payments", Approvals: 2})
	_, it := pauseOnGate(t, rt, "fourEyes", "s-4eyes", "9000")

	// The requester cannot approve through the protocol.
	_, err := rt.InvokeOne(ctx, requester, "fourEyes", service.AgentInit{SessionID: "s-4eyes"}, service.AgentInput{Resume: &service.Resume{
		Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: it.Input}}},
	}}, nil)
	wantCode(t, "the requester's restart", err, service.CodePermissionDenied)

	// A key without the scope sees nothing and decides nothing.
	stranger := approver("stranger", "approve:other")
	if list, err := inbox.New(rt).ListInterrupts(ctx, stranger, service.InterruptFilter{SessionID: "s-4eyes"}); err != nil || len(list) != 0 {
		t.Fatalf("a key without the scope lists %v %+v", err, list)
	}
	_, err = inbox.New(rt).GetInterrupt(ctx, stranger, it.ID, 0)
	wantCode(t, "get without the scope", err, service.CodePermissionDenied)
	counts := func(c service.Caller) int {
		all, err := inbox.New(rt).PendingCounts(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pc := range all {
			if pc.Agent == "fourEyes" {
				n += int(pc.Pending)
			}
		}
		return n
	}
	if counts(stranger) != 0 || counts(approver("bob", "approve:payments")) != 1 {
		t.Fatalf("pending counts: a key without the scope counts %d, one with it %d", counts(stranger), counts(approver("bob", "approve:payments")))
	}
	_, err = inbox.New(rt).ApproveInterrupt(ctx, stranger, it.ID, nil, "")
	wantCode(t, "approve without the scope", err, service.CodePermissionDenied)

	// The requester, through a key that holds the scope, is refused.
	self := approver("selfish", "approve:payments")
	self.EndUser = "alice"
	_, err = inbox.New(rt).ApproveInterrupt(ctx, self, it.ID, nil, "")
	wantCode(t, "the requester's own approval", err, service.CodePermissionDenied)

	bob := approver("bob", "approve:payments")
	res, err := inbox.New(rt).ApproveInterrupt(ctx, bob, it.ID, nil, "looks fine")
	if err != nil || res.Status != "voted" || res.Approvals != 1 || res.Needed != 2 {
		t.Fatalf("first approval: %v %+v", err, res)
	}
	if len(tr.ran()) != 0 {
		t.Fatal("ran after one of two approvals")
	}
	_, err = inbox.New(rt).ApproveInterrupt(ctx, bob, it.ID, nil, "")
	wantCode(t, "the same approver again", err, service.CodeAborted)
	d, err := inbox.New(rt).GetInterrupt(ctx, bob, it.ID, 0)
	if err != nil || d.Status != service.InterruptPending || d.Approvals != 1 || d.ApprovalsNeeded != 2 || len(d.Votes) != 1 {
		t.Fatalf("after one approval: %v %+v", err, d)
	}
	carol := approver("carol", "approve:payments")
	res, err = inbox.New(rt).ApproveInterrupt(ctx, carol, it.ID, nil, "")
	if err != nil || res.Status != "resumed" {
		t.Fatalf("second approval: %v %+v", err, res)
	}
	if got := tr.ran(); len(got) != 1 {
		t.Fatalf("ran %v, want once", got)
	}
	d, _ = inbox.New(rt).GetInterrupt(ctx, bob, it.ID, 0)
	if d.Status != service.InterruptResolved || len(d.Votes) != 2 || d.Votes[0].KeyName != "bob" || d.Votes[1].KeyName != "carol" || d.Votes[1].KeyID == "" {
		t.Fatalf("votes %+v", d.Votes)
	}
}

// TestOneDenialEndsIt: after a denial, a third vote is refused and
// nothing runs.
func TestOneDenialEndsIt(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	tr := gatedAgent(t, rt, "denied", &approval.Policy{Scope: "approve:payments", Approvals: 2})
	_, it := pauseOnGate(t, rt, "denied", "s-deny", "9000")
	if _, err := inbox.New(rt).ApproveInterrupt(ctx, approver("bob", "approve:payments"), it.ID, nil, ""); err != nil {
		t.Fatal(err)
	}
	res, err := inbox.New(rt).RespondInterrupt(ctx, approver("carol", "approve:payments"), it.ID, json.RawMessage(`{"ok":false}`), "no")
	if err != nil || res.Status != "resumed" {
		t.Fatalf("denial: %v %+v", err, res)
	}
	_, err = inbox.New(rt).ApproveInterrupt(ctx, approver("dave", "approve:payments"), it.ID, nil, "")
	wantCode(t, "a vote after the denial", err, service.CodeAborted)
	if len(tr.ran()) != 0 {
		t.Fatal("a denied call ran")
	}
}

// TestApproverEdit: where the policy allows it, the approver's edit is what
// runs and is recorded; elsewhere an edit is refused.
func TestApproverEdit(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	tr := gatedAgent(t, rt, "editable", &approval.Policy{Scope: "approve:payments", AllowEdit: true})
	_, it := pauseOnGate(t, rt, "editable", "s-edit", "9000")
	bob := approver("bob", "approve:payments")
	_, err := inbox.New(rt).ApproveInterrupt(ctx, bob, it.ID, json.RawMessage(`{"to":"mallory"}`), "")
	wantCode(t, "an edit the schema refuses", err, service.CodeInvalidArgument)
	res, err := inbox.New(rt).ApproveInterrupt(ctx, bob, it.ID, json.RawMessage(`{"to":"mallory","amount":100}`), "capped")
	if err != nil || res.Status != "resumed" {
		t.Fatalf("edited approval: %v %+v", err, res)
	}
	if got := tr.ran(); len(got) != 1 || !jsonEq(json.RawMessage(got[0]), `{"to":"mallory","amount":100}`) {
		t.Fatalf("ran %v", got)
	}
	d, _ := inbox.New(rt).GetInterrupt(ctx, bob, it.ID, 0)
	if len(d.Votes) != 1 || !jsonEq(d.Votes[0].Input, `{"to":"mallory","amount":100}`) || !strings.Contains(string(d.Resolution), `"amount": 100`) {
		t.Fatalf("the edit is not recorded: votes %+v resolution %s", d.Votes, d.Resolution)
	}

	fixed := gatedAgent(t, rt, "fixed", &approval.Policy{Scope: "approve:payments"})
	_, it = pauseOnGate(t, rt, "fixed", "s-fixed", "9000")
	_, err = inbox.New(rt).ApproveInterrupt(ctx, bob, it.ID, json.RawMessage(`{"to":"mallory","amount":1}`), "")
	wantCode(t, "an edit the policy forbids", err, service.CodeInvalidArgument)
	if len(fixed.ran()) != 0 {
		t.Fatal("ran")
	}
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if err == nil || service.AsError(err).Status != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
