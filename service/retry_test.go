package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// flakyTransfers is a gated transfer tool that fails its first failures
// runs, recording the call id of every run.
type flakyTransfers struct {
	mu       sync.Mutex
	ids      []string
	failures atomic.Int32
}

func (f *flakyTransfers) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func flakyAgent(t *testing.T, rt *service.Runtime, name string, failures int32, policy *approval.Policy) *flakyTransfers {
	t.Helper()
	f := &flakyTransfers{}
	f.failures.Store(failures)
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		if last := req.Messages[len(req.Messages)-1]; last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: json.RawMessage(`{"to":"bob","amount":70}`)}}}}
		}
		return text(service.RoleModel, "transferred")
	}}
	err := rt.Register(&service.Agent{Name: name, ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name: "transferMoney", Approval: policy,
		Run: func(_ context.Context, c service.ToolCall) (json.RawMessage, error) {
			f.mu.Lock()
			f.ids = append(f.ids, c.ID)
			f.mu.Unlock()
			if f.failures.Add(-1) >= 0 {
				return nil, errors.New("the bank is down")
			}
			return json.RawMessage(`{"ok":true}`), nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// failApproved pauses a session on the gated call and approves it in the
// inbox; the tool fails, so the turn ends failed.
func failApproved(t *testing.T, rt *service.Runtime, agent, session string) (service.Interrupt, *service.ToolCallRecord) {
	t.Helper()
	ctx := context.Background()
	_, it := pauseOnGate(t, rt, agent, session, "70")
	res, err := inbox.New(rt).ApproveInterrupt(ctx, approver("ops", "*"), it.ID, nil, "")
	if err != nil || res.Output == nil || res.Output.FinishReason != "failed" {
		t.Fatalf("approval of a call that fails: %v %+v", err, res)
	}
	snap, err := rt.GetSnapshot(ctx, requester, agent, service.SnapshotLookup{SessionID: session})
	if err != nil || snap.Status != service.StatusFailed {
		t.Fatalf("the session's head after the failure: %v %+v", err, snap)
	}
	calls, err := rt.SessionToolCalls(ctx, requester, session, nil, 10)
	if err != nil || len(calls) != 1 || calls[0].Status != service.ToolCallFailed || calls[0].Error == nil || calls[0].Attempt != 1 {
		t.Fatalf("the failed call: %v %+v", err, calls)
	}
	return it, &calls[0]
}

// TestApprovedCallThatFailsIsRetriedFromTheProtocol: the same resume sent
// again by sessionId retries the approved call, with the same call id,
// without a new approval; the session goes on.
func TestApprovedCallThatFailsIsRetriedFromTheProtocol(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	f := flakyAgent(t, rt, "flakyProto", 1, &approval.Policy{})
	_, it := pauseOnGate(t, rt, "flakyProto", "s-proto", "70")
	restart := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: it.Input}}}}}
	out, err := rt.InvokeOne(ctx, requester, "flakyProto", service.AgentInit{SessionID: "s-proto"}, restart, nil)
	if err != nil || out.FinishReason != "failed" {
		t.Fatalf("the approved run: %v %+v", err, out)
	}
	out, err = rt.InvokeOne(ctx, requester, "flakyProto", service.AgentInit{SessionID: "s-proto"}, restart, nil)
	if err != nil || out.FinishReason != "stop" {
		t.Fatalf("the same resume again: %v %+v", err, out)
	}
	runs := f.runs()
	if len(runs) != 2 || runs[0] != runs[1] {
		t.Fatalf("runs %v: want two with the same call id", runs)
	}
	calls, _ := rt.SessionToolCalls(ctx, requester, "s-proto", nil, 10)
	if len(calls) != 2 || calls[1].Status != service.ToolCallSucceeded || calls[1].Attempt != 2 || calls[1].CallID != runs[0] {
		t.Fatalf("calls %+v", calls)
	}
	// Once it succeeded, the same resume answers its outcome: nothing runs.
	if out, err = rt.InvokeOne(ctx, requester, "flakyProto", service.AgentInit{SessionID: "s-proto"}, restart, nil); err != nil && service.AsError(err).Status != service.CodeAborted {
		t.Fatalf("the resume after success: %v %+v", err, out)
	}
	if len(f.runs()) != 2 {
		t.Fatalf("ran again after success: %v", f.runs())
	}
}

// TestApprovedCallRetriesAreBounded: the inbox retries a failed approved
// call once per request, never beyond the policy's attempts; concurrent
// retries run it once.
func TestApprovedCallRetriesAreBounded(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	f := flakyAgent(t, rt, "flakyInbox", 5, &approval.Policy{Attempts: 3})
	_, first := failApproved(t, rt, "flakyInbox", "s-inbox")
	ops := approver("ops", "*")
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	var second *service.ToolCallRecord
	var mu sync.Mutex
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, err := inbox.New(rt).RetryToolCall(ctx, ops, first.ID, "")
			if err != nil {
				t.Logf("refused: %v", err)
				refused.Add(1)
				return
			}
			ok.Add(1)
			mu.Lock()
			second = rec
			mu.Unlock()
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || len(f.runs()) != 2 {
		t.Fatalf("concurrent retries: %d ran, %d refused, runs %v", ok.Load(), refused.Load(), f.runs())
	}
	if second.Status != service.ToolCallFailed || second.Attempt != 2 {
		t.Fatalf("the second attempt %+v", second)
	}
	third, err := inbox.New(rt).RetryToolCall(ctx, ops, second.ID, "")
	if err != nil || third.Attempt != 3 {
		t.Fatalf("the third attempt: %v %+v", err, third)
	}
	_, err = inbox.New(rt).RetryToolCall(ctx, ops, third.ID, "")
	wantCode(t, "a retry beyond the policy's attempts", err, service.CodeFailedPrecondition)
	_, err = inbox.New(rt).RetryToolCall(ctx, ops, first.ID, "")
	if err == nil {
		t.Fatal("an old attempt was retried")
	}
	runs := f.runs()
	if len(runs) != 3 || runs[0] != runs[1] || runs[1] != runs[2] {
		t.Fatalf("runs %v: want three with one call id", runs)
	}
}

// TestInboxApprovedCallIsRetriedByTheRequester: a maker-checker call the
// inbox approved, whose tool failed, is retried by the requester's resume
// (no new approval: the approvers' stands); the requester's restart before
// the approvals is refused.
func TestInboxApprovedCallIsRetriedByTheRequester(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	f := flakyAgent(t, rt, "flakyChecked", 1, &approval.Policy{Scope: "approve:payments", Approvals: 2})
	_, it := pauseOnGate(t, rt, "flakyChecked", "s-checked", "70")
	restart := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "transferMoney", Ref: "t1", Input: it.Input}}}}}
	_, err := rt.InvokeOne(ctx, requester, "flakyChecked", service.AgentInit{SessionID: "s-checked"}, restart, nil)
	wantCode(t, "the requester's restart before approval", err, service.CodePermissionDenied)
	if _, err := inbox.New(rt).ApproveInterrupt(ctx, approver("bob", "approve:payments"), it.ID, nil, ""); err != nil {
		t.Fatal(err)
	}
	res, err := inbox.New(rt).ApproveInterrupt(ctx, approver("carol", "approve:payments"), it.ID, nil, "")
	if err != nil || res.Output == nil || res.Output.FinishReason != "failed" {
		t.Fatalf("the approved run: %v %+v", err, res)
	}
	out, err := rt.InvokeOne(ctx, requester, "flakyChecked", service.AgentInit{SessionID: "s-checked"}, restart, nil)
	if err != nil || out.FinishReason != "stop" {
		t.Fatalf("the requester's retry: %v %+v", err, out)
	}
	if runs := f.runs(); len(runs) != 2 || runs[0] != runs[1] {
		t.Fatalf("runs %v", runs)
	}
}
