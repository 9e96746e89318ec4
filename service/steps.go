package service

import (
	"context"
	"encoding/json"
	"fmt"
)

// A turn taken over by another instance runs again from its paused
// snapshot. Asking the model again there would be asking for other calls:
// a model answers differently from one call to the next (other tools,
// other inputs, and with most providers a new ref for every tool request),
// while the journal of tool calls knows a call by its request's ref. A
// transfer the instance before had sent would not be recognised, and would
// go out a second time. So a journaled turn (detached, or a resume guarded
// by a job) records the model's answers (its steps, numbered from the
// first answer of the job's first turn) before any tool call it journals,
// and a takeover replays the recorded answers, in order, instead of asking
// the model; past the last one it asks.

// modelAnswer is the model's next answer in the turn (see callModel),
// replayed in a turn taken over as above, and kept for recordSteps.
func (inv *invocation) modelAnswer(ctx context.Context, index int) (*ModelResponse, error) {
	n := len(inv.det.answers)
	var resp *ModelResponse
	if n < len(inv.det.replay) && inv.det.replay[n].Step == n {
		var err error
		if resp, err = inv.replayStep(inv.det.replay[n], index); err != nil {
			return nil, err
		}
		inv.det.recorded = n + 1
	} else {
		inv.det.replay = nil // past the recorded answers: the model answers from here on
		var err error
		if resp, err = inv.callModel(ctx, index); err != nil {
			return nil, err
		}
	}
	inv.det.answers = append(inv.det.answers, resp)
	return resp, nil
}

// newTurnSteps starts the count of the model's answers at a turn of an
// invocation that has no job yet: the turns before it were written, and a
// job, if one comes, starts from this turn.
func (inv *invocation) newTurnSteps() {
	if !inv.det.journal {
		inv.det.answers, inv.det.recorded = nil, 0
	}
}

// recordSteps journals the model's answers not recorded yet, before a tool
// call of a journaled turn is. False when the turn's job is no longer this
// instance's: the turn must stop (another runs it).
func (inv *invocation) recordSteps(ctx context.Context) (bool, error) {
	for n := inv.det.recorded; n < len(inv.det.answers); n++ {
		resp := inv.det.answers[n]
		raw, err := json.Marshal(resp.Message)
		if err != nil {
			return false, fmt.Errorf("recording the model's answer: %w", err)
		}
		step := TurnStep{Step: n, Message: raw, FinishReason: resp.FinishReason}
		recorded, err := inv.rt.store.JournalStep(ctx, inv.caller.TenantID, inv.det.id, step, inv.rt.instanceID)
		if err != nil || !recorded {
			return false, err
		}
		inv.det.recorded = n + 1
	}
	return true, nil
}

// replayStep answers a recorded step as the model did, streaming it as
// message index.
func (inv *invocation) replayStep(step TurnStep, index int) (*ModelResponse, error) {
	var msg Message
	if err := json.Unmarshal(step.Message, &msg); err != nil {
		return nil, fmt.Errorf("replaying the model's recorded answer %d: %w", step.Step, err)
	}
	if msg.Role == "" {
		msg.Role = RoleModel
	}
	inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: msg.Role, Content: msg.Content, Index: intPtr(index)}})
	return &ModelResponse{Message: msg, FinishReason: step.FinishReason}, nil
}

// loadSteps reads the answers a taken-over turn's previous instances
// recorded, for modelAnswer to replay.
func (inv *invocation) loadSteps(ctx context.Context) error {
	steps, err := inv.rt.store.TurnSteps(ctx, inv.caller.TenantID, inv.det.id)
	if err != nil {
		return err
	}
	inv.det.replay = steps
	return nil
}
