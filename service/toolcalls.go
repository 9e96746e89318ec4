package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/limits"
)

// recordedTool runs a tool that is not an interrupt and records it: a row
// (status running) is written before the tool runs, so no tool runs
// without leaving one, and its outcome after. A synchronous turn's outcomes
// are written with the turn's end (one statement with its snapshot); a
// detached turn writes each outcome before moving on, so the instance that
// takes the turn over after a crash reuses it instead of running the tool
// again, and refuses to repeat a call that started but never finished: it
// may have had its effect, and a tool call is never run twice.
func (inv *invocation) recordedTool(ctx context.Context, t *Turn, tool *Tool, r toolRun) (*Part, *Part, error) {
	key, part := r.key, r.part
	// No tool runs on a history that may be stale.
	if err := inv.checkHead(ctx); err != nil {
		return nil, nil, err
	}
	if err := inv.settleClaims(ctx, t); err != nil {
		return nil, nil, err
	}
	req := part.ToolRequest
	turnID := t.turnID()
	key = t.uniqueKey(key)
	tenant := inv.caller.TenantID
	owner := ""
	rerun := false
	if inv.det.journal {
		owner = inv.rt.instanceID
		if ok, err := inv.recordSteps(ctx); err != nil || !ok {
			return nil, nil, inv.stepsNotRecorded(err)
		}
		resp, irq, done, again, err := inv.journaled(ctx, t, tool, turnID, key, part)
		if done {
			return resp, irq, err
		}
		rerun = again
	}
	prepared, err := inv.prepareTool(ctx, tool)
	if err != nil {
		return nil, nil, err
	}
	started := rerun
	callID, rowCallID, attempt := callIdentity(inv.retry, turnID, key)
	if !rerun {
		var err error
		started, err = inv.rt.store.StartToolCall(ctx, tenant, &ToolCallRecord{
			TurnID: turnID, CallKey: key, SessionID: inv.sess.id, Agent: inv.agent.Name,
			Tool: req.Name, Ref: req.Ref, Input: req.Input, Restart: r.restart,
			Actor: inv.caller.Actor, EndUser: inv.caller.EndUser, Attempt: attempt, CallID: rowCallID,
		}, owner)
		if err != nil {
			return nil, nil, err
		}
	}
	if !started {
		return inv.notStarted(ctx, t, turnID, key, part)
	}
	t.ranTool = true
	trace := &ToolTrace{}
	resp, irq, runErr := inv.execTool(ctx, t, tool, part, r.resumed, callID, trace, prepared)
	outcome := outcomeOf(key, trace, resp, irq, runErr)
	if !inv.det.journal {
		t.outcomes = append(t.outcomes, outcome)
		return resp, irq, runErr
	}
	// Written before the turn moves on: if this instance dies from here on,
	// the instance that takes over reuses the outcome.
	if err := inv.rt.store.FinishToolCalls(context.WithoutCancel(ctx), tenant, turnID, []ToolCallOutcome{outcome}); err != nil {
		return nil, nil, err
	}
	return resp, irq, runErr
}

// journaled answers a call of a journaled turn (detached or guarded) from
// its row when it was recorded before: its outcome (done), or, for an
// idempotent tool whose run never finished, rerun to run it again on its
// row.
func (inv *invocation) journaled(ctx context.Context, t *Turn, tool *Tool, turnID, key string, part Part) (resp, irq *Part, done, rerun bool, err error) {
	resp, irq, found, err := inv.reuseCall(ctx, turnID, key, part)
	if errors.Is(err, errUnfinished) && tool.Idempotent {
		// Its id makes a second run harmless: run it again, on its row.
		inv.rt.log.Warn("running again an idempotent tool call its instance did not finish", "turn", turnID, "call", key)
		return nil, nil, false, true, nil
	}
	if !found && err == nil {
		return nil, nil, false, false, nil
	}
	// A reused outcome is a call that ran: a failure it records does not
	// give the resume's claims back.
	t.ranTool = t.ranTool || found
	return resp, irq, true, false, inv.undecidedCall(ctx, t, turnID, key, err)
}

// prepareTool runs the tool's Prepare (see Tool.Prepare), before its call
// is recorded.
func (inv *invocation) prepareTool(ctx context.Context, tool *Tool) (any, error) {
	if tool.Prepare == nil {
		return nil, nil
	}
	p, err := tool.Prepare(ctx, inv.caller.TenantID)
	if err != nil {
		return nil, inv.hideError(err, CodeInternal, "preparing tool "+tool.Name)
	}
	return p, nil
}

// stepsNotRecorded is the error of a tool call whose model answers could
// not be recorded (recordSteps): err, or, when the job is another
// instance's now, nothing: the turn stops without running the tool.
func (inv *invocation) stepsNotRecorded(err error) error {
	if err != nil {
		return err
	}
	inv.det.lostJob.Store(true)
	inv.cancelWork()
	return context.Canceled
}

// notStarted answers a call StartToolCall did not record: one recorded
// before (a detached turn reuses its outcome), or, for a detached turn
// whose job another instance owns now, nothing: the turn stops without
// running the tool.
func (inv *invocation) notStarted(ctx context.Context, t *Turn, turnID, key string, part Part) (*Part, *Part, error) {
	if !inv.det.journal {
		return nil, nil, fmt.Errorf("tool call %s of turn %s is already recorded", key, turnID)
	}
	if resp, irq, found, err := inv.reuseCall(ctx, turnID, key, part); found || err != nil {
		t.ranTool = t.ranTool || found
		return resp, irq, inv.undecidedCall(ctx, t, turnID, key, err)
	}
	inv.det.lostJob.Store(true)
	inv.cancelWork()
	return nil, nil, context.Canceled
}

// outcomeOf is how a call that ran ended, as its row records it.
func outcomeOf(key string, trace *ToolTrace, resp, irq *Part, runErr error) ToolCallOutcome {
	outcome := ToolCallOutcome{Key: key, FinishedAt: time.Now(), HTTPStatus: trace.HTTPStatus, Attempts: trace.Attempts}
	switch {
	case errors.Is(runErr, ErrMayHaveRun):
		outcome.Status, outcome.Error = ToolCallUnknown, Details(runErr)
	case runErr != nil:
		outcome.Status, outcome.Error = ToolCallFailed, Details(runErr)
	case irq != nil:
		outcome.Status, outcome.Output = ToolCallInterrupted, irq.Metadata[metaInterrupt]
	default:
		outcome.Status, outcome.Output = ToolCallSucceeded, resp.ToolResponse.Output
	}
	return outcome
}

// reuseCall returns the recorded outcome of a detached turn's call, if the
// call was recorded: its response, its interrupt, or its error. A call
// that started but never finished is refused (ABORTED): it may have had its
// effect.
func (inv *invocation) reuseCall(ctx context.Context, turnID, key string, part Part) (*Part, *Part, bool, error) {
	rec, err := inv.rt.store.GetToolCall(ctx, inv.caller.TenantID, turnID, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	req := part.ToolRequest
	switch rec.Status {
	case ToolCallSucceeded:
		return &Part{ToolResponse: &ToolResponse{Name: req.Name, Ref: req.Ref, Output: rawjson.Or(rec.Output, "null")}}, nil, true, nil
	case ToolCallInterrupted:
		return nil, interruptedPart(part, rec.Output), true, nil
	case ToolCallFailed:
		e := &Error{Status: CodeInternal, Message: "internal error"}
		if rec.Error != nil {
			e = &Error{Status: rec.Error.Status, Message: rec.Error.Message}
		}
		return nil, nil, true, e
	case ToolCallCancelled:
		return nil, nil, true, fmt.Errorf("%w: %w", errUndecided, Errorf(CodeAborted, "tool call %s (id %s) was cancelled by %s; it is not run again", key, rec.ID, rec.DecidedBy))
	default:
		return nil, nil, true, fmt.Errorf("%w: %w", errUnfinished, mayHaveRun(key, rec.ID))
	}
}

// mayHaveRun is the public error of a turn that found a call whose outcome
// nobody recorded.
func mayHaveRun(key string, id uuid.UUID) error {
	e := Errorf(CodeAborted, "tool call %s (id %s) may have run: the instance running it stopped before its outcome was recorded. "+
		"It is not run again; a human must decide: confirm its outcome, cancel it, or retry it with the same idempotency key", key, id)
	e.Retry = &RetryAdvice{DecisionRecorded: true, Retry: RetryByHuman}
	return e
}

// ErrMayHaveRun marks a tool's error that leaves its effect unknown: the
// request went out and no answer came back (an HTTP tool's timeout or cut
// connection). The call is recorded unknown, never failed, so that
// nothing runs it again on its own: the interrupts its resume claimed
// stay resolved, and a human confirms, cancels or retries it.
var ErrMayHaveRun = errors.New("the tool call may have run")

// errUnfinished marks a recorded call whose instance died before it ended.
var errUnfinished = errors.New("unfinished tool call")

// errUndecided marks a recorded call a human cancelled.
var errUndecided = errors.New("cancelled tool call")

// undecidedCall settles a turn that found a call that may have run (its
// outcome never recorded) or that a human cancelled: the call is marked
// unknown for a human to decide, and the turn counts as one that ran a
// tool, so the interrupts its resume claimed stay resolved. Released, they
// could be approved again, and the approval would run the call a second
// time. Other errors pass through.
func (inv *invocation) undecidedCall(ctx context.Context, t *Turn, turnID, key string, err error) error {
	if errors.Is(err, errUndecided) {
		t.ranTool = true
		return err
	}
	if !errors.Is(err, errUnfinished) {
		return err
	}
	t.ranTool = true
	rec, merr := inv.rt.store.MarkToolCallUnknown(context.WithoutCancel(ctx), inv.caller.TenantID, turnID, key)
	if merr != nil {
		inv.rt.log.Error("marking a tool call that may have run as unknown failed; the sweep marks it later", "turn", turnID, "call", key, "err", merr)
		return err
	}
	inv.rt.log.Warn("a tool call may have run: its outcome was never recorded; it waits for a human", "turn", turnID, "call", key, "id", rec.ID, "status", rec.Status)
	return fmt.Errorf("%w: %w", errUnfinished, mayHaveRun(key, rec.ID))
}

// turnID names the turn in tool_calls: the snapshot it writes (a detached
// turn's pending snapshot), or, for a client-managed agent, an id of its
// own.
func (t *Turn) turnID() string {
	if t.inv.det.journal {
		return t.inv.det.id
	}
	if t.snapshotID != "" {
		return t.snapshotID
	}
	if t.ownID == "" {
		t.ownID = NewRowID().String()
	}
	return t.ownID
}

// uniqueKey makes a call key unique within the turn: a model may repeat a
// ref across rounds.
func (t *Turn) uniqueKey(key string) string {
	if t.callKeys == nil {
		t.callKeys = map[string]int{}
	}
	n := t.callKeys[key]
	t.callKeys[key] = n + 1
	if n == 0 {
		return key
	}
	return key + "~" + strconv.Itoa(n+1)
}

// flushToolCalls writes the outcomes no snapshot write carried (a
// client-managed turn, an aborted or unwritten one).
func (inv *invocation) flushToolCalls(ctx context.Context, t *Turn) {
	if len(t.outcomes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := inv.rt.store.FinishToolCalls(ctx, inv.caller.TenantID, t.turnID(), t.outcomes); err != nil {
		inv.rt.log.Error("recording tool call outcomes failed; the calls stay 'running'", "turn", t.turnID(), "err", err)
		return
	}
	t.outcomes = nil
}

// MaxToolCallPage bounds one page of a session's tool calls.
const MaxToolCallPage = 200

// SessionToolCalls returns a page of the tool calls a session's turns made,
// oldest first (operators: every session of the tenant).
func (r *Runtime) SessionToolCalls(ctx context.Context, c Caller, sessionID string, after *ToolCallCursor, limit int) ([]ToolCallRecord, error) {
	if err := limits.CheckID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 50
	}
	if limit > MaxToolCallPage {
		return nil, Errorf(CodeInvalidArgument, "limit must be at most %d", MaxToolCallPage)
	}
	_, err := r.store.LoadSession(ctx, OperatorScope(c.TenantID), sessionID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	items, lerr := r.store.ListSessionToolCalls(ctx, ListSessionToolCallsParams{TenantID: c.TenantID, SessionID: sessionID, After: after, Limit: limit})
	if lerr != nil {
		return nil, lerr
	}
	// The first turn of a session records its calls before its write: if
	// it died in between (its instance killed, the database stopped), the
	// session was never written but its calls were, and one that may have
	// run must still be listed for a human to decide.
	if err != nil && len(items) == 0 && after == nil {
		return nil, Errorf(CodeNotFound, "session %s not found", sessionID)
	}
	return items, nil
}

// InterruptToolCalls returns the tool calls around an interrupt: those the
// turn that paused on it made (sibling requests that ran), and those of the
// turn that resumed it (what the decision let the agent do).
func (r *Runtime) InterruptToolCalls(ctx context.Context, c Caller, id uuid.UUID) ([]ToolCallRecord, error) {
	it, err := r.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "interrupt %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	turns := []string{it.SnapshotID}
	if it.ResumedSnapshotID != "" {
		turns = append(turns, it.ResumedSnapshotID)
	}
	return r.store.ListTurnToolCalls(ctx, c.TenantID, turns)
}
