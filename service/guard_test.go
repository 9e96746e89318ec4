package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/telemetry"
)

// crashPoint is where guardedAgent's model waits for the test: after the
// approval, before asking for the tool; or after the tool ran, before
// the turn's last answer.
type crashPoint int

const (
	beforeTool crashPoint = iota
	afterTool
)

// guardedAgent registers "payer": approve (an interrupt), then pay (a
// counted tool), then "paid". Its model waits at point until hold is
// closed or its turn is cancelled; reached is closed when it gets there.
func guardedAgent(rt *service.Runtime, paid *atomic.Int32, point crashPoint, hold <-chan struct{}, reached chan<- struct{}) {
	registerPayer(rt, paid, point, hold, reached, func() string { return "p1" })
}

// registerPayer is guardedAgent with the pay request's ref from payRef,
// asked at each of the model's calls.
func registerPayer(rt *service.Runtime, paid *atomic.Int32, point crashPoint, hold <-chan struct{}, reached chan<- struct{}, payRef func() string) {
	wait := crashWait(hold, reached)
	model := &ctxModel{fn: func(ctx context.Context, req *service.ModelRequest) (service.Message, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "approve", Ref: "a1", Input: json.RawMessage(`{"amount":50}`)}}}}, nil
		case last.Content[0].ToolResponse != nil && last.Content[0].ToolResponse.Name == "approve":
			if point == beforeTool {
				if err := wait(ctx); err != nil {
					return service.Message{}, err
				}
			}
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "pay", Ref: payRef(), Input: json.RawMessage(`{}`)}}}}, nil
		default:
			if point == afterTool {
				if err := wait(ctx); err != nil {
					return service.Message{}, err
				}
			}
			return text(service.RoleModel, "paid"), nil
		}
	}}
	err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			paid.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}},
	}})
	if err != nil {
		panic(err)
	}
}

// crashWait is an agent's wait at its crash point: it signals reached
// (without blocking) and waits for hold, or for its context's end.
func crashWait(hold <-chan struct{}, reached chan<- struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		select {
		case reached <- struct{}{}:
		default:
		}
		select {
		case <-hold:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ctxModel is a scripted model that sees its call's context.
type ctxModel struct {
	fn func(ctx context.Context, req *service.ModelRequest) (service.Message, error)
}

func (m *ctxModel) Name() string { return "ctx" }

func (m *ctxModel) Generate(ctx context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	msg, err := m.fn(ctx, req)
	if err != nil {
		return nil, err
	}
	return &service.ModelResponse{Message: msg, FinishReason: "stop"}, nil
}

// approveA1 is the resume that approves guardedAgent's interrupt.
var approveA1 = service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
	Name: "approve", Ref: "a1", Output: json.RawMessage(`{"approved":true}`)}}}}}

// killAfterClaim has instance A approve through decide (a streamed
// resume or an inbox decision, whose claims come before the turn's
// write), waits until its model reaches point with the approval claimed,
// then makes A look dead (its guard's job owned by nobody alive: what
// `kill -9` leaves) and starts B, which must finish the approved turn. It
// returns the owner pool, the paused snapshot and the pay counters of A
// and B.
func killAfterClaim(t *testing.T, point crashPoint, decide func(rt *service.Runtime, paused string) error) (*pgxpool.Pool, string, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	var paidA, paidB atomic.Int32
	reached := make(chan struct{}, 1)
	// A runs no background loop, so nothing of A takes its job back: it
	// stands for a dead instance once its job is handed to nobody.
	a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidA, point, make(chan struct{}), reached) })
	paused, aDone := pauseThenDecide(t, a, decide, reached)
	if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'resolved'`, paused); n != 1 {
		t.Fatalf("%d interrupts resolved at the crash point; want the approval", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs WHERE parent_id = $1`, paused); n != 1 {
		t.Fatalf("%d jobs guard the approval; want 1", n)
	}
	looksDead(t, admin, aDone)
	open := make(chan struct{})
	close(open)
	startInstance(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, point, open, nil) })
	return admin, paused, &paidA, &paidB
}

// looksDead makes instance A, whose approval's result is aDone, look dead
// to other instances (its guard's job owned by nobody alive, its heartbeat
// stale: what `kill -9` leaves), and waits until A's own heartbeat finds
// the job gone and stops its turn.
func looksDead(t *testing.T, admin *pgxpool.Pool, aDone <-chan error) {
	t.Helper()
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aDone:
	case <-time.After(time.Minute):
		t.Fatal("A never gave the turn up")
	}
}

// wantFinished checks the approved turn was finished once: a completed
// snapshot answering the interrupt, the session's head, with no job left
// and no release in the interrupt's audit trail.
func wantFinished(t *testing.T, admin *pgxpool.Pool, paused string) {
	t.Helper()
	waitFor(t, "the approved turn to complete", time.Minute, func() bool {
		return count(t, admin, `SELECT count(*) FROM snapshots WHERE parent_id = $1 AND status = 'completed'`, paused) == 1
	})
	if n := count(t, admin, `SELECT count(*) FROM interrupts i JOIN snapshots s ON s.id = i.resumed_snapshot_id
		JOIN sessions h ON h.id = s.session_id AND h.latest_snapshot_id = s.id
		WHERE i.snapshot_id = $1 AND i.status = 'resolved' AND s.status = 'completed'`, paused); n != 1 {
		t.Fatalf("the interrupt is not answered by the session's completed head (%d)", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs`); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
	if n := count(t, admin, `SELECT count(*) FROM interrupt_events e JOIN interrupts i ON i.id = e.interrupt_id
		WHERE i.snapshot_id = $1 AND e.type = 'released'`, paused); n != 0 {
		t.Fatalf("the approval was released %d times", n)
	}
}

// pauseThenDecide pauses the payer on instance a, then approves it with
// decide in the background until a's agent signals reached (the crash
// point). It returns the paused snapshot and the approval's result, to
// come once the instance finishes or dies; an approval that ends first,
// or a point not reached within a minute, fails the test.
func pauseThenDecide(t *testing.T, a *service.Runtime, decide func(rt *service.Runtime, paused string) error, reached <-chan struct{}) (string, <-chan error) {
	t.Helper()
	out, err := a.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil || out.FinishReason != service.FinishInterrupted {
		t.Fatalf("pause: %v %+v", err, out)
	}
	paused := out.SnapshotID
	aDone := make(chan error, 1)
	go func() { aDone <- decide(a, paused) }()
	select {
	case <-reached:
	case err := <-aDone:
		t.Fatalf("A's approval ended before it reached the crash point: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("A's approval never reached the crash point")
	}
	return paused, aDone
}

// streamedApproval approves through a streamed resume.
func streamedApproval(rt *service.Runtime, paused string) error {
	_, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: paused}, approveA1, func(service.StreamChunk) {})
	return err
}

// inboxApproval approves through the inbox.
func inboxApproval(rt *service.Runtime, paused string) error {
	items, err := inbox.New(rt).ListInterrupts(context.Background(), testCaller, service.InterruptFilter{Status: "pending"})
	if err != nil || len(items) != 1 || items[0].SnapshotID != paused {
		return errors.Join(err, errors.New("no pending approval"))
	}
	_, err = inbox.New(rt).RespondInterrupt(context.Background(), testCaller, items[0].ID, json.RawMessage(`{"approved":true}`), "")
	return err
}

// TestStreamedApprovalSurvivesItsInstance: the instance running a
// streamed resume dies after the approval is claimed and before the tool;
// another instance finishes the turn, and the tool runs once.
func TestStreamedApprovalSurvivesItsInstance(t *testing.T) {
	t.Parallel()
	admin, paused, paidA, paidB := killAfterClaim(t, beforeTool, streamedApproval)
	wantFinished(t, admin, paused)
	if paidA.Load() != 0 || paidB.Load() != 1 {
		t.Fatalf("pay ran %d times on A and %d on B; want 0 and 1", paidA.Load(), paidB.Load())
	}
}

// TestApprovalSurvivesItsInstanceAfterTheTool: it dies after the tool ran
// and before the turn's write; the other instance reuses the tool's
// journaled result.
func TestApprovalSurvivesItsInstanceAfterTheTool(t *testing.T) {
	t.Parallel()
	admin, paused, paidA, paidB := killAfterClaim(t, afterTool, streamedApproval)
	wantFinished(t, admin, paused)
	if paidA.Load() != 1 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want 1 and 0", paidA.Load(), paidB.Load())
	}
}

// TestInboxDecisionSurvivesItsInstance: an operator's approval, whose
// instance dies while the turn it started runs.
func TestInboxDecisionSurvivesItsInstance(t *testing.T) {
	t.Parallel()
	admin, paused, paidA, paidB := killAfterClaim(t, beforeTool, inboxApproval)
	wantFinished(t, admin, paused)
	if paidA.Load()+paidB.Load() != 1 {
		t.Fatalf("pay ran %d times on A and %d on B; want once", paidA.Load(), paidB.Load())
	}
}

// TestGuardGoesWithWhatItGuarded: a refused resume and a resume whose
// client went away before the tool leave no job and no pending snapshot
// (nobody finishes them), and the approval is pending again after the
// client left.
func TestGuardGoesWithWhatItGuarded(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	var paid atomic.Int32
	reached := make(chan struct{}, 1)
	hold := make(chan struct{})
	guardedAgent(rt, &paid, beforeTool, hold, reached)
	out, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, approveA1, func(service.StreamChunk) {})
		done <- err
	}()
	<-reached
	cancel()
	<-done
	noGuardLeft := func() bool {
		return count(t, admin, `SELECT count(*) FROM turn_jobs`) == 0 &&
			count(t, admin, `SELECT count(*) FROM snapshots WHERE status = 'pending'`) == 0
	}
	waitFor(t, "the guard to go", time.Minute, noGuardLeft)
	if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending'`, out.SnapshotID); n != 1 {
		t.Fatalf("the approval is not pending again after its client left")
	}

	// Approved for real, then approved again: refused, and nothing is left
	// of the refused resume's guard.
	close(hold)
	first, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, approveA1, func(service.StreamChunk) {})
	if err != nil {
		t.Fatal(err)
	}
	// The same approval again answers the first one's outcome.
	again, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, approveA1, func(service.StreamChunk) {})
	if err != nil || again.SnapshotID != first.SnapshotID {
		t.Fatalf("a second resume: %v %+v; want the outcome %s", err, again, first.SnapshotID)
	}
	if !noGuardLeft() {
		t.Fatal("a refused resume left its guard")
	}
	if paid.Load() != 1 {
		t.Fatalf("pay ran %d times; want once", paid.Load())
	}
}

// newInstanceWithoutBackground is a runtime on url that runs no job
// runner, stopped when the test ends.
func newInstanceWithoutBackground(t *testing.T, url string, opts service.Options, register func(rt *service.Runtime)) *service.Runtime {
	t.Helper()
	return servicetest.New(t, servicetest.Options{URL: url, Runtime: opts, Register: registered(register)}).Runtime
}

// TestAnInstanceNeverRunsItsJobTwice: a job whose heartbeat went stale
// while its own instance still runs it (a long pause) is passed over by
// that instance's runner: neither started a second time nor claimed (a
// claim counts an attempt, and a turn is taken over a bounded number of
// them).
func TestAnInstanceNeverRunsItsJobTwice(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 5 * time.Second, HeartbeatTimeout: time.Minute}
	var paid atomic.Int32
	reached := make(chan struct{}, 8)
	hold := make(chan struct{})
	a := startInstance(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paid, beforeTool, hold, reached) })
	t.Cleanup(func() { close(hold) })
	out, err := a.rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	detached := approveA1
	detached.Detach = true
	if _, err := a.rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, detached, nil); err != nil {
		t.Fatal(err)
	}
	<-reached
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	from := service.JobRounds(a.rt)
	waitFor(t, "three rounds of A's job runner", 30*time.Second, func() bool { return service.JobRounds(a.rt) >= from+3 })
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs WHERE attempts = 0`); n != 1 {
		t.Fatalf("A's runner claimed the job it runs (%d jobs left unclaimed, want 1)", n)
	}
	if n := len(reached); n != 0 {
		t.Fatalf("the job was started %d more times on the instance running it", n)
	}
}

// TestStrandedDecisionIsCarriedOut: what an instance that died between an
// operator's decision and its turn's guard leaves (the interrupt resolved,
// no turn resuming it) is found by the repair, and two instances
// repairing at once carry it out once.
func TestStrandedDecisionIsCarriedOut(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	metricsA, metricsB := telemetry.New(telemetry.Options{}), telemetry.New(telemetry.Options{})
	open := make(chan struct{})
	close(open)
	var paidA, paidB atomic.Int32
	a := newInstanceWithoutBackground(t, url, service.Options{Logger: testlog.Logger(t), Observer: metricsA},
		func(rt *service.Runtime) { guardedAgent(rt, &paidA, beforeTool, open, nil) })
	b := newInstanceWithoutBackground(t, url, service.Options{Logger: testlog.Logger(t), Observer: metricsB},
		func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, open, nil) })
	out, err := a.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), `UPDATE interrupts SET status = 'resolved', resolution = '{"respond":{"approved":true}}',
		resolved_by = 'key:ops', resolved_at = now() - interval '1 hour' WHERE snapshot_id = $1`, out.SnapshotID); err != nil {
		t.Fatal(err)
	}
	var started atomic.Int32
	done := make(chan struct{})
	for _, rt := range []*service.Runtime{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			n, err := rt.RepairStrandedDecisions(context.Background())
			if err != nil {
				t.Error(err)
			}
			started.Add(int32(n))
		}()
	}
	<-done
	<-done
	if started.Load() != 1 || paidA.Load()+paidB.Load() != 1 {
		t.Fatalf("%d repairs started a turn and pay ran %d times; want 1 and 1", started.Load(), paidA.Load()+paidB.Load())
	}
	wantFinished(t, admin, out.SnapshotID)
	if n, err := a.RepairStrandedDecisions(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second repair: %d, %v; want nothing to do", n, err)
	}
	if n := recoveries(t, metricsA, observe.RecoveryStrandedDecision) + recoveries(t, metricsB, observe.RecoveryStrandedDecision); n != 1 {
		t.Fatalf("the instances' metrics count %v repairs; want 1", n)
	}
}

// recoveries reads holdpoint_recoveries_total{kind} from m.
func recoveries(t *testing.T, m *telemetry.Metrics, kind string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != telemetry.MetricRecoveries {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// inboxApprovalWith approves through the inbox with ctx, the operator's
// request.
func inboxApprovalWith(ctx context.Context) func(rt *service.Runtime, paused string) error {
	return func(rt *service.Runtime, paused string) error {
		items, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{Status: "pending"})
		if err != nil || len(items) != 1 || items[0].SnapshotID != paused {
			return errors.Join(err, errors.New("no pending approval"))
		}
		_, err = inbox.New(rt).RespondInterrupt(ctx, testCaller, items[0].ID, json.RawMessage(`{"approved":true}`), "")
		return err
	}
}

// underway is an approval whose turn waits before the tool on instance a.
type underway struct {
	url    string
	admin  *pgxpool.Pool
	a      *instance
	paused string
	done   <-chan error // the approval's result, to come
	paid   *atomic.Int32
}

// approvalUnderway starts instance A with opts (its heartbeat's) and the
// payer, whose model waits before the tool until hold is closed; pauses
// it and approves with decide, and returns once the approved turn waits
// there.
func approvalUnderway(t *testing.T, opts service.Options, hold <-chan struct{}, decide func(rt *service.Runtime, paused string) error) underway {
	t.Helper()
	u := underway{url: testdb.URL(t), paid: new(atomic.Int32)}
	u.admin = testdb.OwnerPool(t, u.url)
	reached := make(chan struct{}, 1)
	u.a = startInstance(t, u.url, opts, func(rt *service.Runtime) { guardedAgent(rt, u.paid, beforeTool, hold, reached) })
	u.paused, u.done = pauseThenDecide(t, u.a.rt, decide, reached)
	return u
}

// TestDecisionSurvivesItsInstanceShuttingDown: the instance carrying out
// an operator's approval shuts down before the tool. The decision was
// recorded and acknowledged, so the shutdown must not undo it (it gave
// the approval back, pending again, and ended the turn aborted: an
// accepted approval lost, seen in the chaos test): the operator is told
// it is recorded and carried out later, and another instance carries it
// out, the tool once.
func TestDecisionSurvivesItsInstanceShuttingDown(t *testing.T) {
	t.Parallel()
	opts := takeoverOptions(t)
	u := approvalUnderway(t, opts, make(chan struct{}), inboxApproval)
	u.a.stop() // SIGTERM: the background loops end, then Shutdown
	if err := <-u.done; !errors.Is(err, service.ErrUnavailable) {
		t.Fatalf("the operator's approval, its instance shut down under it: %v; want UNAVAILABLE (recorded, carried out later)", err)
	}
	if n := count(t, u.admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'resolved'`, u.paused); n != 1 {
		t.Fatalf("%d interrupts resolved after the shutdown; want the approval kept", n)
	}
	var paidB atomic.Int32
	open := make(chan struct{})
	close(open)
	startInstance(t, u.url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, open, nil) })
	wantFinished(t, u.admin, u.paused)
	if u.paid.Load() != 0 || paidB.Load() != 1 {
		t.Fatalf("pay ran %d times on A and %d on B; want 0 and 1", u.paid.Load(), paidB.Load())
	}
}

// TestDecisionSurvivesItsRequestGoing: the operator's request goes (a
// closed tab, a dropped connection) while the turn it started waits
// before the tool: the decision stays, and the turn is carried out (the
// guard's job taken over once its heartbeat is stale), the tool once.
func TestDecisionSurvivesItsRequestGoing(t *testing.T) {
	t.Parallel()
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}
	hold := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	u := approvalUnderway(t, opts, hold, inboxApprovalWith(ctx))
	cancel()
	if err := <-u.done; !errors.Is(err, service.ErrUnavailable) {
		t.Fatalf("the approval whose request went: %v; want UNAVAILABLE (recorded, carried out later)", err)
	}
	close(hold) // then the takeover's model goes straight on
	wantFinished(t, u.admin, u.paused)
	if u.paid.Load() != 1 {
		t.Fatalf("pay ran %d times; want once", u.paid.Load())
	}
}

// TestAbortedDecisionIsGivenBack: a user's abort of the turn carrying out
// an operator's approval does end it: the approval is pending again, to be
// decided anew, and nothing of the turn is left to run.
func TestAbortedDecisionIsGivenBack(t *testing.T) {
	t.Parallel()
	opts := takeoverOptions(t)
	u := approvalUnderway(t, opts, make(chan struct{}), inboxApproval)
	var pending string
	if err := u.admin.QueryRow(context.Background(), `SELECT snapshot_id FROM turn_jobs WHERE parent_id = $1`, u.paused).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if _, err := u.a.rt.Abort(context.Background(), testCaller, "payer", pending); err != nil {
		t.Fatal(err)
	}
	<-u.done
	waitFor(t, "the aborted turn's guard to go", time.Minute, func() bool {
		return count(t, u.admin, `SELECT count(*) FROM turn_jobs`) == 0
	})
	if n := count(t, u.admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending'`, u.paused); n != 1 {
		t.Fatal("the approval is not pending again after its turn was aborted")
	}
	if u.paid.Load() != 0 {
		t.Fatalf("pay ran %d times; want none", u.paid.Load())
	}
}

// queuedDecisionAborted: the instance carrying out an operator's approval
// shuts down before the tool (the approval stays, its guard's job handed
// back to the queue), and a user aborts the turn before another instance
// takes the job. It returns the approval and the aborted turn's snapshot.
func queuedDecisionAborted(t *testing.T, opts service.Options) (underway, string) {
	t.Helper()
	u := approvalUnderway(t, opts, make(chan struct{}), inboxApproval)
	u.a.stop()
	if err := <-u.done; !errors.Is(err, service.ErrUnavailable) {
		t.Fatalf("the approval whose instance shut down: %v; want UNAVAILABLE", err)
	}
	var pending string
	if err := u.admin.QueryRow(context.Background(), `SELECT snapshot_id FROM turn_jobs WHERE parent_id = $1 AND owner IS NULL`, u.paused).Scan(&pending); err != nil {
		t.Fatalf("the guard's job, handed back: %v", err)
	}
	// An instance with no job runner takes the user's abort: nobody runs
	// the turn, as when every instance is busy or down.
	c := newInstanceWithoutBackground(t, u.url, opts, func(rt *service.Runtime) { guardedAgent(rt, new(atomic.Int32), beforeTool, nil, nil) })
	if _, err := c.Abort(context.Background(), testCaller, "payer", pending); err != nil {
		t.Fatal(err)
	}
	return u, pending
}

// TestAbortedQueuedDecisionIsGivenBack: an approval whose turn was aborted
// while it waited in the queue, nothing of it run, is pending again (it
// stayed resolved for a turn that never ran: neither carried out nor open
// to a new decision), and a new approval pays once.
func TestAbortedQueuedDecisionIsGivenBack(t *testing.T) {
	t.Parallel()
	opts := takeoverOptions(t)
	u, _ := queuedDecisionAborted(t, opts)
	var paidB atomic.Int32
	open := make(chan struct{})
	close(open)
	b := startInstance(t, u.url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, open, nil) })
	waitFor(t, "the aborted turn's job to go", time.Minute, func() bool {
		return count(t, u.admin, `SELECT count(*) FROM turn_jobs`) == 0
	})
	if n := count(t, u.admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'pending' AND resumed_snapshot_id IS NULL`, u.paused); n != 1 {
		t.Fatal("the approval of the aborted turn is not pending again")
	}
	if n := count(t, u.admin, `SELECT count(*) FROM interrupt_events e JOIN interrupts i ON i.id = e.interrupt_id
		WHERE i.snapshot_id = $1 AND e.type = 'released' AND e.actor = 'system'`, u.paused); n != 1 {
		t.Fatalf("%d released events; want the one of the abort", n)
	}
	if u.paid.Load() != 0 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want none", u.paid.Load(), paidB.Load())
	}
	if err := inboxApproval(b.rt, u.paused); err != nil {
		t.Fatalf("approving again: %v", err)
	}
	if paidB.Load() != 1 {
		t.Fatalf("pay ran %d times after the new approval; want once", paidB.Load())
	}
}

// TestAbortedQueuedDecisionStaysAfterAToolStarted: the same, but the
// instance that shut down had journaled the tool's call (it may have paid):
// the approval stays resolved, for the turn that may have run it, and
// nothing pays again.
func TestAbortedQueuedDecisionStaysAfterAToolStarted(t *testing.T) {
	t.Parallel()
	opts := takeoverOptions(t)
	u, pending := queuedDecisionAborted(t, opts)
	if _, err := u.admin.Exec(context.Background(), `INSERT INTO tool_calls (tenant_id, turn_id, call_key, session_id, agent, tool, status, actor)
		SELECT tenant_id, id, 'pay/p1', session_id, agent, 'pay', 'running', 'system' FROM snapshots WHERE id = $1`, pending); err != nil {
		t.Fatal(err)
	}
	var paidB atomic.Int32
	open := make(chan struct{})
	close(open)
	startInstance(t, u.url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, open, nil) })
	waitFor(t, "the aborted turn's job to go", time.Minute, func() bool {
		return count(t, u.admin, `SELECT count(*) FROM turn_jobs`) == 0
	})
	if n := count(t, u.admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'resolved' AND resumed_snapshot_id = $2`, u.paused, pending); n != 1 {
		t.Fatal("the approval whose turn journaled a tool call did not stay resolved")
	}
	if n := count(t, u.admin, `SELECT count(*) FROM interrupt_events WHERE type = 'released'`); n != 0 {
		t.Fatalf("%d released events; want none", n)
	}
	if paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on B; want none", paidB.Load())
	}
}

// TestAbortedTakeoverKeepsADecisionWhoseToolRan: instance A paid, then
// died before its turn's write; B takes the turn over with no recorded
// model answer to replay (a job an instance of the previous version left),
// and a user aborts it while B's model runs, before B reaches the journaled
// call. Nothing ran on B, but the tool ran on A: the approval must stay
// resolved, or a new approval would pay a second time.
func TestAbortedTakeoverKeepsADecisionWhoseToolRan(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	var paidA, paidB atomic.Int32
	reachedA := make(chan struct{}, 1)
	a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidA, afterTool, make(chan struct{}), reachedA) })
	paused, aDone := pauseThenDecide(t, a, inboxApproval, reachedA)
	looksDead(t, admin, aDone)
	if _, err := admin.Exec(context.Background(), `DELETE FROM turn_steps`); err != nil {
		t.Fatal(err)
	}
	reachedB := make(chan struct{}, 1)
	b := startInstance(t, url, opts, func(rt *service.Runtime) { guardedAgent(rt, &paidB, beforeTool, make(chan struct{}), reachedB) })
	select {
	case <-reachedB:
	case <-time.After(time.Minute):
		t.Fatal("B never took the turn over")
	}
	var pending string
	if err := admin.QueryRow(context.Background(), `SELECT snapshot_id FROM turn_jobs WHERE parent_id = $1`, paused).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if _, err := b.rt.Abort(context.Background(), testCaller, "payer", pending); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the aborted takeover's job to go", time.Minute, func() bool {
		return count(t, admin, `SELECT count(*) FROM turn_jobs`) == 0
	})
	if n := count(t, admin, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND status = 'resolved'`, paused); n != 1 {
		t.Fatal("the approval whose tool ran on A is not resolved after its takeover was aborted")
	}
	if paidA.Load() != 1 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want 1 and 0", paidA.Load(), paidB.Load())
	}
}

// takeoverOptions are the runtime options of the takeover tests: a quick
// heartbeat, and a heartbeat timeout long enough that only a job the test
// makes look dead is taken over.
func takeoverOptions(t *testing.T) service.Options {
	return service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 10 * time.Second}
}
