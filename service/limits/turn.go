package limits

import (
	"time"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// Turn bounds what one turn may make this server do, whatever the
// model asks for. A model's answer is attacker input: any end user can
// steer it (a pasted e-mail, a page a tool fetched), so the number of tool
// calls it requests, the interrupts it raises and the bytes its tools
// return are bounded here rather than trusted. A turn that reaches a bound
// fails with RESOURCE_EXHAUSTED and a message naming the bound; nothing of
// the model's answer that broke it runs. Zero fields take the defaults
// (DefaultTurn). The engine applies them as service.Options.Limits.
type Turn struct {
	// ToolRequests bounds the tool requests of one model answer.
	ToolRequests int
	// Interrupts bounds the interrupts one turn raises.
	Interrupts int
	// PendingPerSession bounds the interrupts pending in one session at
	// once, checked in the write that adds them.
	PendingPerSession int
	// ToolRounds bounds the model/tool rounds of one turn; an agent's
	// MaxToolRounds may only lower it.
	ToolRounds int
	// ToolOutputBytes bounds the output of one tool call; a larger output
	// fails the call and is not kept.
	ToolOutputBytes int
	// TurnToolOutputBytes bounds the tool output of one turn.
	TurnToolOutputBytes int
	// TurnBytes bounds what one turn holds of the model's answers and the
	// tools' outputs together.
	TurnBytes int
}

// DefaultTurn are the bounds of a runtime that sets none.
var DefaultTurn = Turn{
	ToolRequests:        16,
	Interrupts:          16,
	PendingPerSession:   100,
	ToolRounds:          20,
	ToolOutputBytes:     1 << 20,
	TurnToolOutputBytes: 4 << 20,
	TurnBytes:           8 << 20,
}

// WithDefaults fills the zero fields from DefaultTurn.
func (l Turn) WithDefaults() Turn {
	d := DefaultTurn
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.ToolRequests, d.ToolRequests)
	pick(&l.Interrupts, d.Interrupts)
	pick(&l.PendingPerSession, d.PendingPerSession)
	pick(&l.ToolRounds, d.ToolRounds)
	pick(&l.ToolOutputBytes, d.ToolOutputBytes)
	pick(&l.TurnToolOutputBytes, d.TurnToolOutputBytes)
	pick(&l.TurnBytes, d.TurnBytes)
	return l
}

// Detach bounds the detached turns: how many run on one instance at
// once (its own and those it takes over, together), and how many one
// tenant or one credential may have queued or running across the
// deployment. A detach past a tenant's or credential's bound is refused
// with RESOURCE_EXHAUSTED and a Retry-After; one past the instance's bound
// is queued in the database, where any instance with a free slot takes
// it, the tenants with the fewest running first.
type Detach struct {
	// PerInstance bounds the detached turns running on this instance.
	PerInstance int
	// PerTenant bounds a tenant's detached turns queued or running.
	PerTenant int
	// PerCredential bounds one credential's (API key, token subject)
	// detached turns queued or running.
	PerCredential int
	// RetryAfter is what a refused detach tells the client to wait.
	RetryAfter time.Duration
}

// DefaultDetach are the bounds of a runtime that sets none.
var DefaultDetach = Detach{PerInstance: 8, PerTenant: 64, PerCredential: 16, RetryAfter: 5 * time.Second}

// WithDefaults fills the zero fields from DefaultDetach.
func (l Detach) WithDefaults() Detach {
	d := DefaultDetach
	if l.PerInstance <= 0 {
		l.PerInstance = d.PerInstance
	}
	if l.PerTenant <= 0 {
		l.PerTenant = d.PerTenant
	}
	if l.PerCredential <= 0 {
		l.PerCredential = d.PerCredential
	}
	if l.RetryAfter <= 0 {
		l.RetryAfter = d.RetryAfter
	}
	return l
}

// MessageSize is about the bytes a message holds: its texts and its
// JSON values (a cheap bound, not its encoding).
func MessageSize(m protocol.Message) int {
	n := 0
	for _, p := range m.Content {
		if p.Text != nil {
			n += len(*p.Text)
		}
		if p.Reasoning != nil {
			n += len(*p.Reasoning)
		}
		if tr := p.ToolRequest; tr != nil {
			n += len(tr.Name) + len(tr.Ref) + len(tr.Input)
		}
		if tr := p.ToolResponse; tr != nil {
			n += len(tr.Name) + len(tr.Ref) + len(tr.Output)
		}
		n += len(p.Media) + len(p.Data) + len(p.Custom) + len(p.Resource)
		for k, v := range p.Metadata {
			n += len(k) + len(v)
		}
	}
	return n
}
