package service

import (
	"context"
	"errors"
	"fmt"
)

// An approved call whose tool failed ends its turn failed (the snapshot
// failed, the call row failed with what the client was told) and keeps its
// approval: it can be retried without a new one, up to its policy's
// attempts, from the protocol (the same resume sent again by sessionId),
// the API (POST /api/v1/tool-calls/{id}/retry) and the dashboard. A retry
// is a new turn from the paused snapshot that carries the decision out
// again: the decision is given back to it (ReopenDecision, once: of
// concurrent retries one runs), its guard takes it as any decision's turn
// does (so a retry whose instance dies is carried out by the repair), and
// the tool gets the first attempt's call id, so a receiver deduplicating
// by it sees one call.

// retryOf is the call a retry turn runs again.
type retryOf struct {
	key     string // the call's key in its turn (callKey)
	id      string // the id the tool was given the first time
	attempt int    // this run's attempt
}

type retryCtx struct{}

// retryFrom is the retry the turn of ctx runs, if any.
func retryFrom(ctx context.Context) *retryOf {
	r, _ := ctx.Value(retryCtx{}).(*retryOf)
	return r
}

// callIdentity is the id a call's tool gets and its attempt: the first
// attempt's id for a retry.
func callIdentity(r *retryOf, turnID, key string) (id, callID string, attempt int) {
	id = turnID + "/" + key
	if r != nil && r.key == key {
		return r.id, r.id, r.attempt
	}
	return id, "", 1
}

// retryableCall is a failed approved call that may run again.
type retryableCall struct {
	rec *ToolCallRecord
	it  *Interrupt
}

// retryable checks that rec, a failed call, is the approved run of a gated
// call, with attempts left, in the turn its session ended on.
func (r *Runtime) retryable(ctx context.Context, c Caller, rec *ToolCallRecord) (*retryableCall, error) {
	if rec.Status != ToolCallFailed || !rec.Restart {
		return nil, Errorf(CodeFailedPrecondition, "tool call %s is %s: only an approved call that failed can be retried", rec.ID, rec.Status)
	}
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: rec.Agent, ID: rec.TurnID})
	if err != nil {
		return nil, err
	}
	it, err := r.store.InterruptOfRequest(ctx, c.TenantID, snap.ParentID, rec.Tool, rec.Ref)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if it == nil || it.Policy == nil {
		return nil, Errorf(CodeFailedPrecondition, "tool call %s is not the approved run of a gated call: it cannot be retried without a new approval", rec.ID)
	}
	if it.ResumedSnapshotID != rec.TurnID {
		return nil, Errorf(CodeAborted, "tool call %s is being retried, or was retried, by another request", rec.ID)
	}
	if rec.Attempt >= it.Policy.Attempts {
		return nil, Errorf(CodeFailedPrecondition, "tool call %s ran %d time(s), all the attempts its policy allows", rec.ID, rec.Attempt)
	}
	sess, err := r.store.LoadSession(ctx, OperatorScope(c.TenantID), rec.SessionID)
	if err != nil {
		return nil, err
	}
	if sess.LatestSnapshotID != rec.TurnID {
		return nil, Errorf(CodeFailedPrecondition, "session %s went on after tool call %s failed: it can no longer be retried", rec.SessionID, rec.ID)
	}
	return &retryableCall{rec: rec, it: it}, nil
}

// retryApproved runs a failed approved call again (see retryable), on a
// turn that continues its session as the first one would have.
func (r *Runtime) retryApproved(ctx context.Context, c Caller, rc *retryableCall) (*AgentOutput, error) {
	rec, it := rc.rec, rc.it
	ok, err := r.store.ReopenDecision(ctx, c.TenantID, it.ID, rec.TurnID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, Errorf(CodeAborted, "tool call %s is being retried by another request", rec.ID)
	}
	first := rec.CallID
	if first == "" {
		first = rec.TurnID + "/" + rec.CallKey
	}
	r.log.Info("retrying an approved call that failed", "call", rec.ID, "attempt", rec.Attempt+1, "actor", c.Actor)
	ctx = context.WithValue(ctx, retryCtx{}, &retryOf{key: rec.CallKey, id: first, attempt: rec.Attempt + 1})
	// A retry that fails before its tool runs gives the decision back as
	// any decision's turn does (ResumeDecided): the call then needs a new
	// approval.
	return r.ResumeDecided(ctx, c, rec.Agent, it.SnapshotID, []Interrupt{*it})
}

// RetryApprovedCall retries a failed approved call (see retryApproved) for
// the inbox, and returns the retry's call.
func (r *Runtime) RetryApprovedCall(ctx context.Context, c Caller, rec *ToolCallRecord) (*ToolCallRecord, *AgentOutput, error) {
	rc, err := r.retryable(ctx, c, rec)
	if err != nil {
		return nil, nil, err
	}
	if !c.HasScope(rc.it.Scope) {
		return nil, nil, Errorf(CodePermissionDenied, "retrying tool call %s needs the scope %s, which this key does not hold", rec.ID, rc.it.Scope)
	}
	out, err := r.retryApproved(ctx, c, rc)
	if err != nil {
		return nil, nil, err
	}
	// The retry's turn is the one its decision resumed now (a failed
	// turn's output names the last good snapshot, not its own).
	now, err := r.store.GetInterrupt(ctx, c.TenantID, rc.it.ID)
	if err != nil {
		return nil, nil, err
	}
	calls, err := r.store.ListTurnToolCalls(ctx, c.TenantID, []string{now.ResumedSnapshotID})
	if err != nil {
		return nil, nil, err
	}
	for i := range calls {
		if calls[i].CallKey == rec.CallKey {
			return &calls[i], out, nil
		}
	}
	return nil, out, fmt.Errorf("the retry of tool call %s wrote no call", rec.ID)
}

// retryInstead answers a resume sent again after its approved call
// failed: the call is retried rather than the failure replayed.
type retryInstead struct{ call *retryableCall }

func (r *retryInstead) Error() string { return "retry the approved call" }

func retryInsteadOf(err error) *retryableCall {
	var ri *retryInstead
	if errors.As(err, &ri) {
		return ri.call
	}
	return nil
}

// retryableIn is the failed approved call of a failed turn that may be
// retried (nil: none, or not any more).
func (inv *invocation) retryableIn(ctx context.Context, turnID string) *retryableCall {
	calls, err := inv.rt.store.ListTurnToolCalls(ctx, inv.caller.TenantID, []string{turnID})
	if err != nil {
		return nil
	}
	for i := range calls {
		if calls[i].Status != ToolCallFailed || !calls[i].Restart {
			continue
		}
		if rc, err := inv.rt.retryable(ctx, inv.caller, &calls[i]); err == nil {
			return rc
		}
	}
	return nil
}
