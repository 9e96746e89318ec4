package agentkit_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

type recursive struct {
	Name     string      `json:"name"`
	Children []recursive `json:"children"`
}

type withChan struct {
	C chan int `json:"c"`
}

type Shipment struct {
	OrderID string    `json:"orderId" jsonschema:"description=The order to ship,pattern=^[0-9]+$"`
	Speed   string    `json:"speed,omitempty" jsonschema:"enum=standard,enum=express"`
	Due     time.Time `json:"due,omitzero"`
	Notes   []string  `json:"notes,omitempty"`
	Skip    string    `json:"-"`
}

func TestSchemaInference(t *testing.T) {
	t.Parallel()
	tool, err := agentkit.Interrupt[Shipment, map[string]int]{Name: "confirm"}.ServiceTool()
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Type                 string
		Required             []string
		AdditionalProperties *bool `json:"additionalProperties"`
		Properties           map[string]struct {
			Type        string
			Description string
			Pattern     string
			Enum        []string
			Format      string
		}
	}
	if err := json.Unmarshal(tool.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	p := in.Properties
	if in.Type != "object" || len(in.Required) != 1 || in.Required[0] != "orderId" || in.AdditionalProperties == nil || *in.AdditionalProperties ||
		p["orderId"].Description != "The order to ship" || p["orderId"].Pattern != "^[0-9]+$" || len(p["speed"].Enum) != 2 ||
		p["due"].Format != "date-time" || p["notes"].Type != "array" || len(p) != 4 {
		t.Fatalf("input schema %s", tool.InputSchema)
	}
	if !strings.Contains(string(tool.OutputSchema), `"additionalProperties":{"type":"integer"}`) {
		t.Fatalf("output schema %s", tool.OutputSchema)
	}
}

func TestDefinitionErrorsNameAgentAndTool(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, Transfer) (Receipt, error) { return Receipt{}, nil }
	cases := []struct {
		def  agentkit.Definition
		want []string
	}{
		{agentkit.Agent{Name: "a1", Tools: []agentkit.ToolDef{
			agentkit.Tool[Transfer, Receipt]{Name: "pay", Run: noop}, agentkit.Interrupt[Approval, Decision]{Name: "pay"}}},
			[]string{"agent a1", "two tools named pay"}},
		{agentkit.Agent{Name: "a2", Tools: []agentkit.ToolDef{agentkit.Tool[withChan, Receipt]{Name: "piped", Run: func(context.Context, withChan) (Receipt, error) { return Receipt{}, nil }}}},
			[]string{"agent a2", "tool piped", "chan"}},
		{agentkit.Agent{Name: "a3", Tools: []agentkit.ToolDef{agentkit.Tool[recursive, Receipt]{Name: "tree", Run: func(context.Context, recursive) (Receipt, error) { return Receipt{}, nil }}}},
			[]string{"agent a3", "tool tree", "recursive"}},
		{agentkit.Agent{Name: "a4", Tools: []agentkit.ToolDef{agentkit.Interrupt[Approval, any]{Name: "ask"}}},
			[]string{"agent a4", "interrupt ask", "interface"}},
		{agentkit.Agent{Name: "a5", Tools: []agentkit.ToolDef{agentkit.Tool[Transfer, Receipt]{Name: "pay"}}},
			[]string{"agent a5", "tool pay", "Run is nil"}},
		{agentkit.Agent{Name: "a6", Tools: []agentkit.ToolDef{agentkit.Interrupt[Approval, Decision]{Name: "ask", OnExpire: &Decision{}}}},
			[]string{"agent a6", "interrupt ask", "ExpiresAfter"}},
		{agentkit.Agent{Name: "a7", Model: "nowhere"}, []string{"agent a7", `model "nowhere"`}},
		{agentkit.CustomAgent{Name: "c1", Interrupts: []agentkit.ToolDef{agentkit.Tool[Transfer, Receipt]{Name: "pay", Run: noop}},
			Turn: func(context.Context, *service.Turn) (string, error) { return "", nil }}, []string{"custom agent c1", "pay is a tool"}},
		{agentkit.CustomAgent{Name: "c2"}, []string{"custom agent c2", "Turn is nil"}},
		{agentkit.CustomAgent{Name: "c3", Tools: []agentkit.ToolDef{agentkit.Interrupt[Approval, Decision]{Name: "ask"}},
			Turn: func(context.Context, *service.Turn) (string, error) { return "", nil }}, []string{"custom agent c3", "ask is an interrupt"}},
		{agentkit.CustomAgent{Name: "c4", Interrupts: []agentkit.ToolDef{agentkit.Interrupt[Approval, Decision]{Name: "pay"}},
			Tools: []agentkit.ToolDef{agentkit.Tool[Transfer, Receipt]{Name: "pay", Run: noop}},
			Turn:  func(context.Context, *service.Turn) (string, error) { return "", nil }}, []string{"agent c4", "two tools named pay"}},
	}
	for _, c := range cases {
		_, err := c.def.ServiceAgent(func(string) protocol.Model { return nil })
		if err == nil {
			t.Errorf("%s: no error", c.def.AgentName())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.def.AgentName(), err, w)
			}
		}
	}
}

// scripted calls `transfer` with the input the user message holds and,
// once it has a result, says what it got.
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) Generate(_ context.Context, req *protocol.ModelRequest, _ func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == protocol.RoleUser {
		return &protocol.ModelResponse{Message: protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{
			{ToolRequest: &protocol.ToolRequest{Name: "transfer", Ref: "t1", Input: json.RawMessage(last.Text())}}}}}, nil
	}
	return &protocol.ModelResponse{Message: protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{
		protocol.TextPart("got " + string(last.Content[0].ToolResponse.Output))}}, FinishReason: "stop"}, nil
}

// TestTypedToolInTheRuntime runs a typed tool through the runtime: bad
// input never reaches Run, Pause pauses the turn with its metadata, and a
// restart tells Run how it was resumed; SessionOf reaches the session.
func TestTypedToolInTheRuntime(t *testing.T) {
	t.Parallel()
	rt := servicetest.New(t, servicetest.Options{}).Runtime

	var runs atomic.Int32
	def := agentkit.Agent{Name: "typed", Model: "scripted", Tools: []agentkit.ToolDef{agentkit.Tool[Transfer, Receipt]{
		Name: "transfer",
		Run: func(ctx context.Context, in Transfer) (Receipt, error) {
			runs.Add(1)
			confirm, restarted, err := agentkit.Resumed[struct{ Code string }](ctx)
			if err != nil {
				return Receipt{}, err
			}
			if in.Amount > 100 && (!restarted || confirm.Code != "ok") {
				return Receipt{}, agentkit.Pause(map[string]any{"limit": 100})
			}
			if err := agentkit.SessionOf(ctx).UpdateCustom(func(json.RawMessage) (json.RawMessage, error) {
				return json.Marshal(map[string]any{"last": in.ToAccount})
			}); err != nil {
				return Receipt{}, err
			}
			return Receipt{Success: true, TransactionID: "tx-" + agentkit.RefOf(ctx)}, nil
		},
	}}}
	agent, err := def.ServiceAgent(func(name string) protocol.Model {
		if name == "scripted" {
			return scripted{}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Register(agent); err != nil {
		t.Fatal(err)
	}
	caller := auth.Caller{TenantID: "default", Actor: "test"}
	send := func(session, input string) *protocol.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(context.Background(), caller, "typed", protocol.AgentInit{SessionID: session},
			protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(input)}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := send("bad", `{"amount":"ten","toAccount":"1"}`); out.Error == nil || out.Error.Status != store.CodeInvalidArgument || runs.Load() != 0 {
		t.Fatalf("bad input: %+v, %d runs", out.Error, runs.Load())
	}
	if out := send("small", `{"amount":10,"toAccount":"1"}`); out.Message.Text() != `got {"success":true,"transactionId":"tx-t1"}` {
		t.Fatalf("small transfer: %+v", out.Message)
	}
	big := send("big", `{"amount":500,"toAccount":"2"}`)
	if big.FinishReason != "interrupted" || string(big.Message.Content[0].Metadata["interrupt"]) != `{"limit":100}` {
		t.Fatalf("big transfer: %+v", big.Message)
	}
	restart := func(resumed string) *protocol.AgentOutput {
		out, err := rt.InvokeOne(context.Background(), caller, "typed", protocol.AgentInit{SessionID: "big"}, protocol.AgentInput{Resume: &protocol.Resume{
			Restart: []protocol.Part{{ToolRequest: &protocol.ToolRequest{Name: "transfer", Ref: "t1", Input: json.RawMessage(`{"amount":500,"toAccount":"2"}`)},
				Metadata: protocol.Metadata{"resumed": json.RawMessage(resumed)}}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := restart(`{"code":"no"}`); out.FinishReason != "interrupted" {
		t.Fatalf("a wrong code pauses again: %+v", out)
	}
	if out := restart(`{"code":"ok"}`); out.FinishReason != "stop" {
		t.Fatalf("confirmed restart: %+v", out)
	}
	snap, err := rt.GetSnapshot(context.Background(), caller, "typed", protocol.SnapshotLookup{SessionID: "big"})
	if err != nil || string(snap.State.Custom) != `{"last":"2"}` {
		t.Fatalf("custom state after the transfer: %v %s", err, snap.State.Custom)
	}
}

// TestCustomAgentCallsItsTools: a custom turn calls a typed tool through
// the platform (Tool.Call): the output comes back decoded, an input its
// schema refuses fails the turn with INVALID_ARGUMENT before Run, and a
// call its approval policy picks pauses the turn before Run.
func TestCustomAgentCallsItsTools(t *testing.T) {
	t.Parallel()
	rt := servicetest.New(t, servicetest.Options{}).Runtime
	var runs atomic.Int32
	transfer := agentkit.Tool[Transfer, Receipt]{Name: "transfer", Run: func(ctx context.Context, in Transfer) (Receipt, error) {
		runs.Add(1)
		return Receipt{Success: true, TransactionID: "tx-" + agentkit.RefOf(ctx)}, nil
	}}
	turn := func(ctx context.Context, t *service.Turn) (string, error) {
		var in Transfer
		if err := json.Unmarshal([]byte(t.Input().Message.Text()), &in); err != nil {
			return "", err
		}
		r, err := transfer.Call(ctx, t, "to-"+in.ToAccount, in)
		if err != nil {
			return "", err
		}
		t.AddMessages(protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{protocol.TextPart(r.TransactionID)}})
		return "", nil
	}
	def := agentkit.CustomAgent{Name: "mover", Tools: []agentkit.ToolDef{transfer}, Turn: turn}
	agent, err := def.ServiceAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Register(agent); err != nil {
		t.Fatal(err)
	}
	send := func(input string) *protocol.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(context.Background(), auth.Caller{TenantID: "default", Actor: "test"}, "mover", protocol.AgentInit{},
			protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(input)}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := send(`{"amount":10,"toAccount":"7"}`); out.Error != nil || out.Message.Text() != "tx-to-7" || runs.Load() != 1 {
		t.Fatalf("a call: %+v %+v, %d runs", out.Error, out.Message, runs.Load())
	}
	if out := send(`{"amount":0,"toAccount":"8"}`); out.Error == nil || out.Error.Status != store.CodeInvalidArgument || runs.Load() != 1 {
		t.Fatalf("a refused input: %+v, %d runs", out.Error, runs.Load())
	}
	// Above the policy's limit the call waits for a human, Run untouched.
	transfer.Approval = &agentkit.Approval[Transfer]{When: func(_ context.Context, in Transfer) bool { return in.Amount > 100 }}
	gated, err := agentkit.CustomAgent{Name: "mover", Tools: []agentkit.ToolDef{transfer}, Turn: turn}.ServiceAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	rt = servicetest.New(t, servicetest.Options{}).Runtime
	if err := rt.Register(gated); err != nil {
		t.Fatal(err)
	}
	if out := send(`{"amount":500,"toAccount":"9"}`); out.FinishReason != protocol.FinishInterrupted || runs.Load() != 1 {
		t.Fatalf("a gated call: %+v, %d runs", out, runs.Load())
	}
	if out := send(`{"amount":50,"toAccount":"9"}`); out.Message.Text() != "tx-to-9" || runs.Load() != 2 {
		t.Fatalf("a call under the limit: %+v, %d runs", out, runs.Load())
	}
}
