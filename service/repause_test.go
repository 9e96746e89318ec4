package service_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// repauseAgent asks a human ("ask", an interrupt) and pays ("pay", a tool
// that interrupts itself until it is restarted with {"confirmed": true}) in
// one model answer; once both are answered it repeats what it got.
func repauseAgent(t *testing.T, rt *service.Runtime) (paid *atomic.Int32, lastTool *atomic.Value) {
	t.Helper()
	paid, lastTool = new(atomic.Int32), new(atomic.Value)
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{Text: ptr("let me check")},
				{ToolRequest: &service.ToolRequest{Name: "ask", Ref: "q", Input: json.RawMessage(`{"question":"sure?"}`)}},
				{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p", Input: json.RawMessage(`{"amount":5}`)}},
			}}
		}
		b, _ := json.Marshal(last)
		lastTool.Store(string(b))
		return text(service.RoleModel, "done")
	}}
	err := rt.Register(&service.Agent{Name: "repauser", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "ask", Interrupt: true},
		{Name: "pay", Run: func(_ context.Context, c service.ToolCall) (json.RawMessage, error) {
			var r struct{ Confirmed bool }
			_ = json.Unmarshal(c.Resumed, &r)
			if !r.Confirmed {
				return nil, service.InterruptWith(map[string]any{"confirm": 5, "restarted": c.Resumed != nil})
			}
			paid.Add(1)
			return json.RawMessage(`{"paid":5}`), nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return paid, lastTool
}

func interruptedRefs(m *service.Message) map[string]string {
	out := map[string]string{}
	for _, p := range m.Content {
		if p.ToolRequest == nil {
			continue
		}
		if raw, ok := p.Metadata["interrupt"]; ok {
			out[p.ToolRequest.Ref] = "interrupt:" + string(raw)
		} else if raw, ok := p.Metadata["pendingOutput"]; ok {
			out[p.ToolRequest.Ref] = "pending:" + string(raw)
		}
	}
	return out
}

// TestRestartThatInterruptsAgainRepauses checks the seed's re-pausing loop:
// a restarted tool that interrupts again pauses the turn on a new
// interrupt linked to the old one, the answers given meanwhile wait as
// pendingOutput, and the next resume continues with everything, running
// the paying tool once. Restarting an interrupt that asks a human pauses
// again too. No interrupt is ever left that can be neither answered nor
// restarted.
func TestRestartThatInterruptsAgainRepauses(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	paid, lastTool := repauseAgent(t, rt)
	init := service.AgentInit{SessionID: "s-repause"}

	first, err := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Message: ptr(text(service.RoleUser, "pay 5"))}, nil)
	if err != nil || first.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, first)
	}
	before, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{SessionID: "s-repause"})
	if err != nil || len(before) != 2 {
		t.Fatalf("inbox after the first turn: %v %+v", err, before)
	}
	oldPay := before[0]
	if oldPay.Tool != "pay" {
		oldPay = before[1]
	}
	req := func(name, ref, input string) *service.ToolRequest {
		return &service.ToolRequest{Name: name, Ref: ref, Input: json.RawMessage(input)}
	}

	// Answer the question, restart pay without confirming: pay interrupts
	// again, so the turn pauses again.
	var chunks []service.StreamChunk
	second, err := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Resume: &service.Resume{
		Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "ask", Ref: "q", Output: json.RawMessage(`"yes"`)}}},
		Restart: []service.Part{{ToolRequest: req("pay", "p", `{"amount":5}`)}},
	}}, func(c service.StreamChunk) { chunks = append(chunks, c) })
	if err != nil || second.FinishReason != "interrupted" || second.Error != nil {
		t.Fatalf("restart that interrupts again: %v %+v", err, second)
	}
	got := interruptedRefs(second.Message)
	if got["q"] != `pending:"yes"` || got["p"] != `interrupt:{"confirm":5,"restarted":false}` {
		t.Fatalf("re-paused message: %v", got)
	}
	if paid.Load() != 0 {
		t.Fatal("pay ran without confirmation")
	}
	if n := len(chunks); n == 0 || chunks[n-1].TurnEnd == nil || chunks[n-1].TurnEnd.FinishReason != "interrupted" {
		t.Fatalf("chunks end with %+v", chunks)
	}
	pending, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{SessionID: "s-repause", Status: service.InterruptPending})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending after the re-pause: %v %+v", err, pending)
	}
	newPay := pending[0]
	if newPay.Tool != "pay" || newPay.SnapshotID != second.SnapshotID || newPay.PreviousID == nil || *newPay.PreviousID != oldPay.ID {
		t.Fatalf("new interrupt %+v, want pay in %s linked to %s", newPay, second.SnapshotID, oldPay.ID)
	}
	old, err := inbox.New(rt).GetInterrupt(ctx, testCaller, oldPay.ID, 0)
	if err != nil || old.Status != service.InterruptResolved || old.ResumedSnapshotID != second.SnapshotID {
		t.Fatalf("old interrupt: %v %+v", err, old)
	}

	// An empty resume names what is still open; answering the question
	// again is refused (it is no longer interrupted).
	if out, _ := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Resume: &service.Resume{}}, nil); out == nil || out.Error == nil || out.Error.Status != service.CodeInvalidArgument {
		t.Fatalf("empty resume after the re-pause: %+v", out)
	}

	// Confirm: pay runs once, and the model sees both answers.
	third, err := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Resume: &service.Resume{
		Restart: []service.Part{{ToolRequest: req("pay", "p", `{"amount":5}`), Metadata: service.Metadata{"resumed": json.RawMessage(`{"confirmed":true}`)}}},
	}}, nil)
	if err != nil || third.FinishReason != "stop" || third.Error != nil {
		t.Fatalf("confirmed restart: %v %+v", err, third)
	}
	if paid.Load() != 1 {
		t.Fatalf("pay ran %d times, want 1", paid.Load())
	}
	var tm service.Message
	if err := json.Unmarshal([]byte(lastTool.Load().(string)), &tm); err != nil || tm.Role != service.RoleTool || len(tm.Content) != 2 ||
		string(tm.Content[0].ToolResponse.Output) != `"yes"` || string(tm.Content[1].ToolResponse.Output) != `{"paid":5}` {
		t.Fatalf("tool message the model saw: %v %s", err, lastTool.Load())
	}
	final, err := inbox.New(rt).GetInterrupt(ctx, testCaller, newPay.ID, 0)
	if err != nil || final.Status != service.InterruptResolved {
		t.Fatalf("new interrupt after the confirmation: %v %+v", err, final)
	}
}

// TestRestartingAHumanInterruptRepauses restarts an interrupt that only a
// human can answer (as `approval.restart()` in the JS client does): the
// turn pauses again on a new interrupt, which can then be answered.
func TestRestartingAHumanInterruptRepauses(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	repauseAgent(t, rt)
	init := service.AgentInit{SessionID: "s-human"}
	if _, err := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Message: ptr(text(service.RoleUser, "pay 5"))}, nil); err != nil {
		t.Fatal(err)
	}
	ask := &service.ToolRequest{Name: "ask", Ref: "q", Input: json.RawMessage(`{"question":"sure?"}`)}
	out, err := rt.InvokeOne(ctx, testCaller, "repauser", init, service.AgentInput{Resume: &service.Resume{
		Restart: []service.Part{{ToolRequest: ask}, {ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p", Input: json.RawMessage(`{"amount":5}`)}}},
	}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("restarting both: %v %+v", err, out)
	}
	if got := interruptedRefs(out.Message); got["q"] != "interrupt:true" || got["p"] == "" {
		t.Fatalf("re-paused message: %v", got)
	}
	pending, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{SessionID: "s-human", Status: service.InterruptPending})
	if err != nil || len(pending) != 2 || pending[0].PreviousID == nil || pending[1].PreviousID == nil {
		t.Fatalf("pending after restarting both: %v %+v", err, pending)
	}
	for _, it := range pending {
		if it.Tool == "ask" {
			// Answered through the inbox; pay is still open, so the
			// decision is recorded and the turn waits.
			d, err := inbox.New(rt).RespondInterrupt(ctx, service.Caller{TenantID: "default", Actor: "operator:alice"}, it.ID, json.RawMessage(`"yes"`), "")
			if err != nil || d.Status != "recorded" {
				t.Fatalf("deciding the re-paused question: %v %+v", err, d)
			}
		}
	}
}

// TestFailedResumeAfterAToolRanCanGoOn fails the model right after a
// restarted tool ran: the tool's result is kept as a completed snapshot
// (the interrupt stays resolved, so the paused snapshot can no longer be
// resumed), and an input with no message continues from it without running
// the tool again.
func TestFailedResumeAfterAToolRanCanGoOn(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	var runs atomic.Int32
	var down atomic.Bool
	model := &flakyModel{down: &down, fn: func(req *service.ModelRequest) service.Message {
		if last := req.Messages[len(req.Messages)-1]; last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p", Input: json.RawMessage(`{}`)}}}}
		}
		return text(service.RoleModel, "paid")
	}}
	err := rt.Register(&service.Agent{Name: "payer2", ServerManaged: true, Model: model, Tools: []*service.Tool{{Name: "pay",
		Run: func(_ context.Context, c service.ToolCall) (json.RawMessage, error) {
			if c.Resumed == nil {
				return nil, service.InterruptWith(map[string]string{"confirm": "pay"})
			}
			runs.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	init := service.AgentInit{SessionID: "flaky"}
	paused, err := rt.InvokeOne(ctx, testCaller, "payer2", init, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil || paused.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, paused)
	}
	down.Store(true)
	restart := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p", Input: json.RawMessage(`{}`)},
		Metadata: service.Metadata{"resumed": json.RawMessage(`true`)}}}}}
	failed, err := rt.InvokeOne(ctx, testCaller, "payer2", init, restart, nil)
	if err != nil || failed.FinishReason != "failed" || failed.Error.Status != service.CodeUnavailable || runs.Load() != 1 {
		t.Fatalf("restart with the model down: %v %+v, %d runs", err, failed, runs.Load())
	}
	if failed.SnapshotID == paused.SnapshotID || failed.Message == nil || failed.Message.Role != service.RoleTool {
		t.Fatalf("the failed turn's last good snapshot %s (message %+v) should be the kept progress", failed.SnapshotID, failed.Message)
	}
	kept, err := rt.GetSnapshot(ctx, testCaller, "payer2", service.SnapshotLookup{SnapshotID: failed.SnapshotID})
	if err != nil || kept.Status != service.StatusCompleted || kept.ParentID != paused.SnapshotID {
		t.Fatalf("kept progress: %v %+v", err, kept)
	}
	// The same restart again runs nothing: it answers the first attempt's
	// outcome, the turn that kept the tool's result.
	if out, err := rt.InvokeOne(ctx, testCaller, "payer2", service.AgentInit{SnapshotID: paused.SnapshotID}, restart, nil); err != nil || out.SnapshotID != failed.SnapshotID || runs.Load() != 1 {
		t.Fatalf("restarting again: %v %+v, want snapshot %s", err, out, failed.SnapshotID)
	}
	down.Store(false)
	done, err := rt.InvokeOne(ctx, testCaller, "payer2", init, service.AgentInput{}, nil)
	if err != nil || done.FinishReason != "stop" || done.Message.Text() != "paid" {
		t.Fatalf("going on: %v %+v", err, done)
	}
	if runs.Load() != 1 {
		t.Fatalf("pay ran %d times, want 1", runs.Load())
	}
}

// flakyModel answers with fn, or fails as unavailable while down.
type flakyModel struct {
	down *atomic.Bool
	fn   func(*service.ModelRequest) service.Message
}

func (m *flakyModel) Name() string { return "flaky" }

func (m *flakyModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if m.down.Load() && req.Messages[len(req.Messages)-1].Role == service.RoleTool {
		return nil, service.Errorf(service.CodeUnavailable, "model down")
	}
	return &service.ModelResponse{Message: m.fn(req), FinishReason: "stop"}, nil
}

// TestFailedRoundKeepsNoProgress fails a tool after another of its round
// ran: that result is in no message, so no progress is kept (going on
// would run the first tool again), and the failure names the last good
// snapshot.
func TestFailedRoundKeepsNoProgress(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	var logged atomic.Int32
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		switch last := req.Messages[len(req.Messages)-1]; {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "ask", Ref: "a"}}}}
		case last.Content[0].ToolResponse.Name == "ask":
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: "log", Ref: "l"}}, {ToolRequest: &service.ToolRequest{Name: "boom", Ref: "b"}}}}
		default:
			return text(service.RoleModel, "done")
		}
	}}
	err := rt.Register(&service.Agent{Name: "rounds", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "ask", Interrupt: true},
		{Name: "log", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			logged.Add(1)
			return json.RawMessage(`{}`), nil
		}},
		{Name: "boom", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			return nil, service.Errorf(service.CodeAborted, "boom")
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	init := service.AgentInit{SessionID: "rounds"}
	paused, err := rt.InvokeOne(ctx, testCaller, "rounds", init, service.AgentInput{Message: ptr(text(service.RoleUser, "go"))}, nil)
	if err != nil || paused.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, paused)
	}
	out, err := rt.InvokeOne(ctx, testCaller, "rounds", init, service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "ask", Ref: "a", Output: json.RawMessage(`"ok"`)}}}}}, nil)
	if err != nil || out.FinishReason != "failed" || logged.Load() != 1 {
		t.Fatalf("failing round: %v %+v, log ran %d", err, out, logged.Load())
	}
	if out.SnapshotID != paused.SnapshotID {
		t.Fatalf("last good snapshot %s, want the paused %s: no progress may be kept", out.SnapshotID, paused.SnapshotID)
	}
}
