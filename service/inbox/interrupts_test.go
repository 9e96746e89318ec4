package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestDecisionsResumeAfterTheLast checks the multi-interrupt flow: the first
// decision is recorded, the second resumes the turn with both.
func TestDecisionsResumeAfterTheLast(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t)
	ctx := context.Background()
	paid := servicetest.TwoApprovalsAgent(t, rt, 0, nil)
	_, items := servicetest.PausedInterrupts(t, rt, testCaller, "s-multi")
	op := auth.Caller{TenantID: "default", Actor: "operator:alice"}

	// Schema violations are rejected and change nothing.
	_, err := inbox.New(rt).RespondInterrupt(ctx, op, items[0].ID, json.RawMessage(`{"approved":"yes"}`), "")
	var e *store.Error
	if !errors.As(err, &e) || e.Status != store.CodeInvalidArgument || e.Details == nil {
		t.Fatalf("bad output: %v", err)
	}
	first, err := inbox.New(rt).RespondInterrupt(ctx, op, items[0].ID, json.RawMessage(`{"approved":true}`), "ok")
	if err != nil || first.Status != "recorded" || len(first.WaitingFor) != 1 || first.WaitingFor[0].ID != items[1].ID.String() {
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
	paid := servicetest.TwoApprovalsAgent(t, rt, 50*time.Millisecond, &service.ExpireRespond{Output: json.RawMessage(`{"approved":false,"feedback":"timed out"}`)})
	_, items := servicetest.PausedInterrupts(t, rt, testCaller, "s-deadline")
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
	servicetest.TwoApprovalsAgent(t, rt, 50*time.Millisecond, nil)
	paused, items := servicetest.PausedInterrupts(t, rt, testCaller, "s-expire")
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
