package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// Inbox statuses of an interrupt.
const (
	InterruptPending   = "pending"
	InterruptResolved  = "resolved"
	InterruptExpired   = "expired"
	InterruptCancelled = "cancelled"
)

// InboxInterrupt is an interrupt as the approvals inbox (/api/v1) shows
// it: a row of the server's interrupts table (one definition, shared with
// the server: protocol.InboxInterrupt).
type InboxInterrupt = protocol.InboxInterrupt

// InboxInterruptDetail is one interrupt with the last messages of its
// session.
type InboxInterruptDetail struct {
	InboxInterrupt
	Messages []Message `json:"messages"`
}

// InterruptFilter selects interrupts of the inbox; the zero value is the
// pending ones, newest first.
type InterruptFilter struct {
	// Status is pending (the default), resolved, expired or cancelled.
	Status    string
	Agent     string
	Tool      string
	SessionID string
	EndUser   string
	// Oldest lists what waited longest first.
	Oldest        bool
	CreatedBefore time.Time
	CreatedAfter  time.Time
	// PageSize is how many interrupts one request fetches (1 to 200; the
	// server's default, 50, when 0).
	PageSize int
}

func (f InterruptFilter) query(cursor string) url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"status": f.Status, "agent": f.Agent, "tool": f.Tool, "sessionId": f.SessionID, "endUser": f.EndUser, "cursor": cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if f.Oldest {
		q.Set("order", "oldest")
	}
	if !f.CreatedBefore.IsZero() {
		q.Set("createdBefore", f.CreatedBefore.Format(time.RFC3339Nano))
	}
	if !f.CreatedAfter.IsZero() {
		q.Set("createdAfter", f.CreatedAfter.Format(time.RFC3339Nano))
	}
	if f.PageSize != 0 {
		q.Set("limit", strconv.Itoa(f.PageSize))
	}
	return q
}

// InterruptPage is one page of the inbox.
type InterruptPage struct {
	Items []InboxInterrupt `json:"items"`
	// NextCursor fetches the next page ("" after the last one).
	NextCursor string `json:"nextCursor,omitempty"`
}

// InterruptsPage fetches one page of the inbox; cursor is "" for the first
// page, else the previous page's NextCursor.
func (c *Client) InterruptsPage(ctx context.Context, f InterruptFilter, cursor string) (*InterruptPage, error) {
	var page InterruptPage
	if err := c.doJSON(ctx, http.MethodGet, "/api/v1/interrupts", f.query(cursor), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Interrupts yields every interrupt the filter selects, page after page,
// until the last page or the first error.
func (c *Client) Interrupts(ctx context.Context, f InterruptFilter) iter.Seq2[InboxInterrupt, error] {
	return func(yield func(InboxInterrupt, error) bool) {
		cursor := ""
		for {
			page, err := c.InterruptsPage(ctx, f, cursor)
			if err != nil {
				yield(InboxInterrupt{}, err)
				return
			}
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if page.NextCursor == "" || len(page.Items) == 0 {
				return
			}
			cursor = page.NextCursor
		}
	}
}

func interruptPath(id string, suffix string) string {
	return "/api/v1/interrupts/" + pathEscape(id) + suffix
}

// Interrupt returns one interrupt of the inbox with the last messages of
// its session.
func (c *Client) Interrupt(ctx context.Context, id string) (*InboxInterruptDetail, error) {
	var out InboxInterruptDetail
	if err := c.doJSON(ctx, http.MethodGet, interruptPath(id, ""), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditEvent is one entry of an interrupt's audit trail (one definition,
// shared with the server: protocol.AuditEvent).
type AuditEvent = protocol.AuditEvent

// InterruptEvents returns an interrupt's audit trail, oldest first.
func (c *Client) InterruptEvents(ctx context.Context, id string) ([]AuditEvent, error) {
	var out struct {
		Items []AuditEvent `json:"items"`
	}
	if err := c.doJSON(ctx, http.MethodGet, interruptPath(id, "/events"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Decision statuses.
const (
	// DecisionResumed: the decision was the last one the snapshot waited
	// for, and the continued turn's output is in Output.
	DecisionResumed = "resumed"
	// DecisionRecorded: other interrupts of the same snapshot are still
	// pending (WaitingFor); the turn resumes once they are decided.
	DecisionRecorded = "recorded"
)

// Decision is the answer to an inbox decision.
type Decision struct {
	Status     string           `json:"status"`
	Output     *Output          `json:"output,omitempty"`
	WaitingFor []InboxInterrupt `json:"waitingFor,omitempty"`
}

// Text is the continued turn's answer text ("" when it has not resumed).
func (d *Decision) Text() string {
	if d.Output == nil {
		return ""
	}
	return messageText(d.Output.Message)
}

// Respond decides an interrupt on the user's behalf with output (encoded
// as JSON; it must match the tool's output schema) and an optional note
// for the audit trail. An interrupt decided first by someone else is an
// *AlreadyDecidedError (IsConflict holds).
func (c *Client) Respond(ctx context.Context, id string, output any, note string) (*Decision, error) {
	b, err := json.Marshal(output)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"output": json.RawMessage(b)}
	if note != "" {
		body["note"] = note
	}
	return c.decide(ctx, id, "/respond", body)
}

// Restart decides an interrupt by running the interrupted tool again with
// its original input (a tool that paused for a confirmation; an interrupt
// that asks a human cannot be restarted: FAILED_PRECONDITION).
func (c *Client) Restart(ctx context.Context, id string, note string) (*Decision, error) {
	body := map[string]any{}
	if note != "" {
		body["note"] = note
	}
	return c.decide(ctx, id, "/restart", body)
}

func (c *Client) decide(ctx context.Context, id, suffix string, body any) (*Decision, error) {
	var out Decision
	err := c.doJSON(ctx, http.MethodPost, interruptPath(id, suffix), nil, body, &out)
	var e *Error
	if errors.As(err, &e) && e.Status == StatusAborted {
		conflict := &AlreadyDecidedError{Err: e}
		if it, gerr := c.Interrupt(ctx, id); gerr == nil {
			conflict.Interrupt = &it.InboxInterrupt
		}
		return nil, conflict
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportOptions select the interrupt report.
type ReportOptions struct {
	// From and To bound the report (the server's default when zero: the
	// last 7 days to now).
	From, To time.Time
	// GroupBy is day (the default), agent or tool.
	GroupBy string
}

// ReportRow is the figures of one group of the report: the server's own
// type (package protocol). Percentiles are seconds, nil when no interrupt
// of the group qualifies.
type ReportRow = protocol.ReportRow

// Report is the interrupt report over a window.
type Report struct {
	From    time.Time   `json:"from"`
	To      time.Time   `json:"to"`
	GroupBy string      `json:"groupBy"`
	Rows    []ReportRow `json:"rows"`
}

// InterruptReport returns counts by status, approvals and denials and the
// time to decision per day, agent or tool (GET /api/v1/reports/interrupts).
func (c *Client) InterruptReport(ctx context.Context, o ReportOptions) (*Report, error) {
	q := url.Values{}
	if !o.From.IsZero() {
		q.Set("from", o.From.Format(time.RFC3339Nano))
	}
	if !o.To.IsZero() {
		q.Set("to", o.To.Format(time.RFC3339Nano))
	}
	if o.GroupBy != "" {
		q.Set("groupBy", o.GroupBy)
	}
	var out Report
	if err := c.doJSON(ctx, http.MethodGet, "/api/v1/reports/interrupts", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
