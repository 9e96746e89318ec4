package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/schema"
)

// The engine's side of the approval gate (Tool.Approval, approval.Policy):
// it pauses a call its policy gates before anything of it runs, checks the
// protocol's answers to gate interrupts and the inbox's votes on them. What
// a gated call's history says (the gate's marker, an approver's edit) is
// package approval's.

// gate pauses a fresh call of a gated tool: it returns the interrupted part
// when the policy requires approval for this input. The input is checked
// against the schema first, so what a human approves is a call the tool
// accepts.
func (inv *invocation) gate(ctx context.Context, tool *Tool, part Part, explanation string) (*Part, error) {
	if tool.Approval == nil || tool.Interrupt {
		return nil, nil
	}
	req := part.ToolRequest
	if err := CheckToolInput(tool, req); err != nil {
		return nil, err
	}
	need, err := tool.Approval.Requires(ctx, req.Input)
	if err != nil {
		// A condition that cannot be decided never lets the call run.
		return nil, inv.hideError(fmt.Errorf("approval condition of %s: %w", req.Name, err), CodeFailedPrecondition, "the approval condition of tool "+req.Name)
	}
	if !need {
		return nil, nil
	}
	inv.rt.log.Info("gated tool call paused for approval", "agent", inv.agent.Name, "tool", req.Name, "session", inv.sess.id)
	return interruptedPart(part, tool.Approval.GateMeta(tool.Name, explanation)), nil
}

// CheckToolInput checks a request's input against its tool's schema.
func CheckToolInput(tool *Tool, req *ToolRequest) error {
	if violations := schema.Validate(tool.InputSchema, rawjson.Or(req.Input, "null")); len(violations) > 0 {
		e := Errorf(CodeInvalidArgument, "The model called '%s%s' with input that does not match its input schema: %s", req.Name, RefSuffix(req.Ref), strings.Join(violations, "; "))
		e.Details = map[string]any{"violations": violations}
		return e
	}
	return nil
}

// ValidateJSON checks doc against a JSON Schema and returns the violations
// (none when the schema is empty). It is schema.Validate, kept for callers
// of the engine's API.
func ValidateJSON(schemaDoc, doc json.RawMessage) []string {
	return schema.Validate(schemaDoc, doc)
}

// checkGatedResume checks a protocol resume's answers to gate interrupts:
// a maker-checker policy is decided in the inbox only (its restart through
// the protocol would be the requester approving their own call), and an
// edited restart needs a policy that allows edits. Decisions the inbox
// made (preclaimed) were checked when they were made.
//
// pending reports whether the request at a position is still waiting for
// its decision (one decided already is answered by its claim's replay).
func checkGatedResume(plan *resumePlan, last Message, a *Agent, preclaimed bool, pending func(i int) bool) error {
	for i, step := range plan.steps {
		if step.kind != stepRestart {
			continue
		}
		g := approval.GateOf(last.Content[i].Metadata[metaInterrupt])
		tool := a.Tool(last.Content[i].ToolRequest.Name)
		if g == nil || tool == nil || tool.Approval == nil {
			continue
		}
		name := last.Content[i].ToolRequest.Name
		if !preclaimed && tool.Approval.MakerChecker() && pending(i) {
			return Errorf(CodePermissionDenied, "%s needs %d approval(s)%s from someone other than who asked: it is decided in the inbox (POST /api/v1/interrupts/{id}/restart), not by resuming the session", name, tool.Approval.Approvers(), approval.ScopeNote(tool.Approval.Scope))
		}
		if !JSONEqual(step.restart.ToolRequest.Input, last.Content[i].ToolRequest.Input) {
			if !tool.Approval.AllowEdit {
				return Errorf(CodeInvalidArgument, "resume.restart for tool '%s' changes its input, which its approval policy does not allow", name)
			}
			if err := CheckToolInput(tool, step.restart.ToolRequest); err != nil {
				return Errorf(CodeInvalidArgument, "resume.restart for tool '%s': the edited input does not match its input schema", name)
			}
		}
	}
	return nil
}

// gatePending reports whether the interrupt of the base snapshot's request
// at position i of its last message is still pending; when it cannot tell,
// it says pending, so the refusal stands.
func (inv *invocation) gatePending(ctx context.Context, last Message) func(i int) bool {
	return func(i int) bool {
		req := last.Content[i].ToolRequest
		if !inv.agent.ServerManaged || inv.baseID == "" {
			return true
		}
		it, err := inv.rt.store.InterruptOfRequest(ctx, inv.caller.TenantID, inv.baseID, req.Name, req.Ref)
		if err != nil {
			return true
		}
		return it.Status == InterruptPending
	}
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
