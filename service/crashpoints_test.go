package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// storeCut is where a faultStore stops its instance: the store call the
// instance dies in.
type storeCut int

const (
	// cutClaim: in the resume's claim (a streamed resume's guarded claim,
	// an inbox decision's guard), before it reached the database.
	cutClaim storeCut = iota
	// cutBeforeCommit: in the turn's outcome write, before it was sent.
	cutBeforeCommit
	// cutAfterCommit: in the turn's outcome write, after it committed and
	// before the instance heard so (the reply lost with the process).
	cutAfterCommit
	// cutOutage: the claim fails as the database goes out of reach, and
	// the instance lives on (the database is back for its next call).
	cutOutage
)

func (c storeCut) String() string {
	return [...]string{"in the claim", "before the outcome write", "during the commit, after it landed", "an outage at the claim"}[c]
}

// errProcessDied is what a store call of an instance the test killed
// returns: nothing after it reaches the database.
var errProcessDied = fmt.Errorf("%w: the process died", service.ErrUnavailable)

// faultStore is an instance's store that dies at cut: the call reports
// reached and waits until the test kills the instance (closes its pool:
// no later call of the instance reaches the database), then fails.
type faultStore struct {
	service.Store
	cut     storeCut
	reached chan<- struct{}
	dead    <-chan struct{}
}

// die signals the cut was reached and returns once the instance is dead
// (at once for an outage: the instance lives on).
func (s *faultStore) die() error {
	s.reached <- struct{}{}
	if s.cut == cutOutage {
		return errOutage
	}
	<-s.dead
	return errProcessDied
}

// errOutage is the failure of a call the database went away during.
var errOutage = fmt.Errorf("%w: connection reset", service.ErrUnavailable)

func (s *faultStore) GuardedClaim(ctx context.Context, w *service.SnapshotWrite, job *service.TurnJob, owner string, p service.ClaimInterruptsParams) ([]uuid.UUID, error) {
	if s.cut == cutClaim || s.cut == cutOutage {
		return nil, s.die()
	}
	return s.Store.GuardedClaim(ctx, w, job, owner, p)
}

func (s *faultStore) GuardDecided(ctx context.Context, w *service.SnapshotWrite, job *service.TurnJob, owner string, ids []uuid.UUID) error {
	if s.cut == cutClaim || s.cut == cutOutage {
		return s.die()
	}
	return s.Store.GuardDecided(ctx, w, job, owner, ids)
}

func (s *faultStore) CommitTurn(ctx context.Context, w *service.SnapshotWrite) (bool, error) {
	if !w.FinalizePending { // the pause, or anything but the guarded turn's end
		return s.Store.CommitTurn(ctx, w)
	}
	switch s.cut {
	case cutBeforeCommit:
		return false, s.die()
	case cutAfterCommit:
		if _, err := s.Store.CommitTurn(ctx, w); err != nil {
			return false, err
		}
		return false, s.die()
	}
	return s.Store.CommitTurn(ctx, w)
}

// jsonApproval approves through a plain (unstreamed) resume.
func jsonApproval(rt *service.Runtime, paused string) error {
	_, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: paused}, approveA1, nil)
	return err
}

// dyingInstance is a runtime whose store dies at cut, with no background
// loop (nothing of it takes work back once dead). kill makes it dead: its
// pool closes, and the call waiting at the cut fails.
func dyingInstance(t *testing.T, url string, opts service.Options, cut storeCut, reached chan<- struct{}, register func(rt *service.Runtime)) (rt *service.Runtime, kill func()) {
	t.Helper()
	pool, err := pgstore.NewAppPool(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	dead := make(chan struct{})
	rt = service.NewRuntime(&faultStore{Store: newStore(t, pool), cut: cut, reached: reached, dead: dead}, opts)
	var once atomic.Bool
	kill = func() {
		if cut != cutOutage && once.CompareAndSwap(false, true) {
			pool.Close()
			close(dead)
		}
	}
	t.Cleanup(func() {
		kill()
		_ = rt.Shutdown(context.Background())
		pool.Close()
	})
	register(rt)
	return rt, kill
}

// TestApprovalSurvivesEveryCrashPoint kills the instance carrying out an
// approval at each point of its path, for a plain and a streamed resume and
// an inbox decision, and checks that a surviving instance (its takeover,
// its repair, or the client's retry to it) carries the approval out once: the session ends on a completed
// snapshot answering the interrupt, the tool ran exactly once, nothing is
// left running or pending. (The points inside the turn, between the claim
// and the tool and between the tool and the last answer, are
// TestStreamedApprovalSurvivesItsInstance and its neighbours.)
func TestApprovalSurvivesEveryCrashPoint(t *testing.T) {
	t.Parallel()
	paths := []struct {
		name    string
		decide  func(rt *service.Runtime, paused string) error
		decided bool // the decision is recorded before its turn runs
	}{{"json", jsonApproval, false}, {"streamed", streamedApproval, false}, {"inbox", inboxApproval, true}}
	for _, path := range paths {
		for _, cut := range []storeCut{cutClaim, cutBeforeCommit, cutAfterCommit, cutOutage} {
			t.Run(path.name+" "+cut.String(), func(t *testing.T) {
				t.Parallel()
				crashAndRecover(t, cut, path.decide, path.decided)
			})
		}
	}
}

func crashAndRecover(t *testing.T, cut storeCut, decide func(rt *service.Runtime, paused string) error, decided bool) {
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	open := make(chan struct{})
	close(open)
	var paidA, paidB atomic.Int32
	reached := make(chan struct{}, 1)
	a, kill := dyingInstance(t, url, opts, cut, reached, func(rt *service.Runtime) { guardedAgent(rt, &paidA, beforeTool, open, nil) })
	paused, aDone := pauseThenDecide(t, a, decide, reached)
	kill()
	select {
	case <-aDone:
	case <-time.After(time.Minute):
		t.Fatal("A's approval never returned after A died")
	}
	if cut == cutOutage {
		// The instance lived on: an operator's decision it could not
		// carry out is still recorded, a resume's claim never made.
		wantPending := 1
		if decided {
			wantPending = 0
		}
		if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending'`, paused); n != wantPending {
			t.Fatalf("after the outage %d interrupts pending, want %d", n, wantPending)
		}
	}
	// What a dead instance leaves: its jobs' heartbeats stop. (Made
	// stale at once, where the takeover would wait HeartbeatTimeout.)
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	b := startInstance(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, open, nil) })
	recoverOnB(t, admin, b.rt, paused, cut, decide)
	wantFinished(t, admin, paused)
	// The client, which never heard, repeats its approval: it must not
	// run the tool again, whatever it is answered.
	_ = decide(b.rt, paused)
	if total := paidA.Load() + paidB.Load(); total != 1 {
		t.Fatalf("pay ran %d times (A %d, B %d); want once", total, paidA.Load(), paidB.Load())
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay' AND status <> 'succeeded'`); n != 0 {
		t.Fatalf("%d of pay's calls are not recorded as succeeded", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM snapshots WHERE status = 'pending'`); n != 0 {
		t.Fatalf("%d pending snapshots left", n)
	}
}

// recoverOnB is what carries the approval out after A died at cut: B's
// takeover of the guard's job (the outcome write never landed), nothing
// (it landed), or, when A died in the claim, the client's retry (a
// streamed resume: nothing was claimed) or B's repair (an inbox decision:
// the decision committed, its turn never started).
func recoverOnB(t *testing.T, admin *pgxpool.Pool, b *service.Runtime, paused string, cut storeCut, decide func(rt *service.Runtime, paused string) error) {
	t.Helper()
	if cut != cutClaim && cut != cutOutage {
		return
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs`); n != 0 {
		t.Fatalf("a claim that never reached the database left %d jobs", n)
	}
	if count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending'`, paused) == 1 {
		if err := decide(b, paused); err != nil {
			t.Fatalf("the client's retry on B: %v", err)
		}
		return
	}
	// The decision is recorded with no turn: stranded. (Backdated, where
	// the repair would wait for it to be older than its bound.)
	if _, err := admin.Exec(context.Background(), `UPDATE interrupts SET resolved_at = now() - interval '1 hour' WHERE snapshot_id = $1`, paused); err != nil {
		t.Fatal(err)
	}
	n, err := b.RepairStrandedDecisions(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("B's repair started %d turns (%v); want the stranded decision's", n, err)
	}
}

// failingPayer registers "payer" as guardedAgent does, with a pay that
// runs (counted) and fails.
func failingPayer(rt *service.Runtime, paid *atomic.Int32) {
	model := &ctxModel{fn: func(_ context.Context, req *service.ModelRequest) (service.Message, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == service.RoleUser {
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "approve", Ref: "a1", Input: json.RawMessage(`{"amount":50}`)}}}}, nil
		}
		return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
			Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}}}}, nil
	}}
	err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			paid.Add(1)
			return nil, service.Errorf(service.CodeFailedPrecondition, "the bank refused the transfer")
		}},
	}})
	if err != nil {
		panic(err)
	}
}

// TestTakeoverKeepsTheClaimOfAFailedCall: A's approved pay ran and
// failed, its failure journaled, and A died writing the failed turn. B's
// takeover reuses the failure; the call ran, so the approval stays taken
// (given back, approving again would run pay a second time).
func TestTakeoverKeepsTheClaimOfAFailedCall(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	var paid atomic.Int32
	reached := make(chan struct{}, 1)
	a, kill := dyingInstance(t, url, opts, cutBeforeCommit, reached, func(rt *service.Runtime) { failingPayer(rt, &paid) })
	paused, aDone := pauseThenDecide(t, a, streamedApproval, reached)
	kill()
	<-aDone
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	b := startInstance(t, url, opts, func(rt *service.Runtime) { failingPayer(rt, &paid) })
	waitFor(t, "B to end the taken-over turn", time.Minute, func() bool {
		return count(t, admin, `SELECT count(*) FROM snapshots WHERE parent_id = $1 AND status = 'failed'`, paused) == 1
	})
	if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'resolved'`, paused); n != 1 {
		t.Fatal("the approval was given back after its call ran")
	}
	_ = streamedApproval(b.rt, paused)
	if n := paid.Load(); n != 1 {
		t.Fatalf("pay ran %d times; want once", n)
	}
}

// TestToolPreparedBeforeItsCallIsRecorded: a tool whose Prepare fails for
// want of the database (an HTTP tool reading its signing keys as the
// database goes away) fails the approval's turn with nothing recorded and
// nothing run, and the approval is pending again: the client's retry runs
// the tool once. Recorded as a failed call, it would count as one that ran
// and the approval would stay taken with nothing done.
func TestToolPreparedBeforeItsCallIsRecorded(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	var paid, prepared atomic.Int32
	guardedAgent(rt, &paid, beforeTool, closedChan(), nil)
	a, _ := rt.Lookup("payer")
	for _, tool := range a.Tools {
		if tool.Name == "pay" {
			tool.Prepare = func(context.Context, string) (any, error) {
				if prepared.Add(1) == 1 {
					return nil, errOutage
				}
				return nil, nil
			}
		}
	}
	out, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil || out.FinishReason != service.FinishInterrupted {
		t.Fatalf("pause: %v %+v", err, out)
	}
	failed, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, approveA1, func(service.StreamChunk) {})
	if err != nil || failed.FinishReason != service.FinishFailed || failed.Error.Status != service.CodeUnavailable {
		t.Fatalf("the approval during the outage: %v %+v", err, failed)
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay'`); n != 0 || paid.Load() != 0 {
		t.Fatalf("%d pay calls recorded and %d run; want none", n, paid.Load())
	}
	if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending'`, out.SnapshotID); n != 1 {
		t.Fatal("the approval is not pending again")
	}
	if err := streamedApproval(rt, out.SnapshotID); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n := count(t, admin, `SELECT count(*) FROM interrupts i JOIN snapshots s ON s.id = i.resumed_snapshot_id
		JOIN sessions h ON h.id = s.session_id AND h.latest_snapshot_id = s.id
		WHERE i.snapshot_id = $1 AND i.status = 'resolved' AND s.status = 'completed'`, out.SnapshotID); n != 1 {
		t.Fatal("the retried approval is not answered by the session's completed head")
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs`) + count(t, admin, `SELECT count(*) FROM snapshots WHERE status = 'pending'`); n != 0 {
		t.Fatalf("%d jobs or pending snapshots left", n)
	}
	if paid.Load() != 1 {
		t.Fatalf("pay ran %d times; want once", paid.Load())
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
