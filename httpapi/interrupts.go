package httpapi

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/internal/cursor"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// Bounds of the inbox's query parameters and decision bodies.
const (
	// defaultInboxPage is the page size when limit is absent.
	defaultInboxPage = 50
	// maxFilterLength bounds the agent, tool and sessionId filters.
	maxFilterLength = 256
	// maxNoteLength bounds an operator's note, in characters.
	maxNoteLength = 2000
	// contextMessages is how many of the session's last messages an
	// interrupt's detail shows.
	contextMessages = 10
	// defaultReportDays is the report's window when from is absent.
	defaultReportDays = 7
	// maxReportDays bounds a report's window.
	maxReportDays = 366
)

// registerV1 adds the REST routes of the approvals inbox, reports and live
// events under g (/api/v1).
func (a *api) registerV1(g *echo.Group) {
	g.GET("/interrupts", a.listInterrupts)
	g.GET("/interrupts/:id", a.getInterrupt)
	g.GET("/interrupts/:id/events", a.interruptEvents)
	g.GET("/interrupts/:id/outcome", a.interruptOutcome)
	g.GET("/interrupts/:id/tool-calls", a.interruptToolCalls)
	g.GET("/sessions/:id/tool-calls", a.sessionToolCalls)
	g.POST("/interrupts/:id/respond", a.respondInterrupt)
	g.POST("/interrupts/:id/restart", a.restartInterrupt)
	g.GET("/reports/interrupts", a.reportInterrupts)
	g.GET("/events", a.streamEvents)
}

// interruptPage is one page of the inbox.
type interruptPage struct {
	Items      []protocol.InboxInterrupt `json:"items"`
	NextCursor string                    `json:"nextCursor,omitempty"`
}

// listInterrupts answers a page of the inbox, newest first:
// GET /api/v1/interrupts.
func (a *api) listInterrupts(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	f, err := inboxFilter(c)
	if err != nil {
		return err
	}
	items, err := a.inbox.ListInterrupts(c.Request().Context(), caller, f)
	if err != nil {
		return err
	}
	page := interruptPage{Items: make([]protocol.InboxInterrupt, len(items))}
	for i := range items {
		page.Items[i] = items[i].Wire()
	}
	if len(items) == f.Limit {
		// A full page may have a successor; an empty next page is the
		// price of not counting.
		last := items[len(items)-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	return writeJSON(c, page)
}

// inboxFilter reads the inbox's query parameters. Status values are checked
// by the service, which owns the list of statuses.
func inboxFilter(c echo.Context) (service.InterruptFilter, error) {
	q := c.QueryParams()
	f := service.InterruptFilter{Status: q.Get("status"), Limit: defaultInboxPage}
	for name, dst := range map[string]*string{"agent": &f.Agent, "tool": &f.Tool, "sessionId": &f.SessionID, "endUser": &f.EndUser} {
		v := q.Get(name)
		if len(v) > maxFilterLength || !isPlainText(v) {
			return f, invalid("%s must be at most %d bytes of UTF-8 text without control characters", name, maxFilterLength)
		}
		*dst = v
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > inbox.MaxInboxPage {
			return f, invalid("limit must be an integer from 1 to %d", inbox.MaxInboxPage)
		}
		f.Limit = n
	}
	switch q.Get("order") {
	case "", "newest":
	case "oldest":
		f.Oldest = true
	default:
		return f, invalid("order must be newest or oldest")
	}
	var err error
	if f.CreatedBefore, err = timeParam(c, "createdBefore", false); err != nil {
		return f, err
	}
	if f.CreatedAfter, err = timeParam(c, "createdAfter", false); err != nil {
		return f, err
	}
	if v := q.Get("cursor"); v != "" {
		at, id, err := decodeCursor(v)
		if err != nil {
			return f, err
		}
		f.AfterCreatedAt, f.AfterID = &at, id
	}
	return f, nil
}

// isPlainText reports whether s is valid UTF-8 without control characters
// (C0, DEL, C1). Such a filter could match no stored name (the runtime
// refuses them in ids), and U+0000 or invalid UTF-8 would fail in
// PostgreSQL instead of matching nothing.
func isPlainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

// encodeCursor makes the opaque keyset cursor of an inbox page: the
// (createdAt, id) of its last item.
func encodeCursor(at time.Time, id uuid.UUID) string {
	return cursor.Encode(at.UTC().Format(time.RFC3339Nano), id.String())
}

// decodeCursor reads a cursor made by encodeCursor.
func decodeCursor(s string) (time.Time, uuid.UUID, error) {
	bad := invalid("%s", cursor.ErrMalformed)
	f, err := cursor.Decode(s, 2)
	if err != nil {
		return time.Time{}, uuid.Nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil || !inYearRange(t) {
		return time.Time{}, uuid.Nil, bad
	}
	id, err := uuid.Parse(f[1])
	if err != nil {
		return time.Time{}, uuid.Nil, bad
	}
	return t, id, nil
}

// timeParam reads an optional time query parameter given as RFC 3339 or as
// a date (YYYY-MM-DD, midnight UTC). With endOfDay a bare date means the end
// of that day, so that `to=2026-03-31` includes March 31.
func timeParam(c echo.Context, name string, endOfDay bool) (*time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, v); err != nil {
			return nil, invalid("%s must be an RFC 3339 time (2006-01-02T15:04:05Z) or a date (2006-01-02)", name)
		}
		if endOfDay {
			if t = t.AddDate(0, 0, 1); !inYearRange(t) {
				return nil, invalid("%s must be a date before %d-12-31: a date means the end of that day", name, maxYear)
			}
		}
	}
	if !inYearRange(t) {
		return nil, invalid("%s must lie within the years %d to %d (in UTC too)", name, minYear, maxYear)
	}
	return &t, nil
}

// The years a time parameter may name: those an RFC 3339 answer can write.
const (
	minYear = 1
	maxYear = 9999
)

// inYearRange reports whether t falls within minYear to maxYear, both in
// its own offset (as an answer echoes it) and in UTC (as it is compared).
func inYearRange(t time.Time) bool {
	for _, y := range []int{t.Year(), t.UTC().Year()} {
		if y < minYear || y > maxYear {
			return false
		}
	}
	return true
}

// interruptID reads the :id path parameter. An id that is not a UUID names
// no interrupt, so it is answered like an unknown one: 404.
func interruptID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil || len(c.Param("id")) != 36 {
		return uuid.Nil, service.Errorf(service.CodeNotFound, "interrupt not found")
	}
	return id, nil
}

// getInterrupt answers one interrupt with the end of its session's history:
// GET /api/v1/interrupts/:id.
func (a *api) getInterrupt(c echo.Context) error {
	return answerByID(a, c, interruptID, func(ctx context.Context, caller service.Caller, id uuid.UUID) (*inbox.InterruptDetail, error) {
		return a.inbox.GetInterrupt(ctx, caller, id, contextMessages)
	})
}

// interruptOutcome answers a decision's outcome to any key of the tenant
// (and an end user's token, for that user's sessions):
// GET /api/v1/interrupts/:id/outcome.
func (a *api) interruptOutcome(c echo.Context) error {
	return answerByID(a, c, interruptID, a.inbox.InterruptOutcome)
}

// interruptEvents answers an interrupt's audit trail, oldest first:
// GET /api/v1/interrupts/:id/events.
func (a *api) interruptEvents(c echo.Context) error {
	return interruptItems(a, c, func(ctx context.Context, caller service.Caller, id uuid.UUID) ([]protocol.AuditEvent, error) {
		events, err := a.inbox.InterruptEvents(ctx, caller, id)
		out := make([]protocol.AuditEvent, len(events))
		for i, ev := range events {
			out[i] = ev.Wire()
		}
		return out, err
	})
}

// interruptItems answers {"items": [...]}, what list finds for the
// interrupt named by the path (never null).
func interruptItems[T any](a *api, c echo.Context, list func(context.Context, service.Caller, uuid.UUID) ([]T, error)) error {
	return answerByID(a, c, interruptID, func(ctx context.Context, caller service.Caller, id uuid.UUID) (map[string]any, error) {
		items, err := list(ctx, caller, id)
		if err != nil {
			return nil, err
		}
		if items == nil {
			items = []T{}
		}
		return map[string]any{"items": items}, nil
	})
}

// answerByID resolves the caller and the id the path names (pathID reads
// it and answers a malformed one), then answers as JSON what get finds for
// them.
func answerByID[T any](a *api, c echo.Context, pathID func(echo.Context) (uuid.UUID, error), get func(context.Context, service.Caller, uuid.UUID) (T, error)) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	res, err := get(c.Request().Context(), caller, id)
	if err != nil {
		return err
	}
	return writeJSON(c, res)
}

// decisionRequest is the body of respond and restart.
type decisionRequest struct {
	Output json.RawMessage `json:"output"`
	// Input, on restart, is an approver's edit of a gated call's input
	// (where its policy allows edits).
	Input json.RawMessage `json:"input"`
	Note  *string         `json:"note"`
}

// respondInterrupt decides an interrupt with an output on the user's
// behalf: POST /api/v1/interrupts/:id/respond.
func (a *api) respondInterrupt(c echo.Context) error {
	_, res, err := a.decide(c, true, true, a.inbox.RespondInterrupt)
	if err != nil {
		return err
	}
	return writeJSON(c, res)
}

// restartInterrupt decides an interrupt by running its tool again:
// POST /api/v1/interrupts/:id/restart.
func (a *api) restartInterrupt(c echo.Context) error {
	_, res, err := a.decide(c, false, true, a.inbox.ApproveInterrupt)
	if err != nil {
		return err
	}
	return writeJSON(c, res)
}

// decideFunc is the inbox's RespondInterrupt (given the body's output) or
// ApproveInterrupt (given its edited input, if any).
type decideFunc func(ctx context.Context, c service.Caller, id uuid.UUID, value json.RawMessage, note string) (*inbox.DecisionResult, error)

// decide resolves the caller and the interrupt the path names, checks the
// decision body (see beginDecision) and makes the decision with decide:
// respond's (withOutput) or restart's. With keyed the request's
// Idempotency-Key goes with it (see decisionKey).
func (a *api) decide(c echo.Context, withOutput, keyed bool, decide decideFunc) (uuid.UUID, *inbox.DecisionResult, error) {
	caller, id, req, err := a.beginDecision(c, withOutput)
	if err != nil {
		return id, nil, err
	}
	ctx := c.Request().Context()
	if keyed {
		if ctx, err = decisionKey(c); err != nil {
			return id, nil, err
		}
	}
	value := req.Input
	if withOutput {
		value = req.Output
	}
	res, err := decide(ctx, caller, id, value, noteOf(req))
	return id, res, err
}

// idempotencyKey is what an Idempotency-Key header must look like.
var idempotencyKey = regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)

// decisionKey is the request's context with its Idempotency-Key, when it
// sends one (see inbox.WithDecisionKey); a malformed key is a 400.
func decisionKey(c echo.Context) (context.Context, error) {
	ctx := c.Request().Context()
	key, ok := c.Request().Header["Idempotency-Key"]
	if !ok {
		return ctx, nil
	}
	if len(key) != 1 || !idempotencyKey.MatchString(key[0]) {
		return nil, service.Errorf(service.CodeInvalidArgument, "the Idempotency-Key header must be one value of 1 to 200 printable ASCII characters without spaces")
	}
	return inbox.WithDecisionKey(ctx, key[0]), nil
}

func noteOf(req decisionRequest) string {
	if req.Note == nil {
		return ""
	}
	return *req.Note
}

// beginDecision resolves the caller and the interrupt id and decodes the
// decision body. Only respond takes an output; restart's body may be empty.
func (a *api) beginDecision(c echo.Context, withOutput bool) (service.Caller, uuid.UUID, decisionRequest, error) {
	const want = `{"output": ..., "note": ...}`
	return a.beginBody(c, interruptID, want, func(present bool, req decisionRequest) error {
		switch {
		case !present && withOutput:
			return invalid("request body is empty: expected a JSON object %s", want)
		case !withOutput && req.Output != nil:
			return invalid("restart takes no output: it runs the tool again with its original input")
		case withOutput && req.Input != nil:
			return invalid("respond takes no input: it answers with an output")
		case string(req.Input) == "null":
			return invalid("input must be the edited input (a JSON value other than null)")
		case req.Note != nil && utf8.RuneCountInString(*req.Note) > maxNoteLength:
			return invalid("note must be at most %d characters", maxNoteLength)
		}
		return nil
	})
}

// beginBody resolves the caller and the id the path names (see
// answerByID) and decodes the request body, expected as want (it may be
// empty), for check to judge (present: the body was not empty). On an
// error the id is uuid.Nil.
func (a *api) beginBody(c echo.Context, pathID func(echo.Context) (uuid.UUID, error), want string, check func(present bool, req decisionRequest) error) (service.Caller, uuid.UUID, decisionRequest, error) {
	var req decisionRequest
	caller, err := a.opts.Caller(c)
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	id, err := pathID(c)
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	present, err := decodeBody(c, &req, want, true)
	if err == nil {
		err = check(present, req)
	}
	if err != nil {
		return caller, uuid.Nil, req, err
	}
	return caller, id, req, nil
}

// reportBody is the interrupt report.
type reportBody struct {
	From    time.Time           `json:"from"`
	To      time.Time           `json:"to"`
	GroupBy string              `json:"groupBy"`
	Rows    []service.ReportRow `json:"rows"`
}

// reportInterrupts answers the tenant's interrupt figures over [from, to):
// GET /api/v1/reports/interrupts?from&to&groupBy=agent|tool|day. The
// window defaults to the last 7 days.
func (a *api) reportInterrupts(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	from, err := timeParam(c, "from", false)
	if err != nil {
		return err
	}
	to, err := timeParam(c, "to", true)
	if err != nil {
		return err
	}
	if to == nil {
		now := time.Now().UTC()
		to = &now
	}
	if from == nil {
		f := to.AddDate(0, 0, -defaultReportDays)
		if !inYearRange(f) {
			return invalid("from defaults to %d days before to, which falls before the year %d: pass from", defaultReportDays, minYear)
		}
		from = &f
	}
	if !to.After(*from) {
		return invalid("to must be after from")
	}
	if to.Sub(*from) > maxReportDays*24*time.Hour {
		return invalid("the report spans at most %d days; narrow from and to", maxReportDays)
	}
	groupBy := c.QueryParam("groupBy")
	if groupBy == "" {
		groupBy = "day"
	}
	rows, err := a.inbox.ReportInterrupts(c.Request().Context(), caller, *from, *to, groupBy)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []service.ReportRow{}
	}
	return writeJSON(c, reportBody{From: *from, To: *to, GroupBy: groupBy, Rows: rows})
}
