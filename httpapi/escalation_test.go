package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// escalatingAgent's model calls transferMoney, which its policy gates for
// approve:payments and escalates to approve:lead after 50 ms.
func escalatingAgent() *service.Agent {
	model := funcModel{fn: func(req *service.ModelRequest) service.Message {
		if last := req.Messages[len(req.Messages)-1]; last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "transferMoney", Ref: "t1", Input: json.RawMessage(`{"to":"bob","amount":900}`),
			}}}}
		}
		return service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("done")}}
	}}
	return &service.Agent{Name: "escalating", ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name: "transferMoney",
		Approval: &approval.Policy{
			Scope: "approve:payments", Escalate: &approval.Escalation{After: 50 * time.Millisecond, Scope: "approve:lead"},
		},
		Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		},
	}}}
}

// TestEscalationOnTheEventStream: the event stream takes interrupt.voted
// and interrupt.escalated as filters, an escalation reaches it (by
// system), and the audit trail over REST has the escalated event with
// the scopes it moved between.
func TestEscalationOnTheEventStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newInboxServer(t, inboxConfig{agents: []*service.Agent{escalatingAgent()}})
	s.waitListening(t, 1)
	status, live := s.openEvents(t, "?type=interrupt.escalated&type=interrupt.voted")
	if status != http.StatusOK {
		t.Fatalf("stream of escalations and votes: %d", status)
	}
	alice := service.Caller{TenantID: "default", EndUser: "alice", Actor: "user:alice"}
	out, err := s.rt.InvokeOne(ctx, alice, "escalating", service.AgentInit{SessionID: "s-esc"},
		service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("pay bob")}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("gated call: %v %+v", err, out)
	}
	list, err := inbox.New(s.rt).ListInterrupts(ctx, httpapi.DevCaller, service.InterruptFilter{SessionID: "s-esc"})
	if err != nil || len(list) != 1 {
		t.Fatalf("inbox: %v %+v", err, list)
	}
	id := list[0].ID
	for deadline := time.Now().Add(time.Minute); s.countWhere(t, `SELECT count(*) FROM interrupts WHERE id = $1 AND escalate_at <= now()`, id) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("escalate_at never passed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := inbox.New(s.rt).SweepEscalations(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	f := live.next(t, 1)[0]
	if f.event != "interrupt.escalated" || f.note.InterruptID != id.String() || f.note.Actor != "system" ||
		f.note.Tool != "transferMoney" || f.note.SessionID != "s-esc" {
		t.Fatalf("frame %+v", f)
	}

	var trail struct {
		Items []protocol.AuditEvent `json:"items"`
	}
	jsonOf(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+id.String()+"/events", nil), http.StatusOK, &trail)
	last := trail.Items[len(trail.Items)-1]
	var moved struct{ From, To string }
	if err := json.Unmarshal(last.Payload, &moved); err != nil || last.Type != events.Escalated || moved.From != "approve:payments" || moved.To != "approve:lead" {
		t.Fatalf("audit trail %+v", trail.Items)
	}
}
