package ui

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// chromium finds the browser, or skips (fails under CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("tests/ui: no Chromium on this machine (apt-get install -y chromium); CI must run the browser tests")
	}
	t.Skip("tests/ui: SKIPPED, no Chromium on this machine: apt-get install -y chromium to run the browser tests")
	return ""
}

// env is a server with authentication over a fresh database, serving the
// demo banking agent and an agent whose approval carries markup.
type env struct {
	db    string // the database's URL
	srv   *httptest.Server
	rt    *service.Runtime
	admin string
	other string // a second admin key
	user  string // a client key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st := newStack(t)
	rt := st.rt
	if err := demo.Register(rt, demo.NewModel()); err != nil {
		t.Fatal(err)
	}
	// An agent that asks for approval with whatever input the user sends.
	markupAgent := demo.BankingAgent(echoApproval{})
	markupAgent.Name = "markup"
	if err := rt.Register(markupAgent); err != nil {
		t.Fatal(err)
	}
	acc := tenants.New(st.store)
	srv := httptest.NewServer(httpapi.New(rt, httpapi.Options{Logger: st.log, Auth: acc, Events: st.hub}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	if _, err := acc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	e := &env{db: st.url, srv: srv, rt: rt}
	for _, k := range []struct {
		dst        *string
		role, name string
	}{{&e.admin, tenants.RoleAdmin, "alice"}, {&e.other, tenants.RoleAdmin, "bob"}, {&e.user, tenants.RoleClient, "app"}} {
		plain, _, err := acc.CreateKey(ctx, "acme", k.role, k.name)
		if err != nil {
			t.Fatal(err)
		}
		*k.dst = plain
	}
	return e
}

// customer is the end user the tenant's client asks for.
const customer = "dana@example.com"

// ask raises an approval through the protocol, as the tenant's client
// acting for customer.
func (e *env) ask(t *testing.T, text string) *service.AgentOutput {
	t.Helper()
	out, err := e.rt.InvokeOne(context.Background(), service.Caller{TenantID: "acme", Actor: "key:app", EndUser: customer}, demo.BankingAgentName,
		service.AgentInit{}, service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart(text)}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("raising an approval: %v %+v", err, out)
	}
	return out
}

// browser starts a headless Chromium tab.
func browser(t *testing.T, exec string) context.Context {
	t.Helper()
	// Chromium prints its DevTools address once it is up; chromedp waits
	// 20 s for it by default, which a loaded machine exceeded ("websocket
	// url timeout reached"): the bound only ends a start that hangs.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exec), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1200, 900), chromedp.WSURLReadTimeout(2*time.Minute))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// run runs browser actions with a deadline, a generous one: the actions
// poll for what they wait for, so the bound only ends a run that hangs,
// and a loaded machine does not fail it.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (e *env) signIn(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(e.srv.URL+"/ui/"),
		chromedp.WaitVisible(`#signin`),
		chromedp.SendKeys(`input[name=key]`, key),
		chromedp.Click(`#signin button`),
		chromedp.WaitVisible(`#inbox`),
	)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("HOLDPOINT_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "holdpoint-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var png []byte
	run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", filepath.Join(dir, name))
}

// TestDashboardInBrowser walks an operator's work through the dashboard.
func TestDashboardInBrowser(t *testing.T) {
	start := time.Now()
	bin := chromium(t)
	e := newEnv(t)
	ctx := browser(t, bin)

	// A client key cannot sign in.
	var refused string
	run(t, ctx, "sign in with a client key",
		chromedp.Navigate(e.srv.URL+"/ui/login"),
		chromedp.WaitVisible(`#signin`),
		chromedp.SendKeys(`input[name=key]`, e.user),
		chromedp.Click(`#signin button`),
		chromedp.Poll(`document.getElementById('result').textContent`, &refused, chromedp.WithPollingTimeout(time.Minute)),
	)
	if !strings.Contains(refused, "refused") {
		t.Fatalf("a client key's sign-in shows %q", refused)
	}

	e.signIn(t, ctx, e.admin)

	// A pending approval raised through the protocol shows up in the open
	// inbox, without a reload: well under a second on a quiet server; the
	// bound is looser because events are read once every older transaction
	// on the database server has ended, and parallel tests hold some.
	var live string
	run(t, ctx, "inbox live", chromedp.Poll(`document.getElementById('live').dataset.state === 'live' ? 'live' : ''`, &live, chromedp.WithPollingTimeout(time.Minute)))
	raised := time.Now()
	e.ask(t, "Transfer $50 to account 12345")
	var rows int
	c, cancel := context.WithTimeout(ctx, time.Minute) // generous: the FIGURE below says how long it took
	err := chromedp.Run(c, chromedp.Poll(`document.querySelectorAll('#inbox tbody tr[data-id]').length === 1 ? 1 : 0`, &rows, chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil || rows != 1 {
		t.Fatalf("the approval did not appear within a minute: %v", err)
	}
	t.Logf("FIGURE the approval appeared in the open inbox %s after it was raised", time.Since(raised).Round(time.Millisecond))
	// The row says who asked.
	var asker string
	run(t, ctx, "the inbox row's end user", chromedp.Text(`#inbox tbody tr[data-id] td.end-user`, &asker))
	if asker != customer {
		t.Fatalf("the inbox row shows the end user %q, want %q", asker, customer)
	}
	screenshot(t, ctx, "inbox.png")

	// Approve it from its decision page and read the agent's answer: the
	// page says who asked, and its badge turns resolved.
	var answer, badge string
	run(t, ctx, "open the approval",
		clickFirstApproval(),
		chromedp.WaitVisible(`#decide`),
		chromedp.Text(`#end-user`, &asker),
		chromedp.Text(`#status`, &badge),
	)
	if asker != customer || badge != "pending" {
		t.Fatalf("the decision page shows end user %q and status %q, want %q and pending", asker, badge, customer)
	}
	screenshot(t, ctx, "decision.png")
	run(t, ctx, "approve",
		chromedp.Click(`button.approve`),
		chromedp.Poll(`(t => t.startsWith('Decided') ? t : '')(document.getElementById('result').textContent)`, &answer, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Poll(`(t => t === 'resolved' ? t : '')(document.getElementById('status').textContent)`, &badge, chromedp.WithPollingTimeout(time.Minute)),
	)
	if !strings.Contains(answer, "Done: transferred $50.00 to account 12345") {
		t.Fatalf("after approving the page shows %q", answer)
	}
	screenshot(t, ctx, "decision-approved.png")

	// Two operators open the same approval; the second to decide is told
	// who decided first.
	e.ask(t, "Transfer $70 to account 777")
	second := browser(t, bin)
	e.signIn(t, second, e.other)
	var href string
	run(t, ctx, "open the new approval", chromedp.Navigate(e.srv.URL+"/ui/"),
		chromedp.Poll(`(a => a ? a.getAttribute('href') : '')(document.querySelector('#inbox tbody tr[data-id] td a'))`, &href, chromedp.WithPollingTimeout(time.Minute)))
	run(t, second, "bob opens it", chromedp.Navigate(e.srv.URL+href), chromedp.WaitVisible(`#decide`))
	run(t, ctx, "alice opens it", chromedp.Navigate(e.srv.URL+href), chromedp.WaitVisible(`#decide`))
	var bobs string
	run(t, ctx, "alice's page follows its interrupt", chromedp.Poll(`window.EventSource && document.getElementById('status').dataset.status === 'pending' ? 'ok' : ''`, &bobs,
		chromedp.WithPollingTimeout(time.Minute)))
	run(t, second, "bob approves",
		chromedp.Click(`button.approve`),
		chromedp.Poll(`(t => t.startsWith('Decided') ? t : '')(document.getElementById('result').textContent)`, &bobs, chromedp.WithPollingTimeout(time.Minute)))
	// Alice's open page, not reloaded, shows the new status and who decided,
	// and its buttons no longer send.
	var late string
	var disabled bool
	run(t, ctx, "alice sees bob's decision",
		chromedp.Poll(`(t => t === 'resolved' ? t : '')(document.getElementById('status').textContent)`, &badge, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Poll(`(t => t.startsWith('Already') ? t : '')(document.getElementById('result').textContent)`, &late, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Evaluate(`document.querySelector('button.deny').disabled`, &disabled))
	if !strings.Contains(late, "Already decided by key:bob") || !disabled {
		t.Fatalf("alice's page shows %q after bob's decision (buttons disabled: %v)", late, disabled)
	}
	screenshot(t, ctx, "decision-decided-elsewhere.png")

	// Deny one with a note: the note is in its audit trail.
	e.ask(t, "Transfer $90 to account 999")
	var trail string
	run(t, ctx, "deny with a note",
		chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#inbox tbody tr[data-id] td a`),
		clickFirstApproval(), chromedp.WaitVisible(`#decide`),
		chromedp.SendKeys(`input[name=__note]`, "wrong account, call the customer"),
		chromedp.Click(`button.deny`),
		chromedp.Poll(`(t => t.startsWith('Decided') ? t : '')(document.getElementById('result').textContent)`, &answer, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Reload(),
		chromedp.WaitVisible(`ol.events`),
		chromedp.Text(`ol.events`, &trail),
	)
	// The audit trail reads as sentences, the note after the decision.
	if !regexp.MustCompile(`Denied by key:alice(/[0-9a-f-]+)? at \d\d:\d\d — wrong account, call the customer`).MatchString(trail) ||
		!strings.Contains(trail, "Raised by a turn of key:app at ") || strings.Contains(trail, "{") || !strings.Contains(answer, "Cancelled") {
		t.Fatalf("audit trail %q, answer %q", trail, answer)
	}
	screenshot(t, ctx, "decision-history.png")
	var history string
	run(t, ctx, "history", chromedp.Navigate(e.srv.URL+"/ui/history"), chromedp.WaitVisible(`td.decision`), chromedp.Text(`main table`, &history))
	if !regexp.MustCompile(`Denied by key:alice(/[0-9a-f-]+)? — wrong account, call the customer`).MatchString(history) || !strings.Contains(history, "Approved by key:bob") ||
		!strings.Contains(history, customer) {
		t.Fatalf("the history shows %q", history)
	}
	screenshot(t, ctx, "history.png")
	// The sessions page lists the latest sessions before any search.
	var recent string
	run(t, ctx, "recent sessions", chromedp.Navigate(e.srv.URL+"/ui/sessions"), chromedp.WaitVisible(`#recent`), chromedp.Text(`#recent tbody`, &recent))
	if strings.Count(recent, customer) != 3 || !strings.Contains(recent, "completed") || !strings.Contains(recent, demo.BankingAgentName) {
		t.Fatalf("recent sessions %q", recent)
	}
	screenshot(t, ctx, "sessions.png")

	// Markup in an interrupt's input is shown as text.
	markup := "<script>window.pwned=1</script><b>bold</b>"
	input, _ := json.Marshal(map[string]string{"action": "transferMoney", "details": markup})
	e.askWithInput(t, string(input))
	var shown string
	var pwned bool
	run(t, ctx, "markup as text",
		chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#inbox tbody tr[data-id]`),
		chromedp.Text(`#inbox tbody`, &shown),
		chromedp.Evaluate(`window.pwned === 1`, &pwned))
	if !strings.Contains(shown, markup) || pwned {
		t.Fatalf("the inbox shows %q (script ran: %v)", shown, pwned)
	}

	// The reports draw their charts.
	var bars int
	run(t, ctx, "reports", chromedp.Navigate(e.srv.URL+"/ui/reports"), chromedp.WaitVisible(`section.chart svg`),
		chromedp.Evaluate(`document.querySelectorAll('section.chart svg rect').length`, &bars))
	if bars < 3 {
		t.Fatalf("the reports draw %d bars", bars)
	}
	screenshot(t, ctx, "reports.png")

	// Sign out: the inbox asks for a sign-in again.
	var url string
	run(t, ctx, "sign out", chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#signout`), chromedp.Click(`#signout`),
		chromedp.WaitVisible(`#signin`), chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#signin`), chromedp.Location(&url))
	if !strings.HasSuffix(url, "/ui/login") {
		t.Fatalf("after sign-out /ui/ shows %s", url)
	}
	t.Logf("FIGURE browser test ran in %s", time.Since(start).Round(time.Millisecond))
}

// askWithInput raises an approval whose input is input (JSON).
func (e *env) askWithInput(t *testing.T, input string) {
	t.Helper()
	out, err := e.rt.InvokeOne(context.Background(), service.Caller{TenantID: "acme", Actor: "key:app"}, "markup",
		service.AgentInit{}, service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart(input)}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("raising an approval: %v %+v", err, out)
	}
}

// echoApproval asks userApproval with the user's message as its input.
type echoApproval struct{}

func (echoApproval) Name() string { return "echo" }

func (echoApproval) Generate(_ context.Context, req *service.ModelRequest, _ func(service.ModelChunk)) (*service.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == service.RoleUser {
		return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{
			{ToolRequest: &service.ToolRequest{Name: demo.ToolUserApproval, Ref: "a", Input: json.RawMessage(last.Text())}}}}}, nil
	}
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("ok")}}, FinishReason: "stop"}, nil
}

// clickFirstApproval clicks the first approval's link of the inbox in one
// step in the page: the live inbox re-renders its rows whenever an event
// arrives, so a node found by one browser command may be gone by the next.
func clickFirstApproval() chromedp.Action {
	return chromedp.Evaluate(`document.querySelector('#inbox tbody tr[data-id] td a').click()`, nil)
}
