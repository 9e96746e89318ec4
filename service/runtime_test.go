package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

var testCaller = service.Caller{TenantID: "default", Actor: "test"}

// scriptModel answers from a function of the request, so tests can drive an
// agent for any number of turns.
type scriptModel struct {
	fn func(req *service.ModelRequest) service.Message
}

func (m *scriptModel) Name() string { return "script" }

func (m *scriptModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	return &service.ModelResponse{Message: m.fn(req), FinishReason: "stop"}, nil
}

func text(role, s string) service.Message {
	return service.Message{Role: role, Content: []service.Part{service.TextPart(s)}}
}

// newStore returns a store over pool, closed (its notifier stopped) when
// the test ends.
func newStore(t testing.TB, pool *pgxpool.Pool) *pgstore.PgStore {
	s := pgstore.New(pool)
	t.Cleanup(s.Close)
	return s
}

func isStatus(err error, status string) bool {
	var e *service.Error
	return errors.As(err, &e) && e.Status == status
}

// newRuntime returns a runtime on a fresh database whose store runs as the
// application role (row-level security on), and an owner pool for the
// test's own assertions.
func newRuntime(t *testing.T) (*service.Runtime, *pgxpool.Pool) {
	t.Helper()
	return newRuntimeWith(t, service.Options{})
}

// newRuntimeWith is newRuntime with options (its logger is the test's).
func newRuntimeWith(t *testing.T, opts service.Options) (*service.Runtime, *pgxpool.Pool) {
	t.Helper()
	opts.Logger = nil // the test's
	env := servicetest.New(t, servicetest.Options{Runtime: opts})
	return env.Runtime, testdb.OwnerPool(t, env.URL)
}

// TestStoragePerTurnIsFlat checks that a turn writes only the messages it
// added: the rows and bytes written by turn 40 equal those of turn 2.
func TestStoragePerTurnIsFlat(t *testing.T) {
	t.Parallel()
	rt, pool := newRuntime(t)
	ctx := context.Background()
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		return text(service.RoleModel, fmt.Sprintf("reply to message %04d", len(req.Messages)))
	}}
	if err := rt.Register(&service.Agent{Name: "chat", ServerManaged: true, Model: model, System: "be brief"}); err != nil {
		t.Fatal(err)
	}
	const turns = 40
	var snaps []string
	for i := 0; i < turns; i++ {
		out, err := rt.InvokeOne(ctx, testCaller, "chat", service.AgentInit{SessionID: "s1"},
			service.AgentInput{Message: ptr(text(service.RoleUser, fmt.Sprintf("message %03d", i)))}, nil)
		if err != nil || out.FinishReason != "stop" {
			t.Fatalf("turn %d: %v %+v", i, err, out)
		}
		snaps = append(snaps, out.SnapshotID)
	}
	// The ids begin with their time, so the keys holding them grow at
	// their end (migration 00030).
	for i, id := range snaps {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Fatalf("snapshot id %q is not a version 7 UUID (%v)", id, err)
		}
		if i > 0 && id <= snaps[i-1] {
			t.Fatalf("snapshot id %s of turn %d sorts before %s of the turn before", id, i+1, snaps[i-1])
		}
	}
	type written struct{ rows, bytes, row int }
	perSnap := func(id string) written {
		var w written
		err := pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(body::text)), 0),
			(SELECT pg_column_size(s.*) FROM snapshots s WHERE s.tenant_id = 'default' AND s.id = $1)
			FROM messages WHERE tenant_id = 'default' AND snapshot_id = $1`, id).Scan(&w.rows, &w.bytes, &w.row)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	first, last := perSnap(snaps[1]), perSnap(snaps[turns-1])
	if first.rows != 2 || last.rows != 2 {
		t.Fatalf("rows written per turn: turn 2 = %d, turn %d = %d; want 2 each", first.rows, turns, last.rows)
	}
	if first.bytes != last.bytes || first.row != last.row {
		t.Fatalf("bytes written per turn grew: turn 2 = %d (a %d-byte snapshot row), turn %d = %d (%d)", first.bytes, first.row, turns, last.bytes, last.row)
	}
	snap, err := rt.GetSnapshot(ctx, testCaller, "chat", service.SnapshotLookup{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(snap.State.Messages); got != 2*turns {
		t.Fatalf("history rebuilt from the chain has %d messages, want %d", got, 2*turns)
	}
	for i, m := range snap.State.Messages {
		want := fmt.Sprintf("message %03d", i/2)
		if i%2 == 1 {
			want = fmt.Sprintf("reply to message %04d", i+1)
		}
		if m.Text() != want {
			t.Fatalf("message %d = %q, want %q", i, m.Text(), want)
		}
	}
}

// approvalAgent registers an agent whose model asks for approval and then
// calls a counting tool; it returns the counter.
func approvalAgent(t *testing.T, rt *service.Runtime) *atomic.Int32 {
	t.Helper()
	var runs atomic.Int32
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == service.RoleUser:
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "approve", Ref: "a1", Input: json.RawMessage(`{"what":"pay"}`)}}}}
		case last.Role == service.RoleTool && last.Content[0].ToolResponse.Name == "approve":
			return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{
				Name: "pay", Ref: "p1", Input: json.RawMessage(`{}`)}}}}
		default:
			return text(service.RoleModel, "paid")
		}
	}}
	err := rt.Register(&service.Agent{Name: "payer", ServerManaged: true, Model: model, Tools: []*service.Tool{
		{Name: "approve", Interrupt: true},
		{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &runs
}

// TestResumeIsExactlyOnce resumes one interrupt from many goroutines at once:
// one resume runs the turn, the others get ABORTED and the tool runs once.
func TestResumeIsExactlyOnce(t *testing.T) {
	t.Parallel()
	rt, pool := newRuntime(t)
	ctx := context.Background()
	runs := approvalAgent(t, rt)
	out, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay it"))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	paused := out.SnapshotID
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
		Name: "approve", Ref: "a1", Output: json.RawMessage(`{"approved":true}`)}}}}}

	const n = 20
	var wg sync.WaitGroup
	var ok, aborted, other atomic.Int32
	var outcomes sync.Map
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SnapshotID: paused}, resume, nil)
			var e *service.Error
			switch {
			case err == nil && out.FinishReason == "stop":
				// The turn, or a repeat answered its outcome.
				ok.Add(1)
				outcomes.Store(out.SnapshotID, true)
			case errors.As(err, &e) && (e.Status == service.CodeAborted ||
				(e.Status == service.CodeUnavailable && e.Retry != nil && e.Retry.DecisionRecorded && e.Retry.RetrySafe)):
				// Lost a race with a pending claim, or found the turn
				// still running.
				aborted.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected result: %v %+v", err, out)
			}
		}()
	}
	wg.Wait()
	distinct := 0
	outcomes.Range(func(any, any) bool { distinct++; return true })
	if ok.Load() < 1 || ok.Load()+aborted.Load() != n || distinct != 1 || runs.Load() != 1 {
		t.Fatalf("ok=%d (%d outcomes) waiting=%d other=%d tool runs=%d; want >= 1 (1), %d in all, 0, 1", ok.Load(), distinct, aborted.Load(), other.Load(), runs.Load(), n)
	}
	var status string
	var resumed *string
	if err := pool.QueryRow(ctx, `SELECT status, resumed_snapshot_id FROM interrupts WHERE tenant_id = 'default' AND snapshot_id = $1`, paused).Scan(&status, &resumed); err != nil {
		t.Fatal(err)
	}
	if status != "resolved" || resumed == nil {
		t.Fatalf("interrupt row: status %q resumed %v", status, resumed)
	}
}

// TestFailedResumeReleasesClaim checks that a resume whose turn fails before
// any tool ran gives the interrupt back, so a later resume can proceed.
func TestFailedResumeReleasesClaim(t *testing.T) {
	t.Parallel()
	rt, fail, out := pausedAsker(t)
	ctx := context.Background()
	fail.Store(true)
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "ask", Ref: "q", Output: json.RawMessage(`"yes"`)}}}}}
	failed, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SnapshotID: out.SnapshotID}, resume, nil)
	if err != nil || failed.FinishReason != "failed" || failed.SnapshotID != out.SnapshotID {
		t.Fatalf("failing resume: %v %+v", err, failed)
	}
	fail.Store(false)
	done, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SnapshotID: out.SnapshotID}, resume, nil)
	if err != nil || done.FinishReason != "stop" {
		t.Fatalf("second resume: %v %+v", err, done)
	}
}

// pausedAsker registers the agent "asker", whose model asks the
// interrupting tool "ask" (ref q) and then answers, unless fail is set
// (UNAVAILABLE), and returns the output of a first turn paused on it.
func pausedAsker(t *testing.T) (*service.Runtime, *atomic.Bool, *service.AgentOutput) {
	t.Helper()
	rt, _ := newRuntime(t)
	fail := new(atomic.Bool)
	if err := rt.Register(&service.Agent{Name: "asker", ServerManaged: true, Model: &failingOnceModel{fail: fail}, Tools: []*service.Tool{{Name: "ask", Interrupt: true}}}); err != nil {
		t.Fatal(err)
	}
	out, err := rt.InvokeOne(context.Background(), testCaller, "asker", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "hi"))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	return rt, fail, out
}

type failingOnceModel struct{ fail *atomic.Bool }

func (m *failingOnceModel) Name() string { return "failing" }

func (m *failingOnceModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if req.Messages[len(req.Messages)-1].Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "ask", Ref: "q"}}}}}, nil
	}
	if m.fail.Load() {
		return nil, service.Errorf(service.CodeUnavailable, "model down")
	}
	return &service.ModelResponse{Message: text(service.RoleModel, "thanks"), FinishReason: "stop"}, nil
}

func ptr[T any](v T) *T { return &v }

// TestRowLevelSecurity checks the second wall: as the application role, a
// query that does not set the tenant sees no rows, and one set to another
// tenant sees none of this tenant's.
func TestRowLevelSecurity(t *testing.T) {
	t.Parallel()
	rt, admin := newRuntime(t)
	ctx := context.Background()
	approvalAgent(t, rt)
	if _, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil); err != nil {
		t.Fatal(err)
	}
	app, err := pgstore.NewAppPool(ctx, admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	tables := []string{"sessions", "snapshots", "messages", "interrupts", "interrupt_events", "tool_calls", "tenant_secrets", "api_keys", "turn_jobs", "turn_steps"}
	count := func(tenant string, table string) int {
		tx, err := app.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// The old system switch is only a setting any role can set: it
		// must open nothing.
		if _, err := tx.Exec(ctx, `SELECT set_config('holdpoint.system', 'on', true)`); err != nil {
			t.Fatal(err)
		}
		if tenant != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('holdpoint.tenant_id', $1, true)`, tenant); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, table := range tables {
		if n := count("", table); n != 0 {
			t.Errorf("%s without a tenant: %d rows visible", table, n)
		}
		if n := count("other", table); n != 0 {
			t.Errorf("%s as another tenant: %d rows visible", table, n)
		}
		if n := count("default", table); n == 0 && table != "api_keys" && table != "turn_jobs" && table != "turn_steps" && table != "tool_calls" {
			t.Errorf("%s as its tenant: no rows visible", table)
		}
	}
	// Cross-tenant work is only what the system functions do: the
	// application role may call them, PUBLIC may not, and the role cannot
	// become the tables' owner they run as.
	var callable, public bool
	if err := app.QueryRow(ctx, `SELECT has_function_privilege('holdpoint_app', 'holdpoint_list_tenants()', 'EXECUTE'),
		has_function_privilege('public', 'holdpoint_list_tenants()', 'EXECUTE')`).Scan(&callable, &public); err != nil {
		t.Fatal(err)
	}
	if !callable || public {
		t.Errorf("holdpoint_list_tenants: executable by the app role %v, by PUBLIC %v", callable, public)
	}
	var tenants int
	if err := app.QueryRow(ctx, `SELECT count(*) FROM holdpoint_list_tenants()`).Scan(&tenants); err != nil || tenants == 0 {
		t.Errorf("the app role lists tenants through the system function: %d (%v)", tenants, err)
	}
	if _, err := app.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('forged', 'x')`); err == nil {
		t.Errorf("the app role inserted a tenant directly")
	}
	var role string
	var bypass bool
	if err := app.QueryRow(ctx, `SELECT current_user, rolbypassrls FROM pg_roles WHERE rolname = current_user`).Scan(&role, &bypass); err != nil {
		t.Fatal(err)
	}
	if role != "holdpoint_app" || bypass {
		t.Fatalf("server role %s bypassrls=%v", role, bypass)
	}
}

// TestEndUsersSeeOnlyTheirSessions checks that a caller acting for one end
// user finds another user's session, snapshots and aborts as missing.
func TestEndUsersSeeOnlyTheirSessions(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	approvalAgent(t, rt)
	alice := service.Caller{TenantID: "default", EndUser: "alice", Actor: "user:alice"}
	bob := service.Caller{TenantID: "default", EndUser: "bob", Actor: "user:bob"}
	out, err := rt.InvokeOne(ctx, alice, "payer", service.AgentInit{SessionID: "alice-1"}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		var e *service.Error
		if !errors.As(err, &e) || e.Status != service.CodeNotFound {
			t.Errorf("%s as another user: %v, want NOT_FOUND", what, err)
		}
	}
	_, err = rt.GetSnapshot(ctx, bob, "payer", service.SnapshotLookup{SnapshotID: out.SnapshotID})
	notFound("getSnapshot by id", err)
	_, err = rt.GetSnapshot(ctx, bob, "payer", service.SnapshotLookup{SessionID: "alice-1"})
	notFound("getSnapshot by session", err)
	_, err = rt.InvokeOne(ctx, bob, "payer", service.AgentInit{SnapshotID: out.SnapshotID}, service.AgentInput{Message: ptr(text(service.RoleUser, "hi"))}, nil)
	notFound("resume by snapshot", err)
	_, err = rt.InvokeOne(ctx, bob, "payer", service.AgentInit{SessionID: "alice-1"}, service.AgentInput{Message: ptr(text(service.RoleUser, "hi"))}, nil)
	notFound("continue by session", err)
	if res, err := rt.Abort(ctx, bob, "payer", out.SnapshotID); err != nil || res.Status != "" {
		t.Errorf("abort as another user: %v %+v, want not found", err, res)
	}
	// The owner sees it; the tenant acting as no user does not (it acts
	// for alice by naming her).
	if _, err := rt.GetSnapshot(ctx, alice, "payer", service.SnapshotLookup{SessionID: "alice-1"}); err != nil {
		t.Errorf("owner: %v", err)
	}
	_, err = rt.GetSnapshot(ctx, testCaller, "payer", service.SnapshotLookup{SessionID: "alice-1"})
	notFound("backend acting as no user", err)
	_, err = rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SessionID: "alice-1"}, service.AgentInput{Message: ptr(text(service.RoleUser, "hi"))}, nil)
	notFound("backend continuing by session", err)
}

// TestPanickingAgentCodeFailsTheTurn checks that a panic in a tool ends the
// turn as failed with a fixed message instead of crashing the process.
func TestPanickingAgentCodeFailsTheTurn(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
		return service.Message{Role: service.RoleModel, Content: []service.Part{{ToolRequest: &service.ToolRequest{Name: "boom", Ref: "b"}}}}
	}}
	if err := rt.Register(&service.Agent{Name: "boomer", Model: model, Tools: []*service.Tool{{Name: "boom", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
		panic("secret detail")
	}}}}); err != nil {
		t.Fatal(err)
	}
	out, err := rt.InvokeOne(context.Background(), testCaller, "boomer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "go"))}, nil)
	if err != nil || out.FinishReason != "failed" || out.Error.Status != service.CodeInternal || out.Error.Message != "internal error" {
		t.Fatalf("got %v %+v", err, out)
	}
}

// TestEmptyResumeOnPausedSessionFails checks that an empty resume, or an
// input with neither message nor resume, on a paused session fails with
// INVALID_ARGUMENT naming the request still to answer, runs no model call,
// and leaves the interrupt open for a real resume.
func TestEmptyResumeOnPausedSessionFails(t *testing.T) {
	t.Parallel()
	rt, fail, out := pausedAsker(t)
	ctx := context.Background()
	// A model call now would fail with UNAVAILABLE: an empty input must not
	// reach the model.
	fail.Store(true)
	for name, in := range map[string]service.AgentInput{
		"resume {}":          {Resume: &service.Resume{}},
		"resume respond: []": {Resume: &service.Resume{Respond: []service.Part{}}},
		"empty input":        {},
	} {
		got, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SnapshotID: out.SnapshotID}, in, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.FinishReason != "failed" || got.Error == nil || got.Error.Status != "INVALID_ARGUMENT" || !strings.Contains(got.Error.Message, "'ask#q'") {
			t.Fatalf("%s: want a failed turn with INVALID_ARGUMENT naming 'ask#q', got %+v (error %+v)", name, got, got.Error)
		}
	}
	// On a new session there is nothing to continue from.
	fresh, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{}, service.AgentInput{}, nil)
	if err != nil || fresh.FinishReason != "failed" || fresh.Error == nil || fresh.Error.Status != "INVALID_ARGUMENT" || fresh.SnapshotID != "" {
		t.Fatalf("empty input on a new session: %v %+v", err, fresh)
	}
	fail.Store(false)
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "ask", Ref: "q", Output: json.RawMessage(`"yes"`)}}}}}
	done, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SnapshotID: out.SnapshotID}, resume, nil)
	if err != nil || done.FinishReason != "stop" {
		t.Fatalf("real resume after the empty ones: %v %+v", err, done)
	}
}

// TestRefusedResumeKeepsFailedSnapshot checks that a resume refused on an
// existing session (a restart with forged input) is kept as a failed
// snapshot after the paused one, with its error, that the stream ends the
// turn with a turnEnd naming it, that no interrupt is consumed, and that a
// sessionId resume walks back over it to the paused snapshot.
func TestRefusedResumeKeepsFailedSnapshot(t *testing.T) {
	t.Parallel()
	rt, _, out := pausedAsker(t)
	ctx := context.Background()
	forged := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: &service.ToolRequest{Name: "ask", Ref: "q", Input: json.RawMessage(`{"amount":1}`)}}}}}
	var ends []service.TurnEnd
	failed, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SnapshotID: out.SnapshotID}, forged, func(c service.StreamChunk) {
		if c.TurnEnd != nil {
			ends = append(ends, *c.TurnEnd)
		}
	})
	if err != nil || failed.FinishReason != "failed" || failed.Error == nil || failed.Error.Status != "INVALID_ARGUMENT" {
		t.Fatalf("forged restart: %v %+v", err, failed)
	}
	if len(ends) != 1 || ends[0].FinishReason != "failed" || ends[0].SnapshotID == "" || ends[0].SnapshotID == out.SnapshotID {
		t.Fatalf("turnEnd chunks %+v, want one failed naming a new snapshot", ends)
	}
	snap, err := rt.GetSnapshot(ctx, testCaller, "asker", service.SnapshotLookup{SnapshotID: ends[0].SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != "failed" || snap.ParentID != out.SnapshotID || snap.Error == nil || !strings.Contains(snap.Error.Message, "modified inputs") {
		t.Fatalf("failed snapshot %+v (error %+v)", snap, snap.Error)
	}
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "ask", Ref: "q", Output: json.RawMessage(`"yes"`)}}}}}
	done, err := rt.InvokeOne(ctx, testCaller, "asker", service.AgentInit{SessionID: out.SessionID}, resume, nil)
	if err != nil || done.FinishReason != "stop" {
		t.Fatalf("sessionId resume after the failed turn: %v %+v", err, done)
	}
}

// TestResumeWritesWhatItChanged checks what a resume's snapshot stores: the
// interrupted request it rewrote (marked resolvedInterrupt) and what it
// added, and not the messages before it, which its parent wrote.
func TestResumeWritesWhatItChanged(t *testing.T) {
	t.Parallel()
	rt, pool := newRuntime(t)
	ctx := context.Background()
	approvalAgent(t, rt)
	out, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{}, service.AgentInput{Message: ptr(text(service.RoleUser, "pay it"))}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("first turn: %v %+v", err, out)
	}
	paused := out.SnapshotID
	done, err := rt.InvokeOne(ctx, testCaller, "payer", service.AgentInit{SnapshotID: paused}, service.AgentInput{Resume: &service.Resume{
		Respond: []service.Part{{ToolResponse: &service.ToolResponse{Name: "approve", Ref: "a1", Output: json.RawMessage(`{"approved":true}`)}}}}}, nil)
	if err != nil || done.FinishReason != "stop" {
		t.Fatalf("resume: %v %+v", err, done)
	}
	written := func(snapshot string) string {
		t.Helper()
		var s string
		err := pool.QueryRow(ctx, `SELECT string_agg(position || ':' || role || ':' ||
				coalesce((SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_array_elements(body -> 'content') c,
				          jsonb_object_keys(coalesce(c -> 'metadata', '{}')) k), ''), ' ' ORDER BY position)
			FROM messages WHERE tenant_id = 'default' AND snapshot_id = $1`, snapshot).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := written(paused), "0:user: 1:model:interrupt"; got != want {
		t.Errorf("the paused snapshot wrote %q, want %q", got, want)
	}
	if got, want := written(done.SnapshotID), "1:model:resolvedInterrupt 2:tool: 3:model: 4:tool: 5:model:"; got != want {
		t.Errorf("the resume's snapshot wrote %q, want %q", got, want)
	}
}
