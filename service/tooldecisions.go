package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/requestid"
	"github.com/holdpoint/holdpoint/service/schema"
)

// The decisions on a tool call whose outcome is unknown. Such a call may
// have run (its instance died between the tool's effect and the outcome's
// write), so nothing runs it again by itself: its turn ended failed with
// its interrupts still resolved, and a human chooses what it did. Each
// decision is a guarded update from 'unknown': of two decisions (or two
// retries) exactly one changes the row, the others are refused (ABORTED,
// HTTP 409). After a decision the turn stays failed; the conversation goes
// on with a new input from the session's last good snapshot.

// retryTimeout bounds a retried tool's run: it goes on if the human's
// request ends, so that its outcome is recorded.
const retryTimeout = 5 * time.Minute

// GetToolCall returns one recorded tool call of the caller's tenant by its
// id.
func (r *Runtime) GetToolCall(ctx context.Context, c Caller, id uuid.UUID) (*ToolCallRecord, error) {
	rec, err := r.store.GetToolCallByID(ctx, c.TenantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "tool call %s not found", id)
	}
	return rec, err
}

// ConfirmToolCall records that an unknown call ran, with the output the
// human confirms it had (checked against the tool's output schema when the
// tool is still defined): the call becomes succeeded.
func (r *Runtime) ConfirmToolCall(ctx context.Context, c Caller, id uuid.UUID, output json.RawMessage, note string) (*ToolCallRecord, error) {
	rec, err := r.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if rawjson.IsNull(output) {
		return nil, Errorf(CodeInvalidArgument, "output is required: the outcome the call had")
	}
	if _, tool, err := r.toolOfCall(ctx, c, rec); err == nil {
		if violations := schema.Validate(tool.OutputSchema, output); len(violations) > 0 {
			e := Errorf(CodeInvalidArgument, "output does not match the output schema of %s: %s", rec.Tool, strings.Join(violations, "; "))
			e.Details = map[string]any{"violations": violations}
			return nil, e
		}
	}
	return r.decideCall(ctx, c, rec, ToolCallSucceeded, DecisionConfirmed, output, note)
}

// CancelToolCall records that an unknown call is not to run: it becomes
// cancelled, and nothing runs.
func (r *Runtime) CancelToolCall(ctx context.Context, c Caller, id uuid.UUID, note string) (*ToolCallRecord, error) {
	rec, err := r.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return r.decideCall(ctx, c, rec, ToolCallCancelled, DecisionCancelled, nil, note)
}

// RetryToolCall runs an unknown call once more with the same call id (an
// HTTP tool sends it as webhook-id and Idempotency-Key, so a receiver that
// saw the first run answers without repeating its effect) and records its
// outcome. The guarded update from unknown to running is the claim: of
// concurrent retries exactly one runs the tool.
func (r *Runtime) RetryToolCall(ctx context.Context, c Caller, id uuid.UUID, note string) (*ToolCallRecord, error) {
	if rec, err := r.store.GetToolCallByID(ctx, c.TenantID, id); err == nil && rec.Status == ToolCallFailed {
		// An approved call that failed: retried on a turn that continues
		// its session (see retryApproved).
		retried, _, err := r.RetryApprovedCall(ctx, c, rec)
		return retried, err
	}
	rec, err := r.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	a, tool, err := r.toolOfCall(ctx, c, rec)
	if err != nil {
		return nil, err
	}
	if _, err := r.decideCall(ctx, c, rec, ToolCallRunning, DecisionRetried, nil, note); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
	defer cancel()
	outcome := r.runRetry(ctx, c.TenantID, a, tool, rec)
	if err := r.store.FinishToolCalls(ctx, c.TenantID, rec.TurnID, []ToolCallOutcome{outcome}); err != nil {
		// The row stays running: the sweep marks it unknown again.
		return nil, err
	}
	return r.store.GetToolCallByID(ctx, c.TenantID, id)
}

// runRetry runs a retried call as its turn did, on a turn of its own that
// sees the call's session id but none of its state (a retry keeps no
// change a tool makes to it), and returns its outcome.
func (r *Runtime) runRetry(ctx context.Context, tenantID string, a *Agent, tool *Tool, rec *ToolCallRecord) ToolCallOutcome {
	inv := &invocation{rt: r, agent: a, caller: Caller{TenantID: tenantID, EndUser: rec.EndUser, Actor: rec.Actor},
		sess: &sessionState{id: rec.SessionID}, requestID: requestid.From(ctx)}
	t := &Turn{inv: inv, ownID: rec.TurnID}
	var resumed json.RawMessage
	if rec.Restart {
		resumed = jsonTrue
	}
	part := Part{ToolRequest: &ToolRequest{Name: rec.Tool, Ref: rec.Ref, Input: rec.Input}}
	trace := &ToolTrace{}
	prepared, err := inv.prepareTool(ctx, tool)
	if err != nil {
		return outcomeOf(rec.CallKey, trace, nil, nil, err)
	}
	resp, irq, err := inv.execTool(ctx, t, tool, part, resumed, rec.TurnID+"/"+rec.CallKey, trace, prepared)
	if err != nil {
		r.log.Warn("a retried tool call failed", "turn", rec.TurnID, "call", rec.CallKey, "err", err)
	}
	return outcomeOf(rec.CallKey, trace, resp, irq, err)
}

// unknownCall loads a call a decision is about: NOT_FOUND for an id the
// caller's tenant has not, ABORTED (409) for a call whose outcome is not
// unknown (any more).
func (r *Runtime) unknownCall(ctx context.Context, c Caller, id uuid.UUID) (*ToolCallRecord, error) {
	rec, err := r.store.GetToolCallByID(ctx, c.TenantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "tool call %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if rec.Status != ToolCallUnknown {
		return nil, notUnknown(rec)
	}
	return rec, nil
}

// notUnknown refuses a decision on a call whose outcome is known.
func notUnknown(rec *ToolCallRecord) error {
	msg := "tool call " + rec.ID.String() + " is " + rec.Status + ", not unknown: there is nothing to decide"
	if rec.DecidedBy != "" {
		msg += " (" + rec.Decision + " by " + rec.DecidedBy + ")"
	}
	return &Error{Status: CodeAborted, Message: msg}
}

// decideCall makes the guarded update of a decision; a decision made
// meanwhile by someone else is refused (ABORTED).
func (r *Runtime) decideCall(ctx context.Context, c Caller, rec *ToolCallRecord, status, decision string, output json.RawMessage, note string) (*ToolCallRecord, error) {
	out, err := r.store.DecideToolCall(ctx, DecideToolCallParams{
		TenantID: c.TenantID, ID: rec.ID, Status: status, Decision: decision, Output: output, Actor: c.Actor, Note: note,
	})
	if errors.Is(err, ErrNotFound) {
		now, gerr := r.store.GetToolCallByID(ctx, c.TenantID, rec.ID)
		if gerr != nil {
			return nil, Errorf(CodeAborted, "tool call %s was decided meanwhile", rec.ID)
		}
		return nil, notUnknown(now)
	}
	if err != nil {
		return nil, err
	}
	r.log.Info("a human decided a tool call that may have run", "call", rec.ID, "decision", decision, "actor", c.Actor)
	return out, nil
}

// toolOfCall is the definition of a call's tool: the agent that ran it, as
// the turn's snapshot names it when there is one.
func (r *Runtime) toolOfCall(ctx context.Context, c Caller, rec *ToolCallRecord) (*Agent, *Tool, error) {
	a, err := r.LookupFor(ctx, c, rec.Agent)
	if err != nil {
		return nil, nil, Errorf(CodeFailedPrecondition, "agent %s of tool call %s is not served by this instance", rec.Agent, rec.ID)
	}
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: rec.Agent, ID: rec.TurnID})
	if err == nil {
		if a, err = r.agentOfSnapshot(ctx, c, a, rec.TurnID, snap.AgentVersion, false); err != nil {
			return nil, nil, err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return nil, nil, err
	}
	tool := a.tool(rec.Tool)
	if tool == nil || tool.Interrupt {
		return nil, nil, Errorf(CodeFailedPrecondition, "agent %s no longer has the tool %s", rec.Agent, rec.Tool)
	}
	return a, tool, nil
}
