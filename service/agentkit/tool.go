package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/store"
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
	// (a confirmation it decides on as it runs; an approval before it
	// runs is the Approval field's), and learns with
	// [Resumed] whether it runs again after a restart. An error of type
	// *store.Error reaches the client as it is; any other error is
	// logged and the client gets a generic message.
	Run func(ctx context.Context, in In) (Out, error)
	// Approval makes the platform ask a human before Run runs (nil: it
	// runs when the model asks). Unlike a [Pause] in Run, the model
	// cannot talk its way past it: Run only ever sees an approved input.
	Approval *Approval[In]
	// Idempotent says a second run of the same call has no further
	// effect: Run passes [CallIDOf] to a receiver that deduplicates on
	// it. A detached turn taken over after its instance died during the
	// call then runs it again, with the same id, instead of failing
	// ABORTED as it does for a call whose effect is unknown.
	Idempotent bool
}

// Approval is a tool's approval policy: the platform pauses a call the
// policy picks before the tool runs, on an approval interrupt whose input
// is the call, and runs it once enough humans approve (see
// approval.Policy). The zero Approval asks for every call, one approval
// from whoever may decide the session's interrupts.
type Approval[In any] struct {
	// When picks the calls that need approval, from their input (already
	// valid against In's schema); nil: every call does. It runs before
	// the call is recorded and may run again when a turn is replayed, so
	// it must not have side effects.
	When func(ctx context.Context, in In) bool
	// Scope is the scope an approver's key must hold (e.g.
	// approve:payments); empty: any operator. A scope, or more than one
	// approval, makes the approval maker-checker: the end user who asked
	// never counts.
	Scope string
	// Approvals is how many distinct approvers are needed (0: one; at
	// most approval.MaxApprovals). One denial ends the call.
	Approvals int
	// AllowEdit lets an approver change the input before approving; the
	// edited input is what Run gets.
	AllowEdit bool
	// Attempts bounds how many times an approved call runs (0:
	// approval.DefaultAttempts; at most approval.MaxAttempts).
	Attempts int
	// Escalate hands a call still pending after a while to another scope.
	Escalate *approval.Escalation
}

// policy is the runtime's policy of a, for the tool named name.
func (a *Approval[In]) policy(name string) (*approval.Policy, error) {
	p := &approval.Policy{Scope: a.Scope, Approvals: a.Approvals, AllowEdit: a.AllowEdit, Attempts: a.Attempts}
	if a.Escalate != nil {
		e := *a.Escalate
		p.Escalate = &e
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("tool %s: approval: %w", name, err)
	}
	if when := a.When; when != nil {
		p.When = func(ctx context.Context, input json.RawMessage) (bool, error) {
			var v In
			if err := decodeInput(input, &v); err != nil {
				return false, store.Errorf(store.CodeInvalidArgument, "tool %s: input: %v", name, err)
			}
			return when(ctx, v), nil
		}
	}
	return p, nil
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
	var approval *approval.Policy
	if t.Approval != nil {
		if approval, err = t.Approval.policy(t.Name); err != nil {
			return nil, err
		}
	}
	run := t.Run
	name := t.Name
	return &service.Tool{
		Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out, Approval: approval,
		Idempotent: t.Idempotent,
		Run: func(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
			var v In
			if err := decodeInput(call.Input, &v); err != nil {
				return nil, store.Errorf(store.CodeInvalidArgument, "tool %s: input: %v", name, err)
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
		return value, true, store.Errorf(store.CodeInvalidArgument, "tool %s: the restart's metadata.resumed does not decode: %v", c.Name, err)
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

// CallIDOf is the id of the call a tool runs for ("" outside a tool's
// Run): the same for every attempt of the call, and for the instance that
// takes a detached turn over, so a receiver that deduplicates on it (an
// idempotency key) makes a second run harmless. See Tool.Idempotent.
func CallIDOf(ctx context.Context) string {
	if c := callOf(ctx); c != nil {
		return c.ID
	}
	return ""
}

// errNoName is returned for a definition without a name.
var errNoName = errors.New("a name is required")

// Call runs the tool from a custom agent's turn (the agent lists it in
// CustomAgent.Tools) through the platform: see service.Turn.CallTool. ref
// names the call within the turn and must be the same each time the turn
// runs; a detached turn taken over after its instance died gets the
// recorded output back instead of a second run. A call the tool's Approval
// picks returns an error wrapping service.ErrCallPaused: return it from the
// turn function as it is; the turn the decision resumes gets the approved
// call's output from the same Call.
func (t Tool[In, Out]) Call(ctx context.Context, turn *service.Turn, ref string, in In) (Out, error) {
	var out Out
	raw, err := json.Marshal(in)
	if err != nil {
		return out, fmt.Errorf("tool %s: encoding its input: %w", t.Name, err)
	}
	res, err := turn.CallTool(ctx, t.Name, ref, raw)
	if err != nil {
		return out, err
	}
	if err := decodeInput(res, &out); err != nil {
		return out, fmt.Errorf("tool %s: decoding its output: %w", t.Name, err)
	}
	return out, nil
}

// Decided is the call of the tool that the turn's resume decided, after
// Call paused the turn on its approval: the input and ref it was asked
// with (ok false when the resume decided none). Calling it again with them
// returns the approved call's output without running it a second time.
func (t Tool[In, Out]) Decided(turn *service.Turn) (in In, ref string, ok bool, err error) {
	ref, raw, ok := turn.DecidedCall(t.Name)
	if !ok {
		return in, "", false, nil
	}
	if err := decodeInput(raw, &in); err != nil {
		return in, ref, true, fmt.Errorf("tool %s: decoding the decided call's input: %w", t.Name, err)
	}
	return in, ref, true, nil
}
