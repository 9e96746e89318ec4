package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardPolishInBrowser holds the dashboard to what issue 28 asked
// of it: the inbox's counts lines without a trailing separator (drawn
// again by the live inbox), the
// decision page's badge showing the decided status (live and reloaded),
// decisions in the history and on the decision page as fields, their JSON
// only behind a summary, an end user's session open to the operator, and report charts with a bar of a fixed width,
// every day of the range on the axis and a 0 % approval rate drawn.
func TestDashboardPolishInBrowser(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	ctx := browser(t, bin)
	e.signIn(t, ctx, e.admin)
	e.ask(t, "Transfer $50 to account 12345")
	e.askWithInput(t, `{"action":"transferMoney","details":"pay the invoice"}`)

	// Counts: "Pending per agent: a 1 · b 1", a separator between items
	// only.
	var counts string
	run(t, ctx, "the counts", chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#inbox tbody tr[data-id]`),
		chromedp.Evaluate(`document.querySelector('p.counts').innerText`, &counts))
	lines := strings.Split(strings.TrimSpace(counts), "\n")
	if len(lines) != 2 || lines[0] != "Pending per agent: bankingAgent 1 · markup 1" || lines[1] != "Pending per tool: userApproval 2" {
		t.Fatalf("the counts lines: %q", lines)
	}
	for _, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), "·") {
			t.Fatalf("a counts line ends in a separator: %q", l)
		}
	}
	// The open inbox draws its counts again when an approval arrives.
	var live string
	run(t, ctx, "inbox live", chromedp.Poll(`document.getElementById('live').dataset.state === 'live' ? 'live' : ''`, &live, chromedp.WithPollingTimeout(time.Minute)))
	e.ask(t, "Transfer $70 to account 777")
	run(t, ctx, "the counts, live", chromedp.Poll(`(t => t.includes('bankingAgent 2') ? t : '')(document.querySelector('p.counts').innerText)`, &counts,
		chromedp.WithPollingTimeout(time.Minute)))
	if lines := strings.Split(strings.TrimSpace(counts), "\n"); len(lines) != 2 || lines[0] != "Pending per agent: bankingAgent 2 · markup 1" || lines[1] != "Pending per tool: userApproval 3" {
		t.Fatalf("the counts lines after an approval arrived: %q", lines)
	}
	screenshot(t, ctx, "inbox-counts.png")

	// Deny the banking approval with feedback and a note: the badge says
	// resolved, live and after a reload, and the decision reads as fields.
	var href, badge, answer string
	run(t, ctx, "find the banking approval",
		chromedp.Evaluate(`[...document.querySelectorAll('#inbox tbody tr[data-id]')].find(r => r.cells[0].textContent.trim() === 'bankingAgent').querySelector('td a').getAttribute('href')`, &href))
	run(t, ctx, "deny the banking approval", chromedp.Navigate(e.srv.URL+href), chromedp.WaitVisible(`#decide`),
		chromedp.SendKeys(`input[name=feedback]`, "call the customer first"),
		chromedp.SendKeys(`input[name=__note]`, "unusual amount"),
		chromedp.Click(`button.deny`),
		chromedp.Poll(`(t => t.startsWith('Decided') ? t : '')(document.getElementById('result').textContent)`, &answer, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Poll(`(t => t === 'resolved' ? t : '')(document.getElementById('status').textContent)`, &badge, chromedp.WithPollingTimeout(time.Minute)))
	var decided struct {
		Badge, Outcome, Fields string
		RawOpen                bool
	}
	run(t, ctx, "the decided page", chromedp.Reload(), chromedp.WaitVisible(`#outcome`),
		chromedp.Evaluate(`({Badge: document.getElementById('status').textContent, Outcome: document.getElementById('outcome').innerText,
			Fields: document.querySelector('main dl.decision-fields').innerText, RawOpen: document.querySelector('main details.raw').open})`, &decided))
	if decided.Badge != "resolved" || !strings.HasPrefix(decided.Outcome, "Denied by key:alice") || !strings.Contains(decided.Outcome, "unusual amount") ||
		decided.Fields != "feedback\tcall the customer first" && decided.Fields != "feedback\ncall the customer first" || decided.RawOpen {
		t.Fatalf("the decided page: %+v", decided)
	}
	screenshot(t, ctx, "decision-fields.png")

	// The history: who, what and when, the fields as a definition list and
	// the resolution's JSON behind a summary, which opens it.
	var row, raw string
	run(t, ctx, "the history", chromedp.Navigate(e.srv.URL+"/ui/history"), chromedp.WaitVisible(`td.decision dl.decision-fields`),
		chromedp.Evaluate(`document.querySelector('main table tbody tr').innerText`, &row))
	for _, want := range []string{"bankingAgent", "userApproval", customer, "Denied by key:alice", "unusual amount", "feedback", "call the customer first", "raw JSON", " UTC"} {
		if !strings.Contains(row, want) {
			t.Fatalf("the history's row lacks %q: %q", want, row)
		}
	}
	if strings.Contains(row, "{") {
		t.Fatalf("the history's row shows JSON before it is asked for: %q", row)
	}
	screenshot(t, ctx, "history-fields.png")
	run(t, ctx, "open the raw JSON", chromedp.Click(`td.decision details.raw summary`),
		chromedp.Evaluate(`document.querySelector('td.decision details.raw').innerText`, &raw))
	if !strings.Contains(raw, `"feedback":"call the customer first"`) || !strings.Contains(raw, `"approved":false`) {
		t.Fatalf("the raw JSON shows %q", raw)
	}
	// The session of the end user who asked opens from the history, its
	// conversation and snapshots shown to the operator.
	var session string
	run(t, ctx, "the end user's session", chromedp.Evaluate(`document.querySelector('main table tbody tr a[href^="/ui/interrupts/"]').click()`, nil),
		chromedp.WaitVisible(`#outcome`), chromedp.Evaluate(`document.querySelector('main p.muted a[href^="/ui/sessions/"]').click()`, nil),
		chromedp.WaitVisible(`ol.messages`), chromedp.Evaluate(`document.querySelector('main').innerText`, &session))
	if !strings.Contains(session, "Cancelled: the transfer of") || !strings.Contains(session, "Snapshots") {
		t.Fatalf("the end user's session page shows %q", session)
	}

	// Reports: one day is drawn as a narrow bar, not one half the chart
	// wide; a week has every day on its axis, the days without data too.
	type chartShape struct {
		Bars   int       `json:"bars"`
		Widths []float64 `json:"widths"`
		Labels []string  `json:"labels"`
		Width  float64   `json:"width"`
	}
	const shapeJS = `(s => ({bars: s.querySelectorAll('rect').length, widths: [...s.querySelectorAll('rect')].map(r => r.width.baseVal.value),
		labels: [...s.querySelectorAll('text')].slice(1).map(t => t.textContent), width: s.viewBox.baseVal.width}))(document.querySelector('section.chart svg'))`
	today := time.Now().UTC().Format(time.DateOnly)
	var one, week chartShape
	run(t, ctx, "one day", chromedp.Navigate(e.srv.URL+"/ui/reports?from="+today+"&to="+today), chromedp.WaitVisible(`section.chart svg`),
		chromedp.Evaluate(shapeJS, &one))
	screenshot(t, ctx, "reports-one-day.png")
	// A day of denials only is an approval rate of 0 %, drawn, not "no
	// data".
	var rate string
	run(t, ctx, "the approval rate", chromedp.Evaluate(`(s => s.querySelector('svg rect title') ? s.querySelector('svg rect title').textContent : s.innerText)(document.querySelectorAll('section.chart')[1])`, &rate))
	if rate != today+" approved: 0%" {
		t.Fatalf("the approval rate of a day of one denial: %q", rate)
	}
	if one.Bars != 2 || len(one.Labels) != 1 || one.Labels[0] != today[5:] {
		t.Fatalf("one day's chart: %+v", one)
	}
	for _, w := range one.Widths {
		if w > one.Width/10 {
			t.Fatalf("one day's bar is %.0f of the chart's %.0f wide", w, one.Width)
		}
	}
	run(t, ctx, "a week", chromedp.Navigate(e.srv.URL+"/ui/reports"), chromedp.WaitVisible(`section.chart svg`), chromedp.Evaluate(shapeJS, &week))
	if week.Bars != 14 || len(week.Labels) != 7 || week.Labels[6] != today[5:] {
		t.Fatalf("a week's chart (every day, two bars a day): %+v", week)
	}
	for _, w := range week.Widths {
		if w != week.Widths[0] {
			t.Fatalf("a week's bars are not all as wide: %v", week.Widths)
		}
	}
	screenshot(t, ctx, "reports-week.png")
}
