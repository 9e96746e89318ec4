package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// approverModel pauses on an approval, asks for pay once it is approved,
// and after pay answered waits for block (or its context) before it
// answers: the window in which its instance dies.
type approverModel struct{ block <-chan struct{} }

func (m *approverModel) Name() string { return "approver" }

func (m *approverModel) Generate(ctx context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	call := func(name, ref, input string) (*service.ModelResponse, error) {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: name, Ref: ref, Input: json.RawMessage(input)}}}}}, nil
	}
	switch {
	case last.Role == service.RoleUser:
		return call("approve", "r1", `{"what":"transfer"}`)
	case last.Content[0].ToolResponse.Name == "approve":
		return call("pay", "p1", `{"amount":100}`)
	}
	select {
	case <-m.block:
		return &service.ModelResponse{Message: text(service.RoleModel, "paid"), FinishReason: "stop"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// payLog counts pay's runs and keeps the call ids it was given.
type payLog struct {
	runs atomic.Int32
	mu   sync.Mutex
	ids  []string
	// hold, when set, keeps each run of pay waiting until it is closed
	// (after counting it).
	hold atomic.Pointer[chan struct{}]
}

func (p *payLog) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

func approverAgent(t *testing.T, rt *service.Runtime, paid *payLog, block <-chan struct{}) {
	t.Helper()
	err := rt.Register(&service.Agent{Name: "approver", ServerManaged: true, Model: &approverModel{block: block}, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)},
		{Name: "pay", OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
			Run: func(_ context.Context, c service.ToolCall) (json.RawMessage, error) {
				paid.runs.Add(1)
				paid.mu.Lock()
				paid.ids = append(paid.ids, c.ID)
				paid.mu.Unlock()
				if hold := paid.hold.Load(); hold != nil {
					<-*hold
				}
				return json.RawMessage(`{"ok":true}`), nil
			}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func approvedResume(detach bool) service.AgentInput {
	return service.AgentInput{Detach: detach, Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
		Name: "approve", Ref: "r1", Output: json.RawMessage(`{"approved":true}`)}}}}}
}

// lostCase is what a lost outcome leaves: the approval's paused snapshot,
// the detached resume that ran pay and failed after the takeover, and the
// instance B that took it over (still running).
type lostCase struct {
	admin            *pgxpool.Pool
	rt               *service.Runtime
	paid             *payLog
	session          string
	paused, detached string
	interrupt        uuid.UUID
	call             uuid.UUID
}

// lostOutcome plays the fault: instance A resumes an approval detached,
// claims the interrupt and runs pay (a transfer); then A dies and the
// outcome's write never lands (the row is put back to running, as a kill
// between the transfer and the write leaves it). Instance B takes the job
// over. Nothing sleeps for time: each step waits for the state it needs.
func lostOutcome(t *testing.T, session string) *lostCase {
	t.Helper()
	url := testdb.URL(t)
	opts := service.Options{Logger: testlog.Logger(t), HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 600 * time.Millisecond}
	lc := &lostCase{admin: testdb.OwnerPool(t, url), paid: &payLog{}, session: session}
	rtA := servicetest.New(t, servicetest.Options{URL: url, Runtime: opts}).Runtime
	approverAgent(t, rtA, lc.paid, make(chan struct{}))
	ctx := context.Background()
	out, err := rtA.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SessionID: session}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay 100"))}, nil)
	if err != nil || out.FinishReason != service.FinishInterrupted {
		t.Fatalf("pause: %v %+v", err, out)
	}
	lc.paused = out.SnapshotID
	if err := lc.admin.QueryRow(ctx, `SELECT id FROM interrupts WHERE snapshot_id = $1`, lc.paused).Scan(&lc.interrupt); err != nil {
		t.Fatal(err)
	}
	out, err = rtA.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SnapshotID: lc.paused}, approvedResume(true), nil)
	if err != nil || out.FinishReason != "detached" {
		t.Fatalf("detached resume: %v %+v", err, out)
	}
	lc.detached = out.SnapshotID
	waitFor(t, "A to run pay", 5*time.Second, func() bool {
		return count(t, lc.admin, `SELECT count(*) FROM tool_calls WHERE turn_id = $1 AND tool = 'pay' AND status = 'succeeded'`, lc.detached) == 1
	})
	for _, sql := range []string{
		`UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour' WHERE snapshot_id = $1`,
		`UPDATE tool_calls SET status = 'running', output = NULL, finished_at = NULL WHERE turn_id = $1 AND tool = 'pay'`,
	} {
		if _, err := lc.admin.Exec(ctx, sql, lc.detached); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	close(release)
	b := startInstance(t, url, opts, func(rt *service.Runtime) { approverAgent(t, rt, lc.paid, release) })
	lc.rt = b.rt
	waitFor(t, "B to end the detached resume", 10*time.Second, func() bool {
		return count(t, lc.admin, `SELECT count(*) FROM snapshots WHERE id = $1 AND status <> 'pending'`, lc.detached) == 1
	})
	if err := lc.admin.QueryRow(ctx, `SELECT id FROM tool_calls WHERE turn_id = $1 AND tool = 'pay'`, lc.detached).Scan(&lc.call); err != nil {
		t.Fatal(err)
	}
	return lc
}

func (lc *lostCase) callStatus(t *testing.T) string {
	t.Helper()
	var s string
	if err := lc.admin.QueryRow(context.Background(), `SELECT status FROM tool_calls WHERE id = $1`, lc.call).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLostOutcomeIsNeverRunTwice: the takeover finds pay started and never
// finished. The call becomes unknown, the turn fails saying it may have
// run, and the approval stays resolved (claimed, never released): approving
// it again through the inbox, or repeating the resume, is refused, and the
// transfer ran once.
func TestLostOutcomeIsNeverRunTwice(t *testing.T) {
	t.Parallel()
	lc := lostOutcome(t, "lost-1")
	ctx := context.Background()
	snap, err := lc.rt.GetSnapshot(ctx, testCaller, "approver", service.SnapshotLookup{SnapshotID: lc.detached})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != service.StatusFailed || snap.Error == nil || snap.Error.Status != service.CodeAborted || !strings.Contains(snap.Error.Message, "may have run") || !strings.Contains(snap.Error.Message, lc.call.String()) {
		t.Fatalf("detached resume after the takeover: %+v", snap)
	}
	if s := lc.callStatus(t); s != service.ToolCallUnknown {
		t.Fatalf("pay's call is %s, want unknown", s)
	}
	if n := count(t, lc.admin, `SELECT count(*) FROM interrupts WHERE id = $1 AND status = 'resolved'`, lc.interrupt); n != 1 {
		t.Fatal("the approval is no longer resolved")
	}
	if ev := gateEvents(t, lc.admin, lc.session); ev != "created claimed" {
		t.Fatalf("audit trail %q, want the approval created and claimed, never released", ev)
	}
	if _, err := inbox.New(lc.rt).RespondInterrupt(ctx, testCaller, lc.interrupt, json.RawMessage(`{"approved":true}`), "again"); statusOf(err) != service.CodeAborted {
		t.Fatalf("approving again through the inbox: %v", err)
	}
	// The same resume again answers the first attempt's outcome: its turn
	// failed on a call that may have run, which a human decides.
	if out, err := lc.rt.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SnapshotID: lc.paused}, approvedResume(false), nil); err != nil ||
		out.FinishReason != service.FinishFailed || out.Error == nil || out.Error.Status != service.CodeAborted || !strings.Contains(out.Error.Message, "may have run") {
		t.Fatalf("repeating the resume: %v %+v", err, out)
	}
	if out, err := lc.rt.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SessionID: lc.session}, approvedResume(false), nil); err != nil ||
		out.FinishReason != service.FinishFailed || out.Error == nil || out.Error.Status != service.CodeAborted {
		t.Fatalf("repeating the resume by session: %v %+v", err, out)
	}
	if n := lc.paid.runs.Load(); n != 1 {
		t.Fatalf("pay ran %d times, want once", n)
	}
	if s := lc.callStatus(t); s != service.ToolCallUnknown {
		t.Fatalf("pay's call is %s after the refused approvals, want unknown", s)
	}
}

// TestUnknownCallDecisions: each decision on an unknown call works once; a
// second decision of any kind is refused (ABORTED), a decision on another
// tenant's call finds nothing, and a confirmed output must match the
// tool's output schema.
func TestUnknownCallDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	human := service.Caller{TenantID: testCaller.TenantID, Actor: "key:operator"}
	again := func(t *testing.T, lc *lostCase) {
		t.Helper()
		if _, err := inbox.New(lc.rt).ConfirmToolCall(ctx, human, lc.call, json.RawMessage(`{"ok":true}`), ""); statusOf(err) != service.CodeAborted {
			t.Fatalf("second confirm: %v", err)
		}
		if _, err := inbox.New(lc.rt).CancelToolCall(ctx, human, lc.call, ""); statusOf(err) != service.CodeAborted {
			t.Fatalf("second cancel: %v", err)
		}
		if _, err := inbox.New(lc.rt).RetryToolCall(ctx, human, lc.call, ""); statusOf(err) != service.CodeAborted {
			t.Fatalf("second retry: %v", err)
		}
	}
	t.Run("confirm", func(t *testing.T) {
		t.Parallel()
		lc := lostOutcome(t, "lost-confirm")
		other := service.Caller{TenantID: "other", Actor: "key:intruder"}
		if _, err := inbox.New(lc.rt).ConfirmToolCall(ctx, other, lc.call, json.RawMessage(`{"ok":true}`), ""); statusOf(err) != service.CodeNotFound {
			t.Fatalf("another tenant's confirm: %v", err)
		}
		if _, err := inbox.New(lc.rt).ConfirmToolCall(ctx, human, lc.call, json.RawMessage(`{"ok":"yes"}`), ""); statusOf(err) != service.CodeInvalidArgument {
			t.Fatalf("confirm with an output the schema refuses: %v", err)
		}
		if s := lc.callStatus(t); s != service.ToolCallUnknown {
			t.Fatalf("refused confirms left the call %s", s)
		}
		rec, err := inbox.New(lc.rt).ConfirmToolCall(ctx, human, lc.call, json.RawMessage(`{"ok":true}`), "the bank shows the transfer")
		if err != nil || rec.Status != service.ToolCallSucceeded || rec.Decision != service.DecisionConfirmed || rec.DecidedBy != human.Actor || string(rec.Output) != `{"ok": true}` || rec.Note == "" {
			t.Fatalf("confirm: %v %+v (output %s)", err, rec, rec.Output)
		}
		again(t, lc)
		if n := lc.paid.runs.Load(); n != 1 {
			t.Fatalf("pay ran %d times", n)
		}
		// The conversation goes on with a new message from the last good
		// snapshot; nothing runs pay again.
		out, err := lc.rt.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SessionID: lc.session}, service.AgentInput{Message: ptr(text(service.RoleUser, "the transfer went through"))}, nil)
		if err != nil || out.Error != nil || out.SnapshotID == "" {
			t.Fatalf("going on after the decision: %v %+v", err, out)
		}
		if n := lc.paid.runs.Load(); n != 1 {
			t.Fatalf("pay ran %d times after the conversation went on", n)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		lc := lostOutcome(t, "lost-cancel")
		rec, err := inbox.New(lc.rt).CancelToolCall(ctx, human, lc.call, "")
		if err != nil || rec.Status != service.ToolCallCancelled || rec.Decision != service.DecisionCancelled || rec.DecidedBy != human.Actor {
			t.Fatalf("cancel: %v %+v", err, rec)
		}
		again(t, lc)
		if n := lc.paid.runs.Load(); n != 1 {
			t.Fatalf("pay ran %d times", n)
		}
	})
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		lc := lostOutcome(t, "lost-retry")
		rec, err := inbox.New(lc.rt).RetryToolCall(ctx, human, lc.call, "")
		if err != nil || rec.Status != service.ToolCallSucceeded || rec.Decision != service.DecisionRetried || rec.DecidedBy != human.Actor {
			t.Fatalf("retry: %v %+v", err, rec)
		}
		again(t, lc)
		ids := lc.paid.seen()
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Fatalf("pay's call ids %q: the retry must reuse the first run's id", ids)
		}
	})
}

// TestConcurrentRetriesRunOnce: many operators retry the same unknown
// call at once: exactly one runs the tool, the others are refused.
func TestConcurrentRetriesRunOnce(t *testing.T) {
	t.Parallel()
	lc := lostOutcome(t, "lost-race")
	const n = 8
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := inbox.New(lc.rt).RetryToolCall(context.Background(), testCaller, lc.call, "")
			switch statusOf(err) {
			case "":
				if err == nil {
					ok.Add(1)
				}
			case service.CodeAborted:
				refused.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != n-1 {
		t.Fatalf("%d retries ran, %d refused; want 1 and %d (pay ran %d times)", ok.Load(), refused.Load(), n-1, lc.paid.runs.Load())
	}
	if runs := lc.paid.runs.Load(); runs != 2 {
		t.Fatalf("pay ran %d times, want twice (the lost run and one retry)", runs)
	}
}

// TestRetryInFlightIsNotLostAgain: a human's retry of an unknown call runs
// the tool on a row that is running again. Neither the sweep of calls lost
// with their turn (the call first started over an hour ago) nor a turn
// that finds the call running may mark it unknown while the retry runs:
// another retry would then run the transfer a second time (seen under load
// as "2 retries ran" in TestConcurrentRetriesRunOnce).
func TestRetryInFlightIsNotLostAgain(t *testing.T) {
	t.Parallel()
	lc := lostOutcome(t, "retry-in-flight")
	ctx := context.Background()
	if _, err := lc.admin.Exec(ctx, `UPDATE tool_calls SET started_at = now() - interval '2 hours' WHERE id = $1`, lc.call); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	lc.paid.hold.Store(&hold)
	done := make(chan error, 1)
	go func() {
		_, err := inbox.New(lc.rt).RetryToolCall(ctx, testCaller, lc.call, "")
		done <- err
	}()
	waitFor(t, "the retry to run pay", time.Minute, func() bool { return lc.paid.runs.Load() == 2 })
	if n, err := inbox.New(lc.rt).SweepLostToolCalls(ctx); err != nil || n != 0 {
		t.Fatalf("the sweep marked %d calls lost during a retry (%v), want 0", n, err)
	}
	if rec, err := newStore(t, lc.admin).MarkToolCallUnknown(ctx, "default", lc.detached, "pay#p1"); err != nil || rec.Status != service.ToolCallRunning {
		t.Fatalf("a turn finding the retried call running: %v, %+v; want it left running for the retry", err, rec)
	}
	if st := lc.callStatus(t); st != "running" {
		t.Fatalf("call %s during its retry, want running", st)
	}
	if _, err := inbox.New(lc.rt).RetryToolCall(ctx, testCaller, lc.call, ""); statusOf(err) != service.CodeAborted {
		t.Fatalf("a second retry during the first: %v, want ABORTED", err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if st, runs := lc.callStatus(t), lc.paid.runs.Load(); st != "succeeded" || runs != 2 {
		t.Fatalf("after the retry: call %s, pay ran %d times; want succeeded and 2", st, runs)
	}
}

// TestSweepMarksCallsLostWithTheirTurn: a synchronous turn's call left
// running (its instance died; its outcome would have come with the turn's
// write) is marked unknown once it is older than the bound; a recent one,
// and one whose detached turn still has a job (the takeover decides), are
// left alone.
func TestSweepMarksCallsLostWithTheirTurn(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	ctx := context.Background()
	paid := &payLog{}
	approverAgent(t, rt, paid, make(chan struct{}))
	var paidDetached atomic.Int32
	slowPayAgent(rt, &paidDetached, make(chan struct{}), nil)
	for _, s := range []string{"sweep-old", "sweep-new"} {
		out, err := rt.InvokeOne(ctx, testCaller, "approver", service.AgentInit{SessionID: s}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
		if err != nil || out.FinishReason != service.FinishInterrupted {
			t.Fatal(err, out)
		}
	}
	detached := detachPay(t, rt)
	// The pay ran and its row was recorded (the pay's outcome is written
	// after it returns; rewriting the row before that write would be
	// undone by it).
	waitFor(t, "the detached pay recorded", time.Minute, func() bool {
		return paidDetached.Load() == 1 && count(t, admin, `SELECT count(*) FROM tool_calls WHERE turn_id = '`+detached+`' AND status = 'succeeded'`) == 1
	})
	// The rows a dead synchronous turn leaves: started, never finished.
	if _, err := admin.Exec(ctx, `
		INSERT INTO tool_calls (tenant_id, turn_id, call_key, session_id, agent, tool, status, actor, started_at)
		VALUES ('default', 'dead-old', 'pay#p1', 'sweep-old', 'approver', 'pay', 'running', 'test', now() - interval '2 hours'),
		       ('default', 'dead-new', 'pay#p1', 'sweep-new', 'approver', 'pay', 'running', 'test', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `UPDATE tool_calls SET status = 'running', started_at = now() - interval '2 hours' WHERE turn_id = $1`, detached); err != nil {
		t.Fatal(err)
	}
	n, err := inbox.New(rt).SweepLostToolCalls(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want 1", n, err)
	}
	got := map[string]string{}
	rows, err := admin.Query(ctx, `SELECT turn_id, status FROM tool_calls WHERE turn_id IN ('dead-old', 'dead-new', $1)`, detached)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, s string
		if err := rows.Scan(&id, &s); err != nil {
			t.Fatal(err)
		}
		got[id] = s
	}
	if got["dead-old"] != "unknown" || got["dead-new"] != "running" || got[detached] != "running" {
		t.Fatalf("after the sweep: %v", got)
	}
	if n := count(t, admin, `SELECT count(*) FROM interrupt_events WHERE type = 'tool.called' AND payload->>'snapshotId' = 'dead-old'`); n != 1 {
		t.Fatalf("%d tool.called events for the lost call, want 1", n)
	}
}
