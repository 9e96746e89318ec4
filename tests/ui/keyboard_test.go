package ui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// focused is what the focused element of the page is, as a test reads it.
type focused struct {
	Desc    string `json:"desc"`
	Approve bool   `json:"approve"`
	Outline string `json:"outline"`
	Width   string `json:"width"`
}

const focusedJS = `(el => ({desc: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + el.className : '') + ' ' + (el.textContent || '').trim().slice(0, 30),
  approve: el.matches('button.approve'), outline: getComputedStyle(el).outlineStyle, width: getComputedStyle(el).outlineWidth}))(document.activeElement || document.body)`

// TestKeyboardApprovalInBrowser approves with the keyboard only: from the
// top of the decision page, Tab until the Approve button has the focus
// (which it shows with an outline of its own), then Enter; the decision is
// recorded.
func TestKeyboardApprovalInBrowser(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	ctx := browser(t, bin)
	e.signIn(t, ctx, e.admin)
	e.ask(t, "Transfer $50 to account 12345")
	caller := service.Caller{TenantID: "acme", Actor: "key:alice"}
	pending, err := inbox.New(e.rt).ListInterrupts(context.Background(), caller, service.InterruptFilter{Status: service.InterruptPending, Limit: 10})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %v %d", err, len(pending))
	}
	id := pending[0].ID
	run(t, ctx, "open the decision page", chromedp.Navigate(e.srv.URL+"/ui/interrupts/"+id.String()), chromedp.WaitVisible(`#decide`),
		// The focus starts at the top of the document, as after a load.
		chromedp.Evaluate(`document.activeElement && document.activeElement.blur(); window.focus(); true`, nil))
	var path []string
	var f focused
	for range 60 {
		run(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(focusedJS, &f))
		path = append(path, f.Desc)
		if f.Approve {
			break
		}
	}
	if !f.Approve {
		t.Fatalf("60 Tab presses never reached the Approve button; the focus went through:\n%s", strings.Join(path, "\n"))
	}
	t.Logf("Approve reached with %d Tab presses: %s", len(path), strings.Join(path, " → "))
	if f.Outline == "none" || f.Width == "0px" || f.Width == "1px" {
		t.Errorf("the focused Approve button shows outline %s %s: a keyboard user cannot see where the focus is", f.Outline, f.Width)
	}
	screenshot(t, ctx, "keyboard-focus.png")
	var answer string
	run(t, ctx, "Enter", chromedp.KeyEvent(kb.Enter),
		chromedp.Poll(`(t => t.startsWith('Decided') ? t : '')(document.getElementById('result').textContent)`, &answer, chromedp.WithPollingTimeout(time.Minute)))
	it, err := inbox.New(e.rt).GetInterrupt(context.Background(), caller, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Respond struct {
			Approved *bool `json:"approved"`
		} `json:"respond"`
	}
	_ = json.Unmarshal(it.Resolution, &res)
	if it.Status != service.InterruptResolved || res.Respond.Approved == nil || !*res.Respond.Approved || !strings.HasPrefix(it.ResolvedBy, "key:alice") {
		t.Fatalf("after Enter on Approve the interrupt is %s by %q with %s", it.Status, it.ResolvedBy, it.Resolution)
	}
}
