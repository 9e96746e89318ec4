package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/schema"
	"github.com/holdpoint/holdpoint/service/store"
)

// DecisionResult answers an operator's decision: the continued turn's
// output when it was the last decision the snapshot waited for, otherwise
// the interrupts still waiting.
type DecisionResult struct {
	// Status is "resumed", "recorded" (the snapshot waits for other
	// interrupts) or "voted" (the call waits for more approvals).
	Status     string                    `json:"status"`
	Output     *protocol.AgentOutput     `json:"output,omitempty"`
	WaitingFor []protocol.InboxInterrupt `json:"waitingFor,omitempty"`
	// Approvals of Needed, after a vote that did not complete them.
	Approvals int `json:"approvals,omitempty"`
	Needed    int `json:"needed,omitempty"`
}

// RespondInterrupt decides an interrupt on the user's behalf with output,
// which must match the tool's declared output schema.
func (ib *Inbox) RespondInterrupt(ctx context.Context, c auth.Caller, id uuid.UUID, output json.RawMessage, note string) (*DecisionResult, error) {
	resolution := decisionResolution(ctx, "respond", output, note)
	it, tool, err := ib.interruptTool(ctx, c, id)
	if err != nil {
		return ib.orSameDecision(ctx, c, id, resolution, err)
	}
	if rawjson.IsNull(output) {
		return nil, store.Errorf(store.CodeInvalidArgument, "output is required")
	}
	if violations := schema.Validate(tool.OutputSchema, output); len(violations) > 0 {
		e := store.Errorf(store.CodeInvalidArgument, "output does not match the output schema of %s: %s", it.Tool, strings.Join(violations, "; "))
		e.Details = map[string]any{"violations": violations}
		return nil, e
	}
	vote, err := voteOf(c, it, store.VoteDeny, nil, note)
	if err != nil {
		return nil, err
	}
	return ib.decide(ctx, c, it, resolution, vote)
}

// orSameDecision answers a decision refused with err: the first outcome
// when the interrupt was decided already by the same actor with the same
// resolution (see sameDecision), else err.
func (ib *Inbox) orSameDecision(ctx context.Context, c auth.Caller, id uuid.UUID, resolution []byte, err error) (*DecisionResult, error) {
	if store.AsError(err).Status != store.CodeAborted {
		return nil, err
	}
	if res, same, rerr := ib.sameDecision(ctx, c, id, resolution); same {
		return res, rerr
	}
	return nil, err
}

// RestartInterrupt decides an interrupt by running its tool again with the
// original input (and `resumed` metadata).
func (ib *Inbox) RestartInterrupt(ctx context.Context, c auth.Caller, id uuid.UUID, note string) (*DecisionResult, error) {
	return ib.ApproveInterrupt(ctx, c, id, nil, note)
}

// ApproveInterrupt restarts an interrupt's tool: for a gated call, it is
// the caller's approval (a vote, which runs the call once the policy's
// approvals are given), with input an edit of the call's input where the
// policy allows it (nil: as asked, or as the last edit proposed).
func (ib *Inbox) ApproveInterrupt(ctx context.Context, c auth.Caller, id uuid.UUID, input json.RawMessage, note string) (*DecisionResult, error) {
	resolution := decisionResolution(ctx, "restart", jsonTrue, note)
	it, tool, err := ib.interruptTool(ctx, c, id)
	if err != nil {
		return ib.orSameDecision(ctx, c, id, resolution, err)
	}
	if tool.Interrupt {
		return nil, store.Errorf(store.CodeFailedPrecondition, "%s is an interrupt that asks a human; it cannot be restarted, respond instead", it.Tool)
	}
	if input != nil && it.ProposedInput == nil && protocol.JSONEqual(input, it.Input) {
		input = nil // not an edit
	}
	if input != nil {
		if err := checkEdit(it, tool, input); err != nil {
			return nil, err
		}
	}
	vote, err := voteOf(c, it, store.VoteApprove, input, note)
	if err != nil {
		return nil, err
	}
	return ib.decide(ctx, c, it, resolution, vote)
}

// jsonTrue is the value of a restart decision's "restart".
var jsonTrue = json.RawMessage("true")

// decisionKeyCtx is the context key of a decision's idempotency key.
type decisionKeyCtx struct{}

// WithDecisionKey gives the inbox decision made with ctx the client's
// idempotency key (its Idempotency-Key header). The key is recorded with
// the decision (its resolution's "key"): the same key with the same
// decision answers the first outcome, and with another decision is
// refused (422) instead of read as a new one.
func WithDecisionKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, decisionKeyCtx{}, key)
}

// decisionResolution is the resolution an operator's decision records:
// kind ("respond" or "restart") with its value, the note and the key.
func decisionResolution(ctx context.Context, kind string, value json.RawMessage, note string) json.RawMessage {
	m := map[string]any{kind: value, "note": noteOrNil(note)}
	if key, _ := ctx.Value(decisionKeyCtx{}).(string); key != "" {
		m["key"] = key
	}
	out, _ := json.Marshal(m)
	return out
}

func noteOrNil(note string) any {
	if note == "" {
		return nil
	}
	return note
}

// interruptTool loads an interrupt and the definition of its tool.
func (ib *Inbox) interruptTool(ctx context.Context, c auth.Caller, id uuid.UUID) (*store.Interrupt, *service.Tool, error) {
	it, err := ib.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, store.Errorf(store.CodeNotFound, "interrupt %s not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	switch it.Status {
	case store.InterruptExpired:
		return nil, nil, store.Errorf(store.CodeFailedPrecondition, "interrupt %s expired", id)
	case store.InterruptPending:
	default:
		return nil, nil, store.Errorf(store.CodeAborted, "interrupt %s is already %s", id, it.Status)
	}
	a, err := ib.rt.SnapshotAgent(ctx, c, it.Agent, it.SnapshotID)
	if err != nil {
		return nil, nil, err
	}
	tool := a.Tool(it.Tool)
	if tool == nil {
		return nil, nil, store.Errorf(store.CodeFailedPrecondition, "agent %s no longer has the tool %s", it.Agent, it.Tool)
	}
	return it, tool, nil
}

// decide records a decision and, when it was the last one the snapshot
// waited for, runs the resume turn with every decision together.
func (ib *Inbox) decide(ctx context.Context, c auth.Caller, it *store.Interrupt, resolution json.RawMessage, vote *store.Vote) (*DecisionResult, error) {
	d, err := ib.store.DecideInterrupt(ctx, store.DecideInterruptParams{TenantID: c.TenantID, ID: it.ID, Resolution: resolution, Actor: c.Actor, Vote: vote, Scope: it.Scope})
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Errorf(store.CodeNotFound, "interrupt %s not found", it.ID)
	}
	if err != nil {
		return ib.orSameDecision(ctx, c, it.ID, resolution, err)
	}
	if d.Voted {
		return &DecisionResult{Status: "voted", Approvals: d.Approvals, Needed: d.Needed}, nil
	}
	ib.obs.InterruptResolved(ib.rt.MetricLabels(it.Agent, it.Tool))
	if len(d.Batch) == 0 {
		res := &DecisionResult{Status: "recorded", WaitingFor: make([]protocol.InboxInterrupt, len(d.Waiting))}
		for i := range d.Waiting {
			res.WaitingFor[i] = d.Waiting[i].Wire()
		}
		return res, nil
	}
	out, err := ib.rt.ResumeDecided(ctx, c, it.Agent, it.SnapshotID, d.Batch)
	if errors.Is(err, store.ErrUnavailable) {
		// The decision is recorded, so this 503 must not read as
		// "nothing happened": sent again it is refused as decided.
		e := store.UnavailableError(err)
		e.Message = "the decision was recorded, but the database became unavailable before the turn it resumes was saved; " +
			"the turn is carried out once the database is back: send the same decision again to get its outcome"
		e.Retry = &store.RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: store.RetryOutcome, InterruptID: it.ID.String()}
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return &DecisionResult{Status: "resumed", Output: out}, nil
}

// sameDecision answers an operator's decision refused because the
// interrupt is decided already, when it was decided by the same actor with
// the same decision (the request sent again, its answer lost): the
// original outcome, as the first request would have been answered, or,
// while its turn runs, an answer saying so. same is false otherwise: the
// refusal stands.
func (ib *Inbox) sameDecision(ctx context.Context, c auth.Caller, id uuid.UUID, resolution []byte) (res *DecisionResult, same bool, err error) {
	it, gerr := ib.store.GetInterrupt(ctx, c.TenantID, id)
	if gerr != nil || it.Status != store.InterruptResolved || it.ResolvedBy != c.Actor {
		return nil, false, nil
	}
	if !protocol.JSONEqual(it.Resolution, resolution) {
		if key := resolutionKey(resolution); key != "" && key == resolutionKey(it.Resolution) {
			return nil, true, store.Errorf(store.CodeInvalidArgument, "the Idempotency-Key %q was used for another decision of interrupt %s; a key names one decision", key, id)
		}
		return nil, false, nil
	}
	if it.ResumedSnapshotID == "" {
		// Recorded: the snapshot waits for other decisions, or its turn
		// is about to start (or, its instance gone, the repair starts it).
		if waiting, _ := ib.store.ListInterrupts(ctx, c.TenantID, store.InterruptFilter{SessionID: it.SessionID, Status: store.InterruptPending}); hasSnapshot(waiting, it.SnapshotID) {
			return &DecisionResult{Status: "recorded"}, true, nil
		}
		return nil, true, &store.Error{
			Status:     store.CodeUnavailable,
			Message:    "this decision was recorded and the turn it resumes is starting; send the same decision again to get its outcome",
			RetryAfter: store.UnavailableRetryAfter,
			Retry:      &store.RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: store.RetryOutcome, InterruptID: it.ID.String()},
		}
	}
	snap, lerr := ib.store.LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: store.OperatorScope(c.TenantID), Agent: it.Agent, ID: it.ResumedSnapshotID, WithState: true})
	if lerr != nil && !errors.Is(lerr, store.ErrNotFound) {
		return nil, true, lerr
	}
	if lerr != nil || snap.Status == protocol.StatusPending {
		return nil, true, &store.Error{
			Status:     store.CodeUnavailable,
			Message:    fmt.Sprintf("this decision was recorded and its turn (snapshot %s) is still running or being repaired; send the same decision again to get its outcome", it.ResumedSnapshotID),
			RetryAfter: store.UnavailableRetryAfter,
			Retry:      &store.RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: store.RetryOutcome, InterruptID: it.ID.String(), ResumedSnapshotID: it.ResumedSnapshotID},
		}
	}
	return &DecisionResult{Status: "resumed", Output: service.SnapshotOutput(snap)}, true, nil
}

// resolutionKey is the idempotency key a resolution records ("" when none).
func resolutionKey(resolution []byte) string {
	var r struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(resolution, &r)
	return r.Key
}

// hasSnapshot reports whether one of items is of the snapshot.
func hasSnapshot(items []store.Interrupt, snapshotID string) bool {
	for _, it := range items {
		if it.SnapshotID == snapshotID {
			return true
		}
	}
	return false
}

// voteOf is the vote a decision of c on it records: nil for an interrupt
// no policy made; for a gated call, the checks of its policy first (the
// scope, the requester's exclusion).
func voteOf(c auth.Caller, it *store.Interrupt, vote string, input json.RawMessage, note string) (*store.Vote, error) {
	if it.Policy == nil {
		return nil, nil
	}
	if !c.HasScope(it.Scope) {
		return nil, store.Errorf(store.CodePermissionDenied, "deciding interrupt %s needs the scope %s, which this key does not hold", it.ID, it.Scope)
	}
	if it.Policy.MakerChecker() && it.EndUser != "" && c.EndUser == it.EndUser {
		return nil, store.Errorf(store.CodePermissionDenied, "%s asked for this call and cannot approve or deny it: its policy needs someone else", it.EndUser)
	}
	return &store.Vote{Voter: c.Voter(), KeyID: c.KeyID, KeyName: c.KeyName, Vote: vote, Input: input, Note: note}, nil
}

// checkEdit checks an approver's edit of a gated call's input.
func checkEdit(it *store.Interrupt, tool *service.Tool, input json.RawMessage) error {
	if it.Policy == nil || !it.Policy.AllowEdit {
		return store.Errorf(store.CodeInvalidArgument, "the approval policy of %s does not allow editing its input", it.Tool)
	}
	if err := service.CheckToolInput(tool, &protocol.ToolRequest{Name: it.Tool, Ref: it.Ref, Input: input}); err != nil {
		return store.Errorf(store.CodeInvalidArgument, "the edited input does not match the input schema of %s: %s", it.Tool, store.AsError(err).Message)
	}
	return nil
}
