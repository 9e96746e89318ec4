package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/tenants"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// hookEnv is a server with authentication and webhooks over a fresh
// database, as `platform serve --allow-loopback-webhooks --webhook-retries
// 1h` runs it: endpoints may be on this machine, and a failed delivery
// waits an hour before its retry. Tenant acme has the demo banking agent
// and an admin key; tenant globex has an admin key of its own.
type hookEnv struct {
	env
	globex string // globex's admin key
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	ctx := context.Background()
	st := newStack(t)
	rt, store, log := st.rt, st.store, st.log
	if err := demo.Register(rt, demo.NewModel()); err != nil {
		t.Fatal(err)
	}
	ids := keys.NewEventIDs(store.SigningKeys)
	dispatcher := &webhooks.Dispatcher{
		Store: store, IDs: ids, Owner: rt.InstanceID(), AllowLoopback: true,
		Schedule: []time.Duration{time.Hour}, Timeout: 5 * time.Second, Poll: 100 * time.Millisecond, Log: log,
	}
	st.run(t, dispatcher.Run)
	acc := tenants.New(store)
	srv := httptest.NewServer(httpapi.New(rt, httpapi.Options{Logger: log, Auth: acc, Events: st.hub,
		Webhooks: &webhooks.Manager{Store: store, AllowLoopback: true}, EventIDs: ids}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	e := &hookEnv{env: env{srv: srv, rt: rt}}
	for _, k := range []struct {
		tenant string
		dst    *string
	}{{"acme", &e.admin}, {"globex", &e.globex}} {
		if _, err := acc.CreateTenant(ctx, k.tenant, k.tenant); err != nil {
			t.Fatal(err)
		}
		plain, _, err := acc.CreateKey(ctx, k.tenant, tenants.RoleAdmin, "ops")
		if err != nil {
			t.Fatal(err)
		}
		*k.dst = plain
	}
	return e
}

// api calls the REST API with a key and decodes the answer into out.
func (e *hookEnv) api(t *testing.T, key, method, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
	}
	return res.StatusCode
}

// deliveryRow is the first (newest) row of an endpoint's deliveries as the
// page shows it.
type deliveryRow struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Attempts string `json:"attempts"`
	HTTP     string `json:"http"`
	Error    string `json:"error"`
	Button   bool   `json:"button"`
}

const firstRowJS = `(r => r ? {id: r.dataset.id, status: r.dataset.status, attempts: r.querySelector('.attempts').textContent.trim(),
  http: r.querySelector('.http').textContent.trim(), error: r.querySelector('.error').textContent.trim(),
  button: !!r.querySelector('form.redeliver button')} : {})(document.querySelector('#deliveries tbody tr[data-id]'))`

// waitRow loads the page until its first delivery satisfies ok.
func waitRow(t *testing.T, ctx context.Context, url, what string, ok func(deliveryRow) bool) deliveryRow {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var row deliveryRow
	for {
		run(t, ctx, what, chromedp.Navigate(url), chromedp.WaitVisible(`#deliveries`), chromedp.Evaluate(firstRowJS, &row))
		if ok(row) {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the page still shows %+v", what, row)
		}
		time.Sleep(50 * time.Millisecond) // polls: a reload, then a look
	}
}

// fetchJS runs a fetch in the page and answers its HTTP status.
func fetchJS(t *testing.T, ctx context.Context, what, method, path string, csrf bool) int {
	t.Helper()
	headers := `{'Content-Type': 'application/json'}`
	if csrf {
		headers = `{'Content-Type': 'application/json', 'X-CSRF-Token': window.holdpoint.csrf()}`
	}
	body := ``
	if method == http.MethodPost {
		body = `, body: '{}'`
	}
	js := `window.fetched = 0; fetch(` + jsString(path) + `, {method: '` + method + `', headers: ` + headers + `, redirect: 'manual'` + body +
		`}).then(r => { window.fetched = r.type === 'opaqueredirect' ? 303 : r.status; }, () => { window.fetched = -1; })`
	var status int
	run(t, ctx, what, chromedp.Evaluate(js, nil), chromedp.Poll(`window.fetched`, &status, chromedp.WithPollingTimeout(time.Minute)))
	return status
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestWebhookPagesInBrowser follows a tenant's webhook endpoints through
// the dashboard: the list with its figures and a disabled endpoint's
// reason, an endpoint's deliveries with a failing attempt, redelivering a
// dead delivery (and being told why a pending one cannot be), and another
// tenant's operator seeing none of it.
// longQuery makes the second endpoint's URL longer than its cell.
const longQuery = "/gone?subscription=billing-notifications-for-the-quarterly-settlements-of-every-subsidiary&signature=v1"

func TestWebhookPagesInBrowser(t *testing.T) {
	bin := chromium(t)
	e := newHookEnv(t)

	// The tenant's receiver: /hook fails with 500, /gone says 410 Gone
	// until told otherwise.
	var hookCode, goneCode atomic.Int32
	hookCode.Store(http.StatusInternalServerError)
	goneCode.Store(http.StatusGone)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/hook":
			w.WriteHeader(int(hookCode.Load()))
		case "/gone":
			w.WriteHeader(int(goneCode.Load()))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(receiver.Close)

	markup := "<script>window.pwned=1</script><b>billing</b>"
	var hook, gone webhooks.Webhook
	if code := e.api(t, e.admin, http.MethodPost, "/api/v1/webhooks",
		map[string]any{"url": receiver.URL + "/hook", "eventTypes": []string{"interrupt.created"}, "description": markup}, &hook); code != http.StatusCreated {
		t.Fatalf("creating the endpoint: %d %+v", code, hook)
	}
	if code := e.api(t, e.admin, http.MethodPost, "/api/v1/webhooks",
		map[string]any{"url": receiver.URL + longQuery, "eventTypes": []string{"interrupt.created"}}, &gone); code != http.StatusCreated {
		t.Fatalf("creating the second endpoint: %d %+v", code, gone)
	}

	ctx := browser(t, bin)
	e.signIn(t, ctx, e.admin)
	e.ask(t, "Transfer $50 to account 12345")

	// The endpoint's page shows the failed attempt, waiting for its retry.
	hookPage := e.srv.URL + "/ui/webhooks/" + hook.ID.String()
	row := waitRow(t, ctx, hookPage, "the failed attempt", func(r deliveryRow) bool { return r.Attempts != "" && r.Attempts != "0" && r.HTTP == "500" })
	if row.Status != webhooks.DeliveryPending || row.Button || !strings.Contains(row.Error, "500") {
		t.Fatalf("after a 500 the delivery shows %+v", row)
	}
	var text, interrupt string
	var pwned bool
	run(t, ctx, "read the endpoint's page",
		chromedp.Text(`main`, &text),
		chromedp.AttributeValue(`#deliveries tbody tr[data-id] td a[href^="/ui/interrupts/"]`, "href", &interrupt, nil),
		chromedp.Evaluate(`window.pwned === 1`, &pwned))
	for _, want := range []string{receiver.URL + "/hook", markup, "interrupt.created", "enabled", "POST /api/v1/webhooks", "platform webhooks create"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the endpoint's page lacks %q:\n%s", want, text)
		}
	}
	if pwned || interrupt == "" {
		t.Fatalf("script ran: %v; interrupt link %q", pwned, interrupt)
	}
	screenshot(t, ctx, "webhook.png")

	// A pending delivery is not redelivered: it is retried on its own. A
	// post without the page's CSRF token is refused outright.
	redeliverHook := "/ui/webhooks/" + hook.ID.String() + "/deliveries/" + row.ID + "/redeliver"
	if got := fetchJS(t, ctx, "redeliver without the CSRF token", http.MethodPost, redeliverHook, false); got != http.StatusForbidden {
		t.Fatalf("a redelivery without the CSRF token answered %d", got)
	}
	if got := fetchJS(t, ctx, "redeliver a pending delivery", http.MethodPost, redeliverHook, true); got != http.StatusSeeOther {
		t.Fatalf("redelivering a pending delivery answered %d, want a 303 back to the page", got)
	}
	var flash string
	run(t, ctx, "the page says why", chromedp.Navigate(hookPage), chromedp.Text(`#flash.problem`, &flash))
	if !strings.Contains(flash, "still pending") {
		t.Fatalf("after redelivering a pending delivery the page says %q", flash)
	}
	var again int
	run(t, ctx, "the flash shows once", chromedp.Reload(), chromedp.WaitVisible(`#deliveries`),
		chromedp.Evaluate(`document.querySelectorAll('#flash').length`, &again))
	if again != 0 {
		t.Fatal("the flash shows again after a reload")
	}

	// The list: the endpoint the receiver answered 410 is disabled, saying
	// why; the other one has its failure counted. Reached from the nav.
	var list string
	run(t, ctx, "the list", chromedp.Navigate(e.srv.URL+"/ui/"), chromedp.WaitVisible(`#inbox`),
		chromedp.Click(`nav a[href="/ui/webhooks"]`), chromedp.WaitVisible(`#webhooks`))
	deadline := time.Now().Add(time.Minute)
	for {
		run(t, ctx, "the list", chromedp.Reload(), chromedp.WaitVisible(`#webhooks`), chromedp.Text(`#webhooks`, &list))
		if strings.Contains(list, "the receiver answered 410 Gone at") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polls: a reload, then a look
	}
	for _, want := range []string{receiver.URL + "/hook", receiver.URL + "/gone", "disabled", "the receiver answered 410 Gone at", "enabled"} {
		if !strings.Contains(list, want) {
			t.Fatalf("the list lacks %q:\n%s", want, list)
		}
	}
	// A long URL breaks where it must, not between any two letters, the
	// page does not scroll sideways, and the link's title is the URL.
	var wraps string
	run(t, ctx, "long URLs", chromedp.Evaluate(`(c => getComputedStyle(c).overflowWrap + ' ' + getComputedStyle(c).wordBreak + ' ' +
		(document.documentElement.scrollWidth <= document.documentElement.clientWidth) + ' ' +
		[...document.querySelectorAll('#webhooks td.url a')].every(a => a.title === a.textContent))(document.querySelector('#webhooks td.url'))`, &wraps))
	if wraps != "anywhere normal true true" {
		t.Fatalf("a long URL's cell: overflow-wrap, word-break, fits, titled: %q", wraps)
	}
	screenshot(t, ctx, "webhooks.png")

	// Redeliver the dead delivery: it is pending again, and waits while
	// the endpoint is disabled.
	gonePage := e.srv.URL + "/ui/webhooks/" + gone.ID.String()
	row = waitRow(t, ctx, gonePage, "the dead delivery", func(r deliveryRow) bool { return r.Status == webhooks.DeliveryDead })
	if row.HTTP != "410" || !row.Button {
		t.Fatalf("the dead delivery shows %+v", row)
	}
	run(t, ctx, "redeliver", chromedp.Click(`#deliveries tbody tr[data-id] form.redeliver button`),
		chromedp.WaitVisible(`#flash.notice`), chromedp.Text(`#flash`, &flash), chromedp.Evaluate(firstRowJS, &row))
	if !strings.Contains(flash, "queued again") || row.Status != webhooks.DeliveryPending || row.Attempts != "0" || row.Button {
		t.Fatalf("after the redelivery: flash %q, row %+v", flash, row)
	}
	var disabled string
	run(t, ctx, "the disabled endpoint", chromedp.Text(`#disabled`, &disabled))
	screenshot(t, ctx, "webhook-redelivered.png")
	if !strings.Contains(disabled, "410 Gone") {
		t.Fatalf("the disabled endpoint's page says %q", disabled)
	}

	// Enabled again, with a receiver that answers 200: delivered. Redeliver
	// it once more: pending, then delivered again.
	goneCode.Store(http.StatusOK)
	if code := e.api(t, e.admin, http.MethodPatch, "/api/v1/webhooks/"+gone.ID.String(), map[string]any{"enabled": true}, nil); code != http.StatusOK {
		t.Fatalf("enabling the endpoint: %d", code)
	}
	row = waitRow(t, ctx, gonePage, "the redelivery", func(r deliveryRow) bool { return r.Status == webhooks.DeliveryDelivered })
	if row.HTTP != "200" || row.Attempts != "1" || !row.Button {
		t.Fatalf("the redelivered delivery shows %+v", row)
	}
	run(t, ctx, "redeliver a delivered one", chromedp.Click(`#deliveries tbody tr[data-id] form.redeliver button`),
		chromedp.WaitVisible(`#flash.notice`), chromedp.Evaluate(firstRowJS, &row))
	if row.Status != webhooks.DeliveryPending && row.Status != webhooks.DeliveryDelivered {
		t.Fatalf("after redelivering a delivered one: %+v", row)
	}
	waitRow(t, ctx, gonePage+"?status=delivered", "delivered again", func(r deliveryRow) bool { return r.Status == webhooks.DeliveryDelivered })

	// Another tenant's operator sees no endpoint, and neither page nor
	// redelivery of acme's.
	other := browser(t, bin)
	e.signIn(t, other, e.globex)
	run(t, other, "globex's list", chromedp.Navigate(e.srv.URL+"/ui/webhooks"), chromedp.WaitVisible(`#webhooks`), chromedp.Text(`#webhooks`, &list))
	if strings.Contains(list, receiver.URL) || !strings.Contains(list, "No webhook endpoint yet") {
		t.Fatalf("globex's list shows %q", list)
	}
	if got := fetchJS(t, other, "globex opens acme's endpoint", http.MethodGet, "/ui/webhooks/"+hook.ID.String(), false); got != http.StatusNotFound {
		t.Fatalf("globex's operator opened acme's endpoint page: %d", got)
	}
	if got := fetchJS(t, other, "globex redelivers acme's delivery", http.MethodPost, "/ui/webhooks/"+gone.ID.String()+"/deliveries/"+row.ID+"/redeliver", true); got != http.StatusNotFound {
		t.Fatalf("globex's operator redelivered acme's delivery: %d", got)
	}
}

// TestWebhookPagesWithoutWebhooks: a server that keeps no webhooks says so
// on the pages, rather than failing.
func TestWebhookPagesWithoutWebhooks(t *testing.T) {
	e := newEnv(t)
	b, _ := json.Marshal(map[string]string{"key": e.admin})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ui/session", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || len(res.Cookies()) == 0 {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	for _, path := range []string{"/ui/webhooks", "/ui/webhooks/0b0e4f40-6a6c-4d59-9b43-1f6f3c1e6d2a"} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		for _, c := range res.Cookies() {
			req.AddCookie(c)
		}
		got, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if got.StatusCode != http.StatusOK || !strings.Contains(string(page), "Webhooks are not enabled on this server") {
			t.Fatalf("%s: %d\n%s", path, got.StatusCode, page)
		}
	}
}
