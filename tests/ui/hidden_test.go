package ui

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestHiddenCharactersInBrowser: an approval asking to pay account
// "\u202e54321" (drawn as 12345 when shown raw) arrives in the open inbox,
// rendered by its script, and the decision page shows it as the server
// renders it: the override as a visible ⟨U+202E⟩ before 54321, flagged.
func TestHiddenCharactersInBrowser(t *testing.T) {
	exec := chromium(t)
	t.Parallel()
	e := newEnv(t)
	ctx := browser(t, exec)
	e.signIn(t, ctx, e.admin)
	run(t, ctx, "live inbox", chromedp.WaitVisible(`#live[data-state=live]`))
	e.askWithInput(t, `{"action":"transferMoney","details":"to account \u202e54321"}`)
	var row, flag string
	run(t, ctx, "the approval arrives",
		chromedp.WaitVisible(`#inbox tbody tr[data-id] .hidden-char`),
		chromedp.Text(`#inbox tbody tr[data-id] td.input`, &row),
		chromedp.Text(`#inbox tbody tr[data-id] td.input .warn-hidden`, &flag))
	const warning = "this value contains invisible or direction-changing characters"
	if !strings.Contains(row, "details: to account ⟨U+202E⟩54321") || strings.Contains(row, "\u202e") || !strings.Contains(flag, warning) {
		t.Fatalf("the live inbox shows %q, flag %q", row, flag)
	}
	var field, banner string
	run(t, ctx, "decision page", chromedp.Evaluate(`document.querySelector('#inbox tbody tr[data-id] td a').click()`, nil),
		chromedp.WaitVisible(`#decide`),
		chromedp.Text(`dl.fields`, &field),
		chromedp.Text(`section p.warn-hidden`, &banner))
	if !strings.Contains(field, "⟨U+202E⟩54321") || strings.Contains(field, "\u202e") || !strings.Contains(field, warning) || banner == "" {
		t.Fatalf("the decision page shows %q, banner %q", field, banner)
	}
	screenshot(t, ctx, "hidden-characters.png")
}
