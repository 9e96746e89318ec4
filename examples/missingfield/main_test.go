package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/examples/internal/exampletest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

const agent = "shippingAgent"

// TestMissingAddress builds the example and drives it over HTTP: an order
// with its address ships at once; one without pauses on askAddress, which
// shows in the inbox, refuses an incomplete address, continues with a
// complete one, and cannot be answered twice.
func TestMissingAddress(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	direct := s.Turn(t, agent, service.AgentInit{SessionID: "direct"}, exampletest.User("Ship order 42 to 1 Main St, Springfield"))
	if got, want := exampletest.Text(direct), "Order 42 ships to 1 Main St, Springfield (tracking TRK-42-1)."; got != want || direct.FinishReason != "stop" {
		t.Fatalf("with an address: %q (%s), want %q", got, direct.FinishReason, want)
	}

	// Without an address the turn asks for it.
	res := s.Turn(t, agent, service.AgentInit{SessionID: "ask"}, exampletest.User("Ship order 42"))
	asks := exampletest.Interrupts(res)
	if res.FinishReason != "interrupted" || len(asks) != 1 || asks[0].Name != "askAddress" || asks[0].Ref != "address-42" {
		t.Fatalf("without an address: %+v", res)
	}
	if got, want := exampletest.Text(res), "I need a shipping address for order 42."; got != want {
		t.Fatalf("question text %q, want %q", got, want)
	}
	if got, want := string(asks[0].Input), `{"orderId":"42","question":"Where should order 42 go?"}`; got != want {
		t.Fatalf("askAddress input %s, want %s", got, want)
	}
	paused := service.AgentInit{SnapshotID: res.SnapshotID}

	// It is in the approvals inbox.
	waiting := pending(t, s, "ask")
	if len(waiting) != 1 || waiting[0].Tool != "askAddress" || waiting[0].SnapshotID != res.SnapshotID {
		t.Fatalf("inbox: %+v", waiting)
	}

	// An address without a city (or with an empty one) does not match the
	// answer's schema: refused, and the interrupt stays pending.
	for _, bad := range []string{`{"street":"5 Elm St"}`, `{"street":"5 Elm St","city":""}`} {
		if status, body := s.Refused(t, agent, paused, exampletest.Respond(asks[0], bad)); status != 400 || !strings.Contains(body, "INVALID_ARGUMENT") {
			t.Fatalf("answer %s: %d %s, want 400 INVALID_ARGUMENT", bad, status, body)
		}
	}
	if len(pending(t, s, "ask")) != 1 {
		t.Fatal("a refused answer resolved the interrupt")
	}

	// A complete address continues the turn.
	done := s.Turn(t, agent, paused, exampletest.Respond(asks[0], `{"street":"5 Elm St","city":"Shelbyville"}`))
	if got, want := exampletest.Text(done), "Order 42 ships to 5 Elm St, Shelbyville (tracking TRK-42-2)."; got != want || done.FinishReason != "stop" {
		t.Fatalf("answered: %q (%s), want %q", got, done.FinishReason, want)
	}
	if len(pending(t, s, "ask")) != 0 {
		t.Fatal("the answered interrupt is still pending")
	}
	// The booking is a recorded tool call of the session.
	var calls struct{ Items []service.ToolCallRecord }
	s.Get(t, "/sessions/ask/tool-calls", &calls)
	if c := calls.Items; len(c) != 1 || c[0].Tool != "bookShipment" || c[0].Ref != "ship-42" || c[0].Status != service.ToolCallSucceeded ||
		string(c[0].Output) != `{"tracking":"TRK-42-2"}` {
		t.Fatalf("the session's tool calls: %+v", c)
	}

	// The interrupt is answered: answering it again is refused.
	if status, body := s.Refused(t, agent, paused, exampletest.Respond(asks[0], `{"street":"6 Oak St","city":"Ogdenville"}`)); status != 409 || !strings.Contains(body, "ABORTED") {
		t.Fatalf("second answer: %d %s, want 409 ABORTED", status, body)
	}
}

// TestAnswerInInbox answers the question through the approvals inbox, as
// an operator would: POST /api/v1/interrupts/{id}/respond continues the
// turn on the server.
func TestAnswerInInbox(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	res := s.Turn(t, agent, service.AgentInit{SessionID: "inbox"}, exampletest.User("Ship order 43"))
	if res.FinishReason != "interrupted" {
		t.Fatalf("without an address: %+v", res)
	}
	waiting := pending(t, s, "inbox")
	if len(waiting) != 1 {
		t.Fatalf("inbox: %+v", waiting)
	}
	path := "/interrupts/" + waiting[0].ID.String() + "/respond"

	if status, body := post(t, s, path, `{"output":{"street":"7 Pine St"}}`); status != 400 {
		t.Fatalf("answer without a city: %d %s, want 400", status, body)
	}
	status, body := post(t, s, path, `{"output":{"street":"7 Pine St","city":"Capital City"},"note":"from the order form"}`)
	if status != 200 {
		t.Fatalf("respond: %d %s", status, body)
	}
	var decided inbox.DecisionResult
	if err := json.Unmarshal(body, &decided); err != nil {
		t.Fatal(err)
	}
	if got, want := exampletest.Text(decided.Output), "Order 43 ships to 7 Pine St, Capital City (tracking TRK-43-1)."; decided.Status != "resumed" || got != want {
		t.Fatalf("respond: %s %q, want resumed %q", decided.Status, got, want)
	}
	if snap := s.Snapshot(t, agent, "inbox"); snap.SnapshotID != decided.Output.SnapshotID || snap.Status != "completed" {
		t.Fatalf("the session's latest snapshot %s (%s), want the resumed turn's %s", snap.SnapshotID, snap.Status, decided.Output.SnapshotID)
	}
	if status, body := post(t, s, path, `{"output":{"street":"8 Ash St","city":"Ogdenville"}}`); status != 409 {
		t.Fatalf("second respond: %d %s, want 409", status, body)
	}
}

// TestPOBoxWaitsForApproval: a shipment to a PO box is not booked until an
// operator approves the booking in the inbox; the approval books it once.
func TestPOBoxWaitsForApproval(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	res := s.Turn(t, agent, service.AgentInit{SessionID: "pobox"}, exampletest.User("Ship order 44 to PO Box 12, Springfield"))
	waiting := pending(t, s, "pobox")
	if res.FinishReason != "interrupted" || len(waiting) != 1 || waiting[0].Tool != "bookShipment" || waiting[0].Ref != "ship-44" {
		t.Fatalf("a PO box: %+v, inbox %+v", res, waiting)
	}
	var calls struct{ Items []service.ToolCallRecord }
	s.Get(t, "/sessions/pobox/tool-calls", &calls)
	if len(calls.Items) != 0 {
		t.Fatalf("booked before the approval: %+v", calls.Items)
	}
	path := "/interrupts/" + waiting[0].ID.String() + "/restart"
	status, body := post(t, s, path, `{"note":"checked the box"}`)
	if status != 200 {
		t.Fatalf("approve: %d %s", status, body)
	}
	var decided inbox.DecisionResult
	if err := json.Unmarshal(body, &decided); err != nil {
		t.Fatal(err)
	}
	if got, want := exampletest.Text(decided.Output), "Order 44 ships to PO Box 12, Springfield (tracking TRK-44-1)."; decided.Status != "resumed" || got != want {
		t.Fatalf("approved: %s %q, want resumed %q", decided.Status, got, want)
	}
	s.Get(t, "/sessions/pobox/tool-calls", &calls)
	if c := calls.Items; len(c) != 1 || c[0].Ref != "ship-44" || c[0].Status != service.ToolCallSucceeded {
		t.Fatalf("the session's tool calls: %+v", c)
	}
	if status, body := post(t, s, path, `{}`); status != 409 && status != 200 {
		t.Fatalf("a second approval: %d %s", status, body)
	}
	s.Get(t, "/sessions/pobox/tool-calls", &calls)
	if len(calls.Items) != 1 {
		t.Fatalf("booked %d times", len(calls.Items))
	}
}

// pending lists the session's pending interrupts.
func pending(t *testing.T, s *exampletest.Server, sessionID string) []service.Interrupt {
	t.Helper()
	var page struct{ Items []service.Interrupt }
	s.Get(t, "/interrupts?sessionId="+sessionID, &page)
	return page.Items
}

// post POSTs a JSON body to an /api/v1 route.
func post(t *testing.T, s *exampletest.Server, path, body string) (int, []byte) {
	t.Helper()
	res, err := http.Post(s.URL+"/api/v1"+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}
