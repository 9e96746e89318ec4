package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/auth"
)

// ApprovalPolicy makes the platform, not the model, ask a human before a
// tool runs. When the model requests a tool with a policy (and When, if
// set, says this call needs approval), nothing runs: the turn pauses on an
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
type ApprovalPolicy struct {
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
	// times (default DefaultApprovalAttempts).
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
	MaxApprovals            = 10
	DefaultApprovalAttempts = 3
	MaxApprovalAttempts     = 20
)

// Validate reports what is wrong with a policy, for the agent's author.
func (p *ApprovalPolicy) Validate() error {
	if p.Approvals < 0 || p.Approvals > MaxApprovals {
		return fmt.Errorf("approvals must be between 1 and %d", MaxApprovals)
	}
	if p.Attempts < 0 || p.Attempts > MaxApprovalAttempts {
		return fmt.Errorf("attempts must be between 1 and %d", MaxApprovalAttempts)
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

// approvals is the number of distinct approvals the policy needs.
func (p *ApprovalPolicy) approvals() int {
	if p.Approvals < 1 {
		return 1
	}
	return p.Approvals
}

// attempts is how many runs an approved call gets.
func (p *ApprovalPolicy) attempts() int {
	if p.Attempts < 1 {
		return DefaultApprovalAttempts
	}
	return p.Attempts
}

// MakerChecker reports whether the policy excludes the requester and the
// protocol: a scope, or more than one approver.
func (p *ApprovalPolicy) MakerChecker() bool {
	return p.Scope != "" || p.approvals() > 1
}

// requires reports whether a call with input needs approval.
func (p *ApprovalPolicy) requires(ctx context.Context, input json.RawMessage) (bool, error) {
	if p.When == nil {
		return true, nil
	}
	return p.When(ctx, rawjson.Or(input, "null"))
}

// stored is the policy as its interrupts keep it.
func (p *ApprovalPolicy) stored() *StoredPolicy {
	s := &StoredPolicy{Scope: p.Scope, Approvals: p.approvals(), AllowEdit: p.AllowEdit, Attempts: p.attempts()}
	if p.Escalate != nil {
		s.Escalate = &StoredEscalation{AfterMs: p.Escalate.After.Milliseconds(), Scope: p.Escalate.Scope}
	}
	return s
}

// voteOf is the vote a decision of c on it records: nil for an interrupt
// no policy made; for a gated call, the checks of its policy first (the
// scope, the requester's exclusion).
func voteOf(c Caller, it *Interrupt, vote string, input json.RawMessage, note string) (*Vote, error) {
	if it.Policy == nil {
		return nil, nil
	}
	if !c.HasScope(it.Scope) {
		return nil, Errorf(CodePermissionDenied, "deciding interrupt %s needs the scope %s, which this key does not hold", it.ID, it.Scope)
	}
	if it.Policy.MakerChecker() && it.EndUser != "" && c.EndUser == it.EndUser {
		return nil, Errorf(CodePermissionDenied, "%s asked for this call and cannot approve or deny it: its policy needs someone else", it.EndUser)
	}
	return &Vote{Voter: c.Voter(), KeyID: c.KeyID, KeyName: c.KeyName, Vote: vote, Input: input, Note: note}, nil
}

// checkEdit checks an approver's edit of a gated call's input.
func checkEdit(it *Interrupt, tool *Tool, input json.RawMessage) error {
	if it.Policy == nil || !it.Policy.AllowEdit {
		return Errorf(CodeInvalidArgument, "the approval policy of %s does not allow editing its input", it.Tool)
	}
	if err := checkToolInput(tool, &ToolRequest{Name: it.Tool, Ref: it.Ref, Input: input}); err != nil {
		return Errorf(CodeInvalidArgument, "the edited input does not match the input schema of %s: %s", it.Tool, AsError(err).Message)
	}
	return nil
}

// validateApproval checks a tool's approval policy against its agent: an
// interrupt never runs (nothing to gate), and a maker-checker policy is
// decided in the inbox, which only server-managed sessions reach.
func (a *Agent) validateApproval(t *Tool) error {
	p := t.Approval
	if p == nil {
		return nil
	}
	if t.Interrupt {
		return fmt.Errorf("agent %q: tool %q is an interrupt, which never runs: it takes no approval policy", a.Name, t.Name)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("agent %q: tool %q: approval policy: %w", a.Name, t.Name, err)
	}
	if p.MakerChecker() && !a.ServerManaged {
		return fmt.Errorf("agent %q: tool %q: a policy with a scope or several approvals is decided in the inbox, which a client-managed agent's sessions never reach", a.Name, t.Name)
	}
	return nil
}
