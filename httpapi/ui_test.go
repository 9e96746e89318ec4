package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
)

// TestDashboardPages renders the dev-mode dashboard against a paused
// approval whose input carries markup: the pages escape it, send a strict
// CSP, and the decision form comes from the output schema.
func TestDashboardPages(t *testing.T) {
	t.Parallel()
	env := servicetest.New(t, servicetest.Options{HTTP: &httpapi.Options{}, DevMode: true})
	rt, srv := env.Runtime, env.Server
	model := scriptedAsk{input: `{"action":"transferMoney","details":"<script>alert(1)</script> to account 1"}`}
	if err := rt.Register(&service.Agent{Name: "asker", ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name: "userApproval", Interrupt: true,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"},"priority":{"type":"string","enum":["low","high"]},"limit":{"type":"number"}},"required":["approved"]}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	out, err := rt.InvokeOne(context.Background(), service.Caller{TenantID: "default", Actor: "test"}, "asker", service.AgentInit{SessionID: "ui-1"},
		service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("pay <b>now</b>")}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("turn: %v %+v", err, out)
	}
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Host = "127.0.0.1"
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	status, h, inbox := get("/ui/")
	if status != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || strings.Contains(inbox, "<script>alert") ||
		!strings.Contains(inbox, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(inbox, "<script>\n") {
		t.Fatalf("inbox: %d %v\n%s", status, h, inbox)
	}
	if strings.Count(inbox, "<script") != 2 || !strings.Contains(inbox, `<script src="/ui/static/inbox.js">`) || !strings.Contains(inbox, `<script src="/ui/static/app.js">`) {
		t.Fatalf("the inbox has scripts other than its own: %s", inbox)
	}
	var ids []string
	for _, part := range strings.Split(inbox, `href="/ui/interrupts/`)[1:] {
		ids = append(ids, part[:36])
	}
	if len(ids) != 1 {
		t.Fatalf("inbox links %v", ids)
	}
	status, _, page := get("/ui/interrupts/" + ids[0])
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt; to account 1", // input as text
		"pay &lt;b&gt;now&lt;/b&gt;",                         // messages as text
		`class="approve"`, `class="deny"`,                    // approved: Approve/Deny
		`name="feedback" data-type="string"`, `name="limit" data-type="number"`, `<option>high</option>`,
		"Raised by a turn of test", // audit trail, as sentences
	} {
		if !strings.Contains(page, want) {
			t.Errorf("decision page lacks %q:\n%s", want, page)
		}
	}
	if status != 200 || strings.Contains(page, "<script>alert") || strings.Contains(page, "<b>now</b>") {
		t.Fatalf("decision page: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/sessions/ui-1?agent=asker"); status != 200 || !strings.Contains(page, "pay &lt;b&gt;now&lt;/b&gt;") {
		t.Fatalf("session page: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/?agent=nobody"); status != 200 || !strings.Contains(page, "Nothing is waiting") || !strings.Contains(page, `href="/ui/">clear`) {
		t.Fatalf("a filter matching nothing: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/?order=oldest&age=1h"); status != 200 || !strings.Contains(page, "Nothing is waiting") {
		t.Fatalf("older than an hour: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/?tool=userApproval&order=oldest&endUser="); status != 200 || !strings.Contains(page, `data-id="`+ids[0]+`"`) ||
		!strings.Contains(page, `<a href="/ui/?agent=asker">asker</a> 1`) || strings.Contains(page, "1 · \n") || strings.Contains(page, "1 · </p>") {
		t.Fatalf("filtered inbox with counts: %d\n%s", status, page)
	}
	if status, _, _ := get("/ui/?age=2d"); status != 400 {
		t.Fatalf("a bad age: %d", status)
	}
	if !strings.Contains(page, "Tool calls of this session") {
		t.Fatalf("the decision page lacks the session's tool calls")
	}
	if status, _, page := get("/ui/sessions/ui-1?agent=asker"); status != 200 || !strings.Contains(page, "<h2>Snapshots</h2>") || !strings.Contains(page, "<td>completed</td><td>interrupted</td>") {
		t.Fatalf("session snapshots: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/sessions?q=ui-1"); status != 200 || !strings.Contains(page, `href="/ui/sessions/ui-1?agent=asker"`) {
		t.Fatalf("session search: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/sessions"); status != 200 || !strings.Contains(page, `id="recent"`) ||
		!strings.Contains(page, `href="/ui/sessions/ui-1?agent=asker"`) || !strings.Contains(page, `<span class="status status-completed">completed</span> <span class="muted">interrupted</span>`) {
		t.Fatalf("recent sessions: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/sessions?q=nobody"); status != 200 || !strings.Contains(page, "No session has that id") {
		t.Fatalf("empty session search: %d\n%s", status, page)
	}
	if status, _, page := get("/ui/reports"); status != 200 || !strings.Contains(page, "<svg") || !strings.Contains(page, "<rect") || !strings.Contains(page, "<td>asker</td>") {
		t.Fatalf("reports page: %d\n%s", status, page)
	}
	if status, h, csv := get("/ui/reports.csv"); status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") || !strings.HasPrefix(csv, "day,total,pending") || strings.Count(csv, "\n") != 2 {
		t.Fatalf("reports CSV: %d %v\n%s", status, h, csv)
	}
	if status, _, _ := get("/ui/reports?from=2026-13-01"); status != 400 {
		t.Fatalf("a bad date: %d", status)
	}
	if status, _, _ := get("/ui/interrupts/not-an-id"); status != 404 {
		t.Fatalf("unknown interrupt page: %d", status)
	}
	if status, h, js := get("/ui/static/decide.js"); status != 200 || !strings.Contains(h.Get("Content-Type"), "javascript") || !strings.Contains(js, "/respond") {
		t.Fatalf("decide.js: %d %v", status, h)
	}

}

// TestDashboardSignIn checks the dashboard's access with authentication:
// pages need a session, only an admin key signs in, a request that changes
// something needs the dashboard's origin and CSRF token, decisions carry
// the key's name, and sign-out ends the session.
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	admin, adminID := s.key(t, "acme", "admin")
	client, _ := s.key(t, "acme", "client")
	out := s.send(t, admin, "bankingAgent", "Transfer $50 to account 12345", nil)
	if out.FinishReason != "interrupted" {
		t.Fatalf("turn: %+v", out)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, cookie, csrf, origin, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "holdpoint_ui", Value: cookie})
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	if res := do("GET", "/ui/", "", "", "", ""); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login" {
		t.Fatalf("inbox without a session: %d %v", res.StatusCode, res.Header)
	}
	if res := do("GET", "/ui/login", "", "", "", ""); res.StatusCode != 200 {
		t.Fatalf("login page: %d", res.StatusCode)
	}
	for _, key := range []string{client, "hp_nope", s.token(t, "acme", "u1")} {
		if res := do("POST", "/ui/session", "", "", "", `{"key":"`+key+`"}`); res.StatusCode < 400 || res.Header.Get("Set-Cookie") != "" {
			t.Fatalf("sign-in with %.8s...: %d", key, res.StatusCode)
		}
	}
	res := do("POST", "/ui/session", "", "", "", `{"key":"`+admin+`"}`)
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "holdpoint_ui" {
			cookie = c
		}
	}
	if res.StatusCode != 204 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.MaxAge <= 0 {
		t.Fatalf("admin sign-in: %d %+v", res.StatusCode, cookie)
	}
	var stored int
	if err := s.owner.QueryRow(context.Background(), "SELECT count(*) FROM ui_sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))", cookie.Value).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("the session is not stored by its hash: %v %d", err, stored)
	}
	page := do("GET", "/ui/", cookie.Value, "", "", "")
	b, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !strings.Contains(string(b), "userApproval") || !strings.Contains(string(b), `id="signout"`) {
		t.Fatalf("inbox with a session: %d", page.StatusCode)
	}
	csrf := string(b)[strings.Index(string(b), `name="csrf-token" content="`)+len(`name="csrf-token" content="`):]
	csrf = csrf[:strings.Index(csrf, `"`)]
	var items struct{ Items []service.Interrupt }
	list := do("GET", "/api/v1/interrupts", cookie.Value, "", "", "")
	_ = json.NewDecoder(list.Body).Decode(&items)
	if len(items.Items) != 1 {
		t.Fatalf("the API with a session: %d %+v", list.StatusCode, items)
	}
	decide := "/api/v1/interrupts/" + items.Items[0].ID.String() + "/respond"
	body := `{"output":{"approved":true},"note":"ok"}`
	for name, tc := range map[string][2]string{"no CSRF": {"", s.srv.URL}, "wrong CSRF": {"x" + csrf, s.srv.URL}, "no origin": {csrf, ""}, "another origin": {csrf, "https://evil.example"}} {
		if res := do("POST", decide, cookie.Value, tc[0], tc[1], body); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, res.StatusCode)
		}
	}
	if res := do("POST", decide, cookie.Value, csrf, s.srv.URL, body); res.StatusCode != 200 {
		t.Fatalf("decision with a session: %d", res.StatusCode)
	}
	var actor string
	if err := s.owner.QueryRow(context.Background(), "SELECT resolved_by FROM interrupts WHERE id = $1", items.Items[0].ID).Scan(&actor); err != nil || actor != "key:admin key/"+adminID.String() {
		t.Fatalf("decided by %q (%v), want the key's name and id", actor, err)
	}
	if res := do("POST", "/ui/session/end", cookie.Value, csrf, s.srv.URL, ""); res.StatusCode != 204 {
		t.Fatalf("sign-out: %d", res.StatusCode)
	}
	if res := do("GET", "/ui/", cookie.Value, "", "", ""); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("inbox after sign-out: %d", res.StatusCode)
	}
	if res := do("GET", "/api/v1/interrupts", cookie.Value, "", "", ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the API after sign-out: %d", res.StatusCode)
	}
}

// scriptedAsk asks userApproval with input, then says done.
type scriptedAsk struct{ input string }

func (scriptedAsk) Name() string { return "ask" }

func (m scriptedAsk) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	if req.Messages[len(req.Messages)-1].Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: "userApproval", Ref: "a", Input: json.RawMessage(m.input)}}}}}, nil
	}
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("done")}}, FinishReason: "stop"}, nil
}
