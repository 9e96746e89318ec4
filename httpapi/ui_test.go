package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// TestDashboardPages renders the dev-mode dashboard against a paused
// approval whose input carries markup: the pages escape it, send a strict
// CSP, and the decision form comes from the output schema.
func TestDashboardPages(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	app, err := pgstore.NewAppPool(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	rt := service.NewRuntime(newStore(t, app), service.Options{Logger: testlog.Logger(t)})
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
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
	srv := httptest.NewServer(httpapi.New(rt, httpapi.Options{Logger: testlog.Logger(t)}))
	t.Cleanup(srv.Close)
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
	if strings.Count(inbox, "<script") != 1 || !strings.Contains(inbox, `<script src="/ui/static/inbox.js">`) {
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
		"created", // audit trail
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
	if status, _, _ := get("/ui/interrupts/not-an-id"); status != 404 {
		t.Fatalf("unknown interrupt page: %d", status)
	}
	if status, h, js := get("/ui/static/decide.js"); status != 200 || !strings.Contains(h.Get("Content-Type"), "javascript") || !strings.Contains(js, "/respond") {
		t.Fatalf("decide.js: %d %v", status, h)
	}

	// With authentication on, the dashboard is not served (its sign-in is
	// not built yet).
	authed := httptest.NewServer(httpapi.New(rt, httpapi.Options{Logger: testlog.Logger(t), Auth: service.NewAccounts(newStore(t, app))}))
	t.Cleanup(authed.Close)
	res, err := authed.Client().Get(authed.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == 200 {
		t.Fatal("the dashboard is served without a sign-in on a server with authentication")
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
