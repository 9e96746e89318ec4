package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/store"
)

// DecisionOutcome is what a client key (or an end user's token) may learn
// of a decision: whether it was made, by whom and when, the turn it
// resumed and how that turn and its tool calls ended. It carries no
// history beyond what the caller's own session already shows.
type DecisionOutcome struct {
	InterruptID uuid.UUID `json:"interruptId"`
	SessionID   string    `json:"sessionId"`
	SnapshotID  string    `json:"snapshotId"`
	Tool        string    `json:"tool"`
	Ref         string    `json:"ref,omitempty"`
	// Status is the interrupt's: pending, resolved or expired.
	Status    string          `json:"status"`
	Decision  json.RawMessage `json:"decision,omitempty"`
	DecidedBy string          `json:"decidedBy,omitempty"`
	DecidedAt *time.Time      `json:"decidedAt,omitempty"`
	// ResumedSnapshotID is the snapshot the decision's turn writes, and
	// TurnStatus that snapshot's status (pending while it runs, absent
	// until the turn starts).
	ResumedSnapshotID string `json:"resumedSnapshotId,omitempty"`
	TurnStatus        string `json:"turnStatus,omitempty"`
	// ToolCalls are the resumed turn's calls and their status (succeeded,
	// failed, unknown, cancelled...).
	ToolCalls []OutcomeToolCall `json:"toolCalls"`
}

// OutcomeToolCall is one tool call of a decision's turn.
type OutcomeToolCall struct {
	ID     uuid.UUID `json:"id"`
	Tool   string    `json:"tool"`
	Ref    string    `json:"ref,omitempty"`
	Status string    `json:"status"`
}

// InterruptOutcome answers a decision's outcome to a caller who may see
// the interrupt's session; any other interrupt is not found.
func (ib *Inbox) InterruptOutcome(ctx context.Context, c auth.Caller, id uuid.UUID) (*DecisionOutcome, error) {
	notFound := store.Errorf(store.CodeNotFound, "interrupt %s not found", id)
	it, err := ib.store.GetInterrupt(ctx, c.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	paused, err := ib.store.LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: c.Scope(), Agent: it.Agent, ID: it.SnapshotID})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !c.Scope().Sees(paused.EndUser)) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	out := &DecisionOutcome{InterruptID: it.ID, SessionID: it.SessionID, SnapshotID: it.SnapshotID, Tool: it.Tool, Ref: it.Ref,
		Status: it.Status, Decision: it.Resolution, DecidedBy: it.ResolvedBy, DecidedAt: it.ResolvedAt,
		ResumedSnapshotID: it.ResumedSnapshotID, ToolCalls: []OutcomeToolCall{}}
	if it.ResumedSnapshotID == "" {
		return out, nil
	}
	snap, err := ib.store.LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: c.Scope(), Agent: it.Agent, ID: it.ResumedSnapshotID})
	if err == nil {
		out.TurnStatus = ib.rt.EffectiveStatus(&snap.Snapshot)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	calls, err := ib.store.ListTurnToolCalls(ctx, c.TenantID, []string{it.ResumedSnapshotID})
	if err != nil {
		return nil, err
	}
	for _, call := range calls {
		out.ToolCalls = append(out.ToolCalls, OutcomeToolCall{ID: call.ID, Tool: call.Tool, Ref: call.Ref, Status: call.Status})
	}
	return out, nil
}
