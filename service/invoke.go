package service

import "context"

// Invoke runs an invocation of the named agent: it resolves the session
// from init, then runs one turn per input read from inputs until the channel
// is closed. Stream chunks go to sink (which may be nil) as they happen.
//
// A turn that fails resolves with finishReason "failed" and the last good
// state; only misuse of the API (bad init, unknown agent or snapshot)
// returns an error. An input with detach set makes Invoke return at once
// with finishReason "detached" and a pending snapshot, the remaining work
// going on in the background.
func (r *Runtime) Invoke(ctx context.Context, c Caller, agent string, init AgentInit, inputs <-chan AgentInput, sink func(StreamChunk)) (*AgentOutput, error) {
	panic("TODO")
}

// InvokeOne is Invoke with a single input, the shape of an HTTP request.
func (r *Runtime) InvokeOne(ctx context.Context, c Caller, agent string, init AgentInit, input AgentInput, sink func(StreamChunk)) (*AgentOutput, error) {
	ch := make(chan AgentInput, 1)
	ch <- input
	close(ch)
	return r.Invoke(ctx, c, agent, init, ch, sink)
}

// GetSnapshot returns a snapshot of a server-managed agent by id, or the
// latest snapshot of a session. A missing snapshot is NOT_FOUND.
func (r *Runtime) GetSnapshot(ctx context.Context, c Caller, agent string, lookup SnapshotLookup) (*Snapshot, error) {
	panic("TODO")
}

// Abort flips a pending snapshot to aborted and cancels its running work.
// The result carries the status before the abort (empty when not found).
func (r *Runtime) Abort(ctx context.Context, c Caller, agent, snapshotID string) (*AbortResult, error) {
	panic("TODO")
}
