package service

// Snapshots read back and turns aborted: a snapshot by id or a session's
// latest (as its end user or as the tenant's operators see it), the status
// a reader is shown, and the abort of a running turn.

import (
	"context"
	"errors"
	"time"
)

// GetSnapshot returns a snapshot of a server-managed agent by id, or the
// latest snapshot of a session. A missing snapshot is NOT_FOUND.
func (r *Runtime) GetSnapshot(ctx context.Context, c Caller, agent string, lookup SnapshotLookup) (*Snapshot, error) {
	return r.getSnapshot(ctx, c, c.Scope(), agent, lookup)
}

// OperatorSnapshot is GetSnapshot as the tenant's operators see it (the
// dashboard's session page): a session of any end user of the tenant, as
// the inbox and the decision page show their interrupts.
func (r *Runtime) OperatorSnapshot(ctx context.Context, c Caller, agent string, lookup SnapshotLookup) (*Snapshot, error) {
	return r.getSnapshot(ctx, c, OperatorScope(c.TenantID), agent, lookup)
}

func (r *Runtime) getSnapshot(ctx context.Context, c Caller, scope Scope, agent string, lookup SnapshotLookup) (*Snapshot, error) {
	a, err := r.LookupFor(ctx, c, agent)
	if err != nil {
		return nil, err
	}
	if !a.ServerManaged {
		return nil, Errorf(CodeFailedPrecondition, "getSnapshot requires a server-managed agent; '%s' keeps its state on the client", agent)
	}
	id := lookup.SnapshotID
	if id == "" {
		if lookup.SessionID == "" {
			return nil, Errorf(CodeInvalidArgument, "getSnapshot needs a snapshotId or a sessionId")
		}
		sess, err := r.store.LoadSession(ctx, scope, lookup.SessionID)
		if errors.Is(err, ErrNotFound) || (err == nil && (sess.Agent != agent || sess.LatestSnapshotID == "")) {
			return nil, Errorf(CodeNotFound, "Snapshot '%s' not found for agent '%s'.", lookup.SessionID, agent)
		}
		if err != nil {
			return nil, err
		}
		id = sess.LatestSnapshotID
	}
	snap, err := r.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: scope, Agent: agent, ID: id, WithState: true})
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "Snapshot '%s' not found for agent '%s'.", id, agent)
	}
	if err != nil {
		return nil, err
	}
	out := snap.Snapshot
	out.Status = r.EffectiveStatus(&out)
	return &out, nil
}

// EffectiveStatus reports a pending snapshot whose heartbeat is stale as
// expired; expired is never stored.
func (r *Runtime) EffectiveStatus(s *Snapshot) string {
	if s.Status == StatusPending && s.HeartbeatAt != nil && time.Since(*s.HeartbeatAt) > r.opts.HeartbeatTimeout {
		return StatusExpired
	}
	return s.Status
}

// Abort flips a pending snapshot to aborted and cancels its running work.
// The result carries the status before the abort (empty when not found).
func (r *Runtime) Abort(ctx context.Context, c Caller, agent, snapshotID string) (*AbortResult, error) {
	a, err := r.LookupFor(ctx, c, agent)
	if err != nil {
		return nil, err
	}
	if !a.ServerManaged {
		return nil, Errorf(CodeFailedPrecondition, "abort requires a server-managed agent; '%s' keeps its state on the client", agent)
	}
	if snapshotID == "" {
		return nil, Errorf(CodeInvalidArgument, "abort needs a snapshotId")
	}
	prev, err := r.store.AbortSnapshot(ctx, c.Scope(), agent, snapshotID)
	if errors.Is(err, ErrNotFound) {
		return &AbortResult{SnapshotID: snapshotID}, nil
	}
	if err != nil {
		return nil, err
	}
	if prev == StatusPending {
		if cancel, ok := r.running.Load(runningKey(c.TenantID, snapshotID)); ok {
			cancel.(context.CancelFunc)()
		}
	}
	return &AbortResult{SnapshotID: snapshotID, Status: prev}, nil
}

func runningKey(tenantID, snapshotID string) JobRef {
	return JobRef{TenantID: tenantID, SnapshotID: snapshotID}
}
