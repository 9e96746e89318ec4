package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/requestid"
)

// What the layers built on the engine use of it: the approvals inbox
// (package service/inbox) records decisions and reads the store itself,
// and asks the engine for what only the engine knows: the agent and tool
// a snapshot or a recorded call goes on with, the turn that carries out
// decided interrupts, a recorded call run once more, and its labels,
// logger and observer.

// Store is the store the runtime persists to.
func (r *Runtime) Store() Store { return r.store }

// Logger is the runtime's logger (Options.Logger).
func (r *Runtime) Logger() *slog.Logger { return r.log }

// Observer is what the runtime reports to (Options.Observer).
func (r *Runtime) Observer() observe.Observer { return r.obs }

// Ready reports whether the instance takes background work
// (Options.Readiness; always, without one).
func (r *Runtime) Ready() bool { return r.opts.Readiness.Ready() }

// LostToolCallAfter is Options.LostToolCallAfter with its default.
func (r *Runtime) LostToolCallAfter() time.Duration { return r.opts.LostToolCallAfter }

// EventID is the opaque id of the tenant's event at pos.
func (r *Runtime) EventID(ctx context.Context, tenantID string, pos EventPos) (string, error) {
	return r.keys.EventID(ctx, tenantID, pos)
}

// MetricLabels are the agent and tool labels of the metrics about a call
// of the named agent's tool (bounded for a tenant's own agents).
func (r *Runtime) MetricLabels(agent, tool string) (agentLabel, toolLabel string) {
	return r.metricAgent(agent), r.metricTool(agent, tool)
}

// SnapshotAgent is the agent that resumes a paused snapshot of the named
// agent (see agentOfSnapshot), or why this instance cannot.
func (r *Runtime) SnapshotAgent(ctx context.Context, c Caller, agent, snapshotID string) (*Agent, error) {
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

// ResumeDecided runs the resume turn of a paused snapshot whose interrupts
// were all decided (and so already claimed): batch, each with its recorded
// resolution ({"respond": ...} or {"restart": true, "input": ...}). When
// nothing ran, the decisions are given back (released) so they can be made
// again; ErrDecisionTaken (another turn carries them out) and
// ErrUnavailable (the database, a shutdown or the request gone stopped
// the turn) leave them decided.
func (r *Runtime) ResumeDecided(ctx context.Context, c Caller, agent, snapshotID string, batch []Interrupt) (*AgentOutput, error) {
	// The operator (or the deadline) decides; the turn continues the
	// session of whoever owns it.
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: OperatorScope(c.TenantID), Agent: agent, ID: snapshotID, WithState: true})
	if err != nil {
		return nil, err
	}
	c.EndUser = snap.EndUser
	res, ids, err := decidedResume(batch)
	if err != nil {
		return nil, err
	}
	ch := make(chan AgentInput, 1)
	ch <- AgentInput{Resume: res}
	close(ch)
	out, err := r.invoke(ctx, c, agent, AgentInit{SnapshotID: snapshotID}, ch, nil, ids, false)
	return r.settleDecided(ctx, c.TenantID, c.Actor, snapshotID, ids, out, err)
}

// decidedResume is the resume that carries out the decisions of batch,
// and their interrupts' ids.
func decidedResume(batch []Interrupt) (*Resume, []uuid.UUID, error) {
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
			return nil, nil, fmt.Errorf("interrupt %s resolution: %w", it.ID, err)
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
	return res, ids, nil
}

// settleDecided answers the turn that carried out decisions ids (out,
// err), keeping them decided unless nothing ran for good.
func (r *Runtime) settleDecided(ctx context.Context, tenantID, actor, snapshotID string, ids []uuid.UUID, out *AgentOutput, err error) (*AgentOutput, error) {
	switch {
	case errors.Is(err, ErrDecisionTaken):
		return nil, err // another turn carries them out: they stay decided
	case errors.Is(err, ErrUnavailable):
		// Recorded, and not undone by an outage: the takeover of the
		// turn's guard, or the repair of stranded decisions, carries
		// them out once the database is back.
		return nil, err
	case err != nil && ctx.Err() != nil:
		// Stopped before its turn began (a shutdown, the request gone):
		// the decisions stay, and the repair of stranded decisions starts
		// their turn.
		return nil, fmt.Errorf("%w: the turn carrying out the decision did not start: %w", ErrUnavailable, err)
	case err != nil:
		// Nothing ran: give the decisions back so they can be made again.
		if rerr := r.store.ReleaseInterrupts(context.WithoutCancel(ctx), tenantID, ids, actor); rerr != nil {
			r.log.Error("releasing decisions failed", "snapshot", snapshotID, "err", rerr)
		}
		return nil, err
	case out.FinishReason == FinishFailed && databaseOutage(out.Error):
		// The turn stopped before it ended (the database out of reach, a
		// shutdown, the request gone) and the decisions stay: as above.
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, out.Error.Message)
	}
	return out, nil
}

// RerunToolCall runs a recorded call once more (the inbox's retry of a call
// whose outcome is unknown) as its turn did, on a turn of its own that
// sees the call's session id but none of its state (a retry keeps no
// change a tool makes to it), and returns its outcome; the caller records
// it.
func (r *Runtime) RerunToolCall(ctx context.Context, tenantID string, a *Agent, tool *Tool, rec *ToolCallRecord) ToolCallOutcome {
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

// ToolOfCall is the definition of a call's tool: the agent that ran it, as
// the turn's snapshot names it when there is one.
func (r *Runtime) ToolOfCall(ctx context.Context, c Caller, rec *ToolCallRecord) (*Agent, *Tool, error) {
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
	tool := a.Tool(rec.Tool)
	if tool == nil || tool.Interrupt {
		return nil, nil, Errorf(CodeFailedPrecondition, "agent %s no longer has the tool %s", rec.Agent, rec.Tool)
	}
	return a, tool, nil
}
