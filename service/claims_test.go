package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
)

// gateAgent pauses on one approval; a resume's model call first runs
// onResume (when set), then answers with a pay call when pay is true and
// with text otherwise. It returns how many times pay ran.
func gateAgent(t *testing.T, rt *service.Runtime, name string, pay bool, onResume func(), payRun func()) *atomic.Int32 {
	t.Helper()
	var paid atomic.Int32
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{
				{ToolRequest: &service.ToolRequest{Name: "approve", Ref: "r1", Input: json.RawMessage(`{"what":"x"}`)}},
			}}
		case last.Role == service.RoleTool && last.Content[0].ToolResponse.Name == "approve":
			if onResume != nil {
				onResume()
			}
			if pay {
				return service.Message{Role: service.RoleModel, Content: []service.Part{
					{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}},
				}}
			}
		}
		return text(service.RoleModel, "done")
	}}
	err := rt.Register(&service.Agent{Name: name, ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			if payRun != nil {
				payRun()
			}
			paid.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &paid
}

func pauseGate(t *testing.T, rt *service.Runtime, agent, session string) string {
	t.Helper()
	out, err := rt.InvokeOne(context.Background(), testCaller, agent, service.AgentInit{SessionID: session},
		service.AgentInput{Message: ptr(text(service.RoleUser, "go"))}, nil)
	if err != nil || out.FinishReason != service.FinishInterrupted {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	return out.SnapshotID
}

func gateApproval() service.AgentInput {
	return service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
		Name: "approve", Ref: "r1", Output: json.RawMessage(`{"approved":true}`)}}}}}
}

// gateEvents is the audit trail of the session's interrupt, oldest first.
func gateEvents(t *testing.T, admin *pgxpool.Pool, session string) string {
	t.Helper()
	var types []string
	rows, err := admin.Query(context.Background(), `
		SELECT e.type FROM interrupt_events e JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
		WHERE i.session_id = $1 ORDER BY e.id`, session)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		types = append(types, s)
	}
	return strings.Join(types, " ")
}

func statusOf(err error) string {
	var e *service.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return ""
}

// TestClaimWithTheWriteRunsOnce: concurrent unstreamed resumes of one
// interrupt, all past their model call before any writes (the model waits
// for all of them), claim it in their turns' writes: exactly one turn is
// written, the others are refused with ABORTED and write nothing.
func TestClaimWithTheWriteRunsOnce(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	const n = 6
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	gateAgent(t, rt, "gate", false, func() {
		arrived.Done()
		<-release
	}, nil)
	paused := pauseGate(t, rt, "gate", "s-race")
	go func() { arrived.Wait(); close(release) }()

	var wg sync.WaitGroup
	outs := make([]*service.AgentOutput, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = rt.InvokeOne(context.Background(), testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil)
		}()
	}
	wg.Wait()
	won := ""
	for i := range n {
		switch {
		case errs[i] == nil && outs[i].FinishReason == service.FinishStop:
			if won != "" {
				t.Fatalf("two resumes completed: %s and %s", won, outs[i].SnapshotID)
			}
			won = outs[i].SnapshotID
		case statusOf(errs[i]) == service.CodeAborted:
		default:
			t.Fatalf("resume %d: %v %+v, want a completed turn or ABORTED", i, errs[i], outs[i])
		}
	}
	if won == "" {
		t.Fatal("no resume completed")
	}
	var children int
	var resumed string
	ctx := context.Background()
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM snapshots WHERE parent_id = $1`, paused).Scan(&children); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, `SELECT resumed_snapshot_id FROM interrupts WHERE snapshot_id = $1`, paused).Scan(&resumed); err != nil {
		t.Fatal(err)
	}
	if children != 1 || resumed != won {
		t.Fatalf("%d snapshots continue the paused one (want 1); the interrupt names %s as its resume, want %s", children, resumed, won)
	}
	// Claimed and resolved in one write: no separate claimed event.
	if got := gateEvents(t, admin, "s-race"); got != "created resolved" {
		t.Fatalf("events %q, want %q", got, "created resolved")
	}
}

// TestClaimWithTheWriteRefusedWhenDecidedMeanwhile: an interrupt decided
// (or expired) while the resume's model ran refuses the resume's write as
// a claim made up front would have: ABORTED for a decision,
// FAILED_PRECONDITION for an expiry, and nothing of the turn is written.
func TestClaimWithTheWriteRefusedWhenDecidedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ status, want string }{
		{"resolved", service.CodeAborted},
		{"expired", service.CodeFailedPrecondition},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			rt, admin := newRuntime(t)
			ctx := context.Background()
			var paused string
			gateAgent(t, rt, "gate", false, func() {
				if _, err := admin.Exec(ctx, `UPDATE interrupts SET status = $1 WHERE snapshot_id = $2`, tc.status, paused); err != nil {
					t.Error(err)
				}
			}, nil)
			paused = pauseGate(t, rt, "gate", "s1")
			_, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil)
			if statusOf(err) != tc.want {
				t.Fatalf("resume: %v, want %s", err, tc.want)
			}
			var children int
			var latest string
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM snapshots WHERE parent_id = $1`, paused).Scan(&children); err != nil {
				t.Fatal(err)
			}
			if err := admin.QueryRow(ctx, `SELECT latest_snapshot_id FROM sessions WHERE id = 's1'`).Scan(&latest); err != nil {
				t.Fatal(err)
			}
			if children != 0 || latest != paused {
				t.Fatalf("refused resume wrote %d snapshots; the session's latest is %s, want %s", children, latest, paused)
			}
		})
	}
}

// TestClaimMadeBeforeAToolRuns: a resume whose turn runs a tool, one that
// streams, and any resume under EarlyClaims claim before that happens (a
// claimed event, then the resolution), and the tool sees its interrupt
// already resolved.
func TestClaimMadeBeforeAToolRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("tool", func(t *testing.T) {
		t.Parallel()
		rt, admin := newRuntime(t)
		var paused, seen string
		paid := gateAgent(t, rt, "gate", true, nil, func() {
			if err := admin.QueryRow(ctx, `SELECT status FROM interrupts WHERE snapshot_id = $1`, paused).Scan(&seen); err != nil {
				t.Error(err)
			}
		})
		paused = pauseGate(t, rt, "gate", "s1")
		out, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil)
		if err != nil || out.FinishReason != service.FinishStop {
			t.Fatalf("resume: %v %+v", err, out)
		}
		if paid.Load() != 1 || seen != service.InterruptResolved {
			t.Fatalf("pay ran %d times and saw its interrupt %q; want once, resolved", paid.Load(), seen)
		}
		if got := gateEvents(t, admin, "s1"); got != "created claimed resolved" {
			t.Fatalf("events %q", got)
		}
	})
	for _, tc := range []struct {
		name   string
		opts   service.Options
		stream bool
	}{
		{"streamed", service.Options{}, true},
		{"early claims", service.Options{EarlyClaims: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, admin := newRuntimeWith(t, tc.opts)
			var paused, seen string
			gateAgent(t, rt, "gate", false, func() {
				if err := admin.QueryRow(ctx, `SELECT status FROM interrupts WHERE snapshot_id = $1`, paused).Scan(&seen); err != nil {
					t.Error(err)
				}
			}, nil)
			paused = pauseGate(t, rt, "gate", "s1")
			var sink func(service.StreamChunk)
			if tc.stream {
				sink = func(service.StreamChunk) {}
			}
			out, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), sink)
			if err != nil || out.FinishReason != service.FinishStop || seen != service.InterruptResolved {
				t.Fatalf("resume: %v %+v; the model saw the interrupt %q", err, out, seen)
			}
			if got := gateEvents(t, admin, "s1"); got != "created claimed resolved" {
				t.Fatalf("events %q", got)
			}
		})
	}
}

// TestResumingAnAnsweredInterruptAgainCostsNoModelCall: a resume whose
// claim waits for its turn's write runs the model before it learns it
// lost; once the store has seen the interrupt answered, by a resume that
// won or by a claim refused, a resume of the snapshot claims up front and
// is refused before the model runs. A client repeating a stale resume
// costs at most one model call.
func TestResumingAnAnsweredInterruptAgainCostsNoModelCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// behindTheStore resolves the interrupt in the database, unseen
		// by the store, instead of by a resume.
		behindTheStore bool
	}{
		{"answered by a resume", false},
		{"answered behind the store", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, admin := newRuntime(t)
			var modelCalls atomic.Int32
			gateAgent(t, rt, "gate", false, func() { modelCalls.Add(1) }, nil)
			paused := pauseGate(t, rt, "gate", "s1")
			want := int32(1) // the one resume that runs the model
			if tc.behindTheStore {
				if _, err := admin.Exec(ctx, `UPDATE interrupts SET status = 'resolved' WHERE snapshot_id = $1`, paused); err != nil {
					t.Fatal(err)
				}
				// The first resume learns it only at its write.
				if _, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil); statusOf(err) != service.CodeAborted {
					t.Fatalf("first resume: %v, want ABORTED", err)
				}
			} else if out, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil); err != nil || out.FinishReason != service.FinishStop {
				t.Fatalf("resume: %v %+v", err, out)
			}
			for i := range 3 {
				// Answered by a resume, the same answer again gets its
				// outcome; resolved behind the store (no turn of its
				// own), it is refused.
				out, err := rt.InvokeOne(ctx, testCaller, "gate", service.AgentInit{SnapshotID: paused}, gateApproval(), nil)
				if tc.behindTheStore && statusOf(err) != service.CodeAborted {
					t.Fatalf("repeat %d: %v, want ABORTED", i, err)
				}
				if !tc.behindTheStore && (err != nil || out.FinishReason != service.FinishStop) {
					t.Fatalf("repeat %d: %v %+v, want the first outcome", i, err, out)
				}
			}
			if n := modelCalls.Load(); n != want {
				t.Fatalf("the model ran %d times on resumes, want %d", n, want)
			}
		})
	}
}
