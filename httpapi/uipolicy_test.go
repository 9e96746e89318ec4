package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// payModel calls the gated payment tool on a user message, then says done.
type payModel struct{}

func (payModel) Name() string { return "pay" }

func (payModel) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if req.Messages[len(req.Messages)-1].Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: "payOut", Ref: "p1", Input: json.RawMessage(`{"to":"acct-9","amount":700}`)}}}}}, nil
	}
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("paid")}}, FinishReason: service.FinishStop}, nil
}

// gatedPayAgent is a server-managed agent whose payOut tool needs two
// approvals from holders of approve:payments and fails its first
// failures runs.
func gatedPayAgent(runs *atomic.Int32, failures int32) *service.Agent {
	return &service.Agent{Name: "payAgent", ServerManaged: true, Model: payModel{}, Tools: []*service.Tool{{
		Name:        "payOut",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"]}`),
		Approval:    &approval.Policy{Scope: "approve:payments", Approvals: 2, AllowEdit: true, Attempts: 2},
		Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
			if runs.Add(1) <= failures {
				return nil, errors.New("the bank is down")
			}
			return json.RawMessage(`{"ok":true}`), nil
		},
	}}}
}

// uiClient is a dashboard session of one key.
type uiClient struct {
	t            *testing.T
	s            *authServer
	cookie, csrf string
}

func (s *authServer) uiSignIn(t *testing.T, key string) *uiClient {
	t.Helper()
	u := &uiClient{t: t, s: s}
	res := u.do("POST", "/ui/session", `{"key":"`+key+`"}`, false)
	for _, c := range res.Cookies() {
		if c.Name == "holdpoint_ui" {
			u.cookie = c.Value
		}
	}
	if u.cookie == "" {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	_, page := u.page("/ui/")
	i := strings.Index(page, `name="csrf-token" content="`)
	u.csrf = page[i+len(`name="csrf-token" content="`):]
	u.csrf = u.csrf[:strings.Index(u.csrf, `"`)]
	return u
}

// do sends a request of the session; write adds its origin and CSRF token
// (as the dashboard's scripts do); headers are name, value pairs.
func (u *uiClient) do(method, path, body string, write bool, headers ...string) *http.Response {
	u.t.Helper()
	req, _ := http.NewRequest(method, u.s.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if u.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "holdpoint_ui", Value: u.cookie})
	}
	if write {
		req.Header.Set("Origin", u.s.srv.URL)
		req.Header.Set("X-CSRF-Token", u.csrf)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(func() { res.Body.Close() })
	return res
}

// page reads a page, with the flash cookies the last answers set.
func (u *uiClient) page(path string, flash ...*http.Cookie) (int, string) {
	u.t.Helper()
	req, _ := http.NewRequest("GET", u.s.srv.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: "holdpoint_ui", Value: u.cookie})
	for _, c := range flash {
		req.AddCookie(c)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func flashOf(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == "holdpoint_flash" && c.MaxAge > 0 {
			return c
		}
	}
	return nil
}

func (s *authServer) scopedKey(t *testing.T, name string, scopes ...string) string {
	t.Helper()
	plain, _, err := s.acc.CreateKey(context.Background(), "acme", tenants.RoleAdmin, name, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

// TestDashboardVotesOnGatedCall: the inbox and the decision page show a
// gated call's votes and scope; a key without the scope is told why it
// cannot see it; an approval from the page needs the dashboard's CSRF
// token, is one vote of two ("1 of 2 approvals: waiting for another
// approver"), and a second from the same key, or one acting for the
// requester, is refused with the service's message and counts nothing.
func TestDashboardVotesOnGatedCall(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	s := newAuthServer(t, nil, gatedPayAgent(&runs, 1))
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	carol := s.uiSignIn(t, s.scopedKey(t, "carol", "approve:payments"))
	dave := s.uiSignIn(t, s.scopedKey(t, "dave", "approve:payments"))
	eve := s.uiSignIn(t, s.scopedKey(t, "eve", "refunds"))
	if out := s.send(t, client, "payAgent", "pay acct-9", nil, "X-End-User", "alice"); out.FinishReason != "interrupted" {
		t.Fatalf("turn: %+v", out)
	}
	var id string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM interrupts WHERE tool = 'payOut'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, inbox := carol.page("/ui/"); !strings.Contains(inbox, "0 of 2 approvals") || !strings.Contains(inbox, "needs approve:payments") {
		t.Fatalf("the inbox does not show the gate:\n%s", inbox)
	}
	if _, inbox := eve.page("/ui/"); strings.Contains(inbox, "/ui/interrupts/"+id) {
		t.Fatal("a key without the scope lists the gated call")
	}
	if code, page := eve.page("/ui/interrupts/" + id); code != http.StatusForbidden || !strings.Contains(page, "needs the scope approve:payments") {
		t.Fatalf("a key without the scope opens the call: %d\n%s", code, page)
	}
	if code, page := carol.page("/ui/interrupts/" + id); code != 200 || !strings.Contains(page, `id="gate-decide"`) || !strings.Contains(page, "No vote yet") {
		t.Fatalf("decision page before a vote: %d\n%s", code, page)
	}
	votes := func() (n int) {
		t.Helper()
		if err := s.owner.QueryRow(context.Background(), "SELECT count(*) FROM interrupt_votes").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	approve := "/ui/interrupts/" + id + "/approve"
	if res := carol.do("POST", approve, `{"note":"ok by me"}`, false); res.StatusCode != http.StatusForbidden || votes() != 0 {
		t.Fatalf("an approval without the CSRF token: %d, %d votes", res.StatusCode, votes())
	}
	res := carol.do("POST", approve, `{"note":"ok by me"}`, true)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/interrupts/"+id || votes() != 1 {
		t.Fatalf("carol's approval: %d %v, %d votes", res.StatusCode, res.Header, votes())
	}
	_, page := carol.page("/ui/interrupts/"+id, flashOf(res))
	for _, want := range []string{"1 of 2 approvals: waiting for another approver", "ok by me", "carol", "You approved this call", "1 of 2 approvals</span>"} {
		if !strings.Contains(page, want) {
			t.Errorf("after carol's vote the page lacks %q", want)
		}
	}
	if strings.Contains(page, `id="gate-decide"`) {
		t.Error("carol is offered a second vote")
	}
	for who, r := range map[string]*http.Response{
		"carol again":             carol.do("POST", approve, `{}`, true),
		"dave acting for alice":   dave.do("POST", approve, `{}`, true, "X-End-User", "alice"),
		"an edit that is no JSON": dave.do("POST", approve, `{"input":`, true),
	} {
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode < 400 || r.StatusCode >= 500 || votes() != 1 {
			t.Errorf("%s: %d %s, %d votes", who, r.StatusCode, b, votes())
		}
		if who == "dave acting for alice" && !strings.Contains(string(b), "alice asked for this call and cannot approve or deny it") {
			t.Errorf("the requester's refusal says %s", b)
		}
	}
	if _, page := dave.page("/ui/interrupts/" + id); !strings.Contains(page, `id="gate-decide"`) {
		t.Error("dave is not offered a vote")
	}
	// Dave denies: one denial ends it, and nothing ran.
	res = dave.do("POST", "/ui/interrupts/"+id+"/deny", `{"output":{"denied":true},"note":"not this month"}`, true)
	if res.StatusCode != http.StatusSeeOther || votes() != 2 || runs.Load() != 0 {
		t.Fatalf("dave's denial: %d, %d votes, %d runs", res.StatusCode, votes(), runs.Load())
	}
	_, page = dave.page("/ui/interrupts/"+id, flashOf(res))
	for _, want := range []string{"Denied: the turn went on", "not this month", `vote-deny`} {
		if !strings.Contains(page, want) {
			t.Errorf("after dave's denial the page lacks %q", want)
		}
	}
}

// TestDashboardShowsExhaustedAttempts: once a failed approved call has
// run all its policy's attempts, its page offers no Retry and says so.
func TestDashboardShowsExhaustedAttempts(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	s := newAuthServer(t, nil, gatedPayAgent(&runs, 5))
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	carol := s.uiSignIn(t, s.scopedKey(t, "carol", "approve:payments"))
	dave := s.uiSignIn(t, s.scopedKey(t, "dave", "*"))
	s.send(t, client, "payAgent", "pay acct-9", nil, "X-End-User", "alice")
	var id string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM interrupts WHERE tool = 'payOut'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, u := range []*uiClient{carol, dave} {
		if res := u.do("POST", "/ui/interrupts/"+id+"/approve", `{}`, true); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("approval: %d", res.StatusCode)
		}
	}
	var callID string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM tool_calls WHERE status = 'failed'").Scan(&callID); err != nil {
		t.Fatal(err)
	}
	res := carol.do("POST", "/ui/tool-calls/"+callID+"/retry?from="+id, `{}`, true)
	if res.StatusCode != http.StatusSeeOther || runs.Load() != 2 {
		t.Fatalf("the retry: %d, %d runs", res.StatusCode, runs.Load())
	}
	_, page := carol.page("/ui/interrupts/"+id, flashOf(res))
	for _, want := range []string{"Retried: attempt 2 of payOut failed", "Attempt 2 of 2", "All 2 attempts used"} {
		if !strings.Contains(page, want) {
			t.Errorf("after the last attempt the page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="policy-retry"`) {
		t.Error("a call with no attempt left is offered Retry")
	}
}

// TestDashboardRetriesFailedApprovedCall: the second approval from the
// dashboard runs the call, which fails; the decision page shows the
// failure, its attempt and Retry (no Cancel); the retry from the dashboard
// runs the tool once more and its session's page shows it succeeded; a
// second retry is refused, and all attempts used leave no Retry.
func TestDashboardRetriesFailedApprovedCall(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	s := newAuthServer(t, nil, gatedPayAgent(&runs, 1))
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	carol := s.uiSignIn(t, s.scopedKey(t, "carol", "approve:payments"))
	dave := s.uiSignIn(t, s.scopedKey(t, "dave", "approve:payments"))
	s.send(t, client, "payAgent", "pay acct-9", nil, "X-End-User", "alice")
	var id string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM interrupts WHERE tool = 'payOut'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	approve := "/ui/interrupts/" + id + "/approve"
	if res := carol.do("POST", approve, `{"input":{"to":"acct-9","amount":650},"note":"capped"}`, true); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol: %d", res.StatusCode)
	}
	if _, page := dave.page("/ui/interrupts/" + id); !strings.Contains(page, "&#34;amount&#34;: 650") || !strings.Contains(page, "capped") {
		t.Errorf("dave is not shown carol's edit:\n%s", page)
	}
	res := dave.do("POST", approve, `{}`, true)
	if res.StatusCode != http.StatusSeeOther || runs.Load() != 1 {
		t.Fatalf("dave's approval: %d, %d runs", res.StatusCode, runs.Load())
	}
	_, page := dave.page("/ui/interrupts/"+id, flashOf(res))
	for _, want := range []string{"Approved: the turn went on", "The approved call failed: INTERNAL", "Attempt 1 of 2", `class="policy-retry"`, "650"} {
		if !strings.Contains(page, want) {
			t.Errorf("after the failure the page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-action="cancel"`) {
		t.Error("a failed call is offered Cancel")
	}
	var callID string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM tool_calls WHERE status = 'failed'").Scan(&callID); err != nil {
		t.Fatal(err)
	}
	retry := "/ui/tool-calls/" + callID + "/retry"
	if res := dave.do("POST", retry, `{}`, false); res.StatusCode != http.StatusForbidden || runs.Load() != 1 {
		t.Fatalf("a retry without the CSRF token: %d, %d runs", res.StatusCode, runs.Load())
	}
	res = dave.do("POST", retry+"?from="+id, `{"note":"bank is back"}`, true)
	if res.StatusCode != http.StatusSeeOther || runs.Load() != 2 || res.Header.Get("Location") != "/ui/interrupts/"+id {
		t.Fatalf("the retry: %d %v, %d runs", res.StatusCode, res.Header, runs.Load())
	}
	// The page the retry was made from shows its outcome (the dashboard's
	// script reloads it).
	_, page = dave.page("/ui/interrupts/"+id, flashOf(res))
	for _, want := range []string{"Retried: attempt 2 of payOut succeeded", "The approved call ran on attempt 2 of 2", "attempt 2 of 2</span>"} {
		if !strings.Contains(page, want) {
			t.Errorf("after the retry the page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="policy-retry"`) {
		t.Error("a call that succeeded is offered Retry")
	}
	if res := dave.do("POST", retry, `{}`, true); res.StatusCode < 400 || res.StatusCode >= 500 || runs.Load() != 2 {
		t.Fatalf("a second retry: %d, %d runs", res.StatusCode, runs.Load())
	}
}
