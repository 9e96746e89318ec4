package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/schema"
)

// The platform's approval gate (Tool.Approval, ApprovalPolicy): a call the
// policy gates pauses before anything of it runs, on an interrupt of the
// model's own request whose metadata.interrupt says so. Its marker (the
// metaGate key) is the platform's alone: a tool's own interrupt metadata
// loses it (stripGate), so no tool, endpoint or model can make a pause
// look approved, and only the server's copy of the history is read.

// metaGate marks, inside metadata.interrupt, an interrupt the gate made.
const metaGate = "gate"

// maxExplanationBytes bounds the model's explanation kept with a gated
// call.
const maxExplanationBytes = 2000

// gateInfo is what a gate interrupt's metadata says about its policy.
type gateInfo struct {
	Scope     string `json:"scope,omitempty"`
	Approvals int    `json:"approvals"`
	AllowEdit bool   `json:"allowEdit,omitempty"`
}

// gateMeta is the metadata.interrupt of a gated call.
func gateMeta(tool *Tool, explanation string) json.RawMessage {
	p := tool.Approval
	need := "your approval"
	if p.MakerChecker() {
		need = fmt.Sprintf("%d approval(s)", p.approvals())
		if p.Scope != "" {
			need += " from holders of " + p.Scope
		}
	}
	m := map[string]any{
		"approval": "required",
		metaGate:   gateInfo{Scope: p.Scope, Approvals: p.approvals(), AllowEdit: p.AllowEdit},
		"message":  fmt.Sprintf("%s needs %s before it runs: restart it to run it, or respond with an output to skip it.", tool.Name, need),
	}
	if explanation != "" {
		m["explanation"] = explanation
	}
	raw, _ := json.Marshal(m)
	return raw
}

// gateOf is the gate of an interrupted part of the server's history (nil:
// not a gate interrupt).
func gateOf(p Part) *gateInfo {
	raw, ok := p.Metadata[metaInterrupt]
	if !ok {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m[metaGate] == nil {
		return nil
	}
	var g gateInfo
	if json.Unmarshal(m[metaGate], &g) != nil {
		return nil
	}
	return &g
}

// stripGate removes the gate's marker from a tool's own interrupt
// metadata: only the platform makes gate interrupts.
func stripGate(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m[metaGate] == nil {
		return meta
	}
	delete(m, metaGate)
	out, _ := json.Marshal(m)
	return out
}

// gate pauses a fresh call of a gated tool: it returns the interrupted part
// when the policy requires approval for this input. The input is checked
// against the schema first, so what a human approves is a call the tool
// accepts.
func (inv *invocation) gate(ctx context.Context, tool *Tool, part Part, explanation string) (*Part, error) {
	if tool.Approval == nil || tool.Interrupt {
		return nil, nil
	}
	req := part.ToolRequest
	if err := checkToolInput(tool, req); err != nil {
		return nil, err
	}
	need, err := tool.Approval.requires(ctx, req.Input)
	if err != nil {
		// A condition that cannot be decided never lets the call run.
		return nil, inv.hideError(fmt.Errorf("approval condition of %s: %w", req.Name, err), CodeFailedPrecondition, "the approval condition of tool "+req.Name)
	}
	if !need {
		return nil, nil
	}
	inv.rt.log.Info("gated tool call paused for approval", "agent", inv.agent.Name, "tool", req.Name, "session", inv.sess.id)
	return interruptedPart(part, gateMeta(tool, explanation)), nil
}

// checkToolInput checks a request's input against its tool's schema.
func checkToolInput(tool *Tool, req *ToolRequest) error {
	if violations := schema.Validate(tool.InputSchema, rawjson.Or(req.Input, "null")); len(violations) > 0 {
		e := Errorf(CodeInvalidArgument, "The model called '%s%s' with input that does not match its input schema: %s", req.Name, RefSuffix(req.Ref), strings.Join(violations, "; "))
		e.Details = map[string]any{"violations": violations}
		return e
	}
	return nil
}

// explanationOf is the model's text beside its tool requests, bounded.
func explanationOf(m Message) string {
	var b strings.Builder
	for _, p := range m.Content {
		if p.Text != nil && *p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(*p.Text)
		}
	}
	s := strings.TrimSpace(b.String())
	if len(s) > maxExplanationBytes {
		s = strings.ToValidUTF8(s[:maxExplanationBytes], "")
	}
	return s
}

// sameApproval reports whether two resolutions of a gated call approve
// the same call (a restart of the same input), whoever gave them and with
// whatever note: the session's restart sent again after the inbox approved
// the call answers the approval's outcome (or retries its failed call).
func sameApproval(a, b json.RawMessage) bool {
	var x, y struct {
		Restart bool            `json:"restart"`
		Input   json.RawMessage `json:"input"`
	}
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x.Restart && y.Restart && JSONEqual(x.Input, y.Input)
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
		g := gateOf(last.Content[i])
		tool := a.tool(last.Content[i].ToolRequest.Name)
		if g == nil || tool == nil || tool.Approval == nil {
			continue
		}
		name := last.Content[i].ToolRequest.Name
		if !preclaimed && tool.Approval.MakerChecker() && pending(i) {
			return Errorf(CodePermissionDenied, "%s needs %d approval(s)%s from someone other than who asked: it is decided in the inbox (POST /api/v1/interrupts/{id}/restart), not by resuming the session", name, tool.Approval.approvals(), scopeNote(tool.Approval.Scope))
		}
		if !JSONEqual(step.restart.ToolRequest.Input, last.Content[i].ToolRequest.Input) {
			if !tool.Approval.AllowEdit {
				return Errorf(CodeInvalidArgument, "resume.restart for tool '%s' changes its input, which its approval policy does not allow", name)
			}
			if err := checkToolInput(tool, step.restart.ToolRequest); err != nil {
				return Errorf(CodeInvalidArgument, "resume.restart for tool '%s': the edited input does not match its input schema", name)
			}
		}
	}
	return nil
}

func scopeNote(scope string) string {
	if scope == "" {
		return ""
	}
	return " from holders of the scope " + scope
}

// editedRequest is the history's request with the input an approver
// edited: the model reads what ran, and the metadata keeps what it asked.
func editedRequest(p Part, input json.RawMessage) Part {
	p = p.Clone()
	meta := CloneMetadata(p.Metadata)
	if meta == nil {
		meta = Metadata{}
	}
	meta[metaEditedFrom] = rawjson.Or(p.ToolRequest.Input, "null")
	p.Metadata = meta
	req := *p.ToolRequest
	req.Input = input
	p.ToolRequest = &req
	return p
}

// metaEditedFrom keeps, on a request an approver edited, the input the
// model asked for.
const metaEditedFrom = "editedFrom"

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
