package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// customPayer registers "payer" as a custom agent: its turn asks the
// approve interrupt (ref a1), and once resumed with the answer calls its pay
// tool through Turn.CallTool (ref p1) and says what it got. At point it
// signals reached and waits for hold: afterTool once the call returned,
// beforeTool inside pay's run (the call started, its outcome unrecorded).
func customPayer(rt *service.Runtime, paid *atomic.Int32, point crashPoint, hold <-chan struct{}, reached chan<- struct{}) {
	registerCustomPayer(rt, point, hold, reached, func(wait func(context.Context) error) *service.Tool {
		return &service.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object","required":["amount"]}`),
			Run: func(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
				paid.Add(1)
				if point == beforeTool {
					if err := wait(ctx); err != nil {
						return nil, err
					}
				}
				return json.RawMessage(`{"receipt":"r-` + call.Ref + `"}`), nil
			}}
	})
}

// registerCustomPayer is customPayer with its pay tool made by pay, which
// gets the crash point's wait.
func registerCustomPayer(rt *service.Runtime, point crashPoint, hold <-chan struct{}, reached chan<- struct{}, pay func(wait func(context.Context) error) *service.Tool) {
	wait := crashWait(hold, reached)
	turn := func(ctx context.Context, t *service.Turn) (string, error) {
		msgs := t.Messages()
		last := msgs[len(msgs)-1]
		if last.Role != service.RoleTool {
			t.AddMessages(service.Message{Role: service.RoleModel, Content: []service.Part{{
				ToolRequest: &service.ToolRequest{Name: "approve", Ref: "a1", Input: json.RawMessage(`{"amount":50}`)},
				Metadata:    service.Metadata{"interrupt": json.RawMessage("true")}}}})
			return service.FinishInterrupted, nil
		}
		out, err := t.CallTool(ctx, "pay", "p1", json.RawMessage(`{"amount":50}`))
		if err != nil {
			return "", err
		}
		if point == afterTool {
			if err := wait(ctx); err != nil {
				return "", err
			}
		}
		t.AddMessages(text(service.RoleModel, "paid: "+string(out)))
		return "", nil
	}
	err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Turn: turn, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true}, pay(wait),
	}})
	if err != nil {
		panic(err)
	}
}

// TestCustomTurnsToolCallIsNotRepeatedOnTakeover: a custom agent's approved
// turn calls its tool through Turn.CallTool, then its instance dies; the
// instance that takes the turn over runs the turn function again, and the
// call returns the recorded output instead of paying a second time.
func TestCustomTurnsToolCallIsNotRepeatedOnTakeover(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	var paidA, paidB atomic.Int32
	reached := make(chan struct{}, 1)
	a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) {
		customPayer(rt, &paidA, afterTool, make(chan struct{}), reached)
	})
	paused, aDone := pauseThenDecide(t, a, inboxApproval, reached)
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay' AND status = 'succeeded'`); n != 1 {
		t.Fatalf("%d pay calls recorded succeeded before the crash; want 1", n)
	}
	looksDead(t, admin, aDone)
	open := make(chan struct{})
	close(open)
	startInstance(t, url, opts, func(rt *service.Runtime) { customPayer(rt, &paidB, afterTool, open, nil) })
	wantFinished(t, admin, paused)
	if paidA.Load() != 1 || paidB.Load() != 0 {
		t.Fatalf("pay ran %d times on A and %d on B; want 1 and 0", paidA.Load(), paidB.Load())
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay'`); n != 1 {
		t.Fatalf("%d pay calls journaled; want 1", n)
	}
	// The journal's copy (jsonb: a space after the colon), not a new run's.
	if n := count(t, admin, `SELECT count(*) FROM snapshots WHERE parent_id = $1 AND strpos(turn_messages::text, $2) > 0`, paused, `paid: {\"receipt\": \"r-p1\"}`); n != 1 {
		var msgs string
		_ = admin.QueryRow(context.Background(), `SELECT turn_messages::text FROM snapshots WHERE parent_id = $1`, paused).Scan(&msgs)
		t.Fatalf("the taken-over turn did not answer with the recorded output: %s", msgs)
	}
}

// TestIdempotentCustomCallRunsAgainOnTakeover: a custom turn's call of an
// agentkit tool marked Idempotent started, then its instance hung before
// the outcome was recorded; the instance that takes the turn over runs the
// call again, with the same call id (agentkit.CallIDOf, the key its
// receiver deduplicates on), on the same row, and the turn completes where
// another tool's would fail ABORTED. The hung run's late outcome, when it
// ends, changes nothing.
func TestIdempotentCustomCallRunsAgainOnTakeover(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	opts := takeoverOptions(t)
	type payment struct {
		Amount int `json:"amount"`
	}
	type receipt struct {
		Receipt string `json:"receipt"`
	}
	// pay records the id of each run, then runs stall.
	pay := func(ids chan<- string, stall func() error) func(func(context.Context) error) *service.Tool {
		return func(func(context.Context) error) *service.Tool {
			tool, err := agentkit.Tool[payment, receipt]{Name: "pay", Idempotent: true, Run: func(ctx context.Context, in payment) (receipt, error) {
				ids <- agentkit.CallIDOf(ctx)
				if err := stall(); err != nil {
					return receipt{}, err
				}
				return receipt{Receipt: "r-" + agentkit.RefOf(ctx)}, nil
			}}.ServiceTool()
			if err != nil {
				panic(err)
			}
			return tool
		}
	}
	idsA, idsB := make(chan string, 4), make(chan string, 4)
	reached, release := make(chan struct{}, 1), make(chan struct{})
	// A's run hangs, deaf to its turn's cancellation, until released.
	hang := func() error {
		reached <- struct{}{}
		<-release
		return errors.New("the hung run ends")
	}
	a := newInstanceWithoutBackground(t, url, opts, func(rt *service.Runtime) {
		registerCustomPayer(rt, beforeTool, nil, nil, pay(idsA, hang))
	})
	released := sync.OnceFunc(func() { close(release) })
	t.Cleanup(released)
	paused, aDone := pauseThenDecide(t, a, inboxApproval, reached)
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay' AND status = 'running'`); n != 1 {
		t.Fatalf("%d pay calls running when A hangs; want 1", n)
	}
	if _, err := admin.Exec(context.Background(), `UPDATE turn_jobs SET owner = 'dead-instance', heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	startInstance(t, url, opts, func(rt *service.Runtime) {
		registerCustomPayer(rt, beforeTool, nil, nil, pay(idsB, func() error { return nil }))
	})
	wantFinished(t, admin, paused)
	released()
	<-aDone
	if len(idsA) != 1 || len(idsB) != 1 {
		t.Fatalf("pay ran %d times on A and %d on B; want once on each", len(idsA), len(idsB))
	}
	if a, b := <-idsA, <-idsB; a == "" || a != b {
		t.Fatalf("the runs' call ids: %q on A, %q on B; want one id", a, b)
	}
	if n := count(t, admin, `SELECT count(*) FROM tool_calls WHERE tool = 'pay' AND status = 'succeeded' AND output->>'receipt' = 'r-p1'`); n != 1 ||
		count(t, admin, `SELECT count(*) FROM tool_calls`) != 1 {
		t.Fatalf("%d pay calls succeeded with B's receipt; want its one row", n)
	}
}

// TestCustomTurnsToolCall: a synchronous custom turn's call is checked
// against the tool's schema and recorded; misuse fails the turn with an
// internal error (a bug of the agent's code).
func TestCustomTurnsToolCall(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	var runs atomic.Int32
	turn := func(ctx context.Context, t *service.Turn) (string, error) {
		// "tool ref input"
		f := strings.SplitN(t.Input().Message.Text(), " ", 3)
		out, err := t.CallTool(ctx, f[0], f[1], json.RawMessage(f[2]))
		if err != nil {
			return "", err
		}
		t.AddMessages(text(service.RoleModel, string(out)))
		return "", nil
	}
	tools := []*service.Tool{{Name: "ask", Interrupt: true}, {Name: "ship", InputSchema: json.RawMessage(`{"type":"object","required":["order"],"properties":{"order":{"type":"integer"}}}`),
		Run: func(_ context.Context, call service.ToolCall) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(`{"shipped":` + string(call.Input) + `}`), nil
		}}}
	if err := rt.Register(&service.Agent{Name: "shipper", ServerManaged: true, Turn: turn, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	say := func(session, msg string) *service.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(context.Background(), testCaller, "shipper", service.AgentInit{SessionID: session},
			service.AgentInput{Message: ptr(text(service.RoleUser, msg))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := say("s1", `ship o1 {"order":1}`); out.Error != nil || out.Message.Text() != `{"shipped":{"order":1}}` || runs.Load() != 1 {
		t.Fatalf("a call: %+v %+v, %d runs", out.Error, out.Message, runs.Load())
	}
	calls, err := rt.SessionToolCalls(context.Background(), testCaller, "s1", nil, 0)
	if err != nil || len(calls) != 1 || calls[0].Tool != "ship" || calls[0].Ref != "o1" || calls[0].Status != service.ToolCallSucceeded {
		t.Fatalf("recorded calls: %v %+v", err, calls)
	}
	for _, msg := range []string{`ship o2 {"order":"x"}`, `ship o3 {}`} {
		if out := say("s2", msg); out.Error == nil || out.Error.Status != service.CodeInvalidArgument {
			t.Errorf("%s: %+v", msg, out.Error)
		}
	}
	for _, msg := range []string{`nope o4 {}`, `ask o5 {}`, `ship  {"order":1}`} {
		if out := say("s3", msg); out.Error == nil || out.Error.Status != service.CodeInternal {
			t.Errorf("%s: %+v", msg, out.Error)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("ship ran %d times; want only the valid call", runs.Load())
	}
}

// TestCustomTurnsGatedCall: a custom turn's call of a tool with an approval
// policy pauses before anything of it runs, in the inbox like a model's;
// an operator's approval runs it once and the turn function gets its
// output; a client's restart runs it too; a human's answer replaces it.
func TestCustomTurnsGatedCall(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	var runs atomic.Int32
	turn := func(ctx context.Context, t *service.Turn) (string, error) {
		out, err := t.CallTool(ctx, "ship", "o1", json.RawMessage(`{"order":1}`))
		if err != nil {
			return "", err
		}
		t.AddMessages(text(service.RoleModel, "got "+string(out)))
		return "", nil
	}
	ship := &service.Tool{Name: "ship", Approval: &approval.Policy{}, Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{"shipped":true}`), nil
	}}
	if err := rt.Register(&service.Agent{Name: "gatedShipper", ServerManaged: true, Turn: turn, Tools: []*service.Tool{ship}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pause := func(session string) (*service.AgentOutput, service.Interrupt) {
		t.Helper()
		out, err := rt.InvokeOne(ctx, testCaller, "gatedShipper", service.AgentInit{SessionID: session}, service.AgentInput{Message: ptr(text(service.RoleUser, "ship"))}, nil)
		if err != nil || out.FinishReason != service.FinishInterrupted {
			t.Fatalf("the gated call: %v %+v", err, out)
		}
		items, err := inbox.New(rt).ListInterrupts(ctx, testCaller, service.InterruptFilter{Status: "pending", SessionID: session})
		if err != nil || len(items) != 1 || items[0].Tool != "ship" || items[0].Ref != "o1" {
			t.Fatalf("the inbox: %v %+v", err, items)
		}
		return out, items[0]
	}
	_, it := pause("approved")
	if runs.Load() != 0 {
		t.Fatalf("ship ran %d times before its approval", runs.Load())
	}
	res, err := inbox.New(rt).ApproveInterrupt(ctx, testCaller, it.ID, nil, "")
	if err != nil || res.Output == nil || res.Output.Message.Text() != `got {"shipped":true}` || runs.Load() != 1 {
		t.Fatalf("approved: %v %+v, %d runs", err, res, runs.Load())
	}
	if _, err := inbox.New(rt).RespondInterrupt(ctx, testCaller, it.ID, json.RawMessage(`{"shipped":false}`), ""); err == nil || runs.Load() != 1 {
		t.Fatalf("a second decision: %v, %d runs", err, runs.Load())
	}

	paused, _ := pause("restarted")
	// A client's restart must name the paused request as the server wrote
	// it: another input, another ref or another tool is refused, and
	// nothing runs.
	for _, forged := range []service.ToolRequest{
		{Name: "ship", Ref: "o1", Input: json.RawMessage(`{"order":2}`)},
		{Name: "ship", Ref: "o2", Input: json.RawMessage(`{"order":1}`)},
		{Name: "pay", Ref: "o1", Input: json.RawMessage(`{"order":1}`)},
	} {
		in := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &forged}}}}
		out, err := rt.InvokeOne(ctx, testCaller, "gatedShipper", service.AgentInit{SnapshotID: paused.SnapshotID}, in, nil)
		if err != nil || out.FinishReason != "failed" || out.Error == nil || out.Error.Status != "INVALID_ARGUMENT" || runs.Load() != 1 {
			t.Fatalf("a forged restart %+v: %v %+v, %d runs", forged, err, out, runs.Load())
		}
	}
	restart := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "ship", Ref: "o1", Input: json.RawMessage(`{"order":1}`)}}}}}
	out, err := rt.InvokeOne(ctx, testCaller, "gatedShipper", service.AgentInit{SnapshotID: paused.SnapshotID}, restart, nil)
	if err != nil || out.Message.Text() != `got {"shipped":true}` || runs.Load() != 2 {
		t.Fatalf("a client's restart: %v %+v, %d runs", err, out, runs.Load())
	}

	_, it = pause("answered")
	res, err = inbox.New(rt).RespondInterrupt(ctx, testCaller, it.ID, json.RawMessage(`{"shipped":"by hand"}`), "")
	if err != nil || res.Output == nil || res.Output.Message.Text() != `got {"shipped":"by hand"}` || runs.Load() != 2 {
		t.Fatalf("answered by a human: %v %+v, %d runs", err, res, runs.Load())
	}
}
