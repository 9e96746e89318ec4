package service

// Turn: the state of one turn, and what a custom agent's code works with.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wI2L/jsondiff"

	"github.com/holdpoint/holdpoint/internal/rawjson"
)

// Turn is what a custom agent's TurnFunc works with: the input of the turn
// and the session it may read and change. Changes to custom state and
// artifacts are streamed to the client as they happen. A Turn is used by one
// goroutine at a time.
type Turn struct {
	inv        *invocation
	input      AgentInput
	snapshotID string
	// started is set once the input passed validation and agent code is
	// about to run (see begin).
	started bool
	// ranTool says a tool ran in this turn: its effects cannot be undone,
	// so the interrupts the turn's resume claimed stay resolved.
	ranTool bool
	// unrecorded says a tool ran whose result is in no message of the
	// session (a later tool of its round failed): the turn's progress
	// cannot be kept without running it again.
	unrecorded bool
	// ownID names a client-managed turn in tool_calls (see turnID).
	ownID string
	// callKeys counts the call keys used, to keep them unique.
	callKeys map[string]int
	// outcomes are the tool call outcomes not written yet.
	outcomes []ToolCallOutcome
	// deferred is the resume's claim, when the turn's write makes it (see
	// invocation.claim).
	deferred *deferredClaim
	// budget counts what the turn holds against the runtime's limits.Turn.
	budget turnBudget
	// resumed is the tool message a custom turn's resume added: the
	// outputs of the requests it answered (see CallTool).
	resumed Message
}

// begin marks the point where the turn's input has passed validation and
// agent code (a model, a tool, a custom turn) is about to run. A new
// session's client-chosen id is taken for the caller here, not earlier, so
// that a request refused before this point writes nothing.
func (t *Turn) begin(ctx context.Context) error {
	if t.started {
		return nil
	}
	inv := t.inv
	if inv.sess.unclaimed && inv.agent.ServerManaged && !inv.isDetached() {
		if err := inv.claimSession(ctx); err != nil {
			return err
		}
	}
	t.started = true
	return nil
}

// Input is the turn's input (its message was already appended).
func (t *Turn) Input() AgentInput { return t.input }

// SessionID is the id of the session the turn belongs to.
func (t *Turn) SessionID() string { return t.inv.sess.id }

// SnapshotID is the id the turn's snapshot will have (empty for
// client-managed agents).
func (t *Turn) SnapshotID() string { return t.snapshotID }

// Messages returns a copy of the session history.
func (t *Turn) Messages() []Message {
	return cloneMessages(t.inv.sess.messages)
}

// AddMessages appends messages to the history.
func (t *Turn) AddMessages(msgs ...Message) {
	t.inv.sess.add(cloneMessages(msgs)...)
}

// SetMessages replaces the history.
func (t *Turn) SetMessages(msgs []Message) {
	t.inv.sess.messages = cloneMessages(msgs)
	t.inv.sess.replaced = true
}

// Custom returns the session's custom state (nil when unset).
func (t *Turn) Custom() json.RawMessage { return t.inv.sess.custom }

// UpdateCustom replaces the custom state by fn's result and streams the
// change as a customPatch chunk: the first of the turn replaces the whole
// document, later ones are RFC 6902 diffs against the last one sent.
func (t *Turn) UpdateCustom(fn func(current json.RawMessage) (json.RawMessage, error)) error {
	next, err := fn(t.inv.sess.custom)
	if err != nil {
		return err
	}
	if next != nil && !json.Valid(next) {
		return fmt.Errorf("custom state is not valid JSON")
	}
	t.inv.sess.custom = next
	t.inv.sendCustomPatch()
	return nil
}

// Artifacts returns a copy of the session's artifacts.
func (t *Turn) Artifacts() []Artifact {
	return append([]Artifact(nil), t.inv.sess.artifacts...)
}

// AddArtifacts adds artifacts, replacing any of the same name, and streams
// each one.
func (t *Turn) AddArtifacts(arts ...Artifact) {
	for _, a := range arts {
		t.inv.sess.artifacts = upsertArtifact(t.inv.sess.artifacts, a)
		a := a
		t.inv.emit(StreamChunk{Artifact: &a})
	}
}

// SendChunk streams a chunk to the client (dropped once detached).
func (t *Turn) SendChunk(c StreamChunk) { t.inv.emit(c) }

func upsertArtifact(list []Artifact, a Artifact) []Artifact {
	if a.Name != "" {
		for i := range list {
			if list[i].Name == a.Name {
				out := append([]Artifact(nil), list...)
				out[i] = a
				return out
			}
		}
	}
	return append(append([]Artifact(nil), list...), a)
}

func cloneMessages(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Clone()
	}
	return out
}

// sendCustomPatch streams the custom state change of the turn.
func (inv *invocation) sendCustomPatch() {
	cur := inv.sess.custom
	var ops []PatchOp
	if inv.patches.firstInTurn {
		value := cur
		if value == nil {
			value = json.RawMessage("null")
		}
		ops = []PatchOp{{Op: "replace", Path: "", Value: value}}
		inv.patches.firstInTurn = false
	} else {
		before := inv.patches.lastSent
		if before == nil {
			before = json.RawMessage("null")
		}
		after := cur
		if after == nil {
			after = json.RawMessage("null")
		}
		patch, err := jsondiff.CompareJSON(before, after)
		if err != nil {
			inv.rt.log.Warn("custom state diff failed", "err", err)
			return
		}
		for _, op := range patch {
			raw, err := json.Marshal(op.Value)
			if err != nil {
				return
			}
			p := PatchOp{Op: op.Type, Path: op.Path, From: op.From}
			if op.Type != "remove" {
				p.Value = raw
			}
			ops = append(ops, p)
		}
	}
	inv.patches.lastSent = cur
	if len(ops) > 0 {
		inv.emit(StreamChunk{CustomPatch: ops})
	}
}

// CallTool runs the agent's tool name for a custom turn, as a model's
// request for it runs: its input checked against the tool's schema, a
// tool_calls row written before it runs and its outcome after, and, in a
// detached turn, journaled: a turn taken over after its instance died runs
// its function again, and this call then returns the recorded output
// instead of running the tool a second time (a call that started and never
// finished fails the turn: it may have run). ref names the call within the
// turn and must be the same when the turn runs again (derive it from the
// turn's input, not from a clock or a random source). A tool that pauses
// (InterruptWith) fails the call.
//
// A call the tool's approval policy picks does not run: CallTool adds a
// model message with the request, paused on its approval, and returns
// ErrCallPaused, which the turn function returns as it is (the turn ends
// interrupted, the approval waits in the inbox). The turn resumed by the
// decision runs the approved call, or takes the output a human answered
// instead, before the function runs again; the same CallTool then returns
// that output.
func (t *Turn) CallTool(ctx context.Context, name, ref string, input json.RawMessage) (json.RawMessage, error) {
	inv := t.inv
	tool := inv.agent.Tool(name)
	switch {
	case tool == nil:
		return nil, fmt.Errorf("CallTool: agent %s has no tool %q", inv.agent.Name, name)
	case tool.Interrupt:
		return nil, fmt.Errorf("CallTool: %s is an interrupt, which never runs: ask it instead", name)
	case ref == "":
		return nil, fmt.Errorf("CallTool: tool %s: the call needs a ref, the same each time the turn runs", name)
	}
	req := &ToolRequest{Name: name, Ref: ref, Input: rawjson.Or(input, "null")}
	part := Part{ToolRequest: req}
	if tool.Approval != nil {
		if out, ok := t.resumedOutput(name, ref); ok {
			return out, nil
		}
		irq, err := inv.gate(ctx, tool, part, "")
		if err != nil {
			return nil, err
		}
		if irq != nil {
			t.AddMessages(Message{Role: RoleModel, Content: []Part{*irq}})
			return nil, fmt.Errorf("CallTool: tool %s: %w", name, ErrCallPaused)
		}
	}
	resp, irq, err := inv.recordedTool(ctx, t, tool, toolRun{key: callKey(0, 0, req), part: part})
	if err != nil {
		return nil, err
	}
	if irq != nil {
		return nil, fmt.Errorf("CallTool: tool %s paused the call: a custom turn's call cannot pause; ask with an interrupt before it", name)
	}
	return resp.ToolResponse.Output, nil
}

// ErrCallPaused is CallTool's error for a call paused on its approval: the
// turn function returns it (wrapped or not) and the turn ends interrupted.
var ErrCallPaused = errors.New("the call waits for its approval")

// resumedOutput is the output the turn's resume gave the request name/ref:
// the approved call's, run as the turn resumed, or a human's answer.
func (t *Turn) resumedOutput(name, ref string) (json.RawMessage, bool) {
	if p := findResponse(t.resumed.Content, name, ref); p != nil {
		return p.ToolResponse.Output, true
	}
	return nil, false
}

// DecidedCall is the call of tool name that the turn's resume decided (its
// approval ran it, or a human answered it) after CallTool paused the turn
// on it: its ref and the input it was asked with, for the turn function to
// make the same call again, which then returns the decided output.
func (t *Turn) DecidedCall(name string) (ref string, input json.RawMessage, ok bool) {
	for _, p := range t.resumed.Content {
		r := p.ToolResponse
		if r == nil || r.Name != name {
			continue
		}
		msgs := t.inv.sess.messages
		for i := len(msgs) - 1; i >= 0; i-- {
			if q := findRequest(msgs[i].Content, name, r.Ref); q != nil {
				return r.Ref, q.ToolRequest.Input, true
			}
		}
	}
	return "", nil, false
}
