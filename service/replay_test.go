package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

func approvals(a, b string) service.AgentInput {
	return service.AgentInput{Resume: &service.Resume{Respond: []service.Part{
		{ToolResponse: &service.ToolResponse{Name: "approve", Ref: "a", Output: json.RawMessage(a)}},
		{ToolResponse: &service.ToolResponse{Name: "approve", Ref: "b", Output: json.RawMessage(b)}},
	}}}
}

// TestResumeRetryReplays checks a resume sent again (its first answer
// lost after the turn committed) answers the first turn's outcome, with
// no second tool run, and that a different answer is refused as already
// decided, saying where the outcome is.
func TestResumeRetryReplays(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	paid := servicetest.TwoApprovalsAgent(t, rt, 0, nil)
	base, _ := servicetest.PausedInterrupts(t, rt, testCaller, "s-replay")
	init := service.AgentInit{SnapshotID: base}
	first, err := rt.InvokeOne(ctx, testCaller, "approver", init, approvals(`{"approved":true}`, `{"approved": true}`), nil)
	if err != nil || first.FinishReason != "stop" {
		t.Fatalf("first resume: %v %+v", err, first)
	}
	// The same payload, written differently: the same JSON.
	again, err := rt.InvokeOne(ctx, testCaller, "approver", init, approvals(`{ "approved": true }`, `{"approved":true}`), nil)
	if err != nil || again.SnapshotID != first.SnapshotID || again.FinishReason != first.FinishReason {
		t.Fatalf("retry: %v %+v, want snapshot %s", err, again, first.SnapshotID)
	}
	if again.Message == nil || len(again.Message.Content) == 0 || again.Message.Content[0].Text == nil || *again.Message.Content[0].Text != "done" {
		t.Fatalf("retry output message: %+v", again.Message)
	}
	if paid.Load() != 2 {
		t.Fatalf("pay ran %d times, want 2", paid.Load())
	}
	_, err = rt.InvokeOne(ctx, testCaller, "approver", init, approvals(`{"approved":false}`, `{"approved":true}`), nil)
	var e *service.Error
	if !errors.As(err, &e) || e.Status != service.CodeAborted || !strings.Contains(e.Message, "already decided") || e.Retry == nil || !e.Retry.DecisionRecorded || e.Retry.RetrySafe {
		t.Fatalf("different answer: %v %+v", err, e)
	}
	if paid.Load() != 2 {
		t.Fatalf("pay ran %d times after the retries, want 2", paid.Load())
	}
}

// TestSameInboxDecisionAnswersItsFirstOutcome: an operator's decision sent
// again by the same operator (its answer lost) gets the first outcome and
// runs nothing twice; another decision, or the same one from another
// operator, is refused as decided.
func TestSameInboxDecisionAnswersItsFirstOutcome(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	var paid atomic.Int32
	open := make(chan struct{})
	close(open)
	guardedAgent(rt, &paid, beforeTool, open, nil)
	out, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil || out.FinishReason != service.FinishInterrupted {
		t.Fatalf("pause: %v %+v", err, out)
	}
	items, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{Status: "pending"})
	if err != nil || len(items) != 1 {
		t.Fatalf("inbox: %v %+v", err, items)
	}
	id := items[0].ID
	first, err := inbox.New(rt).RespondInterrupt(ctx, testCaller, id, json.RawMessage(`{"approved":true}`), "ok")
	if err != nil || first.Status != "resumed" || first.Output == nil {
		t.Fatalf("decision: %v %+v", err, first)
	}
	again, err := inbox.New(rt).RespondInterrupt(ctx, testCaller, id, json.RawMessage(`{ "approved": true }`), "ok")
	if err != nil || again.Status != "resumed" || again.Output.SnapshotID != first.Output.SnapshotID || again.Output.Message.Text() != first.Output.Message.Text() {
		t.Fatalf("the same decision again: %v %+v; want %+v", err, again, first)
	}
	if _, err := inbox.New(rt).RespondInterrupt(ctx, testCaller, id, json.RawMessage(`{"approved":false}`), "ok"); statusOf(err) != service.CodeAborted {
		t.Fatalf("another decision: %v", err)
	}
	other := service.Caller{TenantID: testCaller.TenantID, Actor: "key:someone-else"}
	if _, err := inbox.New(rt).RespondInterrupt(ctx, other, id, json.RawMessage(`{"approved":true}`), "ok"); statusOf(err) != service.CodeAborted {
		t.Fatalf("the same decision from another operator: %v", err)
	}
	if n := paid.Load(); n != 1 {
		t.Fatalf("pay ran %d times; want once", n)
	}
}
