package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
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
	paid := twoApprovalsAgent(t, rt, 0, nil)
	base, _ := pausedInterrupts(t, rt, "s-replay")
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
