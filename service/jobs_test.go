package service_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service"
)

// instance is one "server process" of a test: its own runtime, store and
// pool on a shared database, running its background loop.
type instance struct {
	rt     *service.Runtime
	cancel context.CancelFunc
	done   chan struct{}
}

func startInstance(t *testing.T, url string, opts service.Options, register func(rt *service.Runtime)) *instance {
	t.Helper()
	rt := servicetest.New(t, servicetest.Options{URL: url, Runtime: opts, Register: registered(register)}).Runtime
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{rt: rt, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(in.done); rt.RunBackground(ctx) }()
	// Runs before New's cleanups: the store and the pool outlive it.
	t.Cleanup(in.stop)
	return in
}

// registered is register as a servicetest Register.
func registered(register func(rt *service.Runtime)) func(*service.Runtime) error {
	return func(rt *service.Runtime) error { register(rt); return nil }
}

func (in *instance) stop() {
	in.cancel()
	<-in.done
	_ = in.rt.Shutdown(context.Background())
}

// slowPayAgent's model asks for pay, and after the tool answers it blocks
// until block is closed or its context ends.
func slowPayAgent(rt *service.Runtime, paid *atomic.Int32, block <-chan struct{}, cancelled chan<- time.Time) {
	model := &blockingModel{block: block, cancelled: cancelled}
	err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			paid.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}},
	}})
	if err != nil {
		panic(err)
	}
}

type blockingModel struct {
	block     <-chan struct{}
	cancelled chan<- time.Time
}

func (m *blockingModel) Name() string { return "blocking" }

func (m *blockingModel) Generate(ctx context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}}}}}, nil
	}
	select {
	case <-m.block:
		return &service.ModelResponse{Message: text(service.RoleModel, "paid"), FinishReason: "stop"}, nil
	case <-ctx.Done():
		if m.cancelled != nil {
			m.cancelled <- time.Now()
		}
		return nil, ctx.Err()
	}
}

func detachPay(t *testing.T, rt *service.Runtime) string {
	t.Helper()
	out, err := rt.InvokeOne(context.Background(), testCaller, "payer", service.AgentInit{},
		service.AgentInput{Message: ptr(text(service.RoleUser, "pay")), Detach: true}, nil)
	if err != nil || out.FinishReason != "detached" {
		t.Fatalf("detach: %v %+v", err, out)
	}
	return out.SnapshotID
}

// waitFor is waitfor.Until.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return waitfor.Until(t, what, timeout, cond)
}

func snapshotStatus(t *testing.T, rt *service.Runtime, id string) string {
	t.Helper()
	snap, err := rt.GetSnapshot(context.Background(), testCaller, "payer", service.SnapshotLookup{SnapshotID: id})
	if err != nil {
		t.Fatal(err)
	}
	return snap.Status
}

func count(t *testing.T, admin *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// crashedAfterTool runs a detached pay turn on an instance A past its tool
// call, then makes A look dead to other instances (its job owned by nobody
// alive, its heartbeat stale): what `kill -9` leaves behind. A's runtime
// never runs its background loop, and its own heartbeat finds the job gone
// and stops its goroutines. It returns an owner pool, the snapshot id and
// A's runtime and tool counter.
func crashedAfterTool(t *testing.T, url string, opts service.Options) (*pgxpool.Pool, string, *service.Runtime, *atomic.Int32) {
	t.Helper()
	admin := testdb.OwnerPool(t, url)
	rtA := servicetest.New(t, servicetest.Options{URL: url, Runtime: opts}).Runtime
	var paidA atomic.Int32
	slowPayAgent(rtA, &paidA, make(chan struct{}), nil)
	snap := detachPay(t, rtA)
	waitFor(t, "A to journal the tool result", 5*time.Second, func() bool {
		return count(t, admin, `SELECT count(*) FROM tool_calls WHERE turn_id = $1 AND status = 'succeeded'`, snap) == 1
	})
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour' WHERE snapshot_id = $1`, snap); err != nil {
		t.Fatal(err)
	}
	return admin, snap, rtA, &paidA
}

// TestTakeoverAfterCrashRunsToolsOnce: instance A runs a detached turn past
// its tool call and dies; instance B takes the job over, reuses the
// journaled tool result, and completes the snapshot.
func TestTakeoverAfterCrashRunsToolsOnce(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	// The job is made stale by hand (crashedAfterTool): the long timeout
	// only keeps B's heartbeats on time on a loaded machine.
	opts := takeoverOptions(t)
	admin, snap, rtA, paidA := crashedAfterTool(t, url, opts)
	crashed := time.Now()
	var paidB atomic.Int32
	release := make(chan struct{})
	close(release)
	startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidB, release, nil) })
	waitFor(t, "B to complete the snapshot", time.Minute, func() bool {
		return snapshotStatus(t, rtA, snap) == service.StatusCompleted
	})
	t.Logf("takeover: snapshot completed by B %s after A stopped", time.Since(crashed).Round(time.Millisecond))
	if paidA.Load() != 1 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want 1 and 0", paidA.Load(), paidB.Load())
	}
	if n := count(t, admin, `SELECT count(*) FROM turn_jobs WHERE snapshot_id = $1`, snap); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
	got, err := rtA.GetSnapshot(context.Background(), testCaller, "payer", service.SnapshotLookup{SnapshotID: snap})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := got.State.Messages; len(msgs) != 4 || msgs[3].Text() != "paid" {
		t.Fatalf("history after takeover: %+v", msgs)
	}
}

// TestShutdownHandsJobsBack: a graceful stop of A hands its detached turn
// back, and B finishes it without waiting for a stale heartbeat.
func TestShutdownHandsJobsBack(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	// A long timeout: only the hand-back can explain a quick takeover.
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 5 * time.Second, HeartbeatTimeout: time.Minute}
	var paidA, paidB atomic.Int32
	never := make(chan struct{})
	a := startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidA, never, nil) })
	snap := detachPay(t, a.rt)
	waitFor(t, "A to run the tool", 5*time.Second, func() bool { return paidA.Load() == 1 })
	a.stop()
	release := make(chan struct{})
	close(release)
	b := startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidB, release, nil) })
	took := waitFor(t, "B to complete the handed-back turn", 5*time.Second, func() bool {
		return snapshotStatus(t, b.rt, snap) == service.StatusCompleted
	})
	t.Logf("handed-back turn completed by B in %s", took.Round(time.Millisecond))
	if paidB.Load() != 0 {
		t.Fatalf("pay ran again on B (%d times)", paidB.Load())
	}
}

// TestAbortReachesAnotherInstance: a turn detached on A is aborted through
// B; A's work is cancelled through the notification (heartbeat polling is
// set far too slow to explain it) and nothing is written after.
func TestAbortReachesAnotherInstance(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 30 * time.Second, HeartbeatTimeout: time.Minute}
	var paidA, paidB atomic.Int32
	never := make(chan struct{})
	cancelled := make(chan time.Time, 1)
	a := startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidA, never, cancelled) })
	b := startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidB, never, nil) })
	// A's listener connects before the abort.
	waitFor(t, "A's abort listener to connect", 30*time.Second, func() bool { return service.AbortsHeard(a.rt) })
	snap := detachPay(t, a.rt)
	waitFor(t, "A to run the tool", 5*time.Second, func() bool { return paidA.Load() == 1 })
	start := time.Now()
	res, err := b.rt.Abort(context.Background(), testCaller, "payer", snap)
	if err != nil || res.Status != service.StatusPending {
		t.Fatalf("abort: %v %+v", err, res)
	}
	select {
	case at := <-cancelled:
		t.Logf("abort through B cancelled A's turn after %s", at.Sub(start).Round(time.Millisecond))
	case <-time.After(time.Minute): // generous: a loaded machine
		t.Fatal("A's turn was not cancelled")
	}
	// Nothing is written after: once A has stopped (Shutdown waits for
	// its detached turns), the snapshot is as the abort left it.
	a.stop()
	snapAfter, err := b.rt.GetSnapshot(context.Background(), testCaller, "payer", service.SnapshotLookup{SnapshotID: snap})
	if err != nil || snapAfter.Status != service.StatusAborted || len(snapAfter.State.Messages) != 0 {
		t.Fatalf("after abort: %v %+v", err, snapAfter)
	}
}

// TestTakeoverDoesNotRepeatAnUnfinishedToolCall: A dies inside a tool call
// (journaled as started, never finished). B takes the job over and fails
// the turn rather than run the tool a second time.
func TestTakeoverDoesNotRepeatAnUnfinishedToolCall(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	// The job is made stale by hand, so the takeover does not wait for the
	// timeout; a long one keeps B's own snapshot from reading expired while
	// a loaded machine delays B's heartbeats (it failed so under load).
	opts := takeoverOptions(t)
	admin, snap, _, _ := crashedAfterTool(t, url, opts)
	// Turn the finished call back into one that started and never ended:
	// what a crash inside the tool leaves behind.
	if _, err := admin.Exec(context.Background(), `UPDATE tool_calls SET status = 'running', output = NULL, finished_at = NULL WHERE turn_id = $1`, snap); err != nil {
		t.Fatal(err)
	}
	var paidB atomic.Int32
	release := make(chan struct{})
	close(release)
	b := startInstance(t, url, opts, func(rt *service.Runtime) { slowPayAgent(rt, &paidB, release, nil) })
	waitFor(t, "B to end the snapshot", time.Minute, func() bool {
		switch snapshotStatus(t, b.rt, snap) {
		case service.StatusFailed, service.StatusCompleted, service.StatusAborted:
			return true
		}
		return false
	})
	got, err := b.rt.GetSnapshot(context.Background(), testCaller, "payer", service.SnapshotLookup{SnapshotID: snap})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != service.StatusFailed || got.Error == nil || got.Error.Status != service.CodeAborted {
		t.Fatalf("snapshot after takeover: %+v", got)
	}
	if paidB.Load() != 0 {
		t.Fatalf("B ran the tool %d times", paidB.Load())
	}
}

// TestLostGuardIsNotReportedAborted: a guarded resume whose job another
// instance took over (this one's heartbeat went stale, as in a database
// outage) stops here, and its client is told UNAVAILABLE, to ask again,
// not that the turn was aborted: nobody aborted it, and an approval sent
// as a resume must not read as given up (the chaos test's "lost" once).
func TestLostGuardIsNotReportedAborted(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntimeWith(t, service.Options{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Minute})
	var taken atomic.Int64
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: "approve", Ref: "r1", Input: json.RawMessage(`{"what":"x"}`)}}}}
		case last.Content[0].ToolResponse.Name == "approve":
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}}}}
		}
		return text(service.RoleModel, "done")
	}}
	err := rt.Register(&service.Agent{Name: "gate", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)},
		{Name: "pay", Run: func(ctx context.Context, _ service.ToolCall) (json.RawMessage, error) {
			// Another instance takes the guarded resume's job over while
			// the tool runs; this instance's heartbeat finds it so.
			tag, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'other-instance', heartbeat_at = now()`)
			if err != nil {
				return nil, err
			}
			taken.Store(tag.RowsAffected())
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	paused := pauseGate(t, rt, "gate", "s-lost")
	out, err := rt.InvokeOne(context.Background(), testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if taken.Load() != 1 {
		t.Fatalf("%d jobs taken over, want the resume's guard", taken.Load())
	}
	if out.FinishReason != service.FinishFailed || out.Error == nil || out.Error.Status != service.CodeUnavailable {
		t.Fatalf("a resume lost to another instance ended %q %+v, want failed UNAVAILABLE", out.FinishReason, out.Error)
	}
}
