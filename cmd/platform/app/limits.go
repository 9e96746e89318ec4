package app

import (
	"errors"
	"flag"

	"github.com/holdpoint/holdpoint/service/limits"
)

// limitsConfig is what the bound flags chose: what one turn may make the
// server do, whatever the model asks, and how many detached turns run and
// wait.
type limitsConfig struct {
	turn   limits.Turn
	detach limits.Detach
}

// register adds the bound flags to fs, with the runtime's defaults.
func (l *limitsConfig) register(fs *flag.FlagSet) {
	t, d := limits.DefaultTurn, limits.DefaultDetach
	fs.IntVar(&l.turn.ToolRequests, "max-tool-requests", t.ToolRequests, "tool calls one model answer may request; an answer with more fails its turn before any of them runs")
	fs.IntVar(&l.turn.Interrupts, "max-interrupts-per-turn", t.Interrupts, "interrupts (approvals, questions) one turn may raise")
	fs.IntVar(&l.turn.PendingPerSession, "max-pending-interrupts", t.PendingPerSession, "interrupts that may be pending in one session at once; a turn that would raise more fails and writes none")
	fs.IntVar(&l.turn.ToolRounds, "max-tool-rounds", t.ToolRounds, "model/tool rounds of one turn at most (an agent's own maxToolRounds may only be lower)")
	fs.IntVar(&l.turn.ToolOutputBytes, "max-tool-output-bytes", t.ToolOutputBytes, "bytes of one tool call's output; a larger output fails the call and is not kept")
	fs.IntVar(&l.turn.TurnToolOutputBytes, "max-turn-tool-output-bytes", t.TurnToolOutputBytes, "bytes of tool output one turn may collect")
	fs.IntVar(&l.turn.TurnBytes, "max-turn-bytes", t.TurnBytes, "bytes of model answers and tool outputs one turn may hold")
	fs.IntVar(&l.detach.PerInstance, "max-detached-running", d.PerInstance, "detached turns running on this instance at once (its own and those taken over); more wait in the database for a free slot on any instance")
	fs.IntVar(&l.detach.PerTenant, "max-detached-per-tenant", d.PerTenant, "detached turns one tenant may have queued or running; past it a detach answers 429 with Retry-After")
	fs.IntVar(&l.detach.PerCredential, "max-detached-per-credential", d.PerCredential, "detached turns one API key or token subject may have queued or running; past it a detach answers 429 with Retry-After")
}

// check refuses bounds that are not positive.
func (l *limitsConfig) check() error {
	for _, v := range []int{l.turn.ToolRequests, l.turn.Interrupts, l.turn.PendingPerSession, l.turn.ToolRounds,
		l.turn.ToolOutputBytes, l.turn.TurnToolOutputBytes, l.turn.TurnBytes,
		l.detach.PerInstance, l.detach.PerTenant, l.detach.PerCredential} {
		if v <= 0 {
			return errors.New("every --max-* bound must be positive")
		}
	}
	return nil
}
