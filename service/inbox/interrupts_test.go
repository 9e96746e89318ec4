package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// twoApprovalsAgent asks two approvals in one model answer, then calls pay
// once per approved one.
func twoApprovalsAgent(t *testing.T, rt *service.Runtime, expire time.Duration, onExpire *service.ExpireRespond) *atomic.Int32 {
	t.Helper()
	var paid atomic.Int32
	model := &scriptModel{fn: func(req *protocol.ModelRequest) protocol.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == protocol.RoleUser {
			return protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{
				{ToolRequest: &protocol.ToolRequest{Name: "approve", Ref: "a", Input: json.RawMessage(`{"what":"a"}`)}},
				{ToolRequest: &protocol.ToolRequest{Name: "approve", Ref: "b", Input: json.RawMessage(`{"what":"b"}`)}},
			}}
		}
		if last.Role == protocol.RoleTool && last.Content[0].ToolResponse.Name == "approve" {
			var calls []protocol.Part
			for _, p := range last.Content {
				var out struct{ Approved bool }
				_ = json.Unmarshal(p.ToolResponse.Output, &out)
				if out.Approved {
					calls = append(calls, protocol.Part{ToolRequest: &protocol.ToolRequest{Name: "pay", Ref: "pay-" + p.ToolResponse.Ref, Input: json.RawMessage(`{}`)}})
				}
			}
			if len(calls) > 0 {
				return protocol.Message{Role: protocol.RoleModel, Content: calls}
			}
		}
		return text(protocol.RoleModel, "done")
	}}
	err := rt.Register(&service.Agent{Name: "approver", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true, ExpiresAfter: expire, OnExpire: onExpire,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"}},"required":["approved"]}`)},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			paid.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &paid
}

func pausedInterrupts(t *testing.T, rt *service.Runtime, session string) (string, []store.Interrupt) {
	t.Helper()
	ctx := context.Background()
	out, err := rt.InvokeOne(ctx, testCaller, "approver", protocol.AgentInit{SessionID: session}, protocol.AgentInput{Message: ptr(text(protocol.RoleUser, "two please"))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	items, err := inbox.New(rt).ListInterrupts(ctx, testCaller, store.InterruptFilter{SessionID: session})
	if err != nil || len(items) != 2 {
		t.Fatalf("inbox: %v %d items", err, len(items))
	}
	return out.SnapshotID, items
}

// TestDecisionsResumeAfterTheLast checks the multi-interrupt flow: the first
// decision is recorded, the second resumes the turn with both.
func TestDecisionsResumeAfterTheLast(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t)
	ctx := context.Background()
	paid := twoApprovalsAgent(t, rt, 0, nil)
	_, items := pausedInterrupts(t, rt, "s-multi")
	op := auth.Caller{TenantID: "default", Actor: "operator:alice"}

	// Schema violations are rejected and change nothing.
	_, err := inbox.New(rt).RespondInterrupt(ctx, op, items[0].ID, json.RawMessage(`{"approved":"yes"}`), "")
	var e *store.Error
	if !errors.As(err, &e) || e.Status != store.CodeInvalidArgument || e.Details == nil {
		t.Fatalf("bad output: %v", err)
	}
	first, err := inbox.New(rt).RespondInterrupt(ctx, op, items[0].ID, json.RawMessage(`{"approved":true}`), "ok")
	if err != nil || first.Status != "recorded" || len(first.WaitingFor) != 1 || first.WaitingFor[0].ID != items[1].ID {
		t.Fatalf("first decision: %v %+v", err, first)
	}
	if _, err := inbox.New(rt).RespondInterrupt(ctx, op, items[0].ID, json.RawMessage(`{"approved":true}`), ""); !errors.As(err, &e) || e.Status != store.CodeAborted {
		t.Fatalf("deciding twice: %v", err)
	}
	second, err := inbox.New(rt).RespondInterrupt(ctx, op, items[1].ID, json.RawMessage(`{"approved":true}`), "")
	if err != nil || second.Status != "resumed" || second.Output.FinishReason != "stop" {
		t.Fatalf("second decision: %v %+v", err, second)
	}
	if paid.Load() != 2 {
		t.Fatalf("pay ran %d times, want 2", paid.Load())
	}
	// The client sees the continued conversation by session id.
	snap, err := rt.GetSnapshot(ctx, testCaller, "approver", protocol.SnapshotLookup{SessionID: "s-multi"})
	if err != nil || snap.SnapshotID != second.Output.SnapshotID {
		t.Fatalf("latest snapshot: %v %+v", err, snap)
	}
	events, err := inbox.New(rt).InterruptEvents(ctx, op, items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	if len(types) != 2 || types[0] != "created" || types[1] != "resolved" || events[1].Actor != "operator:alice" {
		t.Fatalf("events: %v", events)
	}
	if _, err := inbox.New(rt).InterruptEvents(ctx, op, uuid.New()); !errors.As(err, &e) || e.Status != store.CodeNotFound {
		t.Fatalf("unknown interrupt: %v", err)
	}
}

// sweepDue sweeps the deadlines until want of them were applied, as the
// sweeper would once they fall due (the ones here are 50 ms away), and
// fails if more were.
func sweepDue(t *testing.T, rt *service.Runtime, want int) {
	t.Helper()
	applied := 0
	waitFor(t, fmt.Sprintf("%d deadlines to fall due", want), 30*time.Second, func() bool {
		n, err := inbox.New(rt).SweepDeadlines(context.Background())
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		applied += n
		return applied >= want
	})
	if applied != want {
		t.Fatalf("the sweeps applied %d deadlines, want %d", applied, want)
	}
}

// TestDeadlineRespondResumes checks a deadline with a fixed answer resumes
// the turn server-side; TestDeadlineExpireRejectsResume one that expires.
func TestDeadlineRespondResumes(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t)
	ctx := context.Background()
	paid := twoApprovalsAgent(t, rt, 50*time.Millisecond, &service.ExpireRespond{Output: json.RawMessage(`{"approved":false,"feedback":"timed out"}`)})
	_, items := pausedInterrupts(t, rt, "s-deadline")
	sweepDue(t, rt, 2)
	snap, err := rt.GetSnapshot(ctx, testCaller, "approver", protocol.SnapshotLookup{SessionID: "s-deadline"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := snap.State.Messages
	if last := msgs[len(msgs)-1]; last.Text() != "done" {
		t.Fatalf("turn not resumed: last message %+v", last)
	}
	if paid.Load() != 0 {
		t.Fatalf("denied-by-deadline approvals paid %d times", paid.Load())
	}
	it, err := inbox.New(rt).GetInterrupt(ctx, testCaller, items[0].ID, 3)
	if err != nil || it.Status != "resolved" || it.ResolvedBy != "system" {
		t.Fatalf("interrupt after deadline: %v %+v", err, it)
	}
	if n, _ := inbox.New(rt).SweepDeadlines(ctx); n != 0 {
		t.Fatalf("second sweep applied %d deadlines again", n)
	}
}

func TestDeadlineExpireRejectsResume(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t)
	ctx := context.Background()
	twoApprovalsAgent(t, rt, 50*time.Millisecond, nil)
	paused, items := pausedInterrupts(t, rt, "s-expire")
	sweepDue(t, rt, 2)
	resume := protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{
		{ToolResponse: &protocol.ToolResponse{Name: "approve", Ref: "a", Output: json.RawMessage(`{"approved":true}`)}},
		{ToolResponse: &protocol.ToolResponse{Name: "approve", Ref: "b", Output: json.RawMessage(`{"approved":true}`)}},
	}}}
	_, err := rt.InvokeOne(ctx, testCaller, "approver", protocol.AgentInit{SnapshotID: paused}, resume, nil)
	var e *store.Error
	if !errors.As(err, &e) || e.Status != store.CodeFailedPrecondition {
		t.Fatalf("resume of an expired interrupt: %v", err)
	}
	if _, err := inbox.New(rt).RespondInterrupt(ctx, testCaller, items[0].ID, json.RawMessage(`{"approved":true}`), ""); !errors.As(err, &e) || e.Status != store.CodeFailedPrecondition {
		t.Fatalf("decision on an expired interrupt: %v", err)
	}
	rows, err := inbox.New(rt).ReportInterrupts(ctx, testCaller, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "tool")
	if err != nil || len(rows) != 1 || rows[0].Key != "approve" || rows[0].Expired != 2 || rows[0].Total != 2 {
		t.Fatalf("report: %v %+v", err, rows)
	}
}
