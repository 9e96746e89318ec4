package servicetest

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// ScriptModel answers each request with Fn's message, so a test can
// drive an agent for any number of turns.
type ScriptModel struct {
	Fn func(req *protocol.ModelRequest) protocol.Message
}

func (m *ScriptModel) Name() string { return "script" }

func (m *ScriptModel) Generate(_ context.Context, req *protocol.ModelRequest, _ func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	return &protocol.ModelResponse{Message: m.Fn(req), FinishReason: "stop"}, nil
}

// TwoApprovalsAgent registers "approver": its model asks two approvals
// (refs a and b) in one answer, then calls pay once per approved one. The
// counter it returns counts pay's runs. expire and onExpire set the
// approvals' deadline.
func TwoApprovalsAgent(t testing.TB, rt *service.Runtime, expire time.Duration, onExpire *service.ExpireRespond) *atomic.Int32 {
	t.Helper()
	var paid atomic.Int32
	model := &ScriptModel{Fn: func(req *protocol.ModelRequest) protocol.Message {
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
		return protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{protocol.TextPart("done")}}
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

// PausedInterrupts runs TwoApprovalsAgent's first turn in session as c and
// returns its snapshot and the two interrupts the inbox lists for it.
func PausedInterrupts(t testing.TB, rt *service.Runtime, c auth.Caller, session string) (string, []store.Interrupt) {
	t.Helper()
	ctx := context.Background()
	msg := protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart("two please")}}
	out, err := rt.InvokeOne(ctx, c, "approver", protocol.AgentInit{SessionID: session}, protocol.AgentInput{Message: &msg}, nil)
	if err != nil || out.FinishReason != protocol.FinishInterrupted {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	items, err := inbox.New(rt).ListInterrupts(ctx, c, store.InterruptFilter{SessionID: session})
	if err != nil || len(items) != 2 {
		t.Fatalf("inbox: %v %d items", err, len(items))
	}
	return out.SnapshotID, items
}
