package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/schema"
)

// Agent is a registered agent: either a prompt agent (System, Model, Tools)
// driven by the runtime's model loop, or a custom agent whose TurnFunc runs
// each turn itself.
type Agent struct {
	// Name is the agent's route name.
	Name string
	// Description is shown to clients and operators.
	Description string
	// ServerManaged agents keep their sessions in the store and are resumed
	// by snapshotId or sessionId; client-managed ones take and return the
	// whole state.
	ServerManaged bool

	// System is the prompt agent's system text.
	System string
	// Model answers the prompt agent's turns.
	Model Model
	// Config is passed to the model as is.
	Config json.RawMessage
	// Tools the prompt agent's model may request (interrupts included).
	Tools []*Tool
	// MaxToolRounds bounds the model/tool loop of one turn (default 5).
	MaxToolRounds int

	// Turn runs one turn of a custom agent. When set, the prompt fields are
	// ignored.
	Turn TurnFunc

	// Version is the version of a tenant's agent (0: an agent compiled into
	// the binary). Every snapshot records the version its turn ran with.
	Version int
	// ResumeLatest makes a tenant's agent continue its sessions with its
	// current version; by default a session goes on with the version it
	// last ran with. A snapshot paused on interrupts resumes on its own
	// version either way.
	ResumeLatest bool
	// Disabled is a tenant's agent its tenant disabled: its sessions can be
	// read, no turn runs.
	Disabled bool
}

// TurnFunc runs one turn of a custom agent. It returns the turn's finish
// reason (empty means stop).
type TurnFunc func(ctx context.Context, t *Turn) (string, error)

// Tool is a function the model may request. An Interrupt tool never runs: a
// request for it pauses the turn until a human answers it.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Interrupt marks a declared interrupt (a question to a human).
	Interrupt bool
	// Run executes the tool. It may return an error made by InterruptWith to
	// pause the turn instead (a tool that needs confirmation).
	Run func(ctx context.Context, call ToolCall) (json.RawMessage, error)
	// Prepare, when set, runs before the call is recorded and Run starts:
	// it reads what Run needs from the platform (an HTTP tool's signing
	// keys and address policy), so that the database going away cannot
	// fail a call that started. Its error fails the turn with nothing
	// recorded and nothing run (a resume's claims are given back); its
	// value reaches Run as ToolCall.Prepared.
	Prepare func(ctx context.Context, tenantID string) (any, error)
	// ExpiresAfter gives an interrupt of this tool a deadline (zero: none).
	ExpiresAfter time.Duration
	// OnExpire says what the deadline does: nil expires the interrupt (a
	// later resume is rejected); a non-nil output answers it with that
	// output and resumes the turn server-side.
	OnExpire *ExpireRespond
	// Idempotent says running the tool again with the same ToolCall.ID has
	// no further effect (an HTTP tool whose receiver deduplicates call
	// ids): a detached turn taken over after its instance died during the
	// call runs it again, instead of failing as for any other tool, whose
	// effect is unknown.
	Idempotent bool
	// Approval makes the platform ask a human before the tool runs (see
	// approval.Policy); nil: the tool runs when the model asks. Not for
	// Interrupt tools, which never run.
	Approval *approval.Policy
}

// ExpireRespond answers an interrupt whose deadline passed.
type ExpireRespond struct {
	Output json.RawMessage
}

// onExpireJSON is the policy stored on an interrupt row.
func (t *Tool) onExpireJSON() json.RawMessage {
	if t.ExpiresAfter <= 0 {
		return nil
	}
	if t.OnExpire == nil {
		return json.RawMessage(`{"action":"expire"}`)
	}
	raw, _ := json.Marshal(map[string]any{"action": "respond", "output": rawjson.Or(t.OnExpire.Output, "null")})
	return raw
}

// ToolCall is one execution of a tool.
type ToolCall struct {
	Name  string
	Ref   string
	Input json.RawMessage
	// Resumed is set when the tool runs again after a restart: the restart
	// part's metadata.resumed, or true when the client gave none.
	Resumed json.RawMessage
	// Metadata is the tool request part's metadata.
	Metadata Metadata
	// Session is the session the tool runs in: its custom state and
	// artifacts, which the tool may update (streamed to the client as they
	// change, and kept with the turn's snapshot or client state).
	Session *ToolSession
	// ID names this call for whoever the tool calls: the same for every
	// attempt, and for the instance that takes a detached turn over.
	ID string
	// TenantID, SessionID, TurnID (the snapshot the turn writes) and
	// EndUser say whose call it is.
	TenantID, SessionID, TurnID, EndUser string
	// Trace is where a tool reports how its call went (an HTTP tool's last
	// status and attempts); it is recorded with the call.
	Trace *ToolTrace
	// Prepared is what the tool's Prepare returned (nil without one).
	Prepared any
}

// ToolTrace is how a tool's call went, beyond its output.
type ToolTrace struct {
	HTTPStatus int
	Attempts   int
}

// ToolSession is what a tool may read and change of its session. Tools of
// one turn run one after another, so a tool needs no locking. A detached
// turn taken over by another instance reuses the recorded outcome of a
// tool that already ran, without running it (or its session updates)
// again.
type ToolSession struct{ t *Turn }

// ID is the session's id.
func (s *ToolSession) ID() string { return s.t.SessionID() }

// Custom returns the session's custom state (nil when unset).
func (s *ToolSession) Custom() json.RawMessage { return s.t.Custom() }

// UpdateCustom replaces the custom state by fn's result and streams the
// change as a customPatch chunk.
func (s *ToolSession) UpdateCustom(fn func(current json.RawMessage) (json.RawMessage, error)) error {
	return s.t.UpdateCustom(fn)
}

// Artifacts returns a copy of the session's artifacts.
func (s *ToolSession) Artifacts() []Artifact { return s.t.Artifacts() }

// AddArtifacts adds artifacts, replacing any of the same name, and streams
// each one.
func (s *ToolSession) AddArtifacts(arts ...Artifact) { s.t.AddArtifacts(arts...) }

// InterruptError pauses a turn on the tool request that returned it.
type InterruptError struct {
	// Metadata becomes the part's metadata.interrupt (true when nil).
	Metadata json.RawMessage
}

func (e *InterruptError) Error() string { return "tool interrupted" }

// InterruptWith returns an error that makes the running tool interrupt the
// turn with the given metadata (nil for plain `true`).
func InterruptWith(metadata any) error {
	if metadata == nil {
		return &InterruptError{}
	}
	raw, err := json.Marshal(metadata)
	if err != nil {
		return fmt.Errorf("interrupt metadata: %w", err)
	}
	return &InterruptError{Metadata: raw}
}

func asInterrupt(err error) (*InterruptError, bool) {
	var ie *InterruptError
	ok := errors.As(err, &ie)
	return ie, ok
}

var agentNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

func (a *Agent) validate() error {
	if a == nil {
		return errors.New("nil agent")
	}
	if !agentNameRE.MatchString(a.Name) {
		return fmt.Errorf("agent name %q: want a letter then letters, digits, _ or -, at most 64", a.Name)
	}
	if a.Turn == nil && a.Model == nil {
		return fmt.Errorf("agent %q: a prompt agent needs a Model (or set Turn for a custom agent)", a.Name)
	}
	seen := map[string]bool{}
	for _, t := range a.Tools {
		if t == nil || t.Name == "" {
			return fmt.Errorf("agent %q: a tool has no name", a.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("agent %q: two tools named %q", a.Name, t.Name)
		}
		seen[t.Name] = true
		if !t.Interrupt && t.Run == nil {
			return fmt.Errorf("agent %q: tool %q has no Run and is not an interrupt", a.Name, t.Name)
		}
		for what, doc := range map[string]json.RawMessage{"input": t.InputSchema, "output": t.OutputSchema} {
			if rawjson.IsNull(doc) {
				continue
			}
			if _, err := schema.Compile(doc); err != nil {
				return fmt.Errorf("agent %q: tool %q: its %s schema is not a valid JSON Schema: %v", a.Name, t.Name, what, err)
			}
		}
		if err := a.validateApproval(t); err != nil {
			return err
		}
		if t.OnExpire != nil && !rawjson.IsNull(t.OutputSchema) {
			if v := schema.Validate(t.OutputSchema, rawjson.Or(t.OnExpire.Output, "null")); len(v) > 0 {
				return fmt.Errorf("agent %q: tool %q: its on-expire output does not match its output schema: %s", a.Name, t.Name, strings.Join(v, "; "))
			}
		}
	}
	return nil
}

// Tool is the agent's tool of that name (nil: none).
func (a *Agent) Tool(name string) *Tool {
	for _, t := range a.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func (a *Agent) toolDefinitions() []ToolDefinition {
	defs := make([]ToolDefinition, 0, len(a.Tools))
	for _, t := range a.Tools {
		defs = append(defs, ToolDefinition{
			Name:         t.Name,
			Description:  t.Description,
			InputSchema:  t.InputSchema,
			OutputSchema: t.OutputSchema,
		})
	}
	return defs
}
