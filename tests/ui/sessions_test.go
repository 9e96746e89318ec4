package ui

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// addSessions writes n sessions of tenant (s-01 … updated a minute apart,
// newest first; the two at the end of the first page updated at the same
// instant) straight into the database.
func addSessions(t *testing.T, url, tenant string, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := testdb.OwnerPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		`SELECT set_config('holdpoint.tenant_id', $1, true)`,
		`INSERT INTO tenants (id, name) VALUES ($1, $1) ON CONFLICT DO NOTHING`,
		`INSERT INTO sessions (tenant_id, id, agent, end_user, created_at, updated_at)
		 SELECT $1, $1 || '-s-' || lpad(g::text, 2, '0'), 'bankingAgent', 'user' || g, now() - interval '1 day',
		        now() - least(g, 20) * interval '1 minute' FROM generate_series(1, $2::int) g`,
	} {
		args := []any{tenant}
		if strings.Contains(q, "$2") {
			args = append(args, n)
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecentSessionsPagedInBrowser: the sessions page lists the tenant's
// sessions, newest first, 20 a page, older ones a link away, every one
// once (two updated at the same instant across the page's end included)
// and none of another tenant's.
func TestRecentSessionsPagedInBrowser(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t)
	addSessions(t, e.db, "acme", 25)
	addSessions(t, e.db, "globex", 3)
	ctx := browser(t, bin)
	e.signIn(t, ctx, e.admin)
	ids := `[...document.querySelectorAll('#recent tbody tr td:first-child a')].map(a => a.textContent)`
	var first, second []string
	var older, newer bool
	run(t, ctx, "the first page", chromedp.Navigate(e.srv.URL+"/ui/sessions"), chromedp.WaitVisible(`#recent`),
		chromedp.Evaluate(ids, &first), chromedp.Evaluate(`!!document.getElementById('newest')`, &newer))
	if len(first) != 20 || first[0] != "acme-s-01" || newer {
		t.Fatalf("the first page: %d sessions %v (a link to the newest: %v)", len(first), first, newer)
	}
	screenshot(t, ctx, "sessions-paged.png")
	run(t, ctx, "older sessions", chromedp.Click(`#next`), chromedp.WaitVisible(`#newest`),
		chromedp.Evaluate(ids, &second), chromedp.Evaluate(`!!document.getElementById('next')`, &older))
	if len(second) != 5 || older {
		t.Fatalf("the second page: %d sessions %v (a link to older ones: %v)", len(second), second, older)
	}
	seen := map[string]bool{}
	for _, id := range append(first, second...) {
		if seen[id] || !strings.HasPrefix(id, "acme-s-") {
			t.Fatalf("the pages list %s twice or of another tenant: %v then %v", id, first, second)
		}
		seen[id] = true
	}
	if len(seen) != 25 {
		t.Fatalf("the pages list %d sessions, want 25", len(seen))
	}
	screenshot(t, ctx, "sessions-older.png")
	var bad string
	run(t, ctx, "a made-up cursor", chromedp.Navigate(e.srv.URL+"/ui/sessions?cursor=bm9wZQ"), chromedp.Evaluate(`document.body.innerText`, &bad))
	if !strings.Contains(bad, "cursor is malformed") {
		t.Fatalf("a made-up cursor shows %q", bad)
	}
}
