package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/client"
)

// TestInbox lists (paged), reads and decides interrupts through the
// operators' API; a second decision is a typed conflict naming who was
// first; restart runs a paused tool; the report counts the decisions.
func TestInbox(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	c := s.client(t)
	agent := c.Agent("bankingAgent")

	res, err := agent.Chat().Send(ctx, "Transfer $50 to savings, €20 to Bob and $30 to account 12345")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Interrupts()); n != 3 {
		t.Fatalf("%d interrupts, want 3", n)
	}
	var ids []string
	for it, err := range c.Interrupts(ctx, client.InterruptFilter{SessionID: res.SessionID(), Oldest: true, PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if it.Tool != "userApproval" || it.Status != client.InterruptPending || it.SnapshotID != res.SnapshotID() {
			t.Fatalf("inbox item %+v", it)
		}
		ids = append(ids, it.ID)
	}
	if len(ids) != 3 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Fatalf("paged listing gave %v, want 3 distinct interrupts", ids)
	}

	detail, err := c.Interrupt(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if detail.ID != ids[0] || len(detail.Messages) != 2 || detail.Agent != "bankingAgent" {
		t.Fatalf("detail %+v", detail)
	}

	for i, id := range ids {
		d, err := c.Respond(ctx, id, map[string]any{"approved": true}, "confirmed by phone")
		if err != nil {
			t.Fatalf("respond %d: %v", i, err)
		}
		want := client.DecisionRecorded
		if i == len(ids)-1 {
			want = client.DecisionResumed
		}
		if d.Status != want {
			t.Fatalf("decision %d: %q, want %q", i, d.Status, want)
		}
		if i < len(ids)-1 && len(d.WaitingFor) != len(ids)-1-i {
			t.Fatalf("decision %d waits for %d", i, len(d.WaitingFor))
		}
		if i == len(ids)-1 && strings.Count(d.Text(), "transferred") != 3 {
			t.Fatalf("resumed answer %q, want three transfers", d.Text())
		}
	}

	// Decided already: 409 ABORTED, and who decided.
	_, err = c.Respond(ctx, ids[0], map[string]any{"approved": false}, "")
	var conflict *client.AlreadyDecidedError
	var e *client.Error
	if !errors.As(err, &conflict) || !errors.As(err, &e) || !client.IsConflict(err) || e.HTTPStatus != http.StatusConflict {
		t.Fatalf("second decision: %v, want a 409 conflict", err)
	}
	if conflict.ResolvedBy() == "" || conflict.Interrupt.Status != client.InterruptResolved || !strings.Contains(err.Error(), conflict.ResolvedBy()) {
		t.Fatalf("conflict %v does not say who decided (%+v)", err, conflict.Interrupt)
	}
	trail, err := c.InterruptEvents(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range trail {
		types = append(types, ev.Type)
	}
	if !slices.Contains(types, "created") || !slices.Contains(types, "resolved") {
		t.Fatalf("audit trail %v", types)
	}

	// A schema-breaking answer: 400 with the violations.
	askTransfer(t, agent, "Transfer $25,000 to account 777")
	pending, err := c.InterruptsPage(ctx, client.InterruptFilter{Tool: "userApproval", PageSize: 1}, "")
	if err != nil || len(pending.Items) != 1 {
		t.Fatalf("pending approvals: %v %+v", err, pending)
	}
	id := pending.Items[0].ID
	if _, err := c.Respond(ctx, id, map[string]any{"approved": "yes"}, ""); !client.IsInvalidArgument(err) || !errors.As(err, &e) || !strings.Contains(string(e.Details), "violations") {
		t.Fatalf("schema-breaking answer: %v", err)
	}
	// An approval asks a human: it cannot be restarted.
	if _, err := c.Restart(ctx, id, ""); !errors.Is(err, client.ErrFailedPrecondition) {
		t.Fatalf("restart of an approval: %v", err)
	}
	d, err := c.Respond(ctx, id, map[string]any{"approved": true}, "")
	if err != nil || d.Status != client.DecisionResumed || d.Output.FinishReason != client.FinishInterrupted {
		t.Fatalf("approve over the limit: %v %+v", err, d)
	}
	pending, err = c.InterruptsPage(ctx, client.InterruptFilter{Tool: "transferMoney"}, "")
	if err != nil || len(pending.Items) != 1 {
		t.Fatalf("paused transfer: %v %+v", err, pending)
	}
	d, err = c.Restart(ctx, pending.Items[0].ID, "limit raised")
	if err != nil || !strings.HasPrefix(d.Text(), "Done: transferred $25,000.00") {
		t.Fatalf("restart the paused transfer: %v %+v", err, d)
	}

	rep, err := c.InterruptReport(ctx, client.ReportOptions{GroupBy: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	var approvals *client.ReportRow
	for i := range rep.Rows {
		if rep.Rows[i].Key == "userApproval" {
			approvals = &rep.Rows[i]
		}
	}
	if rep.GroupBy != "tool" || approvals == nil || approvals.Resolved != 4 || approvals.Approved != 4 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := c.InterruptReport(ctx, client.ReportOptions{GroupBy: "weekday"}); !client.IsInvalidArgument(err) {
		t.Fatalf("report by weekday: %v", err)
	}
}
