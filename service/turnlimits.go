package service

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service/limits"
)

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
	t.budget.held += limits.MessageSize(m)
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
