package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/schema"
	"github.com/holdpoint/holdpoint/service/store"
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
func (ib *Inbox) GetToolCall(ctx context.Context, c auth.Caller, id uuid.UUID) (*store.ToolCallRecord, error) {
	rec, err := ib.store.GetToolCallByID(ctx, c.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "tool call %s not found", id)
	}
	return rec, err
}

// ConfirmToolCall records that an unknown call ran, with the output the
// human confirms it had (checked against the tool's output schema when the
// tool is still defined): the call becomes succeeded.
func (ib *Inbox) ConfirmToolCall(ctx context.Context, c auth.Caller, id uuid.UUID, output json.RawMessage, note string) (*store.ToolCallRecord, error) {
	rec, err := ib.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if rawjson.IsNull(output) {
		return nil, store.Errorf(store.CodeInvalidArgument, "output is required: the outcome the call had")
	}
	if _, tool, err := ib.rt.ToolOfCall(ctx, c, rec); err == nil {
		if violations := schema.Validate(tool.OutputSchema, output); len(violations) > 0 {
			e := store.Errorf(store.CodeInvalidArgument, "output does not match the output schema of %s: %s", rec.Tool, strings.Join(violations, "; "))
			e.Details = map[string]any{"violations": violations}
			return nil, e
		}
	}
	return ib.decideCall(ctx, c, rec, store.ToolCallSucceeded, store.DecisionConfirmed, output, note)
}

// CancelToolCall records that an unknown call is not to run: it becomes
// cancelled, and nothing runs.
func (ib *Inbox) CancelToolCall(ctx context.Context, c auth.Caller, id uuid.UUID, note string) (*store.ToolCallRecord, error) {
	rec, err := ib.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return ib.decideCall(ctx, c, rec, store.ToolCallCancelled, store.DecisionCancelled, nil, note)
}

// RetryToolCall runs an unknown call once more with the same call id (an
// HTTP tool sends it as webhook-id and Idempotency-Key, so a receiver that
// saw the first run answers without repeating its effect) and records its
// outcome. The guarded update from unknown to running is the claim: of
// concurrent retries exactly one runs the tool.
func (ib *Inbox) RetryToolCall(ctx context.Context, c auth.Caller, id uuid.UUID, note string) (*store.ToolCallRecord, error) {
	if rec, err := ib.store.GetToolCallByID(ctx, c.TenantID, id); err == nil && rec.Status == store.ToolCallFailed {
		// An approved call that failed: retried on a turn that continues
		// its session (see service.Runtime.RetryApprovedCall).
		retried, _, err := ib.rt.RetryApprovedCall(ctx, c, rec)
		return retried, err
	}
	rec, err := ib.unknownCall(ctx, c, id)
	if err != nil {
		return nil, err
	}
	a, tool, err := ib.rt.ToolOfCall(ctx, c, rec)
	if err != nil {
		return nil, err
	}
	if _, err := ib.decideCall(ctx, c, rec, store.ToolCallRunning, store.DecisionRetried, nil, note); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
	defer cancel()
	outcome := ib.rt.RerunToolCall(ctx, c.TenantID, a, tool, rec)
	if err := ib.store.FinishToolCalls(ctx, c.TenantID, rec.TurnID, []store.ToolCallOutcome{outcome}); err != nil {
		// The row stays running: the sweep marks it unknown again.
		return nil, err
	}
	return ib.store.GetToolCallByID(ctx, c.TenantID, id)
}

// unknownCall loads a call a decision is about: NOT_FOUND for an id the
// caller's tenant has not, ABORTED (409) for a call whose outcome is not
// unknown (any more).
func (ib *Inbox) unknownCall(ctx context.Context, c auth.Caller, id uuid.UUID) (*store.ToolCallRecord, error) {
	rec, err := ib.store.GetToolCallByID(ctx, c.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "tool call %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if rec.Status != store.ToolCallUnknown {
		return nil, notUnknown(rec)
	}
	return rec, nil
}

// notUnknown refuses a decision on a call whose outcome is known.
func notUnknown(rec *store.ToolCallRecord) error {
	msg := "tool call " + rec.ID.String() + " is " + rec.Status + ", not unknown: there is nothing to decide"
	if rec.DecidedBy != "" {
		msg += " (" + rec.Decision + " by " + rec.DecidedBy + ")"
	}
	return &store.Error{Status: store.CodeAborted, Message: msg}
}

// decideCall makes the guarded update of a decision; a decision made
// meanwhile by someone else is refused (ABORTED).
func (ib *Inbox) decideCall(ctx context.Context, c auth.Caller, rec *store.ToolCallRecord, status, decision string, output json.RawMessage, note string) (*store.ToolCallRecord, error) {
	out, err := ib.store.DecideToolCall(ctx, store.DecideToolCallParams{
		TenantID: c.TenantID, ID: rec.ID, Status: status, Decision: decision, Output: output, Actor: c.Actor, Note: note,
	})
	if errors.Is(err, store.ErrNotFound) {
		now, gerr := ib.store.GetToolCallByID(ctx, c.TenantID, rec.ID)
		if gerr != nil {
			return nil, store.Errorf(store.CodeAborted, "tool call %s was decided meanwhile", rec.ID)
		}
		return nil, notUnknown(now)
	}
	if err != nil {
		return nil, err
	}
	ib.log.Info("a human decided a tool call that may have run", "call", rec.ID, "decision", decision, "actor", c.Actor)
	return out, nil
}
