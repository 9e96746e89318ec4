package agentkit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// Definition is an agent to serve: an [Agent] or a [CustomAgent].
type Definition interface {
	// AgentName is the agent's route name (/api/agents/{name}).
	AgentName() string
	// ModelNames are the models the agent needs ("" is the platform's
	// default model), resolved before ServiceAgent is called.
	ModelNames() []string
	// ServiceAgent builds the runtime's agent; model returns the resolved
	// model of each name ModelNames listed.
	ServiceAgent(model func(name string) protocol.Model) (*service.Agent, error)
}

// Agent is a prompt agent: each turn the model answers the conversation,
// with the tools and interrupts it may request, until it stops asking for
// tools, an interrupt pauses the turn, or MaxToolRounds is reached.
type Agent struct {
	// Name is the route name: a letter, then letters, digits, _ or -.
	Name string
	// Description is shown to clients and operators.
	Description string
	// System is the system prompt.
	System string
	// Model names the model: "googleai/gemini-2.5-flash",
	// "anthropic/claude-sonnet-4-6", "openai/gpt-4o-mini", "ollama/llama3.2"
	// (through its OpenAI-compatible API), "demo" (the offline demo model),
	// a name the program registered (app.Platform.Models), or "" for the
	// platform's default (the provider configured by environment, else the
	// demo model). A provider whose key is not in the environment fails at
	// start-up, naming the variable.
	Model string
	// Config is passed to the model (e.g. map[string]any{"temperature": 0}).
	Config any
	// Tools are the tools and interrupts the model may request.
	Tools []ToolDef
	// ClientManaged agents keep no session on the server: each answer
	// carries the whole state, signed, and the client sends it back. By
	// default sessions, snapshots and interrupts are stored in PostgreSQL.
	ClientManaged bool
	// MaxToolRounds bounds the model/tool loop of one turn (default 5).
	MaxToolRounds int
}

// AgentName implements [Definition].
func (a Agent) AgentName() string { return a.Name }

// ModelNames implements [Definition].
func (a Agent) ModelNames() []string { return []string{a.Model} }

// ServiceAgent implements [Definition].
func (a Agent) ServiceAgent(model func(string) protocol.Model) (*service.Agent, error) {
	if a.Name == "" {
		return nil, fmt.Errorf("agent: %w", errNoName)
	}
	tools, err := serviceTools(a.Name, a.Tools)
	if err != nil {
		return nil, err
	}
	m := model(a.Model)
	if m == nil {
		return nil, fmt.Errorf("agent %s: model %q is not available", a.Name, a.Model)
	}
	out := &service.Agent{
		Name: a.Name, Description: a.Description, ServerManaged: !a.ClientManaged,
		System: a.System, Model: m, Tools: tools, MaxToolRounds: a.MaxToolRounds,
	}
	if a.Config != nil {
		raw, err := json.Marshal(a.Config)
		if err != nil {
			return nil, fmt.Errorf("agent %s: config: %w", a.Name, err)
		}
		out.Config = raw
	}
	return out, nil
}

// CustomAgent runs each turn with a Go function instead of a model loop.
// Its turn may pause on one of its Interrupts ([Interrupt.Ask]); the
// runtime records the interrupt like a prompt agent's, and when the client
// (or an operator) answers it, checks and claims the answer exactly once
// before the next turn's function reads it ([Interrupt.Answer]).
type CustomAgent struct {
	// Name is the route name.
	Name string
	// Description is shown to clients and operators.
	Description string
	// Interrupts are the questions the turn may ask a human.
	Interrupts []ToolDef
	// Tools are the functions with an effect the turn calls through the
	// platform ([Tool.Call], service.Turn.CallTool): each call is recorded
	// before it runs and, in a detached turn taken over by another
	// instance, not run a second time; a call its Approval picks waits
	// for a human first.
	Tools []ToolDef
	// ClientManaged agents keep no session on the server (see Agent).
	ClientManaged bool
	// Turn runs one turn: it reads the input and history from t, adds the
	// answer, and returns the finish reason ("" for stop).
	Turn func(ctx context.Context, t *service.Turn) (string, error)
}

// AgentName implements [Definition].
func (a CustomAgent) AgentName() string { return a.Name }

// ModelNames implements [Definition]: a custom agent needs no model.
func (a CustomAgent) ModelNames() []string { return nil }

// ServiceAgent implements [Definition].
func (a CustomAgent) ServiceAgent(func(string) protocol.Model) (*service.Agent, error) {
	if a.Name == "" {
		return nil, fmt.Errorf("custom agent: %w", errNoName)
	}
	if a.Turn == nil {
		return nil, fmt.Errorf("custom agent %s: Turn is nil", a.Name)
	}
	tools, err := serviceTools(a.Name, append(slices.Clip(a.Interrupts), a.Tools...))
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		switch asked := i < len(a.Interrupts); {
		case asked && !t.Interrupt:
			return nil, fmt.Errorf("custom agent %s: %s is a tool, listed in Interrupts: list it in Tools", a.Name, t.Name)
		case !asked && t.Interrupt:
			return nil, fmt.Errorf("custom agent %s: %s is an interrupt, listed in Tools: list it in Interrupts", a.Name, t.Name)
		}
	}
	return &service.Agent{Name: a.Name, Description: a.Description, ServerManaged: !a.ClientManaged, Tools: tools, Turn: a.Turn}, nil
}

// serviceTools builds an agent's tools, refusing unnamed and duplicate
// ones; errors name the agent and the tool.
func serviceTools(agent string, defs []ToolDef) ([]*service.Tool, error) {
	seen := map[string]bool{}
	var tools []*service.Tool
	for i, d := range defs {
		if d == nil {
			return nil, fmt.Errorf("agent %s: tool %d is nil", agent, i)
		}
		t, err := d.ServiceTool()
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", agent, err)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("agent %s: tool %d: %w", agent, i, errNoName)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("agent %s: two tools named %s", agent, t.Name)
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// Ask pauses a custom agent's turn on the interrupt: it adds a model
// message with text (when not empty) and a request for the interrupt with
// input in under ref, and returns the finish reason the turn function
// returns. The runtime records the interrupt (a row in the approvals
// inbox, with the interrupt's deadline).
func (i Interrupt[In, Out]) Ask(t *service.Turn, ref string, in In, text string) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("interrupt %s: encoding its input: %w", i.Name, err)
	}
	msg := protocol.Message{Role: protocol.RoleModel}
	if text != "" {
		msg.Content = append(msg.Content, protocol.TextPart(text))
	}
	msg.Content = append(msg.Content, protocol.Part{
		ToolRequest: &protocol.ToolRequest{Name: i.Name, Ref: ref, Input: raw},
		Metadata:    protocol.Metadata{"interrupt": json.RawMessage("true")},
	})
	t.AddMessages(msg)
	return protocol.FinishInterrupted, nil
}

// Answer returns the answer to the interrupt that the turn was resumed
// with: ok is false when the turn's input answered no request of this
// interrupt. The runtime has already checked the answer against Out's
// schema and claimed it, so a turn sees each answer once.
func (i Interrupt[In, Out]) Answer(t *service.Turn) (out Out, ref string, ok bool, err error) {
	msgs := t.Messages()
	if len(msgs) == 0 || t.Input().Resume == nil {
		return out, "", false, nil
	}
	last := msgs[len(msgs)-1]
	if last.Role != protocol.RoleTool {
		return out, "", false, nil
	}
	for _, p := range last.Content {
		if r := p.ToolResponse; r != nil && r.Name == i.Name {
			if err := decodeInput(r.Output, &out); err != nil {
				return out, r.Ref, true, fmt.Errorf("interrupt %s: decoding the answer: %w", i.Name, err)
			}
			return out, r.Ref, true, nil
		}
	}
	return out, "", false, nil
}
