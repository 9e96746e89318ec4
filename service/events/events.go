// Package events is the one home of the platform's event names: the types
// stored in interrupt_events.type, and the public names that webhooks, the
// live event stream and the API show. The database checks the stored types
// (a CHECK constraint on interrupt_events) and maps them to public names
// (the SQL function holdpoint_event_name); a test holds both to this
// package.
package events

import "strings"

// The events of an interrupt, stored without a prefix and shown as
// "interrupt." followed by the stored type.
const (
	Created   = "created"   // an agent paused for a human
	Claimed   = "claimed"   // a resume took the interrupt (the decision is being applied)
	Released  = "released"  // a resume failed before it changed anything: pending again
	Resolved  = "resolved"  // decided (respond or restart), recorded with who and what
	Expired   = "expired"   // its deadline passed
	Cancelled = "cancelled" // its session moved on without it
	// Voted: an approver approved or denied a gated call (every vote; the
	// deciding one is followed by resolved). Its payload is the vote, the
	// voter, the approvals so far and needed.
	Voted = "voted"
	// Escalated: its approval policy handed it to another scope (its
	// deadline still applies).
	Escalated = "escalated"
)

// The events of a session that no interrupt carries, stored under their
// public name.
const (
	TurnCompleted = "turn.completed" // a turn ended (finish reason stop, interrupted, ...)
	TurnFailed    = "turn.failed"    // a turn failed
	ToolCalled    = "tool.called"    // a tool ran (its outcome recorded)
)

// interruptPrefix starts the public name of an interrupt's event.
const interruptPrefix = "interrupt."

// InterruptTypes are the stored types of an interrupt's events.
func InterruptTypes() []string {
	return []string{Created, Claimed, Released, Resolved, Expired, Cancelled, Voted, Escalated}
}

// SessionTypes are the stored types of the events no interrupt carries.
func SessionTypes() []string {
	return []string{TurnCompleted, TurnFailed, ToolCalled}
}

// Names are the public names of every event, in the order the
// documentation lists them: what a webhook endpoint may subscribe to and a
// live stream may be filtered by.
func Names() []string {
	var out []string
	for _, t := range InterruptTypes() {
		out = append(out, Name(t))
	}
	return append(out, SessionTypes()...)
}

// Name is the public name of a stored event type, as the SQL function
// holdpoint_event_name says: a stored type with a dot is its own name, any
// other is an interrupt's.
func Name(stored string) string {
	if strings.Contains(stored, ".") {
		return stored
	}
	return interruptPrefix + stored
}

// Known says whether name is the public name of an event.
func Known(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}
