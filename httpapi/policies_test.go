package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// policyServer is the API with authentication on and the demo payments
// agent, in tenant acme: alice asks (a user token), bob, carol and dave
// hold approve:payments, stranger holds another scope only.
type policyServer struct {
	*authServer
	alice                      string
	bob, carol, dave, stranger string
}

func newPolicyServer(t *testing.T) *policyServer {
	t.Helper()
	s := &policyServer{authServer: newAuthServer(t, nil, demo.PaymentsAgent(demo.NewPaymentsModel()))}
	s.tenant(t, "acme")
	s.alice = s.token(t, "acme", "alice")
	key := func(name string, scopes ...string) string {
		plain, _, err := s.acc.CreateKey(context.Background(), "acme", tenants.RoleAdmin, name, scopes...)
		if err != nil {
			t.Fatal(err)
		}
		return plain
	}
	s.bob = key("bob", demo.PaymentsScope)
	s.carol = key("carol", demo.PaymentsScope)
	s.dave = key("dave", demo.PaymentsScope, "approve:refunds")
	s.stranger = key("stranger", "approve:other")
	return s
}

// pay has alice ask the payments agent for something in a new session.
func (s *policyServer) pay(t *testing.T, session, text string) service.AgentOutput {
	t.Helper()
	return s.send(t, s.alice, demo.PaymentsAgentName, text, map[string]any{"sessionId": session})
}

// pending is the one pending interrupt of a session, as bob's inbox lists
// it.
func (s *policyServer) pending(t *testing.T, session string) service.Interrupt {
	t.Helper()
	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?sessionId="+url.QueryEscape(session), s.bob, nil), &page)
	if len(page.Items) != 1 {
		t.Fatalf("session %s: %d pending interrupts, want 1: %+v", session, len(page.Items), page.Items)
	}
	return page.Items[0]
}

// vote decides an interrupt as cred (restart: an approval, with body; or
// respond: a denial) and returns the answer.
func (s *policyServer) vote(t *testing.T, cred, decision string, it service.Interrupt, body any, headers ...string) response {
	t.Helper()
	return s.call(t, http.MethodPost, "/api/v1/interrupts/"+it.ID.String()+"/"+decision, cred, body, headers...)
}

// voteAnswer is a decision's answer, votes included.
type voteAnswer struct {
	Status    string               `json:"status"`
	Approvals int                  `json:"approvals"`
	Needed    int                  `json:"needed"`
	Output    *service.AgentOutput `json:"output"`
}

func (s *policyServer) detail(t *testing.T, cred string, it service.Interrupt) inbox.InterruptDetail {
	t.Helper()
	var d inbox.InterruptDetail
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts/"+it.ID.String(), cred, nil), &d)
	return d
}

// ran lists what the payments agent executed for a vendor.
func ran(vendor string) []demo.Payment {
	var out []demo.Payment
	for _, p := range demo.Payments() {
		if p.Vendor == vendor {
			out = append(out, p)
		}
	}
	return out
}

// pausedPayment has alice ask for a large payment and checks that it
// paused on the platform's gate with nothing run and no call row.
func (s *policyServer) pausedPayment(t *testing.T, session, vendor string) (service.AgentOutput, service.Interrupt) {
	t.Helper()
	out := s.pay(t, session, "pay 5000 to "+vendor)
	req := toolRequest(t, out)
	if req.Name != demo.ToolPayVendor || !sameJSON(req.Input, map[string]any{"vendor": vendor, "amount": 5000}) {
		t.Fatalf("paused on %+v", req)
	}
	if len(ran(vendor)) != 0 {
		t.Fatal("the gated payment ran before any approval")
	}
	if n := countRows(t, s, "SELECT count(*) FROM tool_calls WHERE tenant_id = 'acme' AND session_id = $1", session); n != 0 {
		t.Fatalf("%d tool_calls rows before approval", n)
	}
	it := s.pending(t, session)
	var meta struct {
		Approval    string `json:"approval"`
		Explanation string `json:"explanation"`
		Gate        struct {
			Scope     string `json:"scope"`
			Approvals int    `json:"approvals"`
			AllowEdit bool   `json:"allowEdit"`
		} `json:"gate"`
	}
	if err := json.Unmarshal(it.Metadata, &meta); err != nil || meta.Approval != "required" || meta.Gate.Scope != demo.PaymentsScope ||
		meta.Gate.Approvals != 2 || !meta.Gate.AllowEdit || !strings.Contains(meta.Explanation, "Paying $5,000.00 to "+vendor) {
		t.Fatalf("interrupt metadata %s", it.Metadata)
	}
	if it.EndUser != "alice" || it.Scope != demo.PaymentsScope || it.ApprovalsNeeded != 2 || it.Policy == nil {
		t.Fatalf("interrupt %+v", it)
	}
	return out, it
}

func countRows(t *testing.T, s *policyServer, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.owner.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestPaymentNeedsTwoApprovers: the steered model's large payment pauses
// with nothing run; the requester can approve it neither through the
// protocol nor through the inbox; one approval is a vote (1 of 2), the
// same approver twice is refused, a second approver runs it once, and the
// interrupt lists both votes with their keys.
func TestPaymentNeedsTwoApprovers(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	vendor := newAccount()
	out, it := s.pausedPayment(t, "pay-2eyes", vendor)

	// Alice restarts it herself through the protocol.
	req := toolRequest(t, out)
	restart := map[string]any{"init": map[string]any{"snapshotId": out.SnapshotID}, "data": map[string]any{"resume": map[string]any{
		"restart": []any{map[string]any{"toolRequest": req, "metadata": map[string]any{"resumed": true}}}}}}
	errorOf(t, s.call(t, http.MethodPost, "/api/agents/"+demo.PaymentsAgentName, s.alice, restart), http.StatusForbidden, service.CodePermissionDenied)
	// Alice through a key that holds the scope.
	errorOf(t, s.vote(t, s.dave, "restart", it, nil, "X-End-User", "alice"), http.StatusForbidden, service.CodePermissionDenied)
	errorOf(t, s.vote(t, s.dave, "respond", it, map[string]any{"output": map[string]any{"paid": true}}, "X-End-User", "alice"), http.StatusForbidden, service.CodePermissionDenied)

	var v voteAnswer
	okJSON(t, s.vote(t, s.bob, "restart", it, map[string]any{"note": "invoice checked"}), &v)
	if v.Status != "voted" || v.Approvals != 1 || v.Needed != 2 || v.Output != nil {
		t.Fatalf("first approval: %+v", v)
	}
	if len(ran(vendor)) != 0 {
		t.Fatal("ran after one approval of two")
	}
	errorOf(t, s.vote(t, s.bob, "restart", it, nil), http.StatusConflict, service.CodeAborted)
	if d := s.detail(t, s.carol, it); d.Status != service.InterruptPending || d.Approvals != 1 || len(d.Votes) != 1 || d.Votes[0].KeyName != "bob" || d.Votes[0].Note != "invoice checked" {
		t.Fatalf("after one approval: %+v", d)
	}

	okJSON(t, s.vote(t, s.carol, "restart", it, nil), &v)
	if v.Status != "resumed" || v.Output == nil || !strings.HasPrefix(v.Output.Message.Text(), "Paid $5,000.00 to "+vendor+" (payment pay-") {
		t.Fatalf("second approval: %+v", v)
	}
	if got := ran(vendor); len(got) != 1 || got[0].Amount != 5000 {
		t.Fatalf("ran %+v, want once", got)
	}
	d := s.detail(t, s.bob, it)
	if d.Status != service.InterruptResolved || len(d.Votes) != 2 || d.Votes[0].KeyName != "bob" || d.Votes[1].KeyName != "carol" ||
		d.Votes[0].Vote != service.VoteApprove || d.Votes[1].Vote != service.VoteApprove || d.Votes[1].KeyID == "" {
		t.Fatalf("votes %+v", d.Votes)
	}
	errorOf(t, s.vote(t, s.dave, "restart", it, nil), http.StatusConflict, service.CodeAborted)
	if n := countRows(t, s, "SELECT count(*) FROM tool_calls WHERE tenant_id = 'acme' AND session_id = 'pay-2eyes' AND status = 'succeeded'"); n != 1 {
		t.Fatalf("%d succeeded calls, want 1", n)
	}
}

// TestPaymentDenialEndsTheVote: one denial after an approval ends it: a
// third vote is refused and nothing runs; the model reports the denial.
func TestPaymentDenialEndsTheVote(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	vendor := newAccount()
	_, it := s.pausedPayment(t, "pay-denied", vendor)
	var v voteAnswer
	okJSON(t, s.vote(t, s.bob, "restart", it, nil), &v)
	okJSON(t, s.vote(t, s.carol, "respond", it, map[string]any{"output": map[string]any{"paid": false, "reason": "not on the vendor list"}, "note": "unknown vendor"}), &v)
	if v.Status != "resumed" || v.Output == nil || v.Output.Message.Text() != `Not paid: the payment of $5,000.00 to `+vendor+` was declined. Reason: "not on the vendor list".` {
		t.Fatalf("denial: %+v", v)
	}
	errorOf(t, s.vote(t, s.dave, "restart", it, nil), http.StatusConflict, service.CodeAborted)
	errorOf(t, s.vote(t, s.dave, "respond", it, map[string]any{"output": map[string]any{"paid": false}}), http.StatusConflict, service.CodeAborted)
	if len(ran(vendor)) != 0 {
		t.Fatal("a denied payment ran")
	}
	d := s.detail(t, s.bob, it)
	if len(d.Votes) != 2 || d.Votes[1].KeyName != "carol" || d.Votes[1].Vote != service.VoteDeny || d.Votes[1].Note != "unknown vendor" {
		t.Fatalf("votes %+v", d.Votes)
	}
}

// TestPaymentScopeHidesTheCall: a key without approve:payments neither
// lists, reads nor decides the paused payment (and changes nothing); a
// small payment needs no one.
func TestPaymentScopeHidesTheCall(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	vendor := newAccount()
	_, it := s.pausedPayment(t, "pay-hidden", vendor)
	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts", s.stranger, nil), &page)
	for _, item := range page.Items {
		if item.ID == it.ID {
			t.Fatal("a key without the scope lists the payment")
		}
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?sessionId=pay-hidden", s.stranger, nil), &page)
	if len(page.Items) != 0 {
		t.Fatalf("a key without the scope lists %+v", page.Items)
	}
	path := "/api/v1/interrupts/" + it.ID.String()
	errorOf(t, s.call(t, http.MethodGet, path, s.stranger, nil), http.StatusForbidden, service.CodePermissionDenied)
	errorOf(t, s.call(t, http.MethodGet, path+"/events", s.stranger, nil), http.StatusForbidden, service.CodePermissionDenied)
	errorOf(t, s.vote(t, s.stranger, "restart", it, nil), http.StatusForbidden, service.CodePermissionDenied)
	errorOf(t, s.vote(t, s.stranger, "respond", it, map[string]any{"output": map[string]any{"paid": false}}), http.StatusForbidden, service.CodePermissionDenied)
	if d := s.detail(t, s.bob, it); d.Status != service.InterruptPending || len(d.Votes) != 0 {
		t.Fatalf("after the stranger: %+v", d)
	}
	if n := countRows(t, s, "SELECT count(*) FROM interrupt_votes WHERE tenant_id = 'acme'"); n != 0 {
		t.Fatalf("%d votes recorded", n)
	}

	small := newAccount()
	out := s.pay(t, "pay-small", "pay 900 to "+small)
	if out.FinishReason != service.FinishStop || !strings.HasPrefix(out.Message.Text(), "Paid $900.00 to "+small) || len(ran(small)) != 1 {
		t.Fatalf("a small payment: %+v", out)
	}
}

// TestPaymentApproverEdit: an approver lowers the amount: the edit is
// recorded with the vote, the next approval approves the edit, the edited
// input is what runs, and the history keeps what the model asked for.
func TestPaymentApproverEdit(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	vendor := newAccount()
	_, it := s.pausedPayment(t, "pay-edit", vendor)
	edit := map[string]any{"vendor": vendor, "amount": 800}
	errorOf(t, s.vote(t, s.bob, "restart", it, map[string]any{"input": map[string]any{"vendor": vendor}}), http.StatusBadRequest, service.CodeInvalidArgument)
	errorOf(t, s.vote(t, s.bob, "restart", it, map[string]any{"input": nil}), http.StatusBadRequest, service.CodeInvalidArgument)
	var v voteAnswer
	okJSON(t, s.vote(t, s.bob, "restart", it, map[string]any{"input": edit, "note": "only the first invoice"}), &v)
	if v.Status != "voted" || v.Approvals != 1 || v.Needed != 2 {
		t.Fatalf("edited approval: %+v", v)
	}
	if d := s.detail(t, s.carol, it); !sameJSON(d.ProposedInput, edit) {
		t.Fatalf("proposed input %s", d.ProposedInput)
	}
	okJSON(t, s.vote(t, s.carol, "restart", it, nil), &v)
	if v.Status != "resumed" || v.Output == nil || !strings.HasPrefix(v.Output.Message.Text(), "Paid $800.00 to "+vendor) {
		t.Fatalf("second approval: %+v", v)
	}
	if got := ran(vendor); len(got) != 1 || got[0].Amount != 800 {
		t.Fatalf("ran %+v, want the edit once", got)
	}
	d := s.detail(t, s.bob, it)
	if len(d.Votes) != 2 || !sameJSON(d.Votes[0].Input, edit) || d.Votes[0].KeyName != "bob" || d.Votes[1].KeyName != "carol" {
		t.Fatalf("votes %+v", d.Votes)
	}
	if !s.sessionHasEdit(t, "pay-edit", edit, vendor) {
		t.Fatal("the session's history does not keep the edit that ran and what the model asked")
	}
}

// sessionHasEdit reads alice's session and looks for the edited request,
// which keeps the model's own input as metadata.editedFrom.
func (s *policyServer) sessionHasEdit(t *testing.T, session string, edit map[string]any, vendor string) bool {
	t.Helper()
	var snap service.Snapshot
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+demo.PaymentsAgentName+"/getSnapshot", s.alice,
		map[string]any{"data": map[string]any{"sessionId": session}}), &snap)
	if snap.State == nil {
		return false
	}
	for _, m := range snap.State.Messages {
		for _, p := range m.Content {
			if p.ToolRequest != nil && p.ToolRequest.Name == demo.ToolPayVendor && sameJSON(p.ToolRequest.Input, edit) &&
				sameJSON(p.Metadata["editedFrom"], map[string]any{"vendor": vendor, "amount": 5000}) {
				return true
			}
		}
	}
	return false
}

// sameJSON reports whether raw is the JSON of v.
func sameJSON(raw json.RawMessage, v any) bool {
	var a, b any
	want, err := json.Marshal(v)
	if err != nil || json.Unmarshal(raw, &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestRefundIsAConfirmation: a refund (a policy with no scope and one
// approval) is confirmed by the requester's own restart, which runs it
// once, without `resumed`.
func TestRefundIsAConfirmation(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	vendor := newAccount()
	out := s.pay(t, "refund", "refund 40 to "+vendor)
	req := toolRequest(t, out)
	if req.Name != demo.ToolRefund || len(ran(vendor)) != 0 {
		t.Fatalf("paused on %+v", req)
	}
	if it := s.pending(t, "refund"); it.Scope != "" || it.ApprovalsNeeded != 1 {
		t.Fatalf("refund interrupt %+v", it)
	}
	restart := map[string]any{"init": map[string]any{"snapshotId": out.SnapshotID}, "data": map[string]any{"resume": map[string]any{
		"restart": []any{map[string]any{"toolRequest": req}}}}}
	var done service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+demo.PaymentsAgentName, s.alice, restart), &done)
	if done.FinishReason != service.FinishStop || !strings.HasPrefix(done.Message.Text(), "Refunded $40.00 to "+vendor+" (refund rf-") {
		t.Fatalf("confirmed refund: %+v", done)
	}
	if got := ran(vendor); len(got) != 1 || got[0].Tool != demo.ToolRefund {
		t.Fatalf("ran %+v, want the refund once", got)
	}
}

// readmeVotesQuery is the query of docs/approvals.md ("Approval policies")
// of who approved what, with whom.
func readmeVotesQuery(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile("../docs/approvals.md")
	if err != nil {
		t.Fatal(err)
	}
	_, query, ok := strings.Cut(string(page), "```sql\n-- Who approved what, with whom")
	if !ok {
		t.Fatal("docs/approvals.md has no query of who approved what")
	}
	query, _, _ = strings.Cut(query, "```")
	return "-- Who approved what, with whom" + query
}

// votesRow is one row of the votes query of docs/approvals.md.
type votesRow struct {
	tool, requestedBy, status  string
	asked, editedTo            []byte
	approvedBy, deniedBy, keys *string
	resolved                   bool
}

// TestReadmeVotesQuery runs the votes query of docs/approvals.md: an approval
// with an edit, then a second approval; an approval, then a denial; as the
// tables' owner and as the application role with the tenant set.
func TestReadmeVotesQuery(t *testing.T) {
	t.Parallel()
	s := newPolicyServer(t)
	edited, denied := newAccount(), newAccount()
	_, a := s.pausedPayment(t, "votes-edited", edited)
	var v voteAnswer
	okJSON(t, s.vote(t, s.bob, "restart", a, map[string]any{"input": map[string]any{"vendor": edited, "amount": 800}}), &v)
	okJSON(t, s.vote(t, s.carol, "restart", a, nil), &v)
	_, b := s.pausedPayment(t, "votes-denied", denied)
	okJSON(t, s.vote(t, s.dave, "restart", b, nil, "X-End-User", "erin"), &v)
	okJSON(t, s.vote(t, s.carol, "respond", b, map[string]any{"output": map[string]any{"paid": false}}), &v)

	query := readmeVotesQuery(t)
	run := func(pool *pgxpool.Pool, tenant string) map[string]votesRow {
		ctx := context.Background()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // read-only
		if tenant != "" {
			if _, err := tx.Exec(ctx, "SELECT set_config('holdpoint.tenant_id', $1, true)", tenant); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.Query(ctx, query)
		if err != nil {
			t.Fatalf("the votes query of docs/approvals.md: %v", err)
		}
		defer rows.Close()
		out := map[string]votesRow{}
		for rows.Next() {
			var r votesRow
			var tenantID string
			var id uuid.UUID
			var resolvedAt *time.Time
			if err := rows.Scan(&tenantID, &id, &r.tool, &r.asked, &r.editedTo, &r.requestedBy, &r.status, &r.approvedBy, &r.deniedBy, &r.keys, &resolvedAt); err != nil {
				t.Fatal(err)
			}
			r.resolved = resolvedAt != nil
			out[id.String()] = r
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	str := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	for who, got := range map[string]map[string]votesRow{"owner": run(s.owner, ""), "application role": run(s.app, "acme")} {
		if len(got) != 2 {
			t.Fatalf("%s: %d rows, want 2: %+v", who, len(got), got)
		}
		ra, rb := got[a.ID.String()], got[b.ID.String()]
		if ra.tool != demo.ToolPayVendor || ra.requestedBy != "alice" || ra.status != "resolved" || !ra.resolved ||
			!sameJSON(ra.asked, map[string]any{"vendor": edited, "amount": 5000}) || !sameJSON(ra.editedTo, map[string]any{"vendor": edited, "amount": 800}) ||
			str(ra.approvedBy) != "bob, carol" || ra.deniedBy != nil || str(ra.keys) != "bob, carol" {
			t.Errorf("%s: the edited payment %+v (approved by %s, denied by %s, keys %s)", who, ra, str(ra.approvedBy), str(ra.deniedBy), str(ra.keys))
		}
		if str(rb.approvedBy) != "user:erin" || str(rb.deniedBy) != "carol" || str(rb.keys) != "carol, dave" || rb.editedTo != nil {
			t.Errorf("%s: the denied payment %+v (approved by %s, denied by %s, keys %s)", who, rb, str(rb.approvedBy), str(rb.deniedBy), str(rb.keys))
		}
	}
}
