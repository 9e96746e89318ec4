package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// policyEnv is a server with authentication whose agent payAgent has a
// gated payOut tool: two approvals from holders of approve:payments,
// escalated to approve:treasury, run at most three times; the tool fails
// its first run. Carol holds both scopes, dave approve:payments, eve
// neither.
type policyEnv struct {
	srv              *httptest.Server
	rt               *service.Runtime
	owner            *pgxpool.Pool
	runs             *atomic.Int32
	carol, dave, eve string
}

func newPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	ctx := context.Background()
	st := newStack(t)
	rt := st.rt
	e := &policyEnv{rt: rt, owner: testdb.OwnerPool(t, st.url), runs: &atomic.Int32{}}
	if err := rt.Register(payAgent(e.runs)); err != nil {
		t.Fatal(err)
	}
	acc := tenants.New(st.store)
	e.srv = httptest.NewServer(httpapi.New(rt, httpapi.Options{Logger: st.log, Auth: acc, Events: st.hub}))
	t.Cleanup(func() {
		e.srv.CloseClientConnections()
		e.srv.Close()
	})
	if _, err := acc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		dst    *string
		name   string
		scopes []string
	}{{&e.carol, "carol", []string{"approve:payments", "approve:treasury"}}, {&e.dave, "dave", []string{"approve:payments"}}, {&e.eve, "eve", nil}} {
		plain, _, err := acc.CreateKey(ctx, "acme", tenants.RoleAdmin, k.name, k.scopes...)
		if err != nil {
			t.Fatal(err)
		}
		*k.dst = plain
	}
	return e
}

// payModel calls payOut on a user message, then says it paid.
type payModel struct{}

func (payModel) Name() string { return "pay" }

func (payModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if req.Messages[len(req.Messages)-1].Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: "payOut", Ref: "p1", Input: json.RawMessage(`{"to":"acct-9","amount":700}`)}}}}}, nil
	}
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("Paid acct-9.")}}, FinishReason: "stop"}, nil
}

func payAgent(runs *atomic.Int32) *service.Agent {
	return &service.Agent{Name: "payAgent", ServerManaged: true, Model: payModel{}, Tools: []*service.Tool{{
		Name:        "payOut",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
		Approval: &approval.Policy{Scope: "approve:payments", Approvals: 2, AllowEdit: true, Attempts: 3,
			Escalate: &approval.Escalation{After: time.Hour, Scope: "approve:treasury"}},
		Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			if runs.Add(1) == 1 {
				return nil, errors.New("the bank is down")
			}
			return json.RawMessage(`{"ok":true}`), nil
		},
	}}}
}

// ask raises a gated payOut for end user alice and returns its interrupt.
func (e *policyEnv) ask(t *testing.T, session string) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.rt.InvokeOne(ctx, service.Caller{TenantID: "acme", EndUser: "alice", Actor: "key:app"}, "payAgent",
		service.AgentInit{SessionID: session}, service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("pay acct-9")}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("raising a gated call: %v %+v", err, out)
	}
	var id string
	if err := e.owner.QueryRow(ctx, "SELECT id::text FROM interrupts WHERE session_id = $1 AND status = 'pending'", session).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *policyEnv) signIn(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(e.srv.URL+"/ui/"),
		chromedp.WaitVisible(`#signin`),
		chromedp.SendKeys(`input[name=key]`, key),
		chromedp.Click(`#signin button`),
		chromedp.WaitVisible(`#inbox`),
	)
}

// textOf polls for the text of the first element of sel that contains
// want, and returns it; the page may reload meanwhile (a decision shows
// the page again), so a failed evaluation is tried again.
func textOf(t *testing.T, ctx context.Context, sel, want string) string {
	t.Helper()
	js := `(() => { for (const el of document.querySelectorAll(` + jsString(sel) + `)) { if (el.textContent.includes(` + jsString(want) + `)) return el.textContent; } return ''; })()`
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var got string
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := chromedp.Run(c, chromedp.Evaluate(js, &got))
		cancel()
		if err == nil && got != "" {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	var now string
	_ = chromedp.Run(ctx, chromedp.Evaluate(`document.body.innerText`, &now))
	t.Fatalf("no %s with %q within 10 s; the page shows:\n%s", sel, want, now)
	return ""
}

// TestGatedCallsInBrowser walks two approvers through a gated call: the
// vote count after the first approval, the requester's refusal, a key
// without the scope, the failed call retried once to success, and an
// escalated call in the inbox.
func TestGatedCallsInBrowser(t *testing.T) {
	bin := chromium(t)
	e := newPolicyEnv(t)
	id := e.ask(t, "pay-1")
	page := e.srv.URL + "/ui/interrupts/" + id

	// Carol's inbox shows the call's approvals and scope; her approval is
	// one of two.
	carol := browser(t, bin)
	e.signIn(t, carol, e.carol)
	textOf(t, carol, `#inbox tbody tr[data-id]`, "0 of 2 approvals")
	textOf(t, carol, `#inbox tbody tr[data-id]`, "needs approve:payments")
	run(t, carol, "carol approves", chromedp.Navigate(page), chromedp.WaitVisible(`#gate-decide`),
		chromedp.SendKeys(`#gate-decide input[name=note]`, "checked the invoice"),
		chromedp.Click(`#gate-decide button.approve`))
	textOf(t, carol, `#waiting`, "1 of 2 approvals: waiting for another approver")
	textOf(t, carol, `#votes tbody tr`, "checked the invoice")
	textOf(t, carol, `#gate-refusal`, "You approved this call")
	screenshot(t, carol, "votes.png")

	// Dave acting for alice, who asked: the service refuses, and the page
	// says why.
	dave := browser(t, bin)
	e.signIn(t, dave, e.dave)
	run(t, dave, "dave opens the call", chromedp.Navigate(page), chromedp.WaitVisible(`#gate-decide`),
		network.SetExtraHTTPHeaders(network.Headers{"X-End-User": "alice"}),
		chromedp.Click(`#gate-decide button.approve`))
	refusal := textOf(t, dave, `#gate-problem`, "alice asked for this call and cannot approve or deny it")
	t.Logf("the requester's refusal: %s", refusal)
	screenshot(t, dave, "refusal.png")
	run(t, dave, "dave acts as himself again", network.SetExtraHTTPHeaders(network.Headers{}))
	if e.runs.Load() != 0 {
		t.Fatalf("the tool ran %d times before its second approval", e.runs.Load())
	}

	// Eve holds no scope: the call is not in her inbox, and its page says
	// why she cannot decide it.
	eve := browser(t, bin)
	e.signIn(t, eve, e.eve)
	var rows int
	run(t, eve, "eve's inbox", chromedp.Evaluate(`document.querySelectorAll('#inbox tbody tr[data-id]').length`, &rows))
	if rows != 0 {
		t.Fatalf("eve's inbox lists %d gated calls", rows)
	}
	run(t, eve, "eve opens the call", chromedp.Navigate(page))
	textOf(t, eve, `#refused`, "needs the scope approve:payments")
	screenshot(t, eve, "noscope.png")

	// Dave's approval is the second: the call runs and fails; Retry runs
	// it once more, and it succeeds.
	run(t, dave, "dave approves", chromedp.Navigate(page), chromedp.WaitVisible(`#gate-decide`), chromedp.Click(`#gate-decide button.approve`))
	textOf(t, dave, `#gate-run`, "Attempt 1 of 3")
	textOf(t, dave, `#gate-run`, "The approved call failed")
	screenshot(t, dave, "retry-failed.png")
	if e.runs.Load() != 1 {
		t.Fatalf("after the second approval the tool ran %d times", e.runs.Load())
	}
	run(t, dave, "dave retries", chromedp.Click(`#gate-run form.policy-retry button.retry`))
	textOf(t, dave, `#gate-flash`, "Retried: attempt 2 of payOut succeeded")
	textOf(t, dave, `#gate-run`, "The approved call ran on attempt 2 of 3")
	screenshot(t, dave, "retry.png")
	if e.runs.Load() != 2 {
		t.Fatalf("after the retry the tool ran %d times, want 2", e.runs.Load())
	}
	var retries int
	run(t, dave, "no retry left to offer", chromedp.Evaluate(`document.querySelectorAll('form.policy-retry').length`, &retries))
	if retries != 0 {
		t.Fatal("a call that succeeded is offered Retry")
	}

	// A call still waiting is escalated to approve:treasury (set by SQL:
	// the escalation sweep is not on this branch): carol's inbox marks it,
	// dave's no longer lists it.
	second := e.ask(t, "pay-2")
	if _, err := e.owner.Exec(context.Background(), "UPDATE interrupts SET scope = 'approve:treasury', escalated_at = now() WHERE id = $1", second); err != nil {
		t.Fatal(err)
	}
	run(t, carol, "carol's inbox", chromedp.Navigate(e.srv.URL+"/ui/"))
	textOf(t, carol, `#inbox tbody tr[data-id]`, "escalated")
	textOf(t, carol, `#inbox tbody tr[data-id]`, "needs approve:treasury")
	var live string
	run(t, carol, "inbox live", chromedp.Poll(`document.getElementById('live').dataset.state === 'live' ? 'live' : ''`, &live, chromedp.WithPollingTimeout(time.Minute)))
	// The live inbox draws its rows again: the badge is still there.
	textOf(t, carol, `#inbox tbody tr[data-id] .tag.escalated`, "escalated")
	screenshot(t, carol, "escalated.png")
	run(t, dave, "dave's inbox", chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#inbox`),
		chromedp.Evaluate(`document.querySelectorAll('#inbox tbody tr[data-id]').length`, &rows))
	if rows != 0 {
		t.Fatalf("dave still lists the escalated call (%d rows)", rows)
	}
	run(t, carol, "the escalated call's page", chromedp.Navigate(e.srv.URL+"/ui/interrupts/"+second))
	if got := textOf(t, carol, `#gate`, "Escalated at"); !strings.Contains(got, "approve:treasury") {
		t.Fatalf("the escalated call's page shows %q", got)
	}
	screenshot(t, carol, "escalated-decision.png")
}
