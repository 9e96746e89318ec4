package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/schema"
)

// MaxInboxPage bounds one page of the approvals inbox.
const MaxInboxPage = 200

// InterruptStatuses are the stored statuses of an interrupt.
var InterruptStatuses = []string{InterruptPending, InterruptResolved, InterruptExpired, InterruptCancelled}

// ListInterrupts returns a page of the tenant's interrupts, newest first.
func (r *Runtime) ListInterrupts(ctx context.Context, c Caller, f InterruptFilter) ([]Interrupt, error) {
	if f.Status == "" {
		f.Status = InterruptPending
	}
	if !contains(InterruptStatuses, f.Status) {
		return nil, Errorf(CodeInvalidArgument, "status must be one of %s", strings.Join(InterruptStatuses, ", "))
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > MaxInboxPage {
		return nil, Errorf(CodeInvalidArgument, "limit must be at most %d", MaxInboxPage)
	}
	f.Scopes, f.AllScopes = c.Scopes, c.HasScope("*")
	return r.store.ListInterrupts(ctx, c.TenantID, f)
}

// InterruptDetail is an interrupt with the end of its session's history.
type InterruptDetail struct {
	Interrupt
	// Messages are the last messages of the paused snapshot, for context.
	Messages []Message `json:"messages"`
	// Execution is "unknown" when a tool call of the turn that resumed the
	// interrupt may have run without its outcome being recorded: the
	// decision's effect is not known, and a human must confirm, cancel or
	// retry those calls (UnknownToolCalls).
	Execution        string           `json:"execution,omitempty"`
	UnknownToolCalls []ToolCallRecord `json:"unknownToolCalls,omitempty"`
	// Votes are the votes on a gated call, oldest first.
	Votes []Vote `json:"votes,omitempty"`
}

// visibleInterrupt reads an interrupt the caller may see: one needing a
// scope the caller lacks is refused (403).
func (r *Runtime) visibleInterrupt(ctx context.Context, c Caller, id uuid.UUID) (*Interrupt, error) {
	it, err := r.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "interrupt %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if !c.HasScope(it.Scope) {
		return nil, Errorf(CodePermissionDenied, "interrupt %s needs the scope %s, which this key does not hold", id, it.Scope)
	}
	return it, nil
}

// ExecutionUnknown is InterruptDetail.Execution when a call of the
// resuming turn may have run.
const ExecutionUnknown = "unknown"

// GetInterrupt returns an interrupt with the last few messages of the
// snapshot that paused on it.
func (r *Runtime) GetInterrupt(ctx context.Context, c Caller, id uuid.UUID, lastMessages int) (*InterruptDetail, error) {
	it, err := r.visibleInterrupt(ctx, c, id)
	if err != nil {
		return nil, err
	}
	out := &InterruptDetail{Interrupt: *it, Messages: []Message{}}
	if it.Policy != nil {
		if out.Votes, err = r.store.ListVotes(ctx, c.TenantID, id); err != nil {
			return nil, err
		}
	}
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: it.Agent, ID: it.SnapshotID, WithState: true})
	if err != nil {
		return nil, err
	}
	msgs := snap.State.Messages
	if lastMessages > 0 && len(msgs) > lastMessages {
		msgs = msgs[len(msgs)-lastMessages:]
	}
	out.Messages = msgs
	if it.ResumedSnapshotID != "" {
		calls, err := r.store.ListTurnToolCalls(ctx, c.TenantID, []string{it.ResumedSnapshotID})
		if err != nil {
			return nil, err
		}
		for _, call := range calls {
			if call.Status == ToolCallUnknown {
				out.Execution = ExecutionUnknown
				out.UnknownToolCalls = append(out.UnknownToolCalls, call)
			}
		}
	}
	return out, nil
}

// InterruptEvents returns an interrupt's audit trail.
func (r *Runtime) InterruptEvents(ctx context.Context, c Caller, id uuid.UUID) ([]InterruptEvent, error) {
	if _, err := r.visibleInterrupt(ctx, c, id); err != nil {
		return nil, err
	}
	events, err := r.store.ListInterruptEvents(ctx, c.TenantID, id)
	if err != nil {
		return nil, err
	}
	for i := range events {
		if events[i].ID, err = r.keys.EventID(ctx, c.TenantID, events[i].Pos); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// DecisionResult answers an operator's decision: the continued turn's
// output when it was the last decision the snapshot waited for, otherwise
// the interrupts still waiting.
type DecisionResult struct {
	// Status is "resumed", "recorded" (the snapshot waits for other
	// interrupts) or "voted" (the call waits for more approvals).
	Status     string       `json:"status"`
	Output     *AgentOutput `json:"output,omitempty"`
	WaitingFor []Interrupt  `json:"waitingFor,omitempty"`
	// Approvals of Needed, after a vote that did not complete them.
	Approvals int `json:"approvals,omitempty"`
	Needed    int `json:"needed,omitempty"`
}

// RespondInterrupt decides an interrupt on the user's behalf with output,
// which must match the tool's declared output schema.
func (r *Runtime) RespondInterrupt(ctx context.Context, c Caller, id uuid.UUID, output json.RawMessage, note string) (*DecisionResult, error) {
	resolution := decisionResolution(ctx, "respond", output, note)
	it, tool, err := r.interruptTool(ctx, c, id)
	if err != nil {
		return r.orSameDecision(ctx, c, id, resolution, err)
	}
	if rawjson.IsNull(output) {
		return nil, Errorf(CodeInvalidArgument, "output is required")
	}
	if violations := schema.Validate(tool.OutputSchema, output); len(violations) > 0 {
		e := Errorf(CodeInvalidArgument, "output does not match the output schema of %s: %s", it.Tool, strings.Join(violations, "; "))
		e.Details = map[string]any{"violations": violations}
		return nil, e
	}
	vote, err := voteOf(c, it, VoteDeny, nil, note)
	if err != nil {
		return nil, err
	}
	return r.decide(ctx, c, it, resolution, vote)
}

// orSameDecision answers a decision refused with err: the first outcome
// when the interrupt was decided already by the same actor with the same
// resolution (see sameDecision), else err.
func (r *Runtime) orSameDecision(ctx context.Context, c Caller, id uuid.UUID, resolution []byte, err error) (*DecisionResult, error) {
	if AsError(err).Status != CodeAborted {
		return nil, err
	}
	if res, same, rerr := r.sameDecision(ctx, c, id, resolution); same {
		return res, rerr
	}
	return nil, err
}

// RestartInterrupt decides an interrupt by running its tool again with the
// original input (and `resumed` metadata).
func (r *Runtime) RestartInterrupt(ctx context.Context, c Caller, id uuid.UUID, note string) (*DecisionResult, error) {
	return r.ApproveInterrupt(ctx, c, id, nil, note)
}

// ApproveInterrupt restarts an interrupt's tool: for a gated call, it is
// the caller's approval (a vote, which runs the call once the policy's
// approvals are given), with input an edit of the call's input where the
// policy allows it (nil: as asked, or as the last edit proposed).
func (r *Runtime) ApproveInterrupt(ctx context.Context, c Caller, id uuid.UUID, input json.RawMessage, note string) (*DecisionResult, error) {
	resolution := decisionResolution(ctx, "restart", jsonTrue, note)
	it, tool, err := r.interruptTool(ctx, c, id)
	if err != nil {
		return r.orSameDecision(ctx, c, id, resolution, err)
	}
	if tool.Interrupt {
		return nil, Errorf(CodeFailedPrecondition, "%s is an interrupt that asks a human; it cannot be restarted, respond instead", it.Tool)
	}
	if input != nil && it.ProposedInput == nil && JSONEqual(input, it.Input) {
		input = nil // not an edit
	}
	if input != nil {
		if err := checkEdit(it, tool, input); err != nil {
			return nil, err
		}
	}
	vote, err := voteOf(c, it, VoteApprove, input, note)
	if err != nil {
		return nil, err
	}
	return r.decide(ctx, c, it, resolution, vote)
}

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
func (r *Runtime) interruptTool(ctx context.Context, c Caller, id uuid.UUID) (*Interrupt, *Tool, error) {
	it, err := r.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, Errorf(CodeNotFound, "interrupt %s not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	switch it.Status {
	case InterruptExpired:
		return nil, nil, Errorf(CodeFailedPrecondition, "interrupt %s expired", id)
	case InterruptPending:
	default:
		return nil, nil, Errorf(CodeAborted, "interrupt %s is already %s", id, it.Status)
	}
	a, err := r.snapshotAgent(ctx, c, it.Agent, it.SnapshotID)
	if err != nil {
		return nil, nil, err
	}
	tool := a.tool(it.Tool)
	if tool == nil {
		return nil, nil, Errorf(CodeFailedPrecondition, "agent %s no longer has the tool %s", it.Agent, it.Tool)
	}
	return it, tool, nil
}

// snapshotAgent is the agent that resumes a paused snapshot of the named
// agent (see agentOfSnapshot), or why this instance cannot.
func (r *Runtime) snapshotAgent(ctx context.Context, c Caller, agent, snapshotID string) (*Agent, error) {
	a, err := r.LookupFor(ctx, c, agent)
	if errors.Is(err, ErrUnavailable) {
		return nil, err // the tenant's agents could not be read: 503, try again
	}
	if err != nil {
		return nil, Errorf(CodeFailedPrecondition, "agent %s of snapshot %s is not served by this instance", agent, snapshotID)
	}
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: agent, ID: snapshotID})
	if err != nil {
		return nil, err
	}
	return r.agentOfSnapshot(ctx, c, a, snapshotID, snap.AgentVersion, true)
}

// decide records a decision and, when it was the last one the snapshot
// waited for, runs the resume turn with every decision together.
func (r *Runtime) decide(ctx context.Context, c Caller, it *Interrupt, resolution json.RawMessage, vote *Vote) (*DecisionResult, error) {
	d, err := r.store.DecideInterrupt(ctx, DecideInterruptParams{TenantID: c.TenantID, ID: it.ID, Resolution: resolution, Actor: c.Actor, Vote: vote, Scope: it.Scope})
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "interrupt %s not found", it.ID)
	}
	if err != nil {
		return r.orSameDecision(ctx, c, it.ID, resolution, err)
	}
	if d.Voted {
		return &DecisionResult{Status: "voted", Approvals: d.Approvals, Needed: d.Needed}, nil
	}
	r.obs.InterruptResolved(r.metricAgent(it.Agent), r.metricTool(it.Agent, it.Tool))
	if len(d.Batch) == 0 {
		return &DecisionResult{Status: "recorded", WaitingFor: d.Waiting}, nil
	}
	out, err := r.resumeDecided(ctx, c, it.Agent, it.SnapshotID, d.Batch)
	if errors.Is(err, ErrUnavailable) {
		// The decision is recorded, so this 503 must not read as
		// "nothing happened": sent again it is refused as decided.
		e := UnavailableError(err)
		e.Message = "the decision was recorded, but the database became unavailable before the turn it resumes was saved; " +
			"the turn is carried out once the database is back: send the same decision again to get its outcome"
		e.Retry = &RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: RetryOutcome, InterruptID: it.ID.String()}
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return &DecisionResult{Status: "resumed", Output: out}, nil
}

// resumeDecided runs the resume turn of a paused snapshot whose interrupts
// were all decided (and so already claimed).
func (r *Runtime) resumeDecided(ctx context.Context, c Caller, agent, snapshotID string, batch []Interrupt) (*AgentOutput, error) {
	// The operator (or the deadline) decides; the turn continues the
	// session of whoever owns it.
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: agent, ID: snapshotID, WithState: true})
	if err != nil {
		return nil, err
	}
	c.EndUser = snap.EndUser
	res := &Resume{}
	ids := make([]uuid.UUID, 0, len(batch))
	for _, it := range batch {
		ids = append(ids, it.ID)
		var decision struct {
			Respond json.RawMessage `json:"respond"`
			Restart bool            `json:"restart"`
			Input   json.RawMessage `json:"input"`
			Note    string          `json:"note"`
		}
		if err := json.Unmarshal(it.Resolution, &decision); err != nil {
			return nil, fmt.Errorf("interrupt %s resolution: %w", it.ID, err)
		}
		if decision.Restart {
			meta := Metadata{metaResumed: jsonTrue}
			if decision.Note != "" {
				meta[metaResumed], _ = json.Marshal(map[string]string{"note": decision.Note})
			}
			input := it.Input
			if decision.Input != nil {
				input = decision.Input // an approver's edit
			}
			res.Restart = append(res.Restart, Part{ToolRequest: &ToolRequest{Name: it.Tool, Ref: it.Ref, Input: input}, Metadata: meta})
			continue
		}
		res.Respond = append(res.Respond, Part{ToolResponse: &ToolResponse{Name: it.Tool, Ref: it.Ref, Output: rawjson.Or(decision.Respond, "null")}})
	}
	ch := make(chan AgentInput, 1)
	ch <- AgentInput{Resume: res}
	close(ch)
	out, err := r.invoke(ctx, c, agent, AgentInit{SnapshotID: snapshotID}, ch, nil, ids, false)
	if errors.Is(err, ErrDecisionTaken) {
		return nil, err // another turn carries them out: they stay decided
	}
	if errors.Is(err, ErrUnavailable) {
		// Recorded, and not undone by an outage: the takeover of the
		// turn's guard, or the repair of stranded decisions, carries
		// them out once the database is back.
		return nil, err
	}
	if err != nil {
		// Nothing ran: give the decisions back so they can be made again.
		if rerr := r.store.ReleaseInterrupts(context.WithoutCancel(ctx), c.TenantID, ids, c.Actor); rerr != nil {
			r.log.Error("releasing decisions failed", "snapshot", snapshotID, "err", rerr)
		}
		return nil, err
	}
	return out, nil
}

// SweepDeadlines applies the deadlines of due interrupts (all tenants) and
// resumes the snapshots whose last interrupt was answered by a deadline.
func (r *Runtime) SweepDeadlines(ctx context.Context) (int, error) {
	total := 0
	for {
		swept, decided, err := r.store.SweepDueInterrupts(ctx, 100)
		if err != nil {
			return total, err
		}
		n := len(swept)
		total += n
		for _, s := range swept {
			agent, tool := r.metricAgent(s.Agent), r.metricTool(s.Agent, s.Tool)
			if s.Status == InterruptExpired {
				r.obs.InterruptExpired(agent, tool)
			} else {
				r.obs.InterruptResolved(agent, tool)
			}
		}
		for _, d := range decided {
			c := Caller{TenantID: d.TenantID, Actor: "system"}
			if _, err := r.snapshotAgent(ctx, c, d.Agent, d.SnapshotID); err != nil {
				r.log.Warn("deadline answered an interrupt of an agent this instance does not serve", "agent", d.Agent, "snapshot", d.SnapshotID, "err", err)
				continue
			}
			out, err := r.resumeDecided(ctx, c, d.Agent, d.SnapshotID, d.Batch)
			if err != nil {
				r.log.Error("resuming after a deadline failed", "snapshot", d.SnapshotID, "err", err)
				continue
			}
			r.log.Info("resumed after a deadline", "snapshot", d.SnapshotID, "finishReason", out.FinishReason, "resumedSnapshot", out.SnapshotID)
		}
		if n < 100 {
			return total, nil
		}
	}
}

// RunDeadlineSweeper sweeps every interval until ctx ends: the due
// deadlines, the tool calls lost with their turn (SweepLostToolCalls),
// and the decisions whose turn never started (RepairStrandedDecisions).
func (r *Runtime) RunDeadlineSweeper(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() bool {
		if !r.opts.Readiness.Ready() {
			return false // nothing to gain from sweeps that would fail
		}
		if _, err := r.SweepDeadlines(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("deadline sweep failed", "err", err)
		}
		if _, err := r.SweepEscalations(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("escalation sweep failed", "err", err)
		}
		if _, err := r.SweepLostToolCalls(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("lost tool call sweep failed", "err", err)
		}
		if _, err := r.RepairStrandedDecisions(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("stranded decision repair failed", "err", err)
		}
		return false
	})
}

// SweepLostToolCalls marks unknown (all tenants) the tool calls running
// for longer than Options.LostToolCallAfter whose turn has no detached
// job: their instance died, so nobody will record their outcome. A
// detached turn's calls are left to the takeover of its job.
func (r *Runtime) SweepLostToolCalls(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		n, err := r.store.MarkLostToolCalls(ctx, time.Now().Add(-r.opts.LostToolCallAfter), batch)
		total += n
		if err != nil || n < batch {
			if total > 0 {
				r.obs.Recovered(observe.RecoveryLostToolCall, total)
				r.log.Warn("tool calls lost with their turn may have run; they wait for a human", "calls", total)
			}
			return total, err
		}
	}
}

// ReportGroups are the groupings the interrupt report accepts.
var ReportGroups = []string{"agent", "tool", "day"}

// PendingCounts counts the caller's tenant's pending interrupts per agent
// and tool (those the caller's scopes let it see).
func (r *Runtime) PendingCounts(ctx context.Context, c Caller) ([]PendingCount, error) {
	return r.store.CountPendingInterrupts(ctx, c.TenantID, c.Scopes, c.HasScope("*"))
}

// ReportInterrupts returns the tenant's interrupt figures over [from, to).
func (r *Runtime) ReportInterrupts(ctx context.Context, c Caller, from, to time.Time, groupBy string) ([]ReportRow, error) {
	if groupBy == "" {
		groupBy = "day"
	}
	if !contains(ReportGroups, groupBy) {
		return nil, Errorf(CodeInvalidArgument, "groupBy must be one of %s", strings.Join(ReportGroups, ", "))
	}
	if !to.After(from) {
		return nil, Errorf(CodeInvalidArgument, "to must be after from")
	}
	return r.store.ReportInterrupts(ctx, ReportInterruptsParams{TenantID: c.TenantID, From: from, To: to, GroupBy: groupBy})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ValidateJSON checks doc against a JSON Schema and returns the violations
// (none when the schema is empty). It is schema.Validate, kept for callers
// of the engine's API.
func ValidateJSON(schemaDoc, doc json.RawMessage) []string {
	return schema.Validate(schemaDoc, doc)
}
