package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

var amountSchema = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0}},"required":["amount"],"additionalProperties":false}`)

// schemaAgent's model calls `call` with the input the user message holds
// (verbatim JSON); `pay` checks its input against amountSchema and returns
// the output the test sets.
func schemaAgent(t *testing.T, rt *service.Runtime, output *atomic.Value) *atomic.Int32 {
	t.Helper()
	runs := new(atomic.Int32)
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleUser {
			name, input, _ := strings.Cut(last.Text(), " ")
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: name, Ref: "r1", Input: json.RawMessage(input)}}}}
		}
		return text(service.RoleModel, "done")
	}}
	err := rt.Register(&service.Agent{Name: "checked", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "pay", InputSchema: amountSchema, OutputSchema: json.RawMessage(`{"type":"object","required":["ok"]}`),
			Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
				runs.Add(1)
				return json.RawMessage(output.Load().(string)), nil
			}},
		{Name: "ask", Interrupt: true, InputSchema: amountSchema},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestToolInputsAreChecked checks that what a model sends is checked
// against the tool's input schema before the tool runs or the question
// reaches a human, and what a tool returns against its output schema.
func TestToolInputsAreChecked(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	ctx := context.Background()
	output := new(atomic.Value)
	output.Store(`{"ok":true}`)
	runs := schemaAgent(t, rt, output)
	turn := func(session, msg string) *service.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(ctx, testCaller, "checked", service.AgentInit{SessionID: session}, service.AgentInput{Message: ptr(text(service.RoleUser, msg))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, bad := range []string{`pay {"amount":"5"}`, `pay {"amount":-1}`, `pay {}`, `pay {"amount":5,"to":"x"}`, `ask {"amount":"lots"}`} {
		out := turn("bad-"+strings.ReplaceAll(bad, " ", ""), bad)
		if out.Error == nil || out.Error.Status != service.CodeInvalidArgument || !strings.Contains(out.Error.Message, "input schema") {
			t.Errorf("%s: %+v", bad, out.Error)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("pay ran %d times on bad input", runs.Load())
	}
	var rows, failed, irqs int
	if err := admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'failed') FROM tool_calls`).Scan(&rows, &failed); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM interrupts`).Scan(&irqs); err != nil {
		t.Fatal(err)
	}
	if rows != 4 || failed != 4 || irqs != 0 {
		t.Fatalf("tool_calls %d (failed %d), interrupts %d: want every refused call recorded as failed and no interrupt", rows, failed, irqs)
	}

	if out := turn("good", `pay {"amount":5}`); out.FinishReason != "stop" || runs.Load() != 1 {
		t.Fatalf("good input: %+v, %d runs", out, runs.Load())
	}
	if out := turn("ask", `ask {"amount":5}`); out.FinishReason != "interrupted" {
		t.Fatalf("good question: %+v", out)
	}

	// An output the tool's own schema refuses is the agent's bug: the
	// client gets a generic INTERNAL message, the details go to the log.
	output.Store(`{"nope":1}`)
	out := turn("bad-output", `pay {"amount":5}`)
	if out.Error == nil || out.Error.Status != service.CodeInternal || strings.Contains(out.Error.Message, "nope") {
		t.Fatalf("bad output: %+v", out.Error)
	}
}

// TestRegisterRefusesBadSchemas checks that a tool whose schema does not
// compile, or whose on-expire answer its output schema refuses, is refused
// at registration with the agent and tool named.
func TestRegisterRefusesBadSchemas(t *testing.T) {
	t.Parallel()
	rt := service.NewRuntime(nil, service.Options{})
	model := &scriptModel{fn: func(*service.ModelRequest) service.Message { return text(service.RoleModel, "x") }}
	for name, tool := range map[string]*service.Tool{
		"bad-input":     {Name: "t1", Interrupt: true, InputSchema: json.RawMessage(`{"type":"nonsense"}`)},
		"bad-output":    {Name: "t2", Interrupt: true, OutputSchema: json.RawMessage(`{"minimum":"x"}`)},
		"bad-on-expire": {Name: "t3", Interrupt: true, OutputSchema: amountSchema, ExpiresAfter: 1, OnExpire: &service.ExpireRespond{Output: json.RawMessage(`{"amount":"x"}`)}},
	} {
		err := rt.Register(&service.Agent{Name: name, Model: model, Tools: []*service.Tool{tool}})
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tool.Name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCustomAgentInterrupts checks that a custom agent's turn can pause on
// an interrupt like a prompt agent's: the interrupt is a row, its answer is
// checked against the interrupt's schema and claimed once, and the next
// turn's function reads it from the tool message the runtime added.
func TestCustomAgentInterrupts(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	var answers []string
	err := rt.Register(&service.Agent{Name: "asker", ServerManaged: true,
		Tools: []*service.Tool{{Name: "askName", Interrupt: true, OutputSchema: json.RawMessage(`{"type":"string","minLength":1}`)}},
		Turn: func(_ context.Context, turn *service.Turn) (string, error) {
			msgs := turn.Messages()
			last := msgs[len(msgs)-1]
			if last.Role == service.RoleTool {
				answers = append(answers, string(last.Content[0].ToolResponse.Output))
				turn.AddMessages(text(service.RoleModel, "hello "+string(last.Content[0].ToolResponse.Output)))
				return "", nil
			}
			turn.AddMessages(service.Message{Role: service.RoleModel, Content: []service.Part{
				service.TextPart("what is your name?"),
				{ToolRequest: &service.ToolRequest{Name: "askName", Ref: "n"}, Metadata: service.Metadata{"interrupt": json.RawMessage("true")}},
			}})
			return service.FinishInterrupted, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	init := service.AgentInit{SessionID: "custom-ask"}
	out, err := rt.InvokeOne(ctx, testCaller, "asker", init, service.AgentInput{Message: ptr(text(service.RoleUser, "hi"))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	items, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{SessionID: "custom-ask"})
	if err != nil || len(items) != 1 || items[0].Tool != "askName" {
		t.Fatalf("inbox: %v %+v", err, items)
	}
	paused := service.AgentInit{SnapshotID: out.SnapshotID}
	respond := func(output string) (*service.AgentOutput, error) {
		return rt.InvokeOne(ctx, testCaller, "asker", paused, service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "askName", Ref: "n", Output: json.RawMessage(output)}}}}}, nil)
	}
	// The interrupt's schema refuses an empty name, before anything runs.
	var e *service.Error
	if _, err := respond(`""`); !errors.As(err, &e) || e.Status != service.CodeInvalidArgument {
		t.Fatalf("empty answer: %v", err)
	}
	out, err = respond(`"Ada"`)
	if err != nil || out.FinishReason != "stop" || out.Message.Text() != `hello "Ada"` {
		t.Fatalf("answer: %v %+v", err, out)
	}
	if _, err := respond(`"Eve"`); !errors.As(err, &e) || e.Status != service.CodeAborted {
		t.Fatalf("second answer: %v", err)
	}
	if len(answers) != 1 {
		t.Fatalf("the turn saw %d answers: %v", len(answers), answers)
	}
}

// TestSchemasReadNoFiles checks a schema cannot make the server read a
// file through a $ref.
func TestSchemasReadNoFiles(t *testing.T) {
	t.Parallel()
	rt := service.NewRuntime(nil, service.Options{})
	model := &scriptModel{fn: func(*service.ModelRequest) service.Message { return text(service.RoleModel, "x") }}
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/schema.json", "other.json"} {
		err := rt.Register(&service.Agent{Name: "refs", Model: model, Tools: []*service.Tool{{Name: "t", Interrupt: true,
			InputSchema: json.RawMessage(`{"$ref": "` + ref + `"}`)}}})
		if err == nil {
			t.Errorf("a schema referring to %s was accepted", ref)
		}
	}
	if v := service.ValidateJSON(json.RawMessage(`{"$ref":"file:///etc/passwd"}`), json.RawMessage(`{}`)); len(v) == 0 {
		t.Error("validating against a schema that refers to a file passed")
	}
}
