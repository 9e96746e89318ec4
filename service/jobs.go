package service

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/store"
	"go.opentelemetry.io/otel/trace"
)

// abortPollInterval is how often a detached turn checks whether it should
// heartbeat, or poll for an abort while notifications are not arriving.
const abortPollInterval = 250 * time.Millisecond

// RunBackground runs, until ctx ends, what makes detached turns durable on
// this instance: the worker that takes over jobs left by stopped or dead
// instances, and the listener that cancels a running turn the moment any
// instance aborts it.
func (r *Runtime) RunBackground(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.listenAborts(ctx)
	}()
	r.runJobs(ctx)
	<-done
}

// listenAborts keeps a LISTEN connection open, reconnecting with backoff.
// While it is down, detached turns poll their snapshot instead.
func (r *Runtime) listenAborts(ctx context.Context) {
	wait.KeepListening(ctx, r.log, "abort listener", func(ctx context.Context) error {
		return r.store.ListenAborts(ctx, func() { r.abortsHeard.Store(true) }, func(tenantID, snapshotID string) {
			if cancel, ok := r.running.Load(runningKey(tenantID, snapshotID)); ok {
				cancel.(context.CancelFunc)()
			}
		})
	}, func() { r.abortsHeard.Store(false) })
}

// jobStaleAfter is how old a job's heartbeat must be before another
// instance takes it over: one interval before its snapshot would read as
// expired, so a live deployment never shows an expired snapshot.
func (r *Runtime) jobStaleAfter() time.Duration {
	d := r.opts.HeartbeatTimeout - r.opts.HeartbeatInterval
	if d < r.opts.HeartbeatInterval {
		d = r.opts.HeartbeatInterval
	}
	return d
}

// runJobs polls for claimable jobs and runs them, and looks again at once
// when a slot frees or a job is queued here.
func (r *Runtime) runJobs(ctx context.Context) {
	t := time.NewTicker(max(r.opts.HeartbeatInterval/5, 50*time.Millisecond))
	defer t.Stop()
	for {
		for !r.stopping.Load() && r.startNextJob(ctx) {
		}
		r.jobRounds.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.jobKick:
		}
	}
}

// takeJobSlot takes one of the instance's slots for a detached turn, if
// one is free.
func (r *Runtime) takeJobSlot() bool {
	select {
	case r.jobSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

// releaseJobSlot frees a slot and wakes the job runner for what waits.
func (r *Runtime) releaseJobSlot() {
	<-r.jobSlots
	r.kickJobs()
}

// kickJobs wakes the job runner.
func (r *Runtime) kickJobs() {
	select {
	case r.jobKick <- struct{}{}:
	default:
	}
}

// startNextJob claims a job and runs it in a free slot; false when every
// slot is busy or no job is waiting.
func (r *Runtime) startNextJob(ctx context.Context) bool {
	if !r.opts.Readiness.Ready() {
		// A job claimed now would run against a database that is not
		// answering and fail; left queued, an instance that is ready (or
		// this one, once it is) takes it.
		return false
	}
	if !r.takeJobSlot() {
		return false // every slot busy
	}
	r.mu.RLock()
	tenantAgents := r.tenantAgents != nil
	r.mu.RUnlock()
	job, err := r.claimNextJob(ctx, tenantAgents)
	if err != nil || job == nil {
		<-r.jobSlots
		if err != nil && ctx.Err() == nil {
			r.log.Warn("claiming a detached turn failed", "err", err)
		}
		return false
	}
	// The job is this instance's run from its claim on, not from when
	// its turn starts: a takeover that spent longer than the stale bound
	// loading the turn was claimed again by this worker and ran beside
	// itself (a loaded CI run; the model was called twice over).
	workCtx, cancel := context.WithCancel(r.bg)
	if _, mine := r.running.LoadOrStore(runningKey(job.TenantID, job.SnapshotID), context.CancelFunc(cancel)); mine {
		// This instance still runs it, however late its heartbeat: the
		// claim only refreshed it. Running it twice could run a tool twice.
		cancel()
		<-r.jobSlots
		return false
	}
	r.bgWG.Add(1)
	go func() {
		defer r.bgWG.Done()
		defer r.releaseJobSlot()
		defer cancel()
		r.runJob(workCtx, cancel, job)
	}()
	return true
}

// runJob runs a detached turn taken from the queue: from its parent
// snapshot, with its recorded inputs and claims, reusing journaled tool
// results.
//
// It holds the job's entry in r.running (workCtx's cancel) from the
// claim; the turn's end removes it, and so does a return before the turn
// starts.
func (r *Runtime) runJob(workCtx context.Context, cancel context.CancelFunc, job *TurnJob) {
	log := r.log.With("snapshot", job.SnapshotID, "tenant", job.TenantID, "attempt", job.Attempts)
	started := false
	defer func() {
		if !started {
			r.running.Delete(runningKey(job.TenantID, job.SnapshotID))
		}
	}()
	keeping := r.keepClaim(job)
	defer keeping()
	c := Caller{TenantID: job.TenantID, EndUser: job.EndUser, Actor: job.Actor}
	a := r.jobAgent(job, c, log)
	if a == nil {
		return
	}
	held, err := r.heldClaims(r.bg, job)
	if err != nil {
		log.Warn("reading a detached turn's claims failed", "err", err)
		return
	}
	log.Info("taking over a detached turn", "agent", a.Name, "inputs", len(job.Inputs), "claimsHeld", held != nil)

	inv := &invocation{rt: r, agent: a, caller: c, preclaimed: held, cancelWork: cancel, detached: true}
	inv.det.id, inv.det.attempts = job.SnapshotID, job.Attempts
	if err := inv.loadSteps(workCtx); err != nil {
		log.Warn("reading a detached turn's recorded model answers failed", "err", err)
		return
	}
	if job.ParentID != "" {
		parent, err := r.store.LoadSnapshot(workCtx, LoadSnapshotParams{Scope: c.Scope(), Agent: a.Name, ID: job.ParentID, WithState: true})
		if err != nil {
			log.Error("loading the parent of a detached turn failed", "err", err)
			return
		}
		inv.useSnapshot(parent)
	} else {
		inv.sess = &sessionState{id: job.SessionID}
	}
	inv.last.good = inv.sess.state()
	inv.last.goodID = inv.baseID
	inv.unpersisted = job.Inputs
	if !keeping() {
		log.Info("a detached turn was taken over by another instance before it started here")
		return
	}
	started = true // finishDetached removes the entry
	inv.startBackground(true)

	queue := make(chan AgentInput, len(job.Inputs))
	for _, in := range job.Inputs {
		queue <- in
	}
	close(queue)
	out := inv.runTurns(workCtx, queue)
	inv.finishDetached(out)
	log.Info("detached turn finished", "finishReason", out.FinishReason)
}

// keepClaim keeps a claimed job's heartbeat fresh while its turn is being
// loaded, until the turn's own heartbeat starts: on a loaded machine the
// loading can outlast the stale bound, and another instance then claimed
// the job again, counting an attempt and running it beside this one until
// its heartbeat found the job lost. The returned function stops it and
// reports whether the job is still this instance's.
func (r *Runtime) keepClaim(job *TurnJob) func() bool {
	ctx, stop := context.WithCancel(r.bg)
	done := make(chan struct{})
	var lost atomic.Bool
	go func() {
		defer close(done)
		first := true
		wait.Every(ctx, r.opts.HeartbeatInterval, func() bool {
			if first { // the claim has just refreshed it
				first = false
				return false
			}
			_, owned, err := r.store.TouchHeartbeat(ctx, job.TenantID, job.SnapshotID, r.instanceID)
			if err == nil && !owned {
				lost.Store(true)
				return true
			}
			return false
		})
	}()
	return func() bool {
		stop()
		<-done
		return !lost.Load()
	}
}

// jobAgent is the definition a job's turn started with (its claim matched
// its kind), or nil when this instance does not run the job: another
// serves the agent, or the turn ended (aborted) while nobody ran it, and
// its job goes.
func (r *Runtime) jobAgent(job *TurnJob, c Caller, log *slog.Logger) *Agent {
	a, err := r.LookupFor(r.bg, c, job.Agent)
	if err != nil {
		return nil // another instance serves this agent
	}
	snap, err := r.store.LoadSnapshot(r.bg, LoadSnapshotParams{Scope: c.Scope(), Agent: a.Name, ID: job.SnapshotID})
	if err == nil && snap.Status == StatusAborted {
		r.dropAbortedJob(job, log)
		return nil
	}
	if errors.Is(err, ErrNotFound) || (err == nil && snap.Status != StatusPending) {
		if err := r.store.DeleteJob(r.bg, c.TenantID, job.SnapshotID); err != nil {
			log.Warn("dropping a finished job failed", "err", err)
		}
		return nil
	}
	if err != nil {
		log.Warn("loading a detached turn failed", "err", err)
		return nil
	}
	if a, err = r.agentOfSnapshot(r.bg, c, a, job.SnapshotID, snap.AgentVersion, true); err != nil {
		log.Warn("not taking over a detached turn", "err", err)
		return nil
	}
	return a
}

// dropAbortedJob drops the job of a turn a user aborted while no instance
// ran it (queued after its instance shut down, or waiting for a takeover).
// The decisions it was carrying out would otherwise stay resolved for a
// turn that never ran, neither carried out nor pending: they are given
// back, pending again as when a running turn is aborted, unless a tool call
// of the turn was journaled (then a tool may have run on the instance that
// had it, and they stay resolved).
func (r *Runtime) dropAbortedJob(job *TurnJob, log *slog.Logger) {
	released, err := r.store.DropAbortedJob(r.bg, job.TenantID, job.SnapshotID, r.instanceID)
	if err != nil {
		log.Warn("dropping an aborted turn's job failed", "err", err)
		return
	}
	if len(released) > 0 {
		log.Info("an aborted turn nobody ran gave its decisions back", "interrupts", len(released))
	}
}

// heldClaims is what a taken-over job may run on as decided: its
// preclaimed interrupts when every one is still resolved for the job's
// snapshot, else nil, and the turn claims as any resume does (refused if
// another resume holds them). A job whose instance died before its claim
// has none; one whose claim was given back while the job stayed (its
// delete failed with the database) no longer holds them, and another
// resume may have claimed them and run the tool: trusting the job's list
// then ran the tool a second time (the chaos run, tests/cluster).
func (r *Runtime) heldClaims(ctx context.Context, job *TurnJob) ([]uuid.UUID, error) {
	if len(job.Preclaimed) == 0 {
		return nil, nil
	}
	for _, id := range job.Preclaimed {
		it, err := r.store.GetInterrupt(ctx, job.TenantID, id)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if it.Status != InterruptResolved || it.ResumedSnapshotID != job.SnapshotID {
			return nil, nil
		}
	}
	return job.Preclaimed, nil
}

// runningJobs are the detached turns this instance runs: the queue's claim
// passes over them, however late their heartbeat (one taken over spends a
// while loading its turn before its heartbeat starts).
func (r *Runtime) runningJobs() []JobRef {
	var jobs []JobRef
	r.running.Range(func(k, _ any) bool {
		jobs = append(jobs, k.(JobRef))
		return true
	})
	return jobs
}

// claimNextJob takes a job from the queue, in a store span when one was
// found.
func (r *Runtime) claimNextJob(ctx context.Context, tenantAgents bool) (*TurnJob, error) {
	start := time.Now()
	job, err := r.store.ClaimNextJob(ctx, store.JobClaim{Owner: r.instanceID, Agents: r.AgentNames(), TenantAgents: tenantAgents,
		Stale: r.jobStaleAfter(), Running: r.runningJobs()})
	if job != nil || err != nil {
		// Only claims that found work (or failed) are traced: the idle
		// polls would drown them.
		_, span := r.tracer.Start(ctx, "holdpoint.store.claim_job", trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindClient))
		if job != nil {
			span.SetAttributes(AttrAgent.String(job.Agent), AttrSnapshotID.String(job.SnapshotID))
		}
		endSpan(span, err)
	}
	return job, err
}
