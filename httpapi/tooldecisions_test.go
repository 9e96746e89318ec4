package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

// unknownTransfer approves a transfer through the inbox (transferMoney
// runs once) and then turns its call into one whose outcome is unknown,
// as a takeover or the sweep does when the outcome's write was lost. It
// returns the interrupt and the call.
func (s *inboxServer) unknownTransfer(t *testing.T, session, account string) (uuid.UUID, service.ToolCallRecord) {
	t.Helper()
	_, it := s.pausedTransfer(t, session, "Transfer $5 to account "+account)
	var res decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}}), &res)
	if transfersTo(account) != 1 {
		t.Fatalf("%d transfers after the approval, want 1", transfersTo(account))
	}
	if _, err := s.owner.Exec(context.Background(), `UPDATE tool_calls SET status = 'unknown', output = NULL, finished_at = NULL WHERE session_id = $1 AND tool = 'transferMoney'`, session); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Items []service.ToolCallRecord `json:"items"`
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(session)+"/tool-calls", nil), &page)
	for _, c := range page.Items {
		if c.Tool == "transferMoney" {
			if c.Status != service.ToolCallUnknown || c.ID == uuid.Nil {
				t.Fatalf("the session's tool calls show %+v, want the transfer unknown with an id", c)
			}
			return it.ID, c
		}
	}
	t.Fatalf("no transferMoney call in %+v", page.Items)
	return uuid.Nil, service.ToolCallRecord{}
}

// TestUnknownToolCallOverHTTP: the interrupt's detail says its execution
// is unknown; a confirm the schema refuses, bad bodies and another
// tenant's attempts change nothing; each decision works once and the
// next is answered 409.
func TestUnknownToolCallOverHTTP(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	account := newAccount()
	itID, call := s.unknownTransfer(t, "unknown-http", account)
	var detail inbox.InterruptDetail
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+itID.String(), nil), &detail)
	if detail.Execution != inbox.ExecutionUnknown || len(detail.UnknownToolCalls) != 1 || detail.UnknownToolCalls[0].ID != call.ID {
		t.Fatalf("interrupt detail: execution %q, unknown calls %+v", detail.Execution, detail.UnknownToolCalls)
	}
	for _, page := range []string{"/ui/interrupts/" + itID.String(), "/ui/sessions/unknown-http?agent=bankingAgent"} {
		r := s.call(t, http.MethodGet, page, nil)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "may have run — needs a human") || !strings.Contains(string(r.body), `data-id="`+call.ID.String()+`"`) {
			t.Fatalf("%s: %d, want the call shown as needing a human with its decisions:\n%s", page, r.status, r.body)
		}
	}
	path := "/api/v1/tool-calls/" + call.ID.String()
	refused := []struct {
		name, path string
		body       any
		header     []string
		want       int
	}{
		{"another tenant's confirm", path + "/confirm", map[string]any{"output": map[string]any{"success": true, "transactionId": "x"}}, []string{tenantHeader, "acme"}, 404},
		{"another tenant's retry", path + "/retry", nil, []string{tenantHeader, "acme"}, 404},
		{"no such call", "/api/v1/tool-calls/" + uuid.NewString() + "/cancel", nil, nil, 404},
		{"not an id", "/api/v1/tool-calls/not-an-id/cancel", nil, nil, 404},
		{"confirm without a body", path + "/confirm", nil, nil, 400},
		{"confirm with a null output", path + "/confirm", `{"output":null}`, nil, 400},
		{"confirm with an unknown member", path + "/confirm", `{"output":{},"by":"me"}`, nil, 400},
		{"confirm the schema refuses", path + "/confirm", map[string]any{"output": map[string]any{"success": "yes"}}, nil, 400},
		{"cancel with an output", path + "/cancel", map[string]any{"output": 1}, nil, 400},
		{"an overlong note", path + "/retry", map[string]any{"note": fmt.Sprintf("%02001d", 0)}, nil, 400},
	}
	for _, r := range refused {
		if got := s.call(t, http.MethodPost, r.path, r.body, r.header...); got.status != r.want {
			t.Fatalf("%s: status %d, want %d; body %s", r.name, got.status, r.want, got.body)
		}
	}
	var now service.ToolCallRecord
	okJSON(t, s.call(t, http.MethodGet, path, nil), &now)
	if now.Status != service.ToolCallUnknown || transfersTo(account) != 1 {
		t.Fatalf("after the refused requests: %+v, %d transfers", now, transfersTo(account))
	}
	if got := s.call(t, http.MethodGet, path, nil, tenantHeader, "acme"); got.status != 404 {
		t.Fatalf("another tenant's read: %d", got.status)
	}
	okJSON(t, s.call(t, http.MethodPost, path+"/retry", map[string]any{"note": "the bank has no record"}), &now)
	if now.Status != service.ToolCallSucceeded || now.Decision != service.DecisionRetried || now.DecidedBy == "" || transfersTo(account) != 2 {
		t.Fatalf("retry: %+v, %d transfers", now, transfersTo(account))
	}
	for _, d := range []string{"/retry", "/cancel"} {
		if got := s.call(t, http.MethodPost, path+d, nil); got.status != http.StatusConflict {
			t.Fatalf("%s after the retry: %d %s", d, got.status, got.body)
		}
	}
	if got := s.call(t, http.MethodPost, path+"/confirm", map[string]any{"output": map[string]any{"success": true, "transactionId": "x"}}); got.status != http.StatusConflict {
		t.Fatalf("confirm after the retry: %d %s", got.status, got.body)
	}
	// The interrupt itself stays decided: approving it again answers the
	// first outcome (the same operator, the same decision) and runs
	// nothing.
	if got := s.call(t, http.MethodPost, "/api/v1/interrupts/"+itID.String()+"/respond", map[string]any{"output": map[string]any{"approved": true}}); got.status != http.StatusConflict && got.status != http.StatusOK {
		t.Fatalf("approving again: %d %s", got.status, got.body)
	}
	if transfersTo(account) != 2 {
		t.Fatalf("%d transfers, want the first and the one retry", transfersTo(account))
	}
}

// TestConfirmAndCancelOverHTTP: confirm records the human's outcome and
// who confirmed; cancel runs nothing; a second decision is answered 409.
func TestConfirmAndCancelOverHTTP(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	accounts := []string{newAccount(), newAccount()}
	_, confirmed := s.unknownTransfer(t, "unknown-confirm", accounts[0])
	_, cancelled := s.unknownTransfer(t, "unknown-cancel", accounts[1])
	var rec service.ToolCallRecord
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/tool-calls/"+confirmed.ID.String()+"/confirm",
		map[string]any{"output": map[string]any{"success": true, "transactionId": "T-1"}, "note": "seen at the bank"}), &rec)
	if rec.Status != service.ToolCallSucceeded || rec.Decision != service.DecisionConfirmed || rec.DecidedBy != httpapi.DevCaller.Actor || rec.Note != "seen at the bank" || rec.DecidedAt == nil {
		t.Fatalf("confirm: %+v", rec)
	}
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/tool-calls/"+cancelled.ID.String()+"/cancel", nil), &rec)
	if rec.Status != service.ToolCallCancelled || rec.Decision != service.DecisionCancelled {
		t.Fatalf("cancel: %+v", rec)
	}
	for _, id := range []uuid.UUID{confirmed.ID, cancelled.ID} {
		if got := s.call(t, http.MethodPost, "/api/v1/tool-calls/"+id.String()+"/cancel", nil); got.status != http.StatusConflict {
			t.Fatalf("a second decision: %d %s", got.status, got.body)
		}
	}
	for _, a := range accounts {
		if transfersTo(a) != 1 {
			t.Fatalf("%d transfers to %s, want the approved one only", transfersTo(a), a)
		}
	}
}
