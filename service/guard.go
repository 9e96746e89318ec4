package service

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/holdpoint/holdpoint/service/observe"
)

// A resume that claims its interrupts before its turn's write (a streamed
// resume, an operator's decision, a custom agent's turn, a resume about to
// run a tool) would lose the approval if its process died after the claim:
// the interrupt resolved, no snapshot answering it, nobody to run it. So
// such a claim is guarded: before it, the turn writes its snapshot pending
// (aside, the session does not move to it) with a job that records the
// resume, and claims on that job, as a detached turn does. The turn then
// runs here as any synchronous turn, journaling its tool calls, and its
// write ends the pending snapshot (and the job with it). If this instance
// dies at any point from the guard on, its heartbeat stops, and another
// instance takes the job over (runJob): it runs the resume from the paused
// snapshot with the claims made, reusing the journaled tool results, and a
// call that started but never finished is not run again (unknown). A
// resume whose claim and write are one statement (deferred) needs no
// guard.

// guard writes the guard of the turn's claim, once per invocation, and
// makes the claim (none when claims is empty: decided already) in the same
// transaction, so a refused claim leaves no guard. A detached turn, a
// client-managed one and a first turn have no guard; it returns
// guarded false, and the caller claims as before.
func (inv *invocation) guard(ctx context.Context, t *Turn, cp ClaimInterruptsParams) (ids []uuid.UUID, guarded bool, err error) {
	// Under persistMu, as a detach arriving midway is: one of the two wins.
	inv.persistMu.Lock()
	defer inv.persistMu.Unlock()
	if !inv.agent.ServerManaged || inv.isDetached() || inv.det.guarded.Load() || inv.baseID == "" {
		return nil, false, nil
	}
	w, job := inv.pendingWrite(t.snapshotID)
	w.KeepHead = true
	if len(cp.Claims) == 0 {
		// Decided already: the guard takes the decisions, once.
		err = inv.rt.store.GuardDecided(ctx, w, job, inv.rt.instanceID, inv.preclaimed)
	} else {
		cp.JobSnapshotID = t.snapshotID
		ids, err = inv.rt.store.GuardedClaim(ctx, w, job, inv.rt.instanceID, cp)
	}
	if errors.Is(err, ErrNotFound) {
		err = Errorf(CodeNotFound, "Session %s not found", w.SessionID)
	}
	if err != nil {
		return nil, true, err
	}
	inv.det.id = t.snapshotID
	inv.det.guarded.Store(true)
	inv.startBackground(false)
	return ids, true, nil
}

// guarding reports whether the turn's write ends its guard.
func (inv *invocation) guarding(snapshotID string) bool {
	return inv.det.guarded.Load() && !inv.isDetached() && snapshotID == inv.det.id
}

// endGuard stops the guard's heartbeat once the turn's write ended it (or
// the turn gave up on it): from then on the job, if it is still there, is
// another instance's to take.
func (inv *invocation) endGuard() {
	if !inv.det.guarded.Load() {
		return
	}
	inv.stopGuardHeartbeat()
	inv.det.guarded.Store(false)
	inv.det.journal = false
	inv.rt.running.Delete(runningKey(inv.caller.TenantID, inv.det.id))
	inv.rt.obs.JobEnded()
}

// stopGuardHeartbeat stops the guard's heartbeat (once): before the write
// that ends the guard, so that the heartbeat, seeing the snapshot no
// longer pending, does not take it for an abort.
func (inv *invocation) stopGuardHeartbeat() {
	if inv.det.guarded.Load() && inv.det.heartbeatDone != nil {
		inv.det.stopHeartbeat()
		<-inv.det.heartbeatDone
		inv.det.heartbeatDone = nil
	}
}

// dropGuard takes the guard back when the turn ended without running what
// it guards: refused, or given up by its client. Its job goes and its
// pending snapshot ends aborted, so nobody runs the resume.
func (inv *invocation) dropGuard() {
	if !inv.det.guarded.Load() || inv.det.lostJob.Load() {
		return
	}
	// Stopped first: seeing the snapshot aborted, it would take the
	// abort for a user's and end the turn aborted.
	inv.stopGuardHeartbeat()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(inv.rt.bg), 10*time.Second)
	defer cancel()
	if err := inv.rt.store.DeleteJob(ctx, inv.caller.TenantID, inv.det.id); err != nil {
		inv.rt.log.Warn("dropping a resume's guard failed; another instance finishes the resume", "snapshot", inv.det.id, "err", err)
		return
	}
	if _, err := inv.rt.store.AbortSnapshot(ctx, inv.caller.Scope(), inv.agent.Name, inv.det.id); err != nil {
		inv.rt.log.Warn("ending a dropped guard's snapshot failed", "snapshot", inv.det.id, "err", err)
	}
}

// strandedAfter is how long a decision may stay without the turn that
// carries it out before the repair starts that turn: far longer than the
// moment between a decision's commit and its turn's guard.
const strandedAfter = 30 * time.Second

// RepairStrandedDecisions starts the turns of decisions whose own turn
// never started (its instance died between the decision and the turn's
// guard): the paused snapshots whose interrupts were all decided, none
// resumed, for longer than strandedAfter. The guard takes each decision
// once, so instances repairing at once, or a late turn of the decision's
// own, run it once. It returns how many turns it started.
func (r *Runtime) RepairStrandedDecisions(ctx context.Context) (int, error) {
	batches, err := r.store.StrandedDecisions(ctx, strandedAfter, 50)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range batches {
		c := Caller{TenantID: d.TenantID, Actor: "system"}
		if _, err := r.SnapshotAgent(ctx, c, d.Agent, d.SnapshotID); err != nil {
			continue // another instance serves this agent
		}
		r.log.Warn("a decision's turn never started; starting it", "tenant", d.TenantID, "snapshot", d.SnapshotID, "interrupts", len(d.Batch))
		out, err := r.ResumeDecided(ctx, c, d.Agent, d.SnapshotID, d.Batch)
		if err != nil {
			switch {
			case errors.Is(err, ErrDecisionTaken):
			case errors.Is(err, ErrUnavailable):
				r.log.Warn("a stranded decision's turn stopped before it ended; it is carried out later", "snapshot", d.SnapshotID, "err", err)
			default:
				r.log.Error("starting a stranded decision's turn failed", "snapshot", d.SnapshotID, "err", err)
			}
			continue
		}
		n++
		r.obs.Recovered(observe.RecoveryStrandedDecision, 1)
		r.log.Info("stranded decision carried out", "snapshot", d.SnapshotID, "finishReason", out.FinishReason, "resumedSnapshot", out.SnapshotID)
	}
	return n, nil
}
