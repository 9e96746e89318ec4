package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/store"
)

// Policy makes the platform, not the model, ask a human before a tool
// runs. When the model requests a tool with a policy (and When, if set,
// says this call needs approval), nothing runs: the turn pauses on an
// approval interrupt whose input is exactly the call the model asked for.
// Once approved, the platform runs exactly that input (or the approver's
// edit, where AllowEdit permits), never anything the model says later.
//
// A policy with no Scope and one approval is a confirmation: whoever may
// resume the session (the end user, through the protocol's restart) or
// decide its interrupts (the inbox) gives it. A policy that names a Scope
// or needs two or more approvals is maker-checker: only holders of the
// scope decide, in the inbox; the end user who asked never counts, and
// one person counts once.
type Policy struct {
	// When decides whether a call needs approval, from its input (already
	// valid against the tool's input schema); nil: every call does.
	When func(ctx context.Context, input json.RawMessage) (bool, error)
	// Scope is the scope an approver's key must hold (e.g.
	// approve:payments); empty: any operator.
	Scope string
	// Approvals is how many distinct approvers carry the call out
	// (default 1, at most MaxApprovals). One denial ends it.
	Approvals int
	// AllowEdit lets an approver change the input before approving; the
	// edit is recorded with the vote, and the edited input is what runs.
	AllowEdit bool
	// Attempts bounds how many times an approved call runs: a failed run
	// may be retried (on the same call id) until it has run Attempts
	// times (default DefaultAttempts, at most MaxAttempts).
	Attempts int
	// Escalate hands the interrupt to another scope when it is still
	// pending after a while (before the tool's deadline, if any).
	Escalate *Escalation
}

// Escalation reassigns a pending approval.
type Escalation struct {
	After time.Duration
	Scope string
}

// Bounds of a policy.
const (
	MaxApprovals    = 10
	DefaultAttempts = 3
	MaxAttempts     = 20
)

// Validate reports what is wrong with a policy, for the agent's author.
func (p *Policy) Validate() error {
	if p.Approvals < 0 || p.Approvals > MaxApprovals {
		return fmt.Errorf("approvals must be between 1 and %d", MaxApprovals)
	}
	if p.Attempts < 0 || p.Attempts > MaxAttempts {
		return fmt.Errorf("attempts must be between 1 and %d", MaxAttempts)
	}
	if err := auth.ValidateScope(p.Scope, true); err != nil {
		return err
	}
	if e := p.Escalate; e != nil {
		if e.After <= 0 {
			return fmt.Errorf("escalate.after must be a positive duration")
		}
		if err := auth.ValidateScope(e.Scope, false); err != nil {
			return fmt.Errorf("escalate.scope: %w", err)
		}
		if p.Scope == "" {
			return fmt.Errorf("escalate needs a scope to escalate from: a policy without one is a confirmation anyone may give")
		}
	}
	return nil
}

// Approvers is the number of distinct approvals the policy needs.
func (p *Policy) Approvers() int {
	if p.Approvals < 1 {
		return 1
	}
	return p.Approvals
}

// Runs is how many runs an approved call gets.
func (p *Policy) Runs() int {
	if p.Attempts < 1 {
		return DefaultAttempts
	}
	return p.Attempts
}

// MakerChecker reports whether the policy excludes the requester and the
// protocol: a scope, or more than one approver.
func (p *Policy) MakerChecker() bool {
	return p.Scope != "" || p.Approvers() > 1
}

// Requires reports whether a call with input needs approval.
func (p *Policy) Requires(ctx context.Context, input json.RawMessage) (bool, error) {
	if p.When == nil {
		return true, nil
	}
	return p.When(ctx, rawjson.Or(input, "null"))
}

// Stored is the policy as its interrupts keep it.
func (p *Policy) Stored() *store.StoredPolicy {
	s := &store.StoredPolicy{Scope: p.Scope, Approvals: p.Approvers(), AllowEdit: p.AllowEdit, Attempts: p.Runs()}
	if p.Escalate != nil {
		s.Escalate = &store.StoredEscalation{AfterMs: p.Escalate.After.Milliseconds(), Scope: p.Escalate.Scope}
	}
	return s
}
