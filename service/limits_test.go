package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/limits"
)

// parts returns n text parts.
func parts(n int) []service.Part {
	out := make([]service.Part, n)
	for i := range out {
		out[i] = service.TextPart("p")
	}
	return out
}

// messages returns n user messages.
func messages(n int) []service.Message {
	out := make([]service.Message, n)
	for i := range out {
		out[i] = text(service.RoleUser, "m")
	}
	return out
}

func TestInputLimits(t *testing.T) {
	t.Parallel()
	rt, pool := newRuntime(t)
	model := &scriptModel{fn: func(*service.ModelRequest) service.Message { return text(service.RoleModel, "ok") }}
	for _, a := range []*service.Agent{
		{Name: "server", ServerManaged: true, Model: model},
		{Name: "client", Model: model},
	} {
		if err := rt.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	respond := func(n int) []service.Part {
		out := make([]service.Part, n)
		for i := range out {
			out[i] = service.Part{ToolResponse: &service.ToolResponse{Name: "approve", Ref: "r"}}
		}
		return out
	}
	msg := func(p []service.Part) *service.Message { return &service.Message{Role: service.RoleUser, Content: p} }

	for _, tc := range []struct {
		name     string
		agent    string
		init     service.AgentInit
		input    service.AgentInput
		contains string // empty: accepted
	}{
		{"200 parts", "server", service.AgentInit{}, service.AgentInput{Message: msg(parts(200))}, ""},
		{"201 parts", "server", service.AgentInit{}, service.AgentInput{Message: msg(parts(201))}, "201 parts"},
		{"text at the limit", "server", service.AgentInit{}, service.AgentInput{Message: msg([]service.Part{service.TextPart(strings.Repeat("x", limits.MaxTextBytes))})}, ""},
		{"text over the limit", "server", service.AgentInit{}, service.AgentInput{Message: msg([]service.Part{service.TextPart(strings.Repeat("x", limits.MaxTextBytes+1))})}, "text part over"},
		{"reasoning from a user", "server", service.AgentInit{}, service.AgentInput{Message: msg([]service.Part{{Reasoning: ptr("x")}})}, "reasoning part"},
		{"reasoning over the limit in state", "client", service.AgentInit{State: &service.SessionState{Messages: []service.Message{{Role: service.RoleModel, Content: []service.Part{{Reasoning: ptr(strings.Repeat("x", limits.MaxTextBytes+1))}}}}}}, service.AgentInput{Message: msg(parts(1))}, "text part over"},
		{"101 resume entries", "server", service.AgentInit{}, service.AgentInput{Resume: &service.Resume{Respond: respond(101)}}, "101 entries"},
		{"overlong tool ref", "server", service.AgentInit{}, service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "a", Ref: strings.Repeat("r", 2000)}}}}}, "name or ref"},
		{"overlong sessionId", "server", service.AgentInit{SessionID: strings.Repeat("s", 257)}, service.AgentInput{Message: msg(parts(1))}, "sessionId"},
		{"control character in snapshotId", "server", service.AgentInit{SnapshotID: "a\nb"}, service.AgentInput{Message: msg(parts(1))}, "snapshotId"},
		{"1000 state messages", "client", service.AgentInit{State: &service.SessionState{Messages: messages(1000)}}, service.AgentInput{Message: msg(parts(1))}, ""},
		{"1001 state messages", "client", service.AgentInit{State: &service.SessionState{Messages: messages(1001)}}, service.AgentInput{Message: msg(parts(1))}, "1001 messages"},
		{"state message with 201 parts", "client", service.AgentInit{State: &service.SessionState{Messages: []service.Message{{Role: service.RoleUser, Content: parts(201)}}}}, service.AgentInput{}, "init.state.messages[0] has 201 parts"},
		{"overlong state sessionId", "client", service.AgentInit{State: &service.SessionState{SessionID: strings.Repeat("s", 300)}}, service.AgentInput{Message: msg(parts(1))}, "state.sessionId"},
		{"artifact with 201 parts", "client", service.AgentInit{State: &service.SessionState{Artifacts: []service.Artifact{{Name: "a", Parts: parts(201)}}}}, service.AgentInput{Message: msg(parts(1))}, "artifacts[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rt.InvokeOne(ctx, testCaller, tc.agent, tc.init, tc.input, nil)
			if tc.contains == "" {
				if err != nil || out.FinishReason != service.FinishStop {
					t.Fatalf("at the limit: %v %+v", err, out)
				}
				return
			}
			if !isStatus(err, service.CodeInvalidArgument) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("got %v, %+v; want INVALID_ARGUMENT mentioning %q", err, out, tc.contains)
			}
		})
	}

	// Rejected requests wrote nothing: only the two accepted
	// server-managed turns made sessions.
	var sessions int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM sessions").Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if sessions != 2 {
		t.Errorf("%d sessions, want the 2 of the accepted requests", sessions)
	}

	// Inputs streamed to Invoke are bounded too, not only the first.
	inputs := make(chan service.AgentInput, 2)
	inputs <- service.AgentInput{Message: msg(parts(1))}
	inputs <- service.AgentInput{Message: msg(parts(limits.MaxMessageParts + 1))}
	close(inputs)
	if _, err := rt.Invoke(ctx, testCaller, "server", service.AgentInit{}, inputs, nil); !isStatus(err, service.CodeInvalidArgument) {
		t.Fatalf("second input over the limit: %v", err)
	}
}
