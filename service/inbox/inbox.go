// Package inbox is the approvals inbox, a layer on top of the turn engine
// (package service): the operators' list of interrupts and their history,
// their decisions (respond, restart, approve with votes and edits), the
// outcome a client may learn of a decision, the decisions on tool calls
// whose outcome is unknown, and the background sweeps of deadlines,
// escalations and lost tool calls. It records decisions in the store and
// asks the engine, through its exported methods, for the turn that carries
// them out (service.Runtime.ResumeDecided).
package inbox

import (
	"log/slog"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/store"
)

// Inbox decides the interrupts of the agents a Runtime serves.
type Inbox struct {
	rt    *service.Runtime
	store store.Store
	log   *slog.Logger
	obs   observe.Observer
}

// New returns the inbox of rt: it reads and writes rt's store, and logs
// and reports to rt's logger and observer.
func New(rt *service.Runtime) *Inbox {
	return &Inbox{rt: rt, store: rt.Store(), log: rt.Logger(), obs: rt.Observer()}
}
