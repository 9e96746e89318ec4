package ui

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// axeScript is axe-core's browser build, which tests/ui/install.sh (run
// by make test) installs from package-lock.json into node_modules. Without
// it the accessibility tests skip, loudly, except under CI, where they
// fail.
func axeScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join("node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(path)
	if err == nil {
		return string(b)
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("tests/ui: no axe-core (%v): bash tests/ui/install.sh installs it; CI must run the accessibility tests", err)
	}
	t.Skipf("tests/ui: SKIPPED, no axe-core (%v): bash tests/ui/install.sh to run the accessibility tests", err)
	return ""
}

// axeViolation is one rule axe-core found broken, with the elements that
// break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target         []any  `json:"target"`
		HTML           string `json:"html"`
		FailureSummary string `json:"failureSummary"`
	} `json:"nodes"`
}

// axeRun injects axe-core into the page the tab shows and returns what it
// finds broken (every rule axe runs by default: WCAG 2.x A and AA and its
// best practices).
func axeRun(t *testing.T, ctx context.Context, script, what string) []axeViolation {
	t.Helper()
	var out struct {
		Version    string         `json:"version"`
		Passes     int            `json:"passes"`
		Violations []axeViolation `json:"violations"`
	}
	run(t, ctx, "axe on "+what,
		chromedp.Evaluate(script+"\n;true", nil),
		chromedp.Evaluate(`axe.run(document).then(r => ({version: axe.version, passes: r.passes.length,
			violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
				nodes: v.nodes.map(n => ({target: n.target, html: n.html, failureSummary: n.failureSummary}))}))}))`, &out,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if out.Passes == 0 {
		t.Fatalf("axe-core %s checked nothing on %s", out.Version, what)
	}
	t.Logf("axe-core %s on %s: %d rules passed", out.Version, what, out.Passes)
	return out.Violations
}

// axeReport says the violations of a page, one rule a paragraph with the
// elements that break it.
func axeReport(page string, vs []axeViolation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s: [%s] %s: %s\n", page, v.Impact, v.ID, v.Help)
		for i, n := range v.Nodes {
			if i == 5 {
				fmt.Fprintf(&b, "    … and %d more\n", len(v.Nodes)-5)
				break
			}
			fmt.Fprintf(&b, "    %v %s\n      %s\n", n.Target, n.HTML, strings.ReplaceAll(n.FailureSummary, "\n", "\n      "))
		}
	}
	return b.String()
}

// axePage opens path, waits for sel and checks the page with axe-core:
// a serious or critical violation fails the test; the others are logged.
func axePage(t *testing.T, ctx context.Context, script, base, path, sel string) {
	t.Helper()
	run(t, ctx, "open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(sel))
	vs := axeRun(t, ctx, script, path)
	var bad, minor []axeViolation
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v)
		} else {
			minor = append(minor, v)
		}
	}
	t.Logf("AXE %s: %d serious or critical, %d moderate or minor", path, len(bad), len(minor))
	if len(minor) > 0 {
		t.Logf("moderate or minor violations:\n%s", axeReport(path, minor))
	}
	if len(bad) > 0 {
		t.Errorf("serious or critical accessibility violations:\n%s", axeReport(path, bad))
	}
}

// TestAccessibilityInBrowser runs axe-core on every page of the dashboard,
// each in the states an operator sees it in: sign-in, the inbox with an
// approval waiting, a decision page before and after its decision, the
// history, the sessions (recent, found, one session), the reports, the
// webhooks and one endpoint's deliveries.
func TestAccessibilityInBrowser(t *testing.T) {
	bin := chromium(t)
	script := axeScript(t)
	e := newHookEnv(t)
	ctx := browser(t, bin)
	ctxBg := context.Background()
	var hook struct {
		ID string `json:"id"`
	}
	if code := e.api(t, e.admin, http.MethodPost, "/api/v1/webhooks", map[string]any{
		"url": "http://127.0.0.1:9/hooks/a-rather-long-path/that-goes-on/and-on?token=0123456789abcdef0123456789abcdef", "description": "ops",
	}, &hook); code != http.StatusCreated {
		t.Fatalf("creating a webhook: %d", code)
	}
	e.ask(t, "Transfer $50 to account 12345")
	e.ask(t, "Transfer $70 to account 777")
	caller := service.Caller{TenantID: "acme", Actor: "key:ops"}
	pending, err := inbox.New(e.rt).ListInterrupts(ctxBg, caller, service.InterruptFilter{Status: service.InterruptPending, Limit: 10})
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending: %v %d", err, len(pending))
	}
	axePage(t, ctx, script, e.srv.URL, "/ui/login", `#signin`)
	e.signIn(t, ctx, e.admin)
	decided := pending[1]
	run(t, ctx, "approve one", chromedp.Navigate(e.srv.URL+"/ui/interrupts/"+decided.ID.String()), chromedp.WaitVisible(`#decide`),
		chromedp.Click(`button.approve`), chromedp.WaitVisible(`#status.status-resolved`))
	for _, p := range []struct{ path, sel string }{
		{"/ui/", `#inbox tbody tr[data-id]`},
		{"/ui/interrupts/" + pending[0].ID.String(), `#decide`},
		{"/ui/interrupts/" + decided.ID.String(), `#outcome`},
		{"/ui/history", `td.decision`},
		{"/ui/sessions", `#recent`},
		{"/ui/sessions?q=" + customer, `#found`},
		{"/ui/sessions/" + decided.SessionID + "?agent=" + decided.Agent, `table.toolcalls`},
		{"/ui/reports", `section.chart svg`},
		{"/ui/webhooks", `#webhooks`},
		{"/ui/webhooks/" + hook.ID, `#deliveries`},
	} {
		axePage(t, ctx, script, e.srv.URL, p.path, p.sel)
	}
}

// TestAccessibilityOfGatedCallsInBrowser runs axe-core on the pages of a
// call under an approval policy: the inbox with its badges, the decision
// page with one vote of two, the page of a key without the scope, and the
// failed approved call with its Retry.
func TestAccessibilityOfGatedCallsInBrowser(t *testing.T) {
	bin := chromium(t)
	script := axeScript(t)
	e := newPolicyEnv(t)
	id := e.ask(t, "pay-1")
	page := "/ui/interrupts/" + id
	carol := browser(t, bin)
	e.signIn(t, carol, e.carol)
	axePage(t, carol, script, e.srv.URL, "/ui/", `#inbox tbody tr[data-id] .tag.votes`)
	axePage(t, carol, script, e.srv.URL, page, `#gate-decide`)
	run(t, carol, "carol approves", chromedp.Click(`#gate-decide button.approve`))
	textOf(t, carol, `#waiting`, "1 of 2 approvals")
	axePage(t, carol, script, e.srv.URL, page, `#votes tbody tr`)
	eve := browser(t, bin)
	e.signIn(t, eve, e.eve)
	axePage(t, eve, script, e.srv.URL, page, `#refused`)
	dave := browser(t, bin)
	e.signIn(t, dave, e.dave)
	run(t, dave, "dave approves", chromedp.Navigate(e.srv.URL+page), chromedp.WaitVisible(`#gate-decide`), chromedp.Click(`#gate-decide button.approve`))
	textOf(t, dave, `#gate-run`, "The approved call failed")
	axePage(t, dave, script, e.srv.URL, page, `#gate-run form.policy-retry`)
}
