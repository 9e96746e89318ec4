package service

import (
	"runtime/debug"
	"sync"
	"time"
)

// TurnLimits bound what one turn may make this server do, whatever the
// model asks for. A model's answer is attacker input: any end user can
// steer it (a pasted e-mail, a page a tool fetched), so the number of tool
// calls it requests, the interrupts it raises and the bytes its tools
// return are bounded here rather than trusted. A turn that reaches a bound
// fails with RESOURCE_EXHAUSTED and a message naming the bound; nothing of
// the model's answer that broke it runs. Zero fields take the defaults
// (DefaultTurnLimits).
type TurnLimits struct {
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

// DefaultTurnLimits are the bounds of a runtime that sets none.
var DefaultTurnLimits = TurnLimits{
	ToolRequests:        16,
	Interrupts:          16,
	PendingPerSession:   100,
	ToolRounds:          20,
	ToolOutputBytes:     1 << 20,
	TurnToolOutputBytes: 4 << 20,
	TurnBytes:           8 << 20,
}

// withDefaults fills the zero fields from DefaultTurnLimits.
func (l TurnLimits) withDefaults() TurnLimits {
	d := DefaultTurnLimits
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

// DetachLimits bound the detached turns: how many run on one instance at
// once (its own and those it takes over, together), and how many one
// tenant or one credential may have queued or running across the
// deployment. A detach past a tenant's or credential's bound is refused
// with RESOURCE_EXHAUSTED and a Retry-After; one past the instance's bound
// is queued in the database, where any instance with a free slot takes
// it, the tenants with the fewest running first.
type DetachLimits struct {
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

// DefaultDetachLimits are the bounds of a runtime that sets none.
var DefaultDetachLimits = DetachLimits{PerInstance: 8, PerTenant: 64, PerCredential: 16, RetryAfter: 5 * time.Second}

// withDefaults fills the zero fields from DefaultDetachLimits.
func (l DetachLimits) withDefaults() DetachLimits {
	d := DefaultDetachLimits
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

// exhausted is the error of a turn that reached one of its bounds.
func exhausted(format string, args ...any) *Error {
	return Errorf(CodeResourceExhausted, format, args...)
}

// turnBudget counts what a turn holds against its bounds.
type turnBudget struct {
	toolOutput int
	held       int
}

// chargeModel counts a model answer; it fails when the turn holds too
// much.
func (inv *invocation) chargeModel(t *Turn, m Message) error {
	t.budget.held += messageSize(m)
	if lim := inv.rt.limits.TurnBytes; t.budget.held > lim {
		return exhausted("The turn holds more than %d bytes of model answers and tool outputs; the model's answer is not used", lim)
	}
	return nil
}

// chargeToolOutput counts one tool call's output; it fails the call when
// the output or the turn's total is too large.
func (inv *invocation) chargeToolOutput(t *Turn, name string, out []byte) error {
	lim := inv.rt.limits
	if len(out) > lim.ToolOutputBytes {
		return exhausted("tool %s returned %d bytes; at most %d bytes of one call's output are kept", name, len(out), lim.ToolOutputBytes)
	}
	t.budget.toolOutput += len(out)
	t.budget.held += len(out)
	if t.budget.toolOutput > lim.TurnToolOutputBytes {
		return exhausted("the tools of this turn returned more than %d bytes; the output of %s is not kept", lim.TurnToolOutputBytes, name)
	}
	if t.budget.held > lim.TurnBytes {
		return exhausted("The turn holds more than %d bytes of model answers and tool outputs; the output of %s is not kept", lim.TurnBytes, name)
	}
	return nil
}

// messageSize is about the bytes a message holds: its texts and its
// JSON values (a cheap bound, not its encoding).
func messageSize(m Message) int {
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

// checkToolRequests refuses a model answer before any of its tools runs:
// more requests than the bound, more interrupts than the turn may raise,
// or two requests of one tool with one ref (a ref names one call, and an
// interrupt is answered by tool and ref, so two could never both be
// answered). Calls without a ref may repeat a tool (some models give no
// refs; the journal keys them by position), unless it is an interrupt.
func (inv *invocation) checkToolRequests(msg Message, requests []int, raised int) error {
	lim := inv.rt.limits
	if len(requests) > lim.ToolRequests {
		return exhausted("The model asked for %d tool calls in one answer; at most %d are allowed, and none of them ran", len(requests), lim.ToolRequests)
	}
	seen := make(map[[2]string]bool, len(requests))
	interrupts := raised
	for _, i := range requests {
		req := msg.Content[i].ToolRequest
		tool := inv.agent.Tool(req.Name)
		isInterrupt := tool != nil && tool.Interrupt
		k := [2]string{req.Name, req.Ref}
		if seen[k] && (req.Ref != "" || isInterrupt) {
			return Errorf(CodeInvalidArgument, "The model asked for two calls of '%s%s' with one ref; none of them ran", req.Name, RefSuffix(req.Ref))
		}
		seen[k] = true
		if isInterrupt {
			interrupts++
		}
	}
	if interrupts > lim.Interrupts {
		return exhausted("The model asked for %d interrupts in one turn; at most %d are allowed, and none of its calls ran", interrupts, lim.Interrupts)
	}
	return nil
}

// checkInterrupts refuses a turn that raised more interrupts than the
// bound (tools may interrupt when they run, and a custom agent writes its
// own messages).
func (inv *invocation) checkInterrupts(tr *turnRecord) error {
	if n, lim := len(tr.interrupts), inv.rt.limits.Interrupts; n > lim {
		return exhausted("The turn raised %d interrupts; at most %d are allowed", n, lim)
	}
	seen := make(map[[2]string]bool, len(tr.interrupts))
	for _, ni := range tr.interrupts {
		k := [2]string{ni.Tool, ni.Ref}
		if seen[k] {
			return Errorf(CodeInvalidArgument, "The turn raised two interrupts of '%s%s' with one ref: they could not be answered apart", ni.Tool, RefSuffix(ni.Ref))
		}
		seen[k] = true
	}
	return nil
}

// bigTurnBytes is what a turn must have held for the heap to be given
// back to the system after it.
const bigTurnBytes = 4 << 20

// memoryReturner gives the heap back to the system shortly after a turn
// that held a lot (large tool outputs): with the collector's target set
// high for throughput (cmd/platform's GOGC), the heap such a turn grew
// would otherwise stay with the process until the next collections, and a
// few hostile turns could keep a server at its peak. A return runs a
// second after the turn that asked, when the turn's memory is garbage; at
// most one runs per second, and a big turn that ends while one waits gets
// another after it.
type memoryReturner struct {
	mu      sync.Mutex
	pending bool
	again   bool
}

// after is told what a turn held when it ended.
func (m *memoryReturner) after(held int) {
	if held < bigTurnBytes {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending {
		m.again = true
		return
	}
	m.schedule()
}

// schedule runs a return in a second; m.mu is held.
func (m *memoryReturner) schedule() {
	m.pending = true
	time.AfterFunc(time.Second, func() {
		debug.FreeOSMemory()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.pending = false
		if m.again {
			m.again = false
			m.schedule()
		}
	})
}
