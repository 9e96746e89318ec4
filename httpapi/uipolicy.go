package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// The dashboard's side of approval policies (approval.Policy): the
// inbox and the decision page show a gated call's votes, the scope it
// needs and whether it was escalated; the decision page lists the votes,
// says what the signed-in key may do, and takes an approval (with an edit
// where the policy allows one) or a denial; a failed approved call shows
// its attempts and can be retried. The decisions go through the runtime
// calls the API makes (ApproveInterrupt, RespondInterrupt, RetryToolCall):
// a refusal (a missing scope, the requester, a second vote) answers its
// 4xx, which the page shows; a decision sends the browser back to the page
// (303) with its outcome kept for it once (flashCookie).

// registerUIPolicies adds the dashboard's decision routes of gated calls.
// The authentication middleware holds them to the dashboard's rules for
// every change: the session's CSRF token and the dashboard's own origin.
func (a *api) registerUIPolicies(e *echo.Echo) {
	e.POST("/ui/interrupts/:id/approve", a.uiApprove)
	e.POST("/ui/interrupts/:id/deny", a.uiDeny)
	e.POST("/ui/tool-calls/:id/retry", a.uiRetry)
}

// uiCall is a tool call as the dashboard lists it; for the latest run of
// an approved gated call, its policy's attempts and whether it may be
// retried.
type uiCall struct {
	service.ToolCallRecord
	// Attempts is the policy's bound on the call's runs (0: not the
	// latest run of an approved gated call).
	Attempts int
	// Retry says the call failed with attempts left.
	Retry bool
}

// callView is rec as the dashboard shows it, it being the interrupt whose
// approval it ran (nil: none known).
func callView(rec service.ToolCallRecord, it *service.Interrupt) uiCall {
	v := uiCall{ToolCallRecord: rec}
	if it == nil || it.Policy == nil || !rec.Restart || rec.TurnID != it.ResumedSnapshotID || rec.Ref != it.Ref || rec.Tool != it.Tool {
		return v
	}
	v.Attempts = max(it.Policy.Attempts, rec.Attempt)
	v.Retry = rec.Status == service.ToolCallFailed && rec.Attempt < it.Policy.Attempts
	return v
}

// uiCalls is a session's calls as the dashboard lists them: a failed
// approved call is matched with its interrupt (among those the caller may
// decide) for its attempts.
func (a *api) uiCalls(ctx context.Context, caller service.Caller, sessionID string, calls []service.ToolCallRecord) ([]uiCall, error) {
	var its []service.Interrupt
	for _, rec := range calls {
		if rec.Restart && rec.Status == service.ToolCallFailed {
			var err error
			its, err = a.inbox.ListInterrupts(ctx, caller, service.InterruptFilter{SessionID: sessionID, Status: service.InterruptResolved, Limit: inbox.MaxInboxPage})
			if err != nil {
				return nil, err
			}
			break
		}
	}
	out := make([]uiCall, 0, len(calls))
	for _, rec := range calls {
		var of *service.Interrupt
		for i := range its {
			if its[i].ResumedSnapshotID == rec.TurnID && its[i].Ref == rec.Ref {
				of = &its[i]
			}
		}
		out = append(out, callView(rec, of))
	}
	return out, nil
}

// uiGate is what the decision page shows of a gated call.
type uiGate struct {
	Interrupt service.Interrupt
	Votes     []service.Vote
	// Summary says what the policy needs; Waiting how far the approvals
	// are ("" before the first and once decided).
	Summary, Waiting string
	Pending          bool
	// CanDecide shows the Approve and Deny buttons; otherwise Reason says
	// why this key cannot decide.
	CanDecide bool
	Reason    string
	// Voted says the reason is the key's own vote, not a refusal.
	Voted bool
	// Edit is the input an approver may edit (indented JSON), "" when the
	// policy allows no edit.
	Edit string
	// Deny is the form of the output the agent is given on a denial.
	Deny uiForm
	// Run is the approved call's latest run, once decided.
	Run *uiCall
	// Notice and Problem are a decision's outcome, shown once.
	Notice, Problem string
}

// gateOf is the decision page's view of a gated call for caller (nil: the
// interrupt is no gated call); form is the tool's output form.
func (a *api) gateOf(c echo.Context, caller service.Caller, it *inbox.InterruptDetail, form uiForm) (*uiGate, error) {
	if it.Policy == nil {
		return nil, nil
	}
	g := &uiGate{Interrupt: it.Interrupt, Votes: it.Votes, Summary: policySummary(&it.Interrupt),
		Pending: it.Status == service.InterruptPending, Deny: form}
	if g.Pending {
		g.Reason, g.Voted = refusalOf(caller, it)
		g.CanDecide = g.Reason == ""
		if it.Approvals > 0 {
			g.Waiting = waitingFor(it.Approvals, it.ApprovalsNeeded)
		}
		if it.Policy.AllowEdit {
			g.Edit = indented(it.ProposedInput, it.Input)
		}
	}
	if it.ResumedSnapshotID != "" {
		calls, err := a.rt.InterruptToolCalls(c.Request().Context(), caller, it.ID)
		if err != nil {
			return nil, err
		}
		for _, rec := range calls {
			if v := callView(rec, &it.Interrupt); v.Attempts > 0 {
				g.Run = &v
			}
		}
	}
	g.Notice, g.Problem = takeFlash(c, it.ID.String(), it.SessionID)
	return g, nil
}

// refusalOf says why caller cannot decide the pending gated call it (""
// when it can), as the service would refuse it, and whether that is
// because it voted already.
func refusalOf(caller service.Caller, it *inbox.InterruptDetail) (string, bool) {
	if !caller.HasScope(it.Scope) {
		return fmt.Sprintf("Deciding this call needs the scope %s, which your key does not hold.", it.Scope), false
	}
	if it.Policy.MakerChecker() && it.EndUser != "" && caller.EndUser == it.EndUser {
		return fmt.Sprintf("%s asked for this call and cannot approve or deny it: its policy needs someone else.", it.EndUser), false
	}
	for _, v := range it.Votes {
		if v.Voter == caller.Voter() {
			verb := "approved"
			if v.Vote == service.VoteDeny {
				verb = "denied"
			}
			return fmt.Sprintf("You %s this call at %s: one person counts once.", verb, v.At.UTC().Format("2006-01-02 15:04:05 UTC")), true
		}
	}
	return "", false
}

// waitingFor is how far the approvals are.
func waitingFor(given, needed int) string {
	switch left := needed - given; {
	case left <= 0:
		return fmt.Sprintf("%d of %d approvals", given, needed)
	case left == 1:
		return fmt.Sprintf("%d of %d approvals: waiting for another approver", given, needed)
	default:
		return fmt.Sprintf("%d of %d approvals: waiting for %d more approvers", given, needed, left)
	}
}

// policySummary says what a gated call's policy needs.
func policySummary(it *service.Interrupt) string {
	p := it.Policy
	var b strings.Builder
	fmt.Fprintf(&b, "Needs %d approval", p.Approvals)
	if p.Approvals != 1 {
		b.WriteString("s")
	}
	if it.Scope != "" {
		fmt.Fprintf(&b, " from holders of %s", it.Scope)
	}
	if p.MakerChecker() {
		who := "the one who asked"
		if it.EndUser != "" {
			who += " (" + it.EndUser + ")"
		}
		b.WriteString("; " + who + " cannot approve it, and one person counts once")
	}
	if p.AllowEdit {
		b.WriteString("; an approver may edit its input")
	}
	fmt.Fprintf(&b, "; once approved it runs at most %d time(s).", p.Attempts)
	return b.String()
}

// indented is the first non-empty JSON value, indented for editing.
func indented(raws ...json.RawMessage) string {
	for _, raw := range raws {
		if len(raw) == 0 {
			continue
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	}
	return ""
}

// uiApprove is an approval vote from the decision page:
// POST /ui/interrupts/:id/approve {"input": ..., "note": ...}.
func (a *api) uiApprove(c echo.Context) error {
	return a.uiDecide(c, false, "Approved", a.inbox.ApproveInterrupt)
}

// uiDeny is a denial from the decision page, with the output the agent is
// given instead: POST /ui/interrupts/:id/deny {"output": ..., "note": ...}.
func (a *api) uiDeny(c echo.Context) error {
	return a.uiDecide(c, true, "Denied", a.inbox.RespondInterrupt)
}

// uiDecide makes a decision from the decision page (see api.decide) and
// sends the browser back to the page with its outcome, told as verb.
func (a *api) uiDecide(c echo.Context, withOutput bool, verb string, decide decideFunc) error {
	id, res, err := a.decide(c, withOutput, false, decide)
	if err != nil {
		return err
	}
	setFlash(c, id.String(), "n", decisionNotice(verb, res))
	return c.Redirect(http.StatusSeeOther, "/ui/interrupts/"+id.String())
}

// uiRetry runs a failed approved call (or a call whose outcome is
// unknown) again and sends the browser back to the decision page it came
// from, else to its session's page:
// POST /ui/tool-calls/:id/retry?from=INTERRUPT_ID {"note": ...}.
func (a *api) uiRetry(c echo.Context) error {
	rec, err := a.toolDecision(c, false, withoutOutput(a.inbox.RetryToolCall))
	if err != nil {
		return err
	}
	kind, msg := "n", fmt.Sprintf("Retried: attempt %d of %s %s.", rec.Attempt, rec.Tool, rec.Status)
	if rec.Error != nil {
		kind, msg = "p", fmt.Sprintf("Retried: attempt %d of %s %s: %s", rec.Attempt, rec.Tool, rec.Status, rec.Error.Message)
	}
	setFlash(c, rec.SessionID, kind, msg)
	if from, err := uuid.Parse(c.QueryParam("from")); err == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/interrupts/"+from.String())
	}
	return c.Redirect(http.StatusSeeOther, "/ui/sessions/"+url.PathEscape(rec.SessionID)+"?agent="+url.QueryEscape(rec.Agent))
}

// decisionNotice tells how a decision went.
func decisionNotice(verb string, res *inbox.DecisionResult) string {
	switch res.Status {
	case "voted":
		return "Your approval is recorded. " + waitingFor(res.Approvals, res.Needed) + "."
	case "recorded":
		return fmt.Sprintf("%s. The turn waits for %d more decision(s) before it goes on.", verb, len(res.WaitingFor))
	}
	msg := verb + ": the turn went on"
	if out := res.Output; out != nil {
		if out.FinishReason != "" {
			msg += " (" + out.FinishReason + ")"
		}
		if out.Message != nil && out.Message.Text() != "" {
			msg += ". The agent answered: " + out.Message.Text()
		}
	}
	return msg + "."
}

// uiRefused shows a dashboard page the key may not see (a gated call
// needing a scope it lacks) as a page saying why, with its 403.
func (a *api) uiRefused(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || service.AsError(err).Status != service.CodePermissionDenied {
			return err
		}
		caller, cerr := a.uiCaller(c)
		if cerr != nil {
			return err
		}
		return a.renderStatus(c, http.StatusForbidden, "refused", struct {
			page
			Reason string
		}{pageOf(c, "Not yours to decide", caller.TenantID), service.AsError(err).Message})
	}
}
