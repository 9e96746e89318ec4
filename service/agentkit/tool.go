package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

// ToolDef is a tool or an interrupt an agent offers its model: a [Tool] or
// an [Interrupt].
type ToolDef interface {
	// ServiceTool builds the runtime's tool, with the JSON Schemas
	// inferred from the Go types.
	ServiceTool() (*service.Tool, error)
}

// Interrupt is a question for a human that the model may ask: a request
// for it pauses the turn until someone answers it (the client with
// resume.respond, or an operator in the approvals inbox). In is what the
// model sends and the human sees; Out is what the human answers, validated
// against its schema before the turn resumes.
type Interrupt[In, Out any] struct {
	// Name is the tool name the model calls.
	Name string
	// Description tells the model when to ask.
	Description string
	// ExpiresAfter gives each of its interrupts a deadline (zero: none).
	ExpiresAfter time.Duration
	// OnExpire, when set with ExpiresAfter, answers an interrupt whose
	// deadline passed with this output and resumes the turn on the server;
	// when nil the interrupt expires and can no longer be answered.
	OnExpire *Out
}

// ServiceTool implements [ToolDef].
func (i Interrupt[In, Out]) ServiceTool() (*service.Tool, error) {
	in, err := schemaOf[In]()
	if err != nil {
		return nil, fmt.Errorf("interrupt %s: input: %w", i.Name, err)
	}
	if reflect.TypeFor[Out]().Kind() == reflect.Interface {
		return nil, fmt.Errorf("interrupt %s: its output type is an interface: name the Go type of what the human answers (e.g. struct{ Approved bool })", i.Name)
	}
	out, err := schemaOf[Out]()
	if err != nil {
		return nil, fmt.Errorf("interrupt %s: output: %w", i.Name, err)
	}
	t := &service.Tool{Name: i.Name, Description: i.Description, InputSchema: in, OutputSchema: out,
		Interrupt: true, ExpiresAfter: i.ExpiresAfter}
	if i.OnExpire != nil {
		if i.ExpiresAfter <= 0 {
			return nil, fmt.Errorf("interrupt %s: OnExpire needs ExpiresAfter", i.Name)
		}
		raw, err := json.Marshal(i.OnExpire)
		if err != nil {
			return nil, fmt.Errorf("interrupt %s: OnExpire: %w", i.Name, err)
		}
		t.OnExpire = &service.ExpireRespond{Output: raw}
	}
	return t, nil
}

// Tool is a Go function the model may call. The runtime checks the model's
// input against In's schema before Run is called (a request that fails it
// fails the turn with INVALID_ARGUMENT, and Run does not run) and Run's
// output against Out's. Every call is recorded in the tool_calls table.
type Tool[In, Out any] struct {
	// Name is the tool name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Run does the work. It may return [Pause] to pause the turn instead
	// (a confirmation before something irreversible), and learns with
	// [Resumed] whether it runs again after a restart. An error of type
	// *service.Error reaches the client as it is; any other error is
	// logged and the client gets a generic message.
	Run func(ctx context.Context, in In) (Out, error)
}

// ServiceTool implements [ToolDef].
func (t Tool[In, Out]) ServiceTool() (*service.Tool, error) {
	if t.Run == nil {
		return nil, fmt.Errorf("tool %s: Run is nil", t.Name)
	}
	in, err := schemaOf[In]()
	if err != nil {
		return nil, fmt.Errorf("tool %s: input: %w", t.Name, err)
	}
	out, err := schemaOf[Out]()
	if err != nil {
		return nil, fmt.Errorf("tool %s: output: %w", t.Name, err)
	}
	run := t.Run
	name := t.Name
	return &service.Tool{
		Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out,
		Run: func(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
			var v In
			if err := decodeInput(call.Input, &v); err != nil {
				return nil, service.Errorf(service.CodeInvalidArgument, "tool %s: input: %v", name, err)
			}
			result, err := run(context.WithValue(ctx, callKey{}, &call), v)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(result)
			if err != nil {
				return nil, fmt.Errorf("tool %s: encoding its output: %w", name, err)
			}
			return raw, nil
		},
	}, nil
}

// decodeInput decodes a tool's input (already checked against its schema)
// into v; an absent input decodes as JSON null.
func decodeInput(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return json.Unmarshal(raw, v)
}

type callKey struct{}

func callOf(ctx context.Context) *service.ToolCall {
	c, _ := ctx.Value(callKey{}).(*service.ToolCall)
	return c
}

// Pause returns the error a tool returns to pause its turn: the request
// becomes an interrupt whose metadata (metadata.interrupt on the wire, the
// interrupt's metadata in the inbox) is the JSON of metadata (true when
// nil). The client answers it with a response, or restarts the request to
// run the tool again; [Resumed] then tells the tool so.
func Pause(metadata any) error {
	return service.InterruptWith(metadata)
}

// Resumed tells a tool that runs again after a restart how it was resumed:
// ok is true and the restart's metadata.resumed is decoded into T (true
// when the client sent none, so Resumed[bool] reports a plain restart).
// On a first run ok is false. A resumed value that does not decode into T
// is an error.
func Resumed[T any](ctx context.Context) (value T, ok bool, err error) {
	c := callOf(ctx)
	if c == nil || len(c.Resumed) == 0 {
		return value, false, nil
	}
	if err := json.Unmarshal(c.Resumed, &value); err != nil {
		return value, true, service.Errorf(service.CodeInvalidArgument, "tool %s: the restart's metadata.resumed does not decode: %v", c.Name, err)
	}
	return value, true, nil
}

// SessionOf is the session a tool runs in: it may read and update the
// custom state and artifacts, which stream to the client as they change.
// It is nil outside a tool's Run.
func SessionOf(ctx context.Context) *service.ToolSession {
	if c := callOf(ctx); c != nil {
		return c.Session
	}
	return nil
}

// RefOf is the ref of the request a tool runs for ("" when the model gave
// none, or outside a tool's Run): a key for idempotent side effects.
func RefOf(ctx context.Context) string {
	if c := callOf(ctx); c != nil {
		return c.Ref
	}
	return ""
}

// errNoName is returned for a definition without a name.
var errNoName = errors.New("a name is required")
