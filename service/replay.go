package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/service/approval"
)

// replayed is the answer of a resume sent again: the outcome of the turn
// the first attempt's decision wrote, answered instead of a conflict.
type replayed struct{ out *AgentOutput }

func (r *replayed) Error() string { return "resume replayed" }

// replayedOr answers a rejected invocation: the original outcome of a
// repeated resume, or the error.
func replayedOr(err error) (*AgentOutput, error) {
	var r *replayed
	if errors.As(err, &r) {
		return r.out, nil
	}
	return nil, err
}

// replay answers a resume whose claim was refused because the interrupt
// is already decided. The same decision (same payload, compared exactly
// as JSON) gets the outcome of the turn it resumed, or, while that turn
// runs, an answer saying so; a different one gets the refusal, saying who
// decided it and when. Nil keeps refusal as it is (a race with a pending
// claim, or a lookup that failed).
func (inv *invocation) replay(ctx context.Context, claims []InterruptClaim, refusal *Error) error {
	var cr *ClaimRefused
	if !errors.As(refusal.Cause, &cr) {
		return nil
	}
	it, err := inv.rt.store.GetInterrupt(ctx, inv.caller.TenantID, cr.InterruptID)
	if err != nil || it.Status == InterruptPending || it.SnapshotID != inv.baseID {
		return nil
	}
	var mine *InterruptClaim
	for i := range claims {
		if claims[i].Tool == it.Tool && claims[i].Ref == it.Ref {
			mine = &claims[i]
		}
	}
	if mine == nil || !(JSONEqual(mine.Resolution, it.Resolution) || it.Policy != nil && approval.Same(mine.Resolution, it.Resolution)) || it.ResumedSnapshotID == "" {
		return alreadyDecided(refusal, it)
	}
	snap, err := inv.rt.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: inv.caller.Scope(), Agent: inv.agent.Name, ID: it.ResumedSnapshotID, WithState: true})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil || snap.Status == StatusPending {
		return &Error{
			Status:     CodeUnavailable,
			Message:    fmt.Sprintf("this decision was recorded and its turn (snapshot %s) is still running or being repaired; send the same request again to get its outcome", it.ResumedSnapshotID),
			RetryAfter: UnavailableRetryAfter,
			Retry:      &RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: RetryOutcome, InterruptID: it.ID.String(), ResumedSnapshotID: it.ResumedSnapshotID},
		}
	}
	if snap.Status == StatusFailed {
		if rc := inv.retryableIn(ctx, snap.SnapshotID); rc != nil {
			return &retryInstead{rc}
		}
	}
	return &replayed{out: SnapshotOutput(snap)}
}

// alreadyDecided is the refusal of a different decision for a decided
// interrupt: by whom, when, and where its outcome is.
func alreadyDecided(refusal *Error, it *Interrupt) *Error {
	when := ""
	if it.ResolvedAt != nil {
		when = " at " + it.ResolvedAt.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("interrupt %s (%s%s) was already decided (%s) by %s%s with a different answer; its outcome is at GET /api/v1/interrupts/%s",
		it.ID, it.Tool, refText(it.Ref), it.Status, orUnknown(it.ResolvedBy), when, it.ID)
	return &Error{Status: refusal.Status, Message: msg, Cause: refusal.Cause,
		Retry: &RetryAdvice{DecisionRecorded: true, Retry: RetryNotAgain, InterruptID: it.ID.String(), ResumedSnapshotID: it.ResumedSnapshotID}}
}

func refText(ref string) string {
	if ref == "" {
		return ""
	}
	return " ref " + ref
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown actor"
	}
	return s
}

// SnapshotOutput is the answer a turn gave, rebuilt from its snapshot.
func SnapshotOutput(snap *StoredSnapshot) *AgentOutput {
	out := &AgentOutput{SessionID: snap.SessionID, SnapshotID: snap.SnapshotID, FinishReason: snap.FinishReason, Error: snap.Error}
	if snap.Status == StatusFailed {
		out.FinishReason = FinishFailed
	}
	if st := snap.State; st != nil {
		if n := len(st.Messages); n > 0 {
			m := st.Messages[n-1]
			out.Message = &m
		}
		if len(st.Artifacts) > 0 {
			out.Artifacts = st.Artifacts
		}
	}
	return out
}

// advise adds to the error of a failed resume turn what its client should
// do (see RetryAdvice): claims released (or never made) leave nothing
// recorded and a retry safe; claims kept because a tool ran leave the
// decision recorded, and the same resume again answers this turn. An error
// that carries advice of its own (a call that may have run) keeps it, as
// does one rejected before the turn (an HTTP error).
func (inv *invocation) advise(err error, in AgentInput, t *Turn, tr turnRecord) error {
	res := in.Resume
	if res == nil || len(res.Respond)+len(res.Restart) == 0 || inv.rejected.Load() {
		return err
	}
	var e *Error
	if errors.As(err, &e) && e.Retry != nil {
		return err
	}
	adv := &RetryAdvice{RetrySafe: true, Retry: RetryResend}
	if len(tr.claimed) > 0 && t.ranTool {
		adv = &RetryAdvice{DecisionRecorded: true, RetrySafe: true, Retry: RetryOutcome, ResumedSnapshotID: t.snapshotID}
	}
	ae := AsError(err)
	out := *ae
	out.Retry = adv
	if error(ae) != err && ae.Cause != err {
		// Keep what wraps the domain error visible to errors.Is.
		out.Cause = err
	}
	return &out
}
