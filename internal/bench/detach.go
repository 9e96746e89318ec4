package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

// DefaultDetachPoll is how often a detached cycle's client reads its
// pending snapshot, as a protocol client polling getSnapshot does.
const DefaultDetachPoll = 5 * time.Millisecond

// detachedCycle is the approval cycle with both turns detached: each turn
// is answered at once with its pending snapshot, runs as a detached job
// (on this instance when a slot is free, else queued for the job runner),
// and the client polls getSnapshot until the snapshot leaves pending. A
// turn's latency is from the request to the poll that saw it end.
func detachedCycle(rt *service.Runtime, poll time.Duration) cycleFunc {
	caller := service.Caller{TenantID: "default", Actor: "bench"}
	turn := func(ctx context.Context, init service.AgentInit, in service.AgentInput, want string) (*service.Snapshot, error) {
		in.Detach = true
		out, err := rt.InvokeOne(ctx, caller, Agent, init, in, nil)
		if err != nil {
			return nil, err
		}
		if out.FinishReason != service.FinishDetached || out.SnapshotID == "" {
			return nil, fmt.Errorf("detach answered finish %s %+v", out.FinishReason, out.Error)
		}
		snap, err := awaitSnapshot(ctx, rt, caller, out.SnapshotID, poll)
		if err != nil {
			return nil, err
		}
		if snap.FinishReason != want {
			return nil, fmt.Errorf("detached turn ended %s/%s %+v, want %s", snap.Status, snap.FinishReason, snap.Error, want)
		}
		return snap, nil
	}
	return func(ctx context.Context, session string, i int) (time.Duration, time.Duration, error) {
		msg := service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("Transfer $50 to account 12345")}}
		t0 := time.Now()
		snap, err := turn(ctx, service.AgentInit{SessionID: session}, service.AgentInput{Message: &msg}, service.FinishInterrupted)
		if err != nil {
			return 0, 0, fmt.Errorf("first turn: %w", err)
		}
		t1 := time.Now()
		req, err := pendingApproval(snap)
		if err != nil {
			return 0, 0, err
		}
		resume := &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(`{"approved":true}`)}}}}
		if _, err := turn(ctx, service.AgentInit{SnapshotID: snap.SnapshotID}, service.AgentInput{Resume: resume}, service.FinishStop); err != nil {
			return 0, 0, fmt.Errorf("second turn: %w", err)
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// awaitSnapshot polls the snapshot every poll until it is no longer
// pending (bounded: a turn of the stub model takes milliseconds).
func awaitSnapshot(ctx context.Context, rt *service.Runtime, caller service.Caller, id string, poll time.Duration) (*service.Snapshot, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		snap, err := rt.GetSnapshot(ctx, caller, Agent, service.SnapshotLookup{SnapshotID: id})
		if err != nil {
			return nil, err
		}
		if snap.Status != service.StatusPending {
			return snap, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("snapshot %s still pending after a minute", id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// pendingApproval is the userApproval request a paused snapshot waits on:
// the last model message's tool request.
func pendingApproval(snap *service.Snapshot) (*service.ToolRequest, error) {
	if snap.State != nil {
		msgs := snap.State.Messages
		for i := len(msgs) - 1; i >= 0; i-- {
			for _, p := range msgs[i].Content {
				if p.ToolRequest != nil && p.ToolRequest.Name == "userApproval" {
					return p.ToolRequest, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("snapshot %s has no pending approval", snap.SnapshotID)
}

// startJobRunner runs the runtime's background work (the job runner that
// takes queued detached turns, the abort listener) until the run closes,
// as serve does.
func (r *run) startJobRunner() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.rt.RunBackground(ctx)
	}()
	r.closers = append(r.closers, func() { cancel(); <-done })
}
