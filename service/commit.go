package service

// Claims and commit: an approval's interrupt is claimed the one way the
// claim policy picks (claimWayOf: decided before the turn, deferred to the
// commit, or up front under the guard), and the turn's outcome, its
// snapshot, new interrupts and claims are written in one transaction.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// persist writes the turn's snapshot (server-managed, not detached), with
// the outcomes of its tool calls.
func (inv *invocation) persist(ctx context.Context, t *Turn, status, finish string, errd *ErrorDetails, tr turnRecord) error {
	snapshotID := t.snapshotID
	if d := t.deferred; d != nil && (status != StatusCompleted || inv.isDetached() || inv.baseID != d.on) {
		// Only the completed write of the synchronous turn it answers can
		// make a deferred claim; a turn detached since claims now.
		if err := inv.settleClaims(ctx, t); err != nil {
			return err
		}
		tr.claimed, tr.resolvedEvents = d.tr.claimed, d.tr.resolvedEvents
	}
	inv.persistMu.Lock()
	defer inv.persistMu.Unlock()
	if inv.isDetached() {
		inv.det.interrupts = append(inv.det.interrupts, tr.interrupts...)
		inv.det.claims = append(inv.det.claims, tr.claimed...)
		inv.det.resolvedEvents = inv.det.resolvedEvents || tr.resolvedEvents
		return nil
	}
	w, bodies, err := inv.snapshotWrite(snapshotID, status, finish, errd)
	if err != nil {
		return err
	}
	deferred := inv.fillWrite(w, t, status, bodies, tr)
	sctx, span := inv.rt.storeSpan(ctx, "holdpoint.store.commit_turn")
	committed, err := inv.rt.store.CommitTurn(sctx, w)
	endSpan(span, err)
	t.deferred = nil
	if err != nil {
		return inv.commitError(err, len(deferred) > 0)
	}
	if w.FinalizePending {
		if !committed {
			// Aborted, or taken over by an instance that thought this one
			// dead: what it writes is the turn's end.
			return Errorf(CodeAborted, "the turn's snapshot %s was ended elsewhere (aborted, or finished by another instance)", snapshotID)
		}
		inv.endGuard()
	}
	for _, c := range deferred {
		inv.rt.obs.InterruptResolved(inv.metricAgent(), inv.metricTool(c.Tool))
	}
	for _, ni := range tr.interrupts {
		inv.rt.obs.InterruptCreated(inv.metricAgent(), inv.metricTool(ni.Tool))
	}
	t.outcomes = nil
	inv.expectedHead = "" // the session is at this write now
	if status == StatusCompleted {
		inv.written(snapshotID, bodies)
	}
	return nil
}

// fillWrite adds to w what the turn's write carries besides its state
// record: its interrupts, tool outcomes and claims (a deferred claim,
// returned, is made by the write), the guard it ends, and, completed, the
// session's state.
func (inv *invocation) fillWrite(w *SnapshotWrite, t *Turn, status string, bodies [][]byte, tr turnRecord) []InterruptClaim {
	w.Interrupts = tr.interrupts
	w.ToolCalls = t.outcomes
	if w.FinalizePending = inv.guarding(w.SnapshotID); w.FinalizePending {
		inv.stopGuardHeartbeat()
	}
	var deferred []InterruptClaim
	if t.deferred != nil {
		deferred = t.deferred.claims
		w.Claims = deferred
	}
	w.Resolved = tr.claimed
	w.ResolvedEvents = tr.resolvedEvents
	// A claim made by this turn's own resume already named this snapshot.
	w.ResumedSet = tr.resolvedEvents
	if status == StatusCompleted {
		st := inv.sess.state()
		n := len(bodies)
		w.State, w.Bodies = &st, bodies[:n:n]
		// A paused snapshot keeps its last message apart, for the resume
		// to rewrite in place.
		split := w.FinishReason == FinishInterrupted && n > 1
		if w.Handoff = inv.handOff(bodies, split); w.Handoff != nil && split {
			last := st.Messages[n-1]
			st.Messages = st.Messages[: n-1 : n-1]
			w.Bodies, w.Last, w.LastBody = bodies[:n-1:n-1], &last, bodies[n-1]
		}
	}
	return deferred
}

// written moves the invocation on to the completed snapshot it wrote.
func (inv *invocation) written(snapshotID string, bodies [][]byte) {
	inv.baseID = snapshotID
	inv.baseAnswered = false
	inv.baseBodies = bodies
	inv.bodiesOwnLast = false
	inv.last.goodID = snapshotID
	inv.sess.touched, inv.sess.replaced = nil, false
	if len(inv.unpersisted) > 0 {
		inv.unpersisted = inv.unpersisted[1:]
	}
}

// commitError is what a turn whose write the store refused fails with;
// nothing was written. claimed says the write made the resume's claim.
func (inv *invocation) commitError(err error, claimed bool) error {
	if errors.Is(err, ErrSessionMoved) {
		// Started from a cached head another writer has moved on from: no
		// tool ran (checkHead).
		inv.reject(errHeadMoved)
		return errHeadMoved
	}
	if errors.Is(err, ErrNotFound) {
		return Errorf(CodeNotFound, "Session %s not found", inv.sess.id)
	}
	if errors.Is(err, ErrTooManyPending) {
		return inv.tooManyPending()
	}
	var e *Error
	if claimed && errors.As(err, &e) {
		// The claim was refused: answered as an error, as a claim made up
		// front is (see claimNow).
		if e.Status == CodeAborted {
			inv.rt.obs.ResumeConflict(inv.metricAgent())
		}
		inv.reject(e)
	}
	return err
}

// tooManyPending is the failure of a turn whose interrupts would pass the
// session's bound.
func (inv *invocation) tooManyPending() error {
	return exhausted("The turn would leave more than %d interrupts pending in session %s; answer or cancel some first", inv.rt.limits.PendingPerSession, inv.sess.id)
}

// snapshotWrite builds the write of the current session state: only the
// message positions that differ from the base snapshot are written.
func (inv *invocation) snapshotWrite(snapshotID, status, finish string, errd *ErrorDetails) (*SnapshotWrite, [][]byte, error) {
	msgs := inv.sess.messages
	w := &SnapshotWrite{
		TenantID:     inv.caller.TenantID,
		Agent:        inv.agent.Name,
		SessionID:    inv.sess.id,
		EndUser:      inv.caller.EndUser,
		Actor:        inv.caller.Actor,
		MaxPending:   inv.rt.limits.PendingPerSession,
		SnapshotID:   snapshotID,
		ParentID:     inv.baseID,
		AgentVersion: inv.agent.Version,
		Status:       status,
		FinishReason: finish,
		Error:        errd,
		Custom:       inv.sess.custom,
		Artifacts:    inv.sess.artifacts,
		MessageCount: len(msgs),
		ExpectedHead: inv.expectedHead,
	}
	sess := inv.sess
	// Positions below the base's count that were not rewritten are the
	// base's: not encoded nor written again. (Once the history was set
	// wholesale, every position is compared.)
	bodies, same := inv.bodiesFor(len(msgs))
	encode := func(i int) error {
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return fmt.Errorf("encoding message %d: %w", i, err)
		}
		// bodies may be the base's own array (bodiesFor): compare first.
		pm := PositionedMessage{Position: i, Body: b}
		if i < len(inv.baseBodies) {
			if JSONEqual(inv.baseBodies[i], b) {
				bodies[i] = inv.baseBodies[i]
				return nil
			}
			if inv.baseID != "" {
				pm.Base = inv.baseBodies[i] // the parent's, which the store may edit
			}
		}
		bodies[i] = b
		w.Messages = append(w.Messages, pm)
		return nil
	}
	for _, i := range slices.Sorted(maps.Keys(sess.touched)) {
		if i < same {
			if err := encode(i); err != nil {
				return nil, nil, err
			}
		}
	}
	for i := same; i < len(msgs); i++ {
		if err := encode(i); err != nil {
			return nil, nil, err
		}
	}
	return w, bodies, nil
}

// bodiesFor is the array of the messages' JSON the write fills, of length
// n, and how many leading positions hold the base's (not encoded again).
// It appends to the base's array when that is this invocation's and no
// position the base's snapshot shows is rewritten; otherwise it copies the
// base's positions into a new array, with room to append into next time.
func (inv *invocation) bodiesFor(n int) ([][]byte, int) {
	sess, base := inv.sess, inv.baseBodies
	if sess.replaced {
		inv.bodiesOwned, inv.bodiesOwnLast = true, false
		return make([][]byte, n, n+n/8+16), 0
	}
	limit := len(base) // positions the base's views show
	if inv.bodiesOwnLast {
		limit--
	}
	rewrites := false
	for i := range sess.touched {
		rewrites = rewrites || i < limit
	}
	if inv.bodiesOwned && !rewrites && n >= len(base) && cap(base) >= n {
		return base[:n], len(base)
	}
	bodies := make([][]byte, n, n+n/8+16)
	inv.bodiesOwned, inv.bodiesOwnLast = true, false
	return bodies, copy(bodies, base)
}

// claimWay is how a resume claims the interrupts it answers: the claim
// policy, one way per turn, chosen by claimWayOf. Every way is the same
// conditional update from pending, so of two resumes (or a resume and an
// operator's decision, or a deadline) exactly one changes the row; they
// differ only in when the update runs.
type claimWay int

const (
	// claimNone: nothing to claim (a new session, a client-managed agent,
	// an input that answers no interrupt).
	claimNone claimWay = iota
	// claimDecided: an operator's decisions or a deadline claimed the
	// interrupts before the turn (inv.preclaimed); the guard keeps the
	// decision's turn going if this instance dies.
	claimDecided
	// claimDeferred: the turn's own write claims the interrupts (one
	// commit fewer per resume), unless a tool is about to run first
	// (settleClaims). Nothing with an effect runs before the claim, since a
	// tool's run settles it first, and the model's answer reaches nobody
	// before the write (no stream); the loser's whole write rolls back, and
	// what it costs is one model call whose answer is dropped.
	claimDeferred
	// claimUpFront: claimed now, in a transaction of its own (claimNow).
	claimUpFront
)

// claimWayOf is the claim policy. A synchronous, unstreamed resume of a
// prompt agent defers its claim. A streamed turn, a custom agent's turn
// (its code may do anything), a detached turn, a runtime with EarlyClaims,
// and a resume of a snapshot the store has seen answered (baseAnswered:
// repeating a resume of an answered interrupt then costs no model call)
// claim up front.
func (inv *invocation) claimWayOf(t *Turn, plan *resumePlan) claimWay {
	switch {
	case inv.preclaimed != nil:
		return claimDecided
	case !inv.agent.ServerManaged || inv.baseID == "" || len(plan.claims) == 0:
		return claimNone
	case inv.sink == nil && inv.agent.Turn == nil && !t.input.Detach && !inv.isDetached() && !inv.baseAnswered && !inv.rt.opts.EarlyClaims:
		return claimDeferred
	default:
		return claimUpFront
	}
}

// claim claims the interrupts a resume answers the way claimWayOf says.
func (inv *invocation) claim(ctx context.Context, t *Turn, plan *resumePlan, tr *turnRecord) error {
	switch inv.claimWayOf(t, plan) {
	case claimNone:
		return nil
	case claimDecided:
		return inv.claimDecided(ctx, t, tr)
	case claimDeferred:
		t.deferred = &deferredClaim{claims: plan.claims, on: inv.baseID, tr: tr}
		return nil
	default:
		return inv.claimNow(ctx, t, plan.claims, tr)
	}
}

// claimDecided takes over the claims made before the turn under the guard.
func (inv *invocation) claimDecided(ctx context.Context, t *Turn, tr *turnRecord) error {
	tr.claimed = inv.preclaimed
	_, _, err := inv.guard(ctx, t, ClaimInterruptsParams{})
	if errors.Is(err, ErrDecisionTaken) {
		// Another turn carries the decisions out: none are this turn's to
		// give back, and it writes nothing.
		tr.claimed = nil
		e := Errorf(CodeAborted, "the decisions of snapshot %s are being carried out by another turn", inv.baseID)
		e.Cause = err
		inv.reject(e)
		return e
	}
	return err
}

// settleClaims makes a deferred claim now: a tool is about to run, and
// nothing with an effect may run before the interrupts are claimed.
func (inv *invocation) settleClaims(ctx context.Context, t *Turn) error {
	d := t.deferred
	if d == nil {
		return nil
	}
	t.deferred = nil
	return inv.claimNow(ctx, t, d.claims, d.tr)
}

// claimNow claims interrupts of the paused snapshot in a transaction of
// their own.
func (inv *invocation) claimNow(ctx context.Context, t *Turn, claims []InterruptClaim, tr *turnRecord) error {
	cp := ClaimInterruptsParams{
		TenantID: inv.caller.TenantID, SnapshotID: inv.baseID, Claims: claims, Actor: inv.caller.Actor,
		ResumedSnapshotID: t.snapshotID,
	}
	sctx, span := inv.rt.storeSpan(ctx, "holdpoint.store.claim_interrupts")
	ids, guarded, err := inv.guard(sctx, t, cp)
	if !guarded {
		if inv.isDetached() || inv.det.guarded.Load() {
			cp.JobSnapshotID = inv.det.id
		}
		ids, err = inv.rt.store.ClaimInterrupts(sctx, cp)
	}
	endSpan(span, err)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			if e.Status == CodeAborted {
				// The same decision sent again answers its outcome.
				if r := inv.replay(ctx, claims, e); r != nil {
					err, e = r, AsError(r)
				}
				if e.Status == CodeAborted {
					inv.rt.obs.ResumeConflict(inv.metricAgent())
				}
				inv.reject(err)
				return err
			}
			// Resuming an interrupt that is already resolved (409) or
			// expired (400) is answered as an error, not a failed turn.
			inv.reject(e)
		}
		return err
	}
	tr.claimed, tr.resolvedEvents = ids, true
	for _, c := range claims {
		inv.rt.obs.InterruptResolved(inv.metricAgent(), inv.metricTool(c.Tool))
	}
	return nil
}

// claimSession takes the client-chosen id of a new session for the caller
// before the first turn runs any agent code: two callers racing on one new
// id cannot both get it, and the loser sees a missing session (404), never
// the winner's messages.
func (inv *invocation) claimSession(ctx context.Context) error {
	sess, err := inv.rt.store.CreateSession(ctx, inv.caller.Scope(), inv.agent.Name, inv.sess.id)
	if errors.Is(err, ErrNotFound) {
		err = Errorf(CodeNotFound, "Session %s not found", inv.sess.id)
	} else if err == nil && sess.Agent != inv.agent.Name {
		err = Errorf(CodeFailedPrecondition, "Session %s belongs to another agent.", inv.sess.id)
	}
	if errors.Is(err, ErrUnavailable) {
		// Nothing ran and nothing was written: the request as a whole is
		// refused (503), and sending it again is safe.
		err = AsError(err)
	}
	if err != nil {
		if _, ok := err.(*Error); ok {
			inv.reject(err)
		}
		return err
	}
	inv.sess.unclaimed = false
	return nil
}

// settleFailedClaims decides what becomes of the interrupts a failed
// turn's resume claimed: given back when nothing ran (released), kept
// when a tool ran (returned, for the failed snapshot to record), and an
// operator's decision kept for a later turn (stays) when the database
// failed it or the turn was stopped without being aborted (stopped: its
// instance shuts down, or the request carrying it went away).
func (inv *invocation) settleFailedClaims(ctx context.Context, t *Turn, err error, tr turnRecord, stopped bool) (kept turnRecord, released, stays bool) {
	switch {
	case len(tr.claimed) == 0:
	case !t.ranTool && inv.preclaimed != nil && (stopped || errors.Is(err, ErrUnavailable)):
		// An operator's (or a deadline's) decision is recorded: a database
		// outage, a shutdown or a lost connection does not undo it; only
		// an abort of its turn does. Its turn is carried out by the
		// guard's takeover (handed back at once by a shutdown) or,
		// without a guard, by the repair of stranded decisions.
		inv.rt.log.Warn("a decision's turn stopped before it ran (the database out of reach, a shutdown, or its request gone); the decision stays and its turn is carried out later",
			"snapshot", inv.baseID, "err", err)
		stays = true
	case !t.ranTool:
		if rerr := inv.rt.store.ReleaseInterrupts(ctx, inv.caller.TenantID, tr.claimed, inv.caller.Actor); rerr != nil {
			inv.rt.log.Error("releasing interrupt claims failed", "err", rerr)
		} else {
			released = true
		}
	default:
		inv.rt.log.Warn("resume turn failed after a tool ran; its interrupts stay resolved", "session", inv.sess.id)
		kept = turnRecord{claimed: tr.claimed, resolvedEvents: tr.resolvedEvents}
		if inv.checkpoint(ctx, t, kept) {
			kept = turnRecord{}
		}
	}
	return kept, released, stays
}

// deferredClaim is a resume's claim not made yet: the interrupts of the
// paused snapshot on that claims names, and the turn record that takes
// their ids when it is made before the write.
type deferredClaim struct {
	claims []InterruptClaim
	on     string
	tr     *turnRecord
}
