package service

import (
	"context"
	"errors"
	"time"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/limits"
)

// pump forwards inputs to the turn queue and handles detach as soon as it
// arrives, even while a turn is running.
func (inv *invocation) pump(ctx context.Context, inputs <-chan AgentInput, queue chan<- AgentInput) {
	defer close(queue)
	for {
		var in AgentInput
		var ok bool
		select {
		case in, ok = <-inputs:
			if !ok {
				return
			}
		case <-ctx.Done():
			drain(inputs)
			return
		}
		if err := limits.CheckInput(in); err != nil {
			inv.reject(err)
			drain(inputs)
			return
		}
		if in.Detach && !inv.isDetached() {
			if err := inv.detach(ctx, in); err != nil {
				inv.reject(err)
				drain(inputs)
				return
			}
		}
		if in.HasPayload() {
			if !in.Detach {
				inv.track(ctx, in)
			}
			if inv.det.queued {
				continue // the job has it, for the worker that takes it
			}
			select {
			case queue <- in:
			case <-ctx.Done():
			}
		}
	}
}

// drain keeps reading inputs in the background until the sender closes
// them, so a sender never blocks on an invocation that stopped reading.
func drain(inputs <-chan AgentInput) {
	go func() {
		for range inputs {
		}
	}()
}

// track remembers an input until its turn is persisted, so a detach can
// hand the work still to do to its job; once detached, the input is added
// to the job directly.
func (inv *invocation) track(ctx context.Context, in AgentInput) {
	inv.persistMu.Lock()
	defer inv.persistMu.Unlock()
	in.Detach = false
	inv.unpersisted = append(inv.unpersisted, in)
	if inv.isDetached() {
		if err := inv.rt.store.AppendJobInputs(ctx, inv.caller.TenantID, inv.det.id, []AgentInput{in}); err != nil {
			inv.rt.log.Error("recording a detached input failed", "snapshot", inv.det.id, "err", err)
		}
	}
}

// detach writes the pending snapshot the client will poll and switches the
// invocation to background mode.
func (inv *invocation) detach(ctx context.Context, in AgentInput) error {
	if !inv.agent.ServerManaged {
		return Errorf(CodeFailedPrecondition, "Detach is only supported when a session store is provided.")
	}
	// The pending snapshot moves the session unconditionally, so its
	// head must not be a remembered one left unchecked: it never is, as
	// only InvokeOne starts from a remembered head, with one input that
	// does not detach.
	inv.persistMu.Lock()
	defer inv.persistMu.Unlock()
	if inv.det.guarded.Load() {
		// Its guard's job would finish the same turn under another id.
		return Errorf(CodeFailedPrecondition, "This turn is executing an approval and cannot detach now: send detach with the resume itself.")
	}
	if in.HasPayload() {
		in.Detach = false
		inv.unpersisted = append(inv.unpersisted, in)
	}
	w, job := inv.pendingWrite(NewRowID().String())
	job.TenantCap, job.ActorCap = inv.rt.detach.PerTenant, inv.rt.detach.PerCredential
	// A detach that starts its work (no turn of this invocation is under
	// way) runs here only in a free slot; without one its job is queued,
	// owned by nobody, for the first instance with a slot to take. A turn
	// already running when the detach came goes on here either way.
	inv.det.slot = inv.rt.takeJobSlot()
	inv.det.queued = !inv.det.slot && len(job.Inputs) == 1 && in.HasPayload()
	owner := inv.rt.instanceID
	if inv.det.queued {
		owner = ""
	}
	if err := inv.rt.store.CreatePendingSnapshot(ctx, w, job, owner); err != nil {
		inv.releaseSlot()
		inv.det.queued = false
		return inv.detachError(err, w.SessionID)
	}
	inv.det.id = w.SnapshotID
	if inv.detStream != nil && !inv.det.queued {
		// Set before the background turn starts, which reads it.
		inv.mu.Lock()
		inv.detStream.Detached()
		inv.detStreamOn = true
		inv.mu.Unlock()
	}
	if inv.det.queued {
		inv.rt.kickJobs()
	} else {
		inv.startBackground(false)
	}
	inv.mu.Lock()
	inv.detached = true
	inv.mu.Unlock()
	close(inv.det.ch)
	return nil
}

// pendingWrite is a detach's pending snapshot and its job. The job
// records the work still to do (the turn in progress, if any, and the
// detach's input) before the client learns the snapshot id, so another
// instance can finish it if this one dies.
func (inv *invocation) pendingWrite(snapshotID string) (*SnapshotWrite, *TurnJob) {
	now := time.Now()
	w := &SnapshotWrite{
		TenantID:     inv.caller.TenantID,
		Agent:        inv.agent.Name,
		SessionID:    inv.sess.id,
		EndUser:      inv.caller.EndUser,
		SnapshotID:   snapshotID,
		ParentID:     inv.baseID,
		AgentVersion: inv.agent.Version,
		Status:       StatusPending,
		Custom:       inv.last.good.Custom,
		Artifacts:    inv.last.good.Artifacts,
		MessageCount: len(inv.baseBodies),
		HeartbeatAt:  &now,
	}
	job := &TurnJob{
		TenantID: w.TenantID, SnapshotID: w.SnapshotID, Agent: w.Agent, SessionID: w.SessionID,
		ParentID: w.ParentID, EndUser: w.EndUser, Actor: inv.caller.Actor,
		Inputs: append([]AgentInput{}, inv.unpersisted...), Preclaimed: inv.preclaimed,
	}
	return w, job
}

// detachError is what a detach whose pending snapshot the store refused
// fails with; nothing was written.
func (inv *invocation) detachError(err error, sessionID string) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return Errorf(CodeNotFound, "Session %s not found", sessionID)
	case errors.Is(err, ErrTooManyDetached):
		lim := inv.rt.detach
		e := exhausted("Too many detached turns are queued or running: at most %d for this tenant and %d for this credential. Wait for some to finish, or abort them.", lim.PerTenant, lim.PerCredential)
		e.RetryAfter = lim.RetryAfter
		return e
	}
	return err
}

// releaseSlot gives back the instance's job slot the detached turn held.
func (inv *invocation) releaseSlot() {
	if inv.det.slot {
		inv.det.slot = false
		inv.rt.releaseJobSlot()
	}
}

// startBackground registers the detached turn for abort and starts its
// heartbeat.
func (inv *invocation) startBackground(takenOver bool) {
	inv.rt.obs.JobStarted(takenOver)
	inv.det.journal = true
	inv.rt.running.Store(runningKey(inv.caller.TenantID, inv.det.id), context.CancelFunc(inv.abortWork))
	hbCtx, stop := context.WithCancel(inv.rt.bg)
	inv.det.stopHeartbeat = stop
	inv.det.heartbeatDone = make(chan struct{})
	go inv.heartbeat(hbCtx, inv.det.id)
}

// abortWork cancels the turn because its pending snapshot was aborted.
func (inv *invocation) abortWork() {
	inv.det.aborted.Store(true)
	inv.cancelWork()
}

// heartbeat refreshes the pending snapshot and, as the fallback for an
// abort made elsewhere, cancels the work when the snapshot left pending.
func (inv *invocation) heartbeat(ctx context.Context, snapshotID string) {
	defer close(inv.det.heartbeatDone)
	last := time.Now()
	wait.Every(ctx, abortPollInterval, func() bool {
		// Heartbeat every interval; poll more often while the abort
		// notifications are not reaching this instance.
		if time.Since(last) < inv.rt.opts.HeartbeatInterval && inv.rt.abortsHeard.Load() {
			return false
		}
		last = time.Now()
		status, owned, err := inv.rt.store.TouchHeartbeat(ctx, inv.caller.TenantID, snapshotID, inv.rt.instanceID)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				inv.rt.log.Warn("heartbeat failed", "snapshot", snapshotID, "err", err)
			}
			return false
		case !owned:
			// Another instance took the job over (this one was too slow to
			// heartbeat): stop, and write nothing.
			inv.det.lostJob.Store(true)
			inv.cancelWork()
			return true
		case status != StatusPending:
			inv.abortWork()
			return true
		}
		return false
	})
}

// finishDetached finalizes the pending snapshot of a detached invocation:
// completed or failed, unless it was aborted meanwhile.
func (inv *invocation) finishDetached(out *AgentOutput) {
	if !inv.isDetached() || inv.det.queued {
		return // nothing ran here: a queued job is another worker's
	}
	if inv.detStreamOn {
		defer inv.detStream.Done(out)
	}
	defer inv.releaseSlot()
	defer inv.rt.obs.JobEnded()
	inv.det.stopHeartbeat()
	<-inv.det.heartbeatDone
	defer inv.rt.running.Delete(runningKey(inv.caller.TenantID, inv.det.id))
	status, finish := StatusCompleted, out.FinishReason
	var errd *ErrorDetails
	switch {
	case inv.det.lostJob.Load():
		return // another instance runs the job now
	case out.FinishReason == FinishAborted:
		// Aborted by a user (the snapshot says so; the job goes) or by this
		// instance's shutdown (the job stays for another instance).
		if !inv.rt.stopping.Load() {
			inv.dropJob()
		}
		return
	case out.FinishReason == FinishFailed && databaseOutage(out.Error) && inv.det.attempts < outageRetries:
		// The database went away under the turn: nothing about it is
		// final, and failing it would drop the decision it carries out.
		// The job stays, its heartbeat stopped, and an instance takes it
		// over once the heartbeat is stale (journaled calls reused, an
		// unfinished one not repeated), as when the end cannot be written.
		// A few times only: a failure journaled by a call is reused by
		// every takeover, and such a turn must end.
		inv.rt.log.Warn("a detached turn failed for want of the database; it is taken over", "snapshot", inv.det.id, "attempts", inv.det.attempts)
		return
	case out.FinishReason == FinishFailed:
		status, errd = StatusFailed, out.Error
	}
	inv.finalizeDetached(status, finish, errd)
}

// finalizeDetached writes the end of a detached turn on its pending
// snapshot; an abort that came first leaves nothing written, and the job
// goes.
func (inv *invocation) finalizeDetached(status, finish string, errd *ErrorDetails) {
	inv.persistMu.Lock()
	defer inv.persistMu.Unlock()
	w, _, err := inv.snapshotWrite(inv.det.id, status, finish, errd)
	if err != nil {
		inv.rt.log.Error("finalizing detached snapshot", "snapshot", inv.det.id, "err", err)
		return
	}
	w.FinalizePending = true
	w.Interrupts = inv.det.interrupts
	w.Resolved = inv.det.claims
	w.ResolvedEvents = inv.det.resolvedEvents
	ctx, cancel := context.WithTimeout(inv.rt.bg, 30*time.Second)
	defer cancel()
	sctx, span := inv.rt.storeSpan(context.WithoutCancel(ctx), "holdpoint.store.finalize_detached")
	committed, err := inv.rt.store.CommitTurn(sctx, w)
	if errors.Is(err, ErrTooManyPending) {
		// Its interrupts would pass the session's bound: the turn ends
		// failed instead, pausing on none.
		w.Status, w.FinishReason, w.Error, w.Interrupts = StatusFailed, FinishFailed, Details(inv.tooManyPending()), nil
		committed, err = inv.rt.store.CommitTurn(sctx, w)
	}
	endSpan(span, err)
	if err == nil && committed {
		for _, ni := range w.Interrupts {
			inv.rt.obs.InterruptCreated(inv.metricAgent(), inv.metricTool(ni.Tool))
		}
	}
	if err != nil {
		inv.rt.log.Error("finalizing detached snapshot", "snapshot", inv.det.id, "err", err)
		return
	}
	if !committed {
		inv.dropJob() // aborted meanwhile: nothing is written, the job goes
	}
}

// outageRetries bounds the takeovers of a detached turn that keeps
// failing for want of the database.
const outageRetries = 3

// databaseOutage reports whether a failed turn's error is a database
// outage (not a model's or a tool's UNAVAILABLE).
func databaseOutage(e *ErrorDetails) bool {
	return e != nil && e.Status == CodeUnavailable && e.Message == UnavailableMessage
}

// dropJob deletes the job of a detached turn that ended without finalizing
// its snapshot.
func (inv *invocation) dropJob() {
	ctx, cancel := context.WithTimeout(inv.rt.bg, 10*time.Second)
	defer cancel()
	if err := inv.rt.store.DeleteJob(context.WithoutCancel(ctx), inv.caller.TenantID, inv.det.id); err != nil {
		inv.rt.log.Warn("dropping a detached job failed", "snapshot", inv.det.id, "err", err)
	}
}

// DetachedStream carries a durable stream on past a detach: a streaming
// turn that detaches and runs on in this process calls Detached, then
// Chunk with each later chunk, then Done with its outcome. A detach whose
// work is queued for any instance calls none of them.
type DetachedStream interface {
	Detached()
	Chunk(StreamChunk)
	Done(*AgentOutput)
}

type detachedStreamKey struct{}

// WithDetachedStream makes ds the DetachedStream of the turns ctx starts.
func WithDetachedStream(ctx context.Context, ds DetachedStream) context.Context {
	return context.WithValue(ctx, detachedStreamKey{}, ds)
}

func detachedStreamFrom(ctx context.Context) DetachedStream {
	ds, _ := ctx.Value(detachedStreamKey{}).(DetachedStream)
	return ds
}

// Outliving returns a context with ctx's values that does not end with
// ctx (a streamed turn's request, whose client may go) but with the
// runtime's shutdown, as a detached turn's does.
func (r *Runtime) Outliving(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.bg, cancel)
	return c, func() {
		stop()
		cancel()
	}
}
