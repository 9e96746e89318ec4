package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/sqlcapture"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// inboxServer is the API the way `platform serve` runs it: the store on a
// pool of the application role (row-level security on), an eventhub.Hub, and
// optionally the deadline sweeper; plus an owner pool for the test's own
// assertions.
type inboxServer struct {
	srv   *httptest.Server
	url   string // server root
	rt    *service.Runtime
	app   *pgxpool.Pool
	owner *pgxpool.Pool
	logs  *testproc.Output
}

// inboxConfig configures newInboxServer.
type inboxConfig struct {
	// dbURL is the database to serve (default: a fresh one).
	dbURL string
	// tracer traces the store's queries.
	tracer pgx.QueryTracer
	// sweep runs the deadline sweeper at this interval (0: not running).
	sweep time.Duration
	// agents are registered besides the demo bankingAgent.
	agents []*service.Agent
	// horizonGate, when set, holds the hub's first read of the event log's
	// horizon until it is closed (a hub that has not started yet).
	horizonGate chan struct{}
}

// gatedHorizon is an event source whose EventHorizon waits for gate.
type gatedHorizon struct {
	store.EventSource
	gate chan struct{}
}

func (g gatedHorizon) EventHorizon(ctx context.Context) (int64, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.EventSource.EventHorizon(ctx)
}

// tenantHeader selects the tenant a test request acts for (default: the
// development caller's tenant).
const tenantHeader = "X-Test-Tenant"

// newInboxServer starts the API over cfg's database.
func newInboxServer(t *testing.T, cfg inboxConfig) *inboxServer {
	t.Helper()
	logs := new(testproc.Output)
	log := testlog.Tee(t, logs)
	env := servicetest.New(t, servicetest.Options{
		URL: cfg.dbURL,
		Pool: func(c *pgxpool.Config) {
			c.MaxConns = 16
			c.ConnConfig.Tracer = cfg.tracer
		},
		Runtime:  service.Options{Logger: log},
		Register: register(append([]*service.Agent{demo.BankingAgent(demo.NewModel())}, cfg.agents...)...),
	})
	rt := env.Runtime
	owner := testdb.OwnerPool(t, env.URL)

	// The event hub is the test's own: its source may be gated.
	bg, stop := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	var src store.EventSource = env.Store
	if cfg.horizonGate != nil {
		src = gatedHorizon{EventSource: src, gate: cfg.horizonGate}
	}
	hub := eventhub.New(src, log)
	workers.Go(func() { hub.Run(bg) })
	if cfg.sweep > 0 {
		workers.Go(func() { inbox.New(rt).RunDeadlineSweeper(bg, cfg.sweep) })
	}
	opts := httpapi.Options{
		Logger:   log,
		Events:   hub,
		Webhooks: &webhooks.Manager{Store: env.Store, AllowLoopback: true},
		EventIDs: keys.NewEventIDs(env.Store.SigningKeys),
		Caller: func(c echo.Context) (service.Caller, error) {
			if tenant := c.Request().Header.Get(tenantHeader); tenant != "" {
				return service.Caller{TenantID: tenant, Actor: "operator:" + tenant}, nil
			}
			return httpapi.DevCaller, nil
		},
	}
	srv := httptest.NewServer(contractChecked(t, opts, httpapi.New(rt, opts)))
	t.Cleanup(srv.Close)
	// Runs first: stopping the hub ends the event streams, which srv.Close
	// would otherwise wait for.
	t.Cleanup(func() { stop(); workers.Wait() })
	return &inboxServer{srv: srv, url: srv.URL, rt: rt, app: env.Pool, owner: owner, logs: logs}
}

// call sends a request; body is nil, a string sent as is, or a value sent
// as JSON. header is name/value pairs.
func (s *inboxServer) call(t *testing.T, method, path string, body any, header ...string) response {
	t.Helper()
	r, err := s.send(method, path, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is call for goroutines other than the test's, which must not stop
// the test.
func (s *inboxServer) send(method, path string, body any, header ...string) (response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		return response{}, err
	}
	if body != nil || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// okJSON decodes a 200 JSON answer into dst.
func okJSON(t *testing.T, r response, dst any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(r.body, dst); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
}

// inboxPage is the answer of GET /api/v1/interrupts.
type inboxPage struct {
	Items      []service.Interrupt `json:"items"`
	NextCursor string              `json:"nextCursor"`
}

// decisionAnswer is the answer of respond and restart.
type decisionAnswer struct {
	Status     string               `json:"status"`
	Output     *service.AgentOutput `json:"output"`
	WaitingFor []service.Interrupt  `json:"waitingFor"`
}

// newAccount returns a destination account no other test uses, so the
// process-wide demo ledger can be counted per test.
func newAccount() string {
	return fmt.Sprintf("T%d", rand.Uint64()>>1)
}

// transfersTo counts the demo ledger's transfers to account.
func transfersTo(account string) int {
	n := 0
	for _, tr := range demo.Transfers() {
		if tr.ToAccount == account {
			n++
		}
	}
	return n
}

// pausedTransfer asks bankingAgent for a transfer in a new session and
// returns the paused snapshot and its pending approval.
func (s *inboxServer) pausedTransfer(t *testing.T, session, text string, header ...string) (string, service.Interrupt) {
	t.Helper()
	var out service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/bankingAgent", map[string]any{
		"data": userMessage(text), "init": map[string]any{"sessionId": session},
	}, header...), &out)
	if out.FinishReason != service.FinishInterrupted {
		t.Fatalf("transfer turn: finishReason %q, want interrupted", out.FinishReason)
	}
	return out.SnapshotID, s.onlyPending(t, session, header...)
}

// onlyPending returns the one pending interrupt of a session.
func (s *inboxServer) onlyPending(t *testing.T, session string, header ...string) service.Interrupt {
	t.Helper()
	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?sessionId="+url.QueryEscape(session), nil, header...), &page)
	if len(page.Items) != 1 {
		t.Fatalf("session %s: %d pending interrupts, want 1: %+v", session, len(page.Items), page.Items)
	}
	return page.Items[0]
}

// approvalResume is a protocol resume answering a userApproval.
func approvalResume(snapshotID, ref string, approved bool) map[string]any {
	return map[string]any{
		"init": map[string]any{"snapshotId": snapshotID},
		"data": map[string]any{"resume": map[string]any{"respond": []any{map[string]any{
			"toolResponse": map[string]any{"name": demo.ToolUserApproval, "ref": ref, "output": map[string]any{"approved": approved}},
		}}}},
	}
}

// countWhere counts rows with the owner pool (which sees every tenant).
func (s *inboxServer) countWhere(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.owner.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestConcurrentResumesRunOnce resumes one approval 50 times at once, half
// through the protocol route and half through the REST API: exactly one
// resume continues the turn and transfers the money; the others get 409,
// or, being the same operator's same decision, its outcome (the same
// snapshot) or a 503 saying it is recorded and its turn still running.
func TestConcurrentResumesRunOnce(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	account := newAccount()
	paused, it := s.pausedTransfer(t, "race", "Transfer $50 to account "+account)

	const n = 50
	var (
		wg                            sync.WaitGroup
		start                         = make(chan struct{})
		protocolOK, restOK, conflicts atomic.Int32
		mu                            sync.Mutex
		unexpected                    []string
		outcomes                      = map[string]int{} // REST answers by resumed snapshot
	)
	for i := range n {
		wg.Go(func() {
			<-start
			var r response
			var err error
			if i%2 == 0 {
				r, err = s.send(http.MethodPost, "/api/agents/bankingAgent", approvalResume(paused, it.Ref, true))
			} else {
				r, err = s.send(http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}})
			}
			switch {
			case err != nil:
				mu.Lock()
				unexpected = append(unexpected, err.Error())
				mu.Unlock()
			case r.status == http.StatusConflict && bytes.Contains(r.body, []byte(`"status":"ABORTED"`)),
				r.status == http.StatusServiceUnavailable && bytes.Contains(r.body, []byte(`"decisionRecorded":true`)):
				conflicts.Add(1)
			case r.status == http.StatusOK && i%2 == 0:
				var env struct{ Result service.AgentOutput }
				if json.Unmarshal(r.body, &env) == nil && env.Result.FinishReason == service.FinishStop {
					protocolOK.Add(1)
					return
				}
				fallthrough
			case r.status == http.StatusOK:
				var d decisionAnswer
				if json.Unmarshal(r.body, &d) == nil && d.Status == "resumed" && d.Output != nil && d.Output.FinishReason == service.FinishStop {
					mu.Lock()
					outcomes[d.Output.SnapshotID]++
					mu.Unlock()
					return
				}
				fallthrough
			default:
				mu.Lock()
				unexpected = append(unexpected, fmt.Sprintf("%d %s", r.status, r.body))
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	transfers := transfersTo(account)
	turns := s.countWhere(t, "SELECT count(*) FROM snapshots WHERE parent_id = $1", paused)
	t.Logf("%d concurrent resumes: %d continued through the protocol, %d through REST, %d × 409; transferMoney ran %d time(s); %d continued turn(s)",
		n, protocolOK.Load(), restOK.Load(), conflicts.Load(), transfers, turns)
	if len(unexpected) > 0 {
		t.Errorf("unexpected answers: %v", unexpected)
	}
	for _, k := range outcomes {
		restOK.Add(int32(k))
	}
	if protocolOK.Load()+int32(len(outcomes)) != 1 || protocolOK.Load()+restOK.Load()+conflicts.Load() != n {
		t.Errorf("%d protocol successes, %d REST outcomes (%v) and %d conflicts; want one outcome", protocolOK.Load(), len(outcomes), outcomes, conflicts.Load())
	}
	if transfers != 1 {
		t.Errorf("transferMoney ran %d times, want 1", transfers)
	}
	if turns != 1 {
		t.Errorf("%d turns continued the paused snapshot, want 1", turns)
	}
	var got inbox.InterruptDetail
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+it.ID.String(), nil), &got)
	if got.Status != "resolved" || got.ResumedSnapshotID == "" {
		t.Errorf("interrupt after the race: status %q resumedSnapshotId %q", got.Status, got.ResumedSnapshotID)
	}
}

// funcModel answers with whatever fn makes of the request.
type funcModel struct {
	fn func(req *service.ModelRequest) service.Message
}

// Name identifies the model in logs.
func (m funcModel) Name() string { return "func" }

// Generate returns fn's message.
func (m funcModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	return &service.ModelResponse{Message: m.fn(req), FinishReason: service.FinishStop}, nil
}

// approvalOutput is the declared output of the test agents' approvals.
var approvalOutput = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"}},"required":["approved"]}`)

// askingAgent asks for one approval per ref in one model answer; once
// answered it says what each answer was, e.g. "a=true b=false".
func askingAgent(name string, refs []string, expires time.Duration, onExpire *service.ExpireRespond) *service.Agent {
	model := funcModel{fn: func(req *service.ModelRequest) service.Message {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == service.RoleTool {
			var parts []string
			for _, p := range last.Content {
				var out struct {
					Approved bool   `json:"approved"`
					Feedback string `json:"feedback"`
				}
				_ = json.Unmarshal(p.ToolResponse.Output, &out)
				part := fmt.Sprintf("%s=%t", p.ToolResponse.Ref, out.Approved)
				if out.Feedback != "" {
					part += " " + out.Feedback
				}
				parts = append(parts, part)
			}
			return service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart(strings.Join(parts, " "))}}
		}
		msg := service.Message{Role: service.RoleModel}
		for _, ref := range refs {
			msg.Content = append(msg.Content, service.Part{ToolRequest: &service.ToolRequest{
				Name: "approve", Ref: ref, Input: json.RawMessage(`{"what":"` + ref + `"}`)}})
		}
		return msg
	}}
	return &service.Agent{Name: name, ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name: "approve", Interrupt: true, OutputSchema: approvalOutput, ExpiresAfter: expires, OnExpire: onExpire,
	}}}
}

// lastText is the text of the newest message of a session, read through
// the protocol's getSnapshot as a client would.
func (s *inboxServer) lastText(t *testing.T, agent, session string) (string, service.Snapshot) {
	t.Helper()
	var snap service.Snapshot
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+agent+"/getSnapshot", map[string]any{"data": map[string]any{"sessionId": session}}), &snap)
	msgs := snap.State.Messages
	return msgs[len(msgs)-1].Text(), snap
}

// TestDecisionsWaitForTheLastInterrupt decides a snapshot that paused on two
// interrupts: the first decision is only recorded, the second resumes the
// turn with both.
func TestDecisionsWaitForTheLastInterrupt(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{agents: []*service.Agent{askingAgent("twoApprovals", []string{"a", "b"}, 0, nil)}})
	var out service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/twoApprovals", map[string]any{
		"data": userMessage("two please"), "init": map[string]any{"sessionId": "two"},
	}), &out)
	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?sessionId=two&agent=twoApprovals&tool=approve", nil), &page)
	if out.FinishReason != service.FinishInterrupted || len(page.Items) != 2 {
		t.Fatalf("first turn %q with %d pending interrupts, want interrupted with 2", out.FinishReason, len(page.Items))
	}
	byRef := map[string]service.Interrupt{}
	for _, it := range page.Items {
		byRef[it.Ref] = it
	}
	a, b := byRef["a"], byRef["b"]

	var first decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+a.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}, "note": "fine"}), &first)
	if first.Status != "recorded" || first.Output != nil || len(first.WaitingFor) != 1 || first.WaitingFor[0].ID != b.ID {
		t.Fatalf("first decision: %+v, want recorded waiting for %s", first, b.ID)
	}
	if n := s.countWhere(t, "SELECT count(*) FROM snapshots WHERE parent_id = $1", out.SnapshotID); n != 0 {
		t.Fatalf("%d turns ran after the first of two decisions", n)
	}
	// A protocol resume answering both now loses the race for a: 409, and
	// no turn runs and b stays pending.
	before := s.countWhere(t, "SELECT count(*) FROM snapshots")
	r := s.call(t, http.MethodPost, "/api/agents/twoApprovals", map[string]any{
		"init": map[string]any{"snapshotId": out.SnapshotID},
		"data": map[string]any{"resume": map[string]any{"respond": []any{
			map[string]any{"toolResponse": map[string]any{"name": "approve", "ref": "a", "output": map[string]any{"approved": true}}},
			map[string]any{"toolResponse": map[string]any{"name": "approve", "ref": "b", "output": map[string]any{"approved": true}}},
		}}},
	})
	errorOf(t, r, http.StatusConflict, service.CodeAborted)
	if after := s.countWhere(t, "SELECT count(*) FROM snapshots"); after != before {
		t.Fatalf("a rejected resume wrote %d snapshots", after-before)
	}
	if n := s.countWhere(t, "SELECT count(*) FROM interrupts WHERE id = $1 AND status = 'pending' AND resolution IS NULL", b.ID); n != 1 {
		t.Fatalf("a rejected resume changed interrupt b")
	}

	var second decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+b.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": false, "feedback": "no"}}), &second)
	if second.Status != "resumed" || second.Output == nil || second.Output.FinishReason != service.FinishStop {
		t.Fatalf("second decision: %s", mustJSON(second))
	}
	text, snap := s.lastText(t, "twoApprovals", "two")
	if text != "a=true b=false no" || snap.SnapshotID != second.Output.SnapshotID {
		t.Fatalf("session after both decisions: last message %q in %s, want \"a=true b=false no\" in %s", text, snap.SnapshotID, second.Output.SnapshotID)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDeadlinesOverHTTP checks both deadline policies end to end: respond
// resumes the session server-side (the running sweeper), expire makes later
// resumes fail with FAILED_PRECONDITION through both routes.
func TestDeadlinesOverHTTP(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{
		sweep: 50 * time.Millisecond,
		agents: []*service.Agent{
			askingAgent("timesOutToNo", []string{"a"}, 200*time.Millisecond,
				&service.ExpireRespond{Output: json.RawMessage(`{"approved":false,"feedback":"timed out"}`)}),
			askingAgent("expires", []string{"a"}, 200*time.Millisecond, nil),
		},
	})
	start := func(t *testing.T, agent string) (string, service.Interrupt) {
		var out service.AgentOutput
		resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+agent, map[string]any{
			"data": userMessage("approve?"), "init": map[string]any{"sessionId": agent},
		}), &out)
		// Read whatever its state: on a loaded machine the sweeper may
		// have passed its 200 ms deadline already (the pending list was
		// then empty).
		var id uuid.UUID
		if err := s.owner.QueryRow(context.Background(), `SELECT id FROM interrupts WHERE session_id = $1`, agent).Scan(&id); err != nil {
			t.Fatalf("session %s's interrupt: %v", agent, err)
		}
		var got inbox.InterruptDetail
		okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+id.String(), nil), &got)
		it := got.Interrupt
		if it.ExpiresAt == nil {
			t.Fatalf("interrupt %s has no deadline", it.ID)
		}
		return out.SnapshotID, it
	}

	t.Run("respond", func(t *testing.T) {
		t.Parallel()
		_, it := start(t, "timesOutToNo")
		// The sweeper runs every 50ms, so this takes well under a second
		// on a quiet machine; the bound is generous so that a loaded one
		// does not fail it (latency is measured by platform bench, not
		// asserted here).
		deadline := time.Now().Add(time.Minute)
		for {
			text, _ := s.lastText(t, "timesOutToNo", "timesOutToNo")
			if text == "a=false timed out" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session not resumed by the deadline: last message %q", text)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var got inbox.InterruptDetail
		okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+it.ID.String(), nil), &got)
		if got.Status != "resolved" || got.ResolvedBy != "system" || got.ResumedSnapshotID == "" {
			t.Fatalf("interrupt after its deadline: %s", mustJSON(got))
		}
		r := s.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}})
		errorOf(t, r, http.StatusConflict, service.CodeAborted)
	})

	t.Run("expire", func(t *testing.T) {
		t.Parallel()
		paused, it := start(t, "expires")
		for {
			var got inbox.InterruptDetail
			okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+it.ID.String(), nil), &got)
			if got.Status == "expired" {
				break
			}
			if time.Since(*it.ExpiresAt) > time.Minute { // generous: a loaded machine
				t.Fatalf("interrupt still %s a minute after its deadline", got.Status)
			}
			// The running sweeper applies it; a direct sweep must not apply
			// it a second time.
			if _, err := inbox.New(s.rt).SweepDeadlines(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The respond subtest writes to the same database meanwhile: count
		// this session's rows only.
		written := func() int {
			return s.countWhere(t, "SELECT count(*) FROM snapshots WHERE session_id = 'expires'") +
				s.countWhere(t, "SELECT count(*) FROM interrupt_events WHERE interrupt_id = $1", it.ID)
		}
		before := written()
		e := errorOf(t, s.call(t, http.MethodPost, "/api/agents/expires", map[string]any{
			"init": map[string]any{"snapshotId": paused},
			"data": map[string]any{"resume": map[string]any{"respond": []any{map[string]any{
				"toolResponse": map[string]any{"name": "approve", "ref": "a", "output": map[string]any{"approved": true}},
			}}}},
		}), http.StatusBadRequest, service.CodeFailedPrecondition)
		t.Logf("protocol resume of an expired interrupt: %s", e.Message)
		e = errorOf(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}}),
			http.StatusBadRequest, service.CodeFailedPrecondition)
		t.Logf("REST decision on an expired interrupt: %s", e.Message)
		if after := written(); after != before {
			t.Fatalf("rejected resumes wrote %d rows", after-before)
		}
		if n := s.countWhere(t, "SELECT count(*) FROM interrupt_events WHERE interrupt_id = $1 AND type = 'expired'", it.ID); n != 1 {
			t.Fatalf("%d expired events, want 1", n)
		}
	})
}

// eventTypes lists the types and actors of an interrupt's audit trail, as
// GET /api/v1/interrupts/{id}/events shows them.
func (s *inboxServer) eventTypes(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var body struct{ Items []protocol.AuditEvent }
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+id.String()+"/events", nil), &body)
	var out []string
	for _, ev := range body.Items {
		if ev.InterruptID != id.String() {
			t.Fatalf("event %s of interrupt %s listed for %s", ev.ID, ev.InterruptID, id)
		}
		out = append(out, ev.Type+":"+ev.Actor)
	}
	return strings.Join(out, " ")
}

// TestEventsAndReportsMatchRows makes decisions of every kind and checks
// the audit trail of each interrupt and that the report's figures equal
// counts over the interrupts table.
func TestEventsAndReportsMatchRows(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	account := newAccount()

	// Approved by an operator through REST.
	_, approved := s.pausedTransfer(t, "approved", "Transfer $10 to account "+account)
	var d decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+approved.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}}), &d)
	if d.Status != "resumed" || d.Output.FinishReason != service.FinishStop {
		t.Fatalf("approve: %s", mustJSON(d))
	}
	// Denied by the user through the protocol.
	paused, denied := s.pausedTransfer(t, "denied", "Transfer $20 to account "+account)
	var out service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/bankingAgent", approvalResume(paused, denied.Ref, false)), &out)
	// Left pending.
	_, pending := s.pausedTransfer(t, "pending", "Transfer $30 to account "+account)
	// Over the daily limit: approved, then transferMoney itself interrupts
	// and an operator restarts it.
	_, big := s.pausedTransfer(t, "big", "Transfer $20000 to account "+account)
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+big.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}}), &d)
	if d.Status != "resumed" || d.Output.FinishReason != service.FinishInterrupted {
		t.Fatalf("approve over the limit: %s", mustJSON(d))
	}
	limit := s.onlyPending(t, "big")
	if limit.Tool != demo.ToolTransferMoney {
		t.Fatalf("over-limit interrupt on %s, want %s", limit.Tool, demo.ToolTransferMoney)
	}
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+limit.ID.String()+"/restart", map[string]any{"note": "confirmed by phone"}), &d)
	if d.Status != "resumed" || d.Output.FinishReason != service.FinishStop {
		t.Fatalf("restart: %s", mustJSON(d))
	}
	if n := transfersTo(account); n != 2 {
		t.Fatalf("%d transfers, want 2 ($10 and $20000)", n)
	}

	for _, tc := range []struct {
		name string
		id   uuid.UUID
		want string
	}{
		{"REST approval", approved.ID, "created:dev resolved:dev"},
		// Claimed and resolved by the continuing turn's write (no tool
		// ran): one event.
		{"protocol denial", denied.ID, "created:dev resolved:dev"},
		{"pending", pending.ID, "created:dev"},
		{"approval over the limit", big.ID, "created:dev resolved:dev"},
		{"REST restart", limit.ID, "created:dev resolved:dev"},
	} {
		if got := s.eventTypes(t, tc.id); got != tc.want {
			t.Errorf("%s: events %q, want %q", tc.name, got, tc.want)
		}
	}

	// The report against the rows, per grouping, over the default window
	// and over an explicit one given as dates.
	today := time.Now().UTC().Format(time.DateOnly)
	for _, query := range []string{"groupBy=agent", "groupBy=tool", "groupBy=day", "", "from=" + today + "&to=" + today + "&groupBy=tool"} {
		var rep struct {
			GroupBy string              `json:"groupBy"`
			Rows    []service.ReportRow `json:"rows"`
		}
		okJSON(t, s.call(t, http.MethodGet, "/api/v1/reports/interrupts?"+query, nil), &rep)
		key := map[string]string{"agent": "agent", "tool": "tool", "day": "to_char(date_trunc('day', created_at), 'YYYY-MM-DD')"}[rep.GroupBy]
		if key == "" {
			t.Fatalf("%s: groupBy %q", query, rep.GroupBy)
		}
		rows, err := s.owner.Query(context.Background(), `
			SELECT `+key+`, count(*),
			       count(*) FILTER (WHERE status = 'pending'),
			       count(*) FILTER (WHERE status = 'resolved'),
			       count(*) FILTER (WHERE status = 'expired'),
			       count(*) FILTER (WHERE (resolution -> 'respond' ->> 'approved')::boolean),
			       count(*) FILTER (WHERE NOT (resolution -> 'respond' ->> 'approved')::boolean)
			FROM interrupts WHERE tenant_id = 'default' GROUP BY 1 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		var want []service.ReportRow
		for rows.Next() {
			var r service.ReportRow
			if err := rows.Scan(&r.Key, &r.Total, &r.Pending, &r.Resolved, &r.Expired, &r.Approved, &r.Denied); err != nil {
				t.Fatal(err)
			}
			want = append(want, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != len(want) {
			t.Fatalf("%s: %d rows, want %d: %s", query, len(rep.Rows), len(want), mustJSON(rep.Rows))
		}
		for i, got := range rep.Rows {
			w := want[i]
			if got.Key != w.Key || got.Total != w.Total || got.Pending != w.Pending || got.Resolved != w.Resolved ||
				got.Expired != w.Expired || got.Approved != w.Approved || got.Denied != w.Denied {
				t.Errorf("%s: row %s, want %s", query, mustJSON(got), mustJSON(w))
			}
			if (got.Resolved > 0) != (got.DecisionP50 != nil) || (got.Pending > 0) != (got.PendingAgeP50 != nil) {
				t.Errorf("%s: percentiles of row %s do not match its counts", query, mustJSON(got))
			}
		}
		if total := s.countWhere(t, "SELECT count(*) FROM interrupts"); sumTotals(rep.Rows) != total {
			t.Errorf("%s: report totals %d, table has %d rows", query, sumTotals(rep.Rows), total)
		}
	}
}

func sumTotals(rows []service.ReportRow) int {
	n := 0
	for _, r := range rows {
		n += int(r.Total)
	}
	return n
}

// liveEvent is one event of GET /api/v1/events.
type liveEvent struct {
	name string
	note protocol.Event
	err  error // the frame's data did not decode
}

// subscribe opens the event stream as the given tenant ("" for the default)
// and returns its events; the stream closes when the test ends.
func (s *inboxServer) subscribe(t *testing.T, tenant string) <-chan liveEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set(tenantHeader, tenant)
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(res.Body)
	// The first frame says the subscription is in place.
	if line, err := r.ReadString('\n'); err != nil || line != ": subscribed\n" {
		t.Fatalf("first line of the stream %q (%v)", line, err)
	}
	events := make(chan liveEvent, 64)
	go readEvents(r, events)
	return events
}

// readEvents sends a stream's events to events until the stream ends, then
// closes it.
func readEvents(r *bufio.Reader, events chan<- liveEvent) {
	defer close(events)
	var ev liveEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.note); err != nil {
				ev.err = fmt.Errorf("event data %q: %w", line, err)
			}
		case line == "" && ev.name != "":
			events <- ev
			ev = liveEvent{}
		}
	}
}

// waitListening waits until n event hubs of the database are listening,
// since an event committed before that is not delivered to anyone.
func (s *inboxServer) waitListening(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if s.countWhere(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%LISTEN holdpoint_events%'`) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d event hubs listening", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventBound bounds a wait for a live event. Delivery takes well under a
// second (awaitEvent logs when it does not), but events are read once every
// older transaction on the PostgreSQL server has ended (the log's horizon),
// and the parallel tests of other packages hold some for many seconds on a
// loaded machine (TestLiveEvents failed at 10 s so).
const eventBound = time.Minute

// awaitEvent waits for the stream's event name about the interrupt id,
// skipping others, for at most eventBound.
func awaitEvent(t *testing.T, events <-chan liveEvent, name string, id uuid.UUID) protocol.Event {
	t.Helper()
	start := time.Now()
	timeout := time.After(eventBound)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream ended while waiting for %s of %s", name, id)
			}
			if ev.err != nil {
				t.Fatal(ev.err)
			}
			if ev.name == name && ev.note.InterruptID == id.String() {
				if d := time.Since(start); d > time.Second {
					t.Logf("%s event of %s took %s", name, id, d)
				}
				return ev.note
			}
		case <-timeout:
			t.Fatalf("no %s event of %s within %s", name, id, eventBound)
		}
	}
}

// TestLiveEvents subscribes to the event stream and sees an interrupt
// created and resolved; another tenant's stream does not see them.
func TestLiveEvents(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	if _, err := s.owner.Exec(context.Background(), "INSERT INTO tenants (id, name) VALUES ('other', 'Other')"); err != nil {
		t.Fatal(err)
	}
	s.waitListening(t, 1)
	events := s.subscribe(t, "")
	others := s.subscribe(t, "other")

	_, it := s.pausedTransfer(t, "live", "Transfer $5 to account "+newAccount())
	note := awaitEvent(t, events, "interrupt.created", it.ID)
	if note.TenantID != "default" || !strings.HasPrefix(note.ID, "ev_") || len(note.ID) != 25 {
		t.Fatalf("notification %+v", note)
	}
	var d decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": false}}), &d)
	awaitEvent(t, events, "interrupt.resolved", it.ID)

	// The other tenant's first event is its own interrupt, not ours.
	_, own := s.pausedTransfer(t, "live", "Transfer $5 to account "+newAccount(), tenantHeader, "other")
	select {
	case ev := <-others:
		if ev.note.InterruptID != own.ID.String() || ev.note.TenantID != "other" || ev.name != "interrupt.created" {
			t.Fatalf("other tenant's first event %+v, want interrupt.created of %s", ev, own.ID)
		}
	case <-time.After(eventBound):
		t.Fatalf("other tenant saw no event of its own interrupt within %s", eventBound)
	}
}

// TestEventStreamWaitsForTheHubsStart: a stream says ": subscribed" only
// once the hub knows where the event log stands. Before, a stream opened in
// a server's first moments was subscribed at once while the hub read its
// starting position afterwards, and an event written in between was never
// delivered, though the client had been told it would be.
func TestEventStreamWaitsForTheHubsStart(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	s := newInboxServer(t, inboxConfig{horizonGate: gate})
	var early atomic.Bool // ": subscribed" came while the hub was held
	opened := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body *bufio.Reader
	go func() {
		res, err := s.srv.Client().Do(req)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		if err == nil {
			body = bufio.NewReader(res.Body)
			var line string
			if line, err = body.ReadString('\n'); err == nil && line != ": subscribed\n" {
				err = fmt.Errorf("first line %q", line)
			}
			early.Store(true)
		}
		opened <- err
	}()
	// An event written while the hub has not started: the stream has not
	// promised it, and must not have said it was subscribed.
	_, first := s.pausedTransfer(t, "early", "Transfer $5 to account "+newAccount())
	if early.Load() {
		t.Fatalf("the stream said it was subscribed before the hub knew the log; interrupt %s's event is then lost", first.ID)
	}
	close(gate)
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(eventBound):
		t.Fatalf("the stream did not subscribe within %s of the hub's start", eventBound)
	}
	events := make(chan liveEvent, 64)
	go readEvents(body, events)
	_, second := s.pausedTransfer(t, "later", "Transfer $6 to account "+newAccount())
	awaitEvent(t, events, "interrupt.created", second.ID)
}

// TestLiveEventsAcrossInstances runs two servers (runtimes, hubs, pools) on
// one database: an interrupt created through A is on B's stream.
func TestLiveEventsAcrossInstances(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	a := newInboxServer(t, inboxConfig{dbURL: dbURL})
	b := newInboxServer(t, inboxConfig{dbURL: dbURL})
	a.waitListening(t, 2)
	events := b.subscribe(t, "")
	_, it := a.pausedTransfer(t, "across", "Transfer $7 to account "+newAccount())
	awaitEvent(t, events, "interrupt.created", it.ID)
	// And B decides what A created.
	var d decisionAnswer
	okJSON(t, b.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": false}}), &d)
	if d.Status != "resumed" {
		t.Fatalf("decision through B: %s", mustJSON(d))
	}
	awaitEvent(t, events, "interrupt.resolved", it.ID)
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType  string     `json:"Node Type"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// nodes lists a plan's nodes, depth first.
func (n planNode) nodes() []planNode {
	out := []planNode{n}
	for _, c := range n.Plans {
		out = append(out, c.nodes()...)
	}
	return out
}

// explainInbox explains the store's inbox query exactly as it ran: its SQL
// and arguments, as the application role under the tenant setting.
func (s *inboxServer) explainInbox(t *testing.T, rec *sqlcapture.Tracer) (planNode, string) {
	t.Helper()
	st, _ := rec.Last("ListInterrupts")
	sql, args := st.SQL, st.Args
	if sql == "" {
		t.Fatal("the inbox query was not recorded")
	}
	ctx := context.Background()
	tx, err := s.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	if _, err := tx.Exec(ctx, "SELECT set_config('holdpoint.tenant_id', 'default', true)"); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("plan %s: %v", raw, err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return plans[0].Plan, strings.Join(lines, "\n")
}

// TestInboxFirstPageIsAnIndexScan seeds 100,000 pending interrupts (and
// resolved ones, and another tenant's) and checks that the query the store
// runs for the inbox's first page reads interrupts_inbox_idx in order:
// no sequential scan, no sort.
func TestInboxFirstPageIsAnIndexScan(t *testing.T) {
	t.Parallel()
	rec := sqlcapture.New("ListInterrupts")
	s := newInboxServer(t, inboxConfig{tracer: rec})
	ctx := context.Background()
	_, err := s.owner.Exec(ctx, `
		INSERT INTO tenants (id, name) VALUES ('other', 'Other');
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 'seed', 'bankingAgent'), ('other', 'seed', 'bankingAgent');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status)
		VALUES ('default', 'seed-snap', 'seed', 'bankingAgent', 'completed'), ('other', 'seed-snap', 'seed', 'bankingAgent', 'completed');
		INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, input, status, created_at, resolved_at, resolved_by, resolution)
		SELECT t.tenant, gen_random_uuid(), 'seed', 'seed-snap', 'bankingAgent', 'userApproval', 'r' || g,
		       '{"action":"transferMoney","details":"Transfer $1 to account 1"}',
		       CASE WHEN g <= t.pending THEN 'pending' ELSE 'resolved' END,
		       now() - g * interval '1 second',
		       CASE WHEN g > t.pending THEN now() - g * interval '1 second' + interval '30 seconds' END,
		       CASE WHEN g > t.pending THEN 'seed' END,
		       CASE WHEN g > t.pending THEN '{"respond":{"approved":true}}'::jsonb END
		FROM (VALUES ('default', 100000, 120000), ('other', 20000, 25000)) AS t (tenant, pending, total),
		     generate_series(1, t.total) AS g;
		ANALYZE interrupts;`)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	// One real interrupt on top, which must be the newest item.
	_, it := s.pausedTransfer(t, "fresh", "Transfer $1 to account "+newAccount())
	if n := s.countWhere(t, "SELECT count(*) FROM interrupts WHERE tenant_id = 'default' AND status = 'pending'"); n != 100001 {
		t.Fatalf("%d pending rows, want 100001", n)
	}

	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts", nil), &page)
	if len(page.Items) != 50 || page.Items[0].ID != it.ID || page.NextCursor == "" {
		t.Fatalf("first page: %d items, first %s, cursor %q; want 50 starting with %s and a cursor", len(page.Items), page.Items[0].ID, page.NextCursor, it.ID)
	}
	plan, text := s.explainInbox(t, rec)
	t.Logf("plan of the inbox's first page (100,001 pending rows):\n%s", text)
	var usesIndex bool
	for _, n := range plan.nodes() {
		switch n.NodeType {
		case "Index Scan", "Index Only Scan":
			usesIndex = usesIndex || n.IndexName == "interrupts_inbox_idx"
		case "Seq Scan", "Sort", "Incremental Sort", "Bitmap Heap Scan":
			t.Errorf("the first page's plan has a %s node", n.NodeType)
		}
	}
	if !usesIndex {
		t.Errorf("the first page's plan does not scan interrupts_inbox_idx")
	}

	// The next page continues from the cursor with no overlap.
	var next inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?limit=200&cursor="+page.NextCursor, nil), &next)
	if len(next.Items) != 200 || !next.Items[0].CreatedAt.Before(page.Items[49].CreatedAt) {
		t.Fatalf("second page: %d items", len(next.Items))
	}
	plan, text = s.explainInbox(t, rec)
	t.Logf("plan of a later page:\n%s", text)
	for _, n := range plan.nodes() {
		if n.NodeType == "Seq Scan" || n.NodeType == "Sort" {
			t.Errorf("a later page's plan has a %s node", n.NodeType)
		}
	}
}

// TestInboxPagesAndDetail walks the inbox page by page and reads an
// interrupt's detail.
func TestInboxPagesAndDetail(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	var want []uuid.UUID
	for i := range 5 {
		_, it := s.pausedTransfer(t, fmt.Sprintf("page-%d", i), fmt.Sprintf("Transfer $%d to account %s", i+1, newAccount()))
		want = append([]uuid.UUID{it.ID}, want...) // newest first
	}
	var got []uuid.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		var page inboxPage
		okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?status=pending&agent=bankingAgent&limit=2&cursor="+cursor, nil), &page)
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if page.NextCursor == "" {
			if len(page.Items) == 2 {
				t.Fatalf("full page without a cursor")
			}
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = page.NextCursor
	}
	if mustJSON(got) != mustJSON(want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
	// Time filters, as dates and RFC 3339.
	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?createdAfter=2000-01-01&createdBefore="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), nil), &page)
	if len(page.Items) != 5 {
		t.Fatalf("time filter kept %d of 5", len(page.Items))
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?createdAfter="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), nil), &page)
	if len(page.Items) != 0 || page.Items == nil {
		t.Fatalf("future createdAfter: %s", mustJSON(page))
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?status=resolved", nil), &page)
	if len(page.Items) != 0 {
		t.Fatalf("%d resolved interrupts, want 0", len(page.Items))
	}

	var detail inbox.InterruptDetail
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+want[0].String(), nil), &detail)
	if detail.ID != want[0] || detail.Agent != demo.BankingAgentName || detail.SessionID != "page-4" ||
		detail.Tool != demo.ToolUserApproval || detail.Status != "pending" || len(detail.Input) == 0 || len(detail.Messages) != 2 {
		t.Fatalf("detail: %s", mustJSON(detail))
	}
	if last := detail.Messages[1]; last.Role != service.RoleModel || last.Content[len(last.Content)-1].ToolRequest == nil {
		t.Fatalf("the detail's last message is not the interrupted request: %s", mustJSON(last))
	}
}

// TestInboxBadInput sends bad queries, ids and bodies to the new routes:
// each is a 4xx with a clear message and writes nothing.
func TestInboxBadInput(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	if _, err := s.owner.Exec(context.Background(), "INSERT INTO tenants (id, name) VALUES ('other', 'Other')"); err != nil {
		t.Fatal(err)
	}
	_, it := s.pausedTransfer(t, "mine", "Transfer $3 to account "+newAccount())
	_, foreign := s.pausedTransfer(t, "theirs", "Transfer $3 to account "+newAccount(), tenantHeader, "other")
	mine := "/api/v1/interrupts/" + it.ID.String()
	theirs := "/api/v1/interrupts/" + foreign.ID.String()
	unknown := "/api/v1/interrupts/" + uuid.NewString()
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	approve := map[string]any{"output": map[string]any{"approved": true}}

	fingerprint := func() string {
		var f string
		err := s.owner.QueryRow(context.Background(), `SELECT concat_ws('/',
			(SELECT md5(coalesce(string_agg(i::text, ',' ORDER BY tenant_id, id), '')) FROM interrupts i),
			(SELECT md5(coalesce(string_agg(s::text, ',' ORDER BY tenant_id, id), '')) FROM sessions s),
			(SELECT count(*) FROM interrupt_events), (SELECT count(*) FROM snapshots), (SELECT count(*) FROM messages))`).Scan(&f)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := fingerprint()

	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
		message            string // a piece of the expected message
	}{
		{"limit not a number", "GET", "/api/v1/interrupts?limit=ten", nil, 400, service.CodeInvalidArgument, "limit"},
		{"limit zero", "GET", "/api/v1/interrupts?limit=0", nil, 400, service.CodeInvalidArgument, "limit"},
		{"limit negative", "GET", "/api/v1/interrupts?limit=-5", nil, 400, service.CodeInvalidArgument, "limit"},
		{"limit over 200", "GET", "/api/v1/interrupts?limit=201", nil, 400, service.CodeInvalidArgument, "200"},
		{"cursor not base64", "GET", "/api/v1/interrupts?cursor=%21%21%21", nil, 400, service.CodeInvalidArgument, "cursor"},
		{"cursor without id", "GET", "/api/v1/interrupts?cursor=" + b64("2026-01-01T00:00:00Z"), nil, 400, service.CodeInvalidArgument, "cursor"},
		{"cursor bad time", "GET", "/api/v1/interrupts?cursor=" + b64("yesterday|"+uuid.NewString()), nil, 400, service.CodeInvalidArgument, "cursor"},
		{"cursor bad id", "GET", "/api/v1/interrupts?cursor=" + b64("2026-01-01T00:00:00Z|42"), nil, 400, service.CodeInvalidArgument, "cursor"},
		{"cursor too long", "GET", "/api/v1/interrupts?cursor=" + strings.Repeat("A", 300), nil, 400, service.CodeInvalidArgument, "cursor"},
		{"unknown status", "GET", "/api/v1/interrupts?status=done", nil, 400, service.CodeInvalidArgument, "status"},
		{"bad createdBefore", "GET", "/api/v1/interrupts?createdBefore=yesterday", nil, 400, service.CodeInvalidArgument, "createdBefore"},
		{"bad createdAfter date", "GET", "/api/v1/interrupts?createdAfter=2026-13-01", nil, 400, service.CodeInvalidArgument, "createdAfter"},
		{"agent filter too long", "GET", "/api/v1/interrupts?agent=" + strings.Repeat("a", 300), nil, 400, service.CodeInvalidArgument, "agent"},
		{"bad groupBy", "GET", "/api/v1/reports/interrupts?groupBy=week", nil, 400, service.CodeInvalidArgument, "groupBy"},
		{"bad from", "GET", "/api/v1/reports/interrupts?from=last-week", nil, 400, service.CodeInvalidArgument, "from"},
		{"bad to", "GET", "/api/v1/reports/interrupts?to=2026-02-30", nil, 400, service.CodeInvalidArgument, "to"},
		{"to before from", "GET", "/api/v1/reports/interrupts?from=2026-02-01&to=2026-01-01", nil, 400, service.CodeInvalidArgument, "after"},
		{"window too long", "GET", "/api/v1/reports/interrupts?from=2020-01-01&to=2026-01-01", nil, 400, service.CodeInvalidArgument, "366"},
		{"unknown id", "GET", unknown, nil, 404, service.CodeNotFound, "not found"},
		{"id not a uuid", "GET", "/api/v1/interrupts/not-a-uuid", nil, 404, service.CodeNotFound, "not found"},
		{"id in braces", "GET", "/api/v1/interrupts/{" + it.ID.String() + "}", nil, 404, service.CodeNotFound, "not found"},
		{"foreign id", "GET", theirs, nil, 404, service.CodeNotFound, "not found"},
		{"foreign id events", "GET", theirs + "/events", nil, 404, service.CodeNotFound, "not found"},
		{"unknown id events", "GET", unknown + "/events", nil, 404, service.CodeNotFound, "not found"},
		{"respond to a foreign id", "POST", theirs + "/respond", approve, 404, service.CodeNotFound, "not found"},
		{"respond to an unknown id", "POST", unknown + "/respond", approve, 404, service.CodeNotFound, "not found"},
		{"restart a foreign id", "POST", theirs + "/restart", map[string]any{}, 404, service.CodeNotFound, "not found"},
		{"malformed JSON", "POST", mine + "/respond", `{"output": {"approved": true}`, 400, service.CodeInvalidArgument, "JSON"},
		{"body not an object", "POST", mine + "/respond", `[{"approved": true}]`, 400, service.CodeInvalidArgument, "object"},
		{"empty body", "POST", mine + "/respond", "", 400, service.CodeInvalidArgument, "empty"},
		{"output missing", "POST", mine + "/respond", map[string]any{"note": "ok"}, 400, service.CodeInvalidArgument, "output is required"},
		{"output null", "POST", mine + "/respond", `{"output": null}`, 400, service.CodeInvalidArgument, "output is required"},
		{"output off schema", "POST", mine + "/respond", map[string]any{"output": map[string]any{"approved": "yes"}}, 400, service.CodeInvalidArgument, "schema"},
		{"misspelt member", "POST", mine + "/respond", map[string]any{"output": map[string]any{"approved": true}, "notes": "x"}, 400, service.CodeInvalidArgument, "notes"},
		{"note not a string", "POST", mine + "/respond", map[string]any{"output": map[string]any{"approved": true}, "note": 5}, 400, service.CodeInvalidArgument, "note"},
		{"note too long", "POST", mine + "/respond", map[string]any{"output": map[string]any{"approved": true}, "note": strings.Repeat("n", 2001)}, 400, service.CodeInvalidArgument, "note"},
		{"restart with an output", "POST", mine + "/restart", approve, 400, service.CodeInvalidArgument, "output"},
		{"restart an interrupt that asks a human", "POST", mine + "/restart", nil, 400, service.CodeFailedPrecondition, "respond instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call(t, tc.method, tc.path, tc.body)
			if r.status == http.StatusOK {
				t.Fatalf("accepted: %s", r.body)
			}
			e := errorOf(t, r, tc.status, tc.code)
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not mention %q", e.Message, tc.message)
			}
			if tc.name == "output off schema" {
				var details struct{ Violations []string }
				if err := json.Unmarshal(e.Details, &details); err != nil || len(details.Violations) == 0 {
					t.Errorf("details %s: want violations", e.Details)
				}
			}
		})
	}
	if after := fingerprint(); after != before {
		t.Fatalf("bad requests changed the database:\n before %s\n after  %s", before, after)
	}
	// The interrupt they aimed at is still pending and decidable.
	var d decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, mine+"/respond", map[string]any{"output": map[string]any{"approved": false}, "note": "fine"}), &d)
	if d.Status != "resumed" {
		t.Fatalf("decision after the bad requests: %s", mustJSON(d))
	}
	errorOf(t, s.call(t, http.MethodPost, mine+"/respond", approve), http.StatusConflict, service.CodeAborted)
}

// readmeQueries returns the SQL examples of docs/approvals.md's section on
// the inbox and reporting, without the one that shows how to set the tenant.
func readmeQueries(t *testing.T) []string {
	t.Helper()
	page, err := os.ReadFile("../docs/approvals.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Approvals inbox and reporting\n")
	if !ok {
		t.Fatal("docs/approvals.md has no section \"Approvals inbox and reporting\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, block := range strings.Split(section, "```sql\n")[1:] {
		query, _, _ := strings.Cut(block, "```")
		if !strings.HasPrefix(query, "BEGIN;") {
			out = append(out, query)
		}
	}
	if len(out) < 5 {
		t.Fatalf("docs/approvals.md shows %d example queries, want 5", len(out))
	}
	return out
}

// TestReadmeQueries runs the example queries of docs/approvals.md over
// data that gives each of them rows: as a superuser, and as the application
// role with the tenant set, as the page says.
func TestReadmeQueries(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{agents: []*service.Agent{askingAgent("expires", []string{"a"}, time.Millisecond, nil)}})
	ctx := context.Background()
	_, decided := s.pausedTransfer(t, "decided", "Transfer $1 to account "+newAccount())
	var d decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+decided.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}, "note": "ok"}), &d)
	_, old := s.pausedTransfer(t, "old", "Transfer $2 to account "+newAccount())
	if _, err := s.owner.Exec(ctx, "UPDATE interrupts SET created_at = now() - interval '2 hours' WHERE id = $1", old.ID); err != nil {
		t.Fatal(err)
	}
	var out service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/expires", map[string]any{"data": userMessage("approve?")}), &out)
	swept := 0 // the deadline (1 ms) falls due
	waitfor.Until(t, "the deadline to fall due", 30*time.Second, func() bool {
		n, err := inbox.New(s.rt).SweepDeadlines(ctx)
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		swept += n
		return swept > 0
	})
	if swept != 1 {
		t.Fatalf("swept %d deadlines, want 1", swept)
	}

	count := func(pool *pgxpool.Pool, tenant, query string) int {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // read-only
		if tenant != "" {
			if _, err := tx.Exec(ctx, "SET LOCAL holdpoint.tenant_id = '"+tenant+"'"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.Query(ctx, query)
		if err != nil {
			t.Fatalf("%v\n%s", err, query)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%v\n%s", err, query)
		}
		return n
	}
	for _, query := range readmeQueries(t) {
		asSuperuser := count(s.owner, "", query)
		asApp := count(s.app, "default", query)
		asAppWithoutTenant := count(s.app, "", query)
		if asSuperuser == 0 || asApp != asSuperuser || asAppWithoutTenant != 0 {
			t.Errorf("rows as superuser %d, as holdpoint_app %d (without a tenant %d); want some, the same, none:\n%s",
				asSuperuser, asApp, asAppWithoutTenant, query)
		}
	}
}

// TestInboxDecisionIdempotencyKey: a decision sent again with the same
// Idempotency-Key and body answers the first outcome and transfers once;
// the key with another decision, and a malformed key, are 400 and change
// nothing.
func TestInboxDecisionIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	account := newAccount()
	_, it := s.pausedTransfer(t, "idem", "Transfer $50 to account "+account)
	path := "/api/v1/interrupts/" + it.ID.String() + "/respond"
	approve := map[string]any{"output": map[string]any{"approved": true}}
	if r := s.call(t, http.MethodPost, path, approve, "Idempotency-Key", "has space"); r.status != http.StatusBadRequest {
		t.Fatalf("a malformed key: %d %s", r.status, r.body)
	}
	if n := s.countWhere(t, "SELECT count(*) FROM interrupts WHERE id = $1 AND status = 'pending'", it.ID); n != 1 {
		t.Fatal("a refused decision changed the interrupt")
	}
	var first, again decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, path, approve, "Idempotency-Key", "k-1"), &first)
	okJSON(t, s.call(t, http.MethodPost, path, approve, "Idempotency-Key", "k-1"), &again)
	if first.Status != "resumed" || first.Output == nil || again.Output == nil || again.Output.SnapshotID != first.Output.SnapshotID {
		t.Fatalf("the same keyed decision twice: %+v then %+v", first, again)
	}
	deny := map[string]any{"output": map[string]any{"approved": false}}
	if r := s.call(t, http.MethodPost, path, deny, "Idempotency-Key", "k-1"); r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte("Idempotency-Key")) {
		t.Fatalf("the key with another decision: %d %s", r.status, r.body)
	}
	if n := transfersTo(account); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
}
