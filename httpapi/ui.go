package httpapi

import (
	"bytes"
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/internal/cursor"
	"github.com/holdpoint/holdpoint/service"
)

// The operators' dashboard (/ui/): server-rendered pages, a little
// JavaScript for the live inbox and the decision form, both served from
// the binary. It uses the same runtime calls (and, from the browser, the
// same /api/v1 routes) as any operator. With authentication an operator
// signs in with an admin key (see uisession.go); in dev mode no sign-in.

//go:embed ui/*.html ui/static
var uiFiles embed.FS

// uiCSP keeps every page to its own scripts and styles: no inline script,
// no other origin, no framing.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var uiTemplates = template.Must(template.New("ui").Funcs(template.FuncMap{
	"short": func(s string) string {
		// Eight characters, not bytes: a cut inside one would show as a
		// byte that is not UTF-8.
		n := 0
		for i := range s {
			if n == 8 {
				return s[:i]
			}
			n++
		}
		return s
	},
	"age": func(t time.Time) string { return roughDuration(time.Since(t)) },
	"time": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"deadline": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		left := time.Until(*t)
		if left <= 0 {
			return "overdue"
		}
		return roughDuration(left) + " left"
	},
	"deadlineClass": func(t *time.Time) string {
		if t != nil && time.Until(*t) <= 0 {
			return "overdue"
		}
		return ""
	},
	"json":  compactJSON,
	"deref": func(s *string) string { return *s },
	"sub":   func(a, b int) int { return a - b },
	"secs": func(v *float64) string {
		if v == nil {
			return ""
		}
		return roughDuration(time.Duration(*v * float64(time.Second)))
	},
	// pathEscape makes a client's string (a session id) one segment of a
	// link's path: html/template leaves "/" and "?" as they are.
	"pathEscape":   url.PathEscape,
	"inputSummary": inputSummary,
	"visible":      visible,
	"warnHidden":   warnHidden,
	"fields":       inputFields,
	"outcome":      outcomeLine,
}).ParseFS(uiFiles, "ui/*.html"))

// registerUI adds the dashboard's routes.
func (a *api) registerUI(e *echo.Echo) {
	static, err := fs.Sub(uiFiles, "ui/static")
	if err != nil {
		panic(err)
	}
	assets := http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	e.GET("/ui/", a.uiInbox)
	e.GET("/ui/counts", a.uiCounts)
	e.GET("/ui/login", a.uiLogin)
	e.POST("/ui/session", a.uiSignIn)
	e.POST("/ui/session/end", a.uiSignOut)
	e.GET("/ui/history", a.uiHistory)
	e.GET("/ui/reports", a.uiReports)
	e.GET("/ui/reports.csv", a.uiReportsCSV)
	e.GET("/ui/interrupts/:id", a.uiRefused(a.uiInterrupt))
	e.GET("/ui/sessions", a.uiSessions)
	e.GET("/ui/sessions/:id", a.uiSession)
	e.GET("/ui/webhooks", a.uiWebhooks)
	e.GET("/ui/webhooks/:id", a.uiWebhook)
	e.POST("/ui/webhooks/:id/deliveries/:delivery/redeliver", a.uiRedeliver)
	a.registerUIPolicies(e)
	e.GET("/ui/static/*", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-cache")
		assets.ServeHTTP(c.Response(), c.Request())
		return nil
	})
}

// page is what every page template gets.
type page struct {
	Title  string
	Tenant string
	// CSRF is the session's token the page's scripts send (none in dev
	// mode); SignedIn shows the sign-out button.
	CSRF     string
	SignedIn bool
}

// pageOf is the page data of a signed-in (or dev mode) request.
func pageOf(c echo.Context, title, tenant string) page {
	csrf := csrfOf(c)
	return page{Title: title, Tenant: tenant, CSRF: csrf, SignedIn: csrf != ""}
}

func (a *api) render(c echo.Context, name string, data any) error {
	return a.renderStatus(c, http.StatusOK, name, data)
}

// renderStatus renders a page with an HTTP status of its own.
func (a *api) renderStatus(c echo.Context, status int, name string, data any) error {
	var b bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set(echo.HeaderCacheControl, "no-store")
	return c.HTMLBlob(status, b.Bytes())
}

// inboxPage is the inbox with its filters, counts and the next page.
type inboxPage struct {
	page
	Items                                     []service.Interrupt
	Agent, Tool, Session, EndUser, Order, Age string
	Next                                      string // query of the next page ("" when none)
	ByAgent, ByTool                           []pendingTotal
	Filtered                                  bool
}

// pendingTotal is the number of pending interrupts of one agent or tool.
type pendingTotal struct {
	Key     string `json:"key"`
	Pending int64  `json:"pending"`
}

// pendingTotals adds the counts up by key, in key order.
func pendingTotals(counts []service.PendingCount, key func(service.PendingCount) string) []pendingTotal {
	sums := map[string]int64{}
	for _, pc := range counts {
		sums[key(pc)] += pc.Pending
	}
	out := make([]pendingTotal, 0, len(sums))
	for k, n := range sums {
		out = append(out, pendingTotal{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// inboxAges are the age filters: older than.
var inboxAges = map[string]time.Duration{"1h": time.Hour, "6h": 6 * time.Hour, "24h": 24 * time.Hour}

func (a *api) uiInbox(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	f, err := inboxFilter(c)
	if err != nil {
		return err
	}
	f.Status = service.InterruptPending
	if c.QueryParam("limit") == "" {
		f.Limit = 50
	}
	age := c.QueryParam("age")
	if age != "" {
		d, ok := inboxAges[age]
		if !ok {
			return invalid("age must be 1h, 6h or 24h")
		}
		before := time.Now().Add(-d)
		f.CreatedBefore = &before
	}
	ctx := c.Request().Context()
	items, err := a.inbox.ListInterrupts(ctx, caller, f)
	if err != nil {
		return err
	}
	p := inboxPage{page: pageOf(c, "Inbox", caller.TenantID), Items: items, Agent: f.Agent, Tool: f.Tool, Session: f.SessionID,
		EndUser: f.EndUser, Age: age, Order: c.QueryParam("order")}
	p.Filtered = f.Agent != "" || f.Tool != "" || f.SessionID != "" || f.EndUser != "" || age != ""
	if len(items) == f.Limit {
		q := c.QueryParams()
		last := items[len(items)-1]
		q.Set("cursor", encodeCursor(last.CreatedAt, last.ID))
		p.Next = q.Encode()
	}
	if p.ByAgent, p.ByTool, err = a.inboxCounts(ctx, caller); err != nil {
		return err
	}
	return a.render(c, "inbox.html", p)
}

// inboxCounts are the pending interrupts per agent and per tool.
func (a *api) inboxCounts(ctx context.Context, caller service.Caller) ([]pendingTotal, []pendingTotal, error) {
	counts, err := a.inbox.PendingCounts(ctx, caller)
	if err != nil {
		return nil, nil, err
	}
	return pendingTotals(counts, func(pc service.PendingCount) string { return pc.Agent }),
		pendingTotals(counts, func(pc service.PendingCount) string { return pc.Tool }), nil
}

// uiCounts answers the inbox's counts lines as JSON (GET /ui/counts): the
// live inbox draws them again whenever it reloads its rows.
func (a *api) uiCounts(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	byAgent, byTool, err := a.inboxCounts(c.Request().Context(), caller)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusOK, map[string][]pendingTotal{"byAgent": byAgent, "byTool": byTool})
}

func (a *api) uiHistory(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var items []service.Interrupt
	for _, status := range []string{service.InterruptResolved, service.InterruptExpired} {
		got, err := a.inbox.ListInterrupts(ctx, caller, service.InterruptFilter{Status: status, Limit: 100})
		if err != nil {
			return err
		}
		items = append(items, got...)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt.After(items[j].CreatedAt) })
	return a.render(c, "history.html", struct {
		page
		Items []service.Interrupt
	}{pageOf(c, "History", caller.TenantID), items})
}

// uiForm is the decision form generated from an interrupt's output schema.
type uiForm struct {
	// Approval: the schema has a boolean "approved", shown as Approve and
	// Deny buttons.
	Approval bool
	Fields   []uiField
}

type uiField struct {
	Name, Type string
	Required   bool
	Enum       []string
}

// formOf generates the form of an output schema: one field per property
// (a boolean "approved" becomes the Approve/Deny buttons), or a single
// text field when the schema is not an object's.
func formOf(schema json.RawMessage) uiForm {
	var s struct {
		Type       any `json:"type"`
		Properties map[string]struct {
			Type any      `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	var f uiForm
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return f
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		typ, _ := p.Type.(string)
		if typ == "" {
			typ = "string"
		}
		if n == "approved" && typ == "boolean" {
			f.Approval = true
			continue
		}
		f.Fields = append(f.Fields, uiField{Name: n, Type: typ, Required: required[n], Enum: p.Enum})
	}
	return f
}

func (a *api) uiInterrupt(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return service.Errorf(service.CodeNotFound, "no such interrupt")
	}
	ctx := c.Request().Context()
	it, err := a.inbox.GetInterrupt(ctx, caller, id, 20)
	if err != nil {
		return err
	}
	events, err := a.inbox.InterruptEvents(ctx, caller, id)
	if err != nil {
		return err
	}
	records, err := a.rt.SessionToolCalls(ctx, caller, it.SessionID, nil, 50)
	if err != nil {
		return err
	}
	calls, err := a.uiCalls(ctx, caller, it.SessionID, records)
	if err != nil {
		return err
	}
	var form uiForm
	if agent, err := a.rt.LookupFor(ctx, caller, it.Agent); err == nil {
		for _, t := range agent.Tools {
			if t.Name == it.Tool {
				form = formOf(t.OutputSchema)
			}
		}
	}
	gate, err := a.gateOf(c, caller, it, form)
	if err != nil {
		return err
	}
	return a.render(c, "interrupt.html", struct {
		page
		Interrupt service.Interrupt
		Messages  []service.Message
		Events    []eventLine
		Form      uiForm
		ToolCalls []uiCall
		Execution string
		Gate      *uiGate
	}{pageOf(c, it.Tool, caller.TenantID), it.Interrupt, it.Messages, eventLines(events), form, calls, it.Execution, gate})
}

func (a *api) uiSession(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	// A session id is any client string: it arrives escaped in the path.
	id, err := pathParam(c, "id")
	if err != nil {
		return service.Errorf(service.CodeNotFound, "session not found")
	}
	ctx := c.Request().Context()
	// An operator sees the sessions of every end user of the tenant, as
	// the inbox links to them.
	snap, err := a.rt.OperatorSnapshot(ctx, caller, c.QueryParam("agent"), service.SnapshotLookup{SessionID: id})
	if err != nil {
		return err
	}
	snaps, err := a.rt.OperatorSessionSnapshots(ctx, caller, id)
	if err != nil {
		return err
	}
	records, err := a.rt.SessionToolCalls(ctx, caller, id, nil, 50)
	if err != nil {
		return err
	}
	calls, err := a.uiCalls(ctx, caller, id, records)
	if err != nil {
		return err
	}
	notice, problem := takeFlash(c, id)
	return a.render(c, "session.html", struct {
		page
		SessionID       string
		Snapshot        *service.Snapshot
		Snapshots       []service.Snapshot
		ToolCalls       []uiCall
		Notice, Problem string
	}{pageOf(c, "Session", caller.TenantID), id, snap, snaps, calls, notice, problem})
}

// recentSessions is how many sessions the sessions page lists before a
// search.
const recentSessions = 20

// uiSessions finds sessions by id or end user (GET /ui/sessions?q=...),
// and without a search lists the latest updated ones, recentSessions a
// page (?cursor= the next page's).
func (a *api) uiSessions(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	q, cur := c.QueryParam("q"), c.QueryParam("cursor")
	var found []service.SessionSummary
	var next string
	if q != "" {
		found, err = a.rt.FindSessions(c.Request().Context(), caller, q)
	} else {
		var after service.SessionPosition
		if cur != "" {
			if after, err = decodeSessionCursor(cur); err != nil {
				return err
			}
		}
		found, err = a.rt.RecentSessions(c.Request().Context(), caller, after, recentSessions)
		if n := len(found); err == nil && n == recentSessions {
			next = encodeSessionCursor(found[n-1])
		}
	}
	if err != nil {
		return err
	}
	return a.render(c, "sessions.html", struct {
		page
		Q, Next string
		Paged   bool
		Found   []service.SessionSummary
	}{pageOf(c, "Sessions", caller.TenantID), q, next, cur != "", found})
}

// encodeSessionCursor is the cursor of the recent sessions after s. A
// session id is any client string, so it is carried base64url-encoded
// (the cursor's fields hold no control character).
func encodeSessionCursor(s service.SessionSummary) string {
	return cursor.Encode(s.UpdatedAt.UTC().Format(time.RFC3339Nano), base64.RawURLEncoding.EncodeToString([]byte(s.ID)))
}

// decodeSessionCursor reads a cursor made by encodeSessionCursor.
func decodeSessionCursor(s string) (service.SessionPosition, error) {
	bad := invalid("%s", cursor.ErrMalformed)
	f, err := cursor.Decode(s, 2)
	if err != nil {
		return service.SessionPosition{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, f[0])
	id, idErr := base64.RawURLEncoding.DecodeString(f[1])
	if err != nil || idErr != nil || !inYearRange(t) {
		return service.SessionPosition{}, bad
	}
	return service.SessionPosition{UpdatedAt: t, ID: string(id)}, nil
}

func (a *api) uiCaller(c echo.Context) (service.Caller, error) {
	return a.opts.Caller(c)
}

// field is one line of an interrupt's input, as the pages show it.
type field struct{ Name, Value string }

// inputFields shows an input object as named fields (other JSON as one).
func inputFields(raw json.RawMessage) []field {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return []field{{"input", string(raw)}}
	}
	names := make([]string, 0, len(obj))
	for n := range obj {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]field, 0, len(names))
	for _, n := range names {
		var s string
		if json.Unmarshal(obj[n], &s) != nil {
			s = string(obj[n])
		}
		out = append(out, field{n, s})
	}
	return out
}

// inputSummary is an input on a few lines.
func inputSummary(raw json.RawMessage) string {
	var b bytes.Buffer
	for i, f := range inputFields(raw) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(f.Name + ": " + f.Value)
	}
	return b.String()
}

// roughDuration is a duration as people say it: 45s, 12m, 3h, 2d.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
