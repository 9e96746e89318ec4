package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
)

// toolCallRow is a tool_calls row as the tests read it.
type toolCallRow struct {
	turnID, key, tool, status, actor string
	output, errJSON                  []byte
	finished                         bool
}

// toolCallRows returns the tool calls of a session, oldest first.
func toolCallRows(t *testing.T, admin *pgxpool.Pool, session string) []toolCallRow {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT turn_id, call_key, tool, status, actor, output, error, finished_at IS NOT NULL
		FROM tool_calls WHERE session_id = $1 ORDER BY started_at, call_key`, session)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []toolCallRow
	for rows.Next() {
		var r toolCallRow
		if err := rows.Scan(&r.turnID, &r.key, &r.tool, &r.status, &r.actor, &r.output, &r.errJSON, &r.finished); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// payingAgent asks for the pay tool on a user message, then answers with
// after(): a text, or an error (a model that fails once the tool ran).
func payingAgent(t *testing.T, rt *service.Runtime, name string, serverManaged bool, pay func(context.Context) (json.RawMessage, error), after func() error) {
	t.Helper()
	model := &errModel{fn: func(req *service.ModelRequest) (service.Message, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "pay", Ref: "p1", Input: json.RawMessage(`{"amount":5}`)}}}}, nil
		}
		if err := after(); err != nil {
			return service.Message{}, err
		}
		return text(service.RoleModel, "paid"), nil
	}}
	err := rt.Register(&service.Agent{Name: name, ServerManaged: serverManaged, Model: model, Tools: []*service.Tool{
		{Name: "pay", Run: func(ctx context.Context, _ service.ToolCall) (json.RawMessage, error) { return pay(ctx) }},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// errModel is a scripted model whose answer may be an error.
type errModel struct {
	fn func(req *service.ModelRequest) (service.Message, error)
}

func (m *errModel) Name() string { return "err" }

func (m *errModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	msg, err := m.fn(req)
	if err != nil {
		return nil, err
	}
	return &service.ModelResponse{Message: msg, FinishReason: "stop"}, nil
}

// TestEveryToolRunLeavesARow checks that a tool's execution is recorded
// whatever the turn's end: completed, failed after the tool ran (the
// failed snapshot is kept with the call), a failing tool, a client-managed
// agent, and a turn cancelled while the tool runs.
func TestEveryToolRunLeavesARow(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	ctx := context.Background()
	ok := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil }
	payingAgent(t, rt, "fine", true, ok, func() error { return nil })
	payingAgent(t, rt, "crashing", true, ok, func() error { return errors.New("provider exploded at 10.1.2.3") })
	payingAgent(t, rt, "broken", true, func(context.Context) (json.RawMessage, error) {
		return nil, service.Errorf(service.CodeFailedPrecondition, "insufficient funds")
	}, func() error { return nil })
	payingAgent(t, rt, "stateless", false, ok, func() error { return nil })
	started := make(chan struct{})
	payingAgent(t, rt, "slow", true, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}, func() error { return nil })
	send := func(agent, session string) *service.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(ctx, testCaller, agent, service.AgentInit{SessionID: session}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
		if err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
		return out
	}

	t.Run("completed", func(t *testing.T) {
		out := send("fine", "s-fine")
		rows := toolCallRows(t, admin, "s-fine")
		if out.FinishReason != "stop" || len(rows) != 1 || rows[0].status != "succeeded" || rows[0].turnID != out.SnapshotID ||
			string(rows[0].output) != `{"ok": true}` || !rows[0].finished || rows[0].actor != "test" || rows[0].key != "pay#p1" {
			t.Fatalf("output %+v, rows %+v", out, rows)
		}
	})
	t.Run("the model fails after the tool ran", func(t *testing.T) {
		out, err := rt.InvokeOne(ctx, testCaller, "crashing", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
		if err != nil || out.FinishReason != service.FinishFailed {
			t.Fatalf("%v %+v", err, out)
		}
		rows := toolCallRows(t, admin, out.SessionID)
		if len(rows) != 1 || rows[0].status != "succeeded" {
			t.Fatalf("rows %+v", rows)
		}
		// The failed turn is kept for inspection, with the call it made.
		var status, latest string
		var messages int
		if err := admin.QueryRow(ctx, `SELECT s.status, s.message_count, x.latest_snapshot_id FROM snapshots s
			JOIN sessions x ON x.tenant_id = s.tenant_id AND x.id = s.session_id WHERE s.id = $1`, rows[0].turnID).Scan(&status, &messages, &latest); err != nil {
			t.Fatalf("the failed turn's snapshot: %v", err)
		}
		if status != service.StatusFailed || messages != 3 || latest != rows[0].turnID {
			t.Fatalf("failed snapshot: status %s, %d messages, session latest %s", status, messages, latest)
		}
		snap, err := rt.GetSnapshot(ctx, testCaller, "crashing", service.SnapshotLookup{SnapshotID: rows[0].turnID})
		if err != nil || snap.Error == nil || snap.FinishReason != service.FinishFailed {
			t.Fatalf("getSnapshot of the failed turn: %v %+v", err, snap)
		}
		if snap.Error.Status != service.CodeUnavailable || containsAny(snap.Error.Message, "10.1.2.3", "exploded") {
			t.Fatalf("the failed snapshot's error betrays the cause: %+v", snap.Error)
		}
	})
	t.Run("the tool fails", func(t *testing.T) {
		out := send("broken", "s-broken")
		rows := toolCallRows(t, admin, "s-broken")
		if out.FinishReason != service.FinishFailed || len(rows) != 1 || rows[0].status != "failed" || !rows[0].finished {
			t.Fatalf("output %+v, rows %+v", out, rows)
		}
		var e service.ErrorDetails
		if err := json.Unmarshal(rows[0].errJSON, &e); err != nil || e.Status != service.CodeFailedPrecondition || e.Message != "insufficient funds" {
			t.Fatalf("recorded error %s (%v)", rows[0].errJSON, err)
		}
	})
	t.Run("client-managed", func(t *testing.T) {
		out, err := rt.InvokeOne(ctx, testCaller, "stateless", service.AgentInit{State: &service.SessionState{SessionID: "s-stateless"}},
			service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
		if err != nil || out.FinishReason != "stop" {
			t.Fatalf("%v %+v", err, out)
		}
		rows := toolCallRows(t, admin, "s-stateless")
		if len(rows) != 1 || rows[0].status != "succeeded" || rows[0].turnID == "" || !rows[0].finished {
			t.Fatalf("rows %+v", rows)
		}
	})
	t.Run("cancelled while the tool runs", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = rt.InvokeOne(cctx, testCaller, "slow", service.AgentInit{SessionID: "s-slow"}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
		}()
		<-started
		cancel()
		<-done
		deadline := time.Now().Add(time.Minute) // generous: a loaded machine
		for {
			rows := toolCallRows(t, admin, "s-slow")
			if len(rows) == 1 && rows[0].finished && rows[0].status == "failed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rows %+v: want one finished, failed call", rows)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestClaimStaysWhenTheToolRan checks that a resume whose turn fails after
// a tool ran keeps its interrupt resolved: approving it again must not run
// the tool a second time.
func TestClaimStaysWhenTheToolRan(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	ctx := context.Background()
	var fail atomic.Bool
	var runs atomic.Int32
	model := &errModel{fn: func(req *service.ModelRequest) (service.Message, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "approve", Ref: "a1"}}}}, nil
		case last.Content[0].ToolResponse.Name == "approve":
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}}}}, nil
		case fail.Load():
			return service.Message{}, service.Errorf(service.CodeUnavailable, "model down")
		default:
			return text(service.RoleModel, "paid"), nil
		}
	}}
	if err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(`{}`), nil
		}},
	}}); err != nil {
		t.Fatal(err)
	}
	paused, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil || paused.FinishReason != service.FinishInterrupted {
		t.Fatalf("%v %+v", err, paused)
	}
	fail.Store(true)
	approve := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "approve", Ref: "a1", Output: json.RawMessage(`true`)}}}}}
	out, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SnapshotID: paused.SnapshotID}, approve, nil)
	if err != nil || out.FinishReason != service.FinishFailed {
		t.Fatalf("failing resume: %v %+v", err, out)
	}
	fail.Store(false)
	// The same approval again answers the first attempt's outcome: the
	// snapshot that kept the tool's result, not a second run.
	again, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SnapshotID: paused.SnapshotID}, approve, nil)
	if err != nil || again.SnapshotID != out.SnapshotID {
		t.Fatalf("second approval: %v %+v, want the failed turn %s", err, again, out.SnapshotID)
	}
	if runs.Load() != 1 {
		t.Fatalf("pay ran %d times, want 1", runs.Load())
	}
	var status, resumed string
	if err := admin.QueryRow(ctx, "SELECT status, resumed_snapshot_id FROM interrupts WHERE snapshot_id = $1", paused.SnapshotID).Scan(&status, &resumed); err != nil {
		t.Fatal(err)
	}
	rows := toolCallRows(t, admin, paused.SessionID)
	if status != "resolved" || len(rows) != 1 || rows[0].turnID != resumed {
		t.Fatalf("interrupt %s resumed by %s; tool calls %+v", status, resumed, rows)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
