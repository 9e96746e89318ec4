package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/holdpoint/holdpoint/examples/internal/exampletest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
)

const agent = "supportAgent"

// TestRefundThreshold builds the example and drives it over HTTP: a refund
// under the limit runs at once; one above it pauses the turn with the
// reason and the limit, runs exactly once when the client restarts it, and
// cannot be restarted again.
func TestRefundThreshold(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	// Under the limit: no pause.
	small := s.Turn(t, agent, service.AgentInit{SessionID: "small"}, exampletest.User("Refund $40 for order 7"))
	if got, want := exampletest.Text(small), "Refunded $40.00 for order 7 (rf-1)."; got != want || small.FinishReason != "stop" {
		t.Fatalf("small refund: %q (%s), want %q", got, small.FinishReason, want)
	}

	// Above the limit: the tool pauses the turn with its metadata, and
	// the refund is not made.
	init := service.AgentInit{SessionID: "big"}
	res := s.Turn(t, agent, init, exampletest.User("Refund $250 for order 42"))
	asks := exampletest.Interrupts(res)
	if res.FinishReason != "interrupted" || len(asks) != 1 || asks[0].Name != "refund" {
		t.Fatalf("big refund: %+v", res)
	}
	if got, want := string(asks[0].Input), `{"orderId":"42","amount":250}`; got != want {
		t.Fatalf("refund input %s, want %s", got, want)
	}
	if got := interruptMetadata(t, res); got != `{"limit":100,"reason":"above the refund limit"}` {
		t.Fatalf("interrupt metadata %s", got)
	}
	if calls := toolCalls(t, s, "big"); len(calls) != 1 || calls[0].Status != "interrupted" {
		t.Fatalf("before the restart: tool calls %+v, want one interrupted", calls)
	}
	paused := res.SnapshotID

	// The restart is the confirmation: the refund runs, once (rf-2: the
	// pause made none).
	done := s.Turn(t, agent, init, exampletest.Restart(asks[0], "true"))
	if got, want := exampletest.Text(done), "Refunded $250.00 for order 42 (rf-2)."; got != want || done.FinishReason != "stop" {
		t.Fatalf("restart: %q (%s), want %q", got, done.FinishReason, want)
	}
	calls := toolCalls(t, s, "big")
	if len(calls) != 2 || calls[1].Status != "succeeded" || !calls[1].Restart {
		t.Fatalf("after the restart: tool calls %+v, want the interrupted call and a succeeded restart", calls)
	}

	// The request was restarted: restarting it again from the paused
	// snapshot (the first answer lost) answers the first attempt's
	// outcome; by session id the latest snapshot has nothing to restart,
	// and the turn fails. Neither refunds anything: the next refund is
	// rf-3.
	if replayed := s.Turn(t, agent, service.AgentInit{SnapshotID: paused}, exampletest.Restart(asks[0], "true")); replayed.SnapshotID != done.SnapshotID || exampletest.Text(replayed) != exampletest.Text(done) {
		t.Fatalf("second restart: %+v, want the first outcome", replayed)
	}
	again := s.Turn(t, agent, init, exampletest.Restart(asks[0], "true"))
	if again.FinishReason != "failed" || again.Error == nil || again.Error.Status != "FAILED_PRECONDITION" {
		t.Fatalf("second restart by session: %+v, want a failed turn", again)
	}
	next := s.Turn(t, agent, service.AgentInit{SessionID: "next"}, exampletest.User("Refund $5 for order 8"))
	if got, want := exampletest.Text(next), "Refunded $5.00 for order 8 (rf-3)."; got != want {
		t.Fatalf("next refund: %q, want %q", got, want)
	}
}

// TestOperatorRestart confirms a refund above the limit in the approvals
// inbox: an operator's restart (POST /api/v1/interrupts/{id}/restart, with
// a note as its metadata.resumed) confirms it too.
func TestOperatorRestart(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	res := s.Turn(t, agent, service.AgentInit{SessionID: "operator"}, exampletest.User("Refund $120 for order 9"))
	if res.FinishReason != "interrupted" {
		t.Fatalf("big refund: %+v", res)
	}
	var waiting struct{ Items []service.Interrupt }
	s.Get(t, "/interrupts?sessionId=operator", &waiting)
	if len(waiting.Items) != 1 || waiting.Items[0].Tool != "refund" || string(waiting.Items[0].Metadata) != `{"limit":100,"reason":"above the refund limit"}` {
		t.Fatalf("inbox: %+v", waiting.Items)
	}
	path := "/interrupts/" + waiting.Items[0].ID.String() + "/restart"
	status, body := post(t, s, path, `{"note":"the customer called"}`)
	if status != 200 {
		t.Fatalf("restart: %d %s", status, body)
	}
	var decided inbox.DecisionResult
	if err := json.Unmarshal(body, &decided); err != nil {
		t.Fatal(err)
	}
	if got, want := exampletest.Text(decided.Output), "Refunded $120.00 for order 9 (rf-1)."; decided.Status != "resumed" || got != want {
		t.Fatalf("restart: %s %q, want resumed %q", decided.Status, got, want)
	}
	if status, body := post(t, s, path, `{}`); status != 409 {
		t.Fatalf("second restart: %d %s, want 409", status, body)
	}
	if calls := toolCalls(t, s, "operator"); len(calls) != 2 || calls[1].Status != "succeeded" {
		t.Fatalf("tool calls %+v, want the interrupted call and one restart", calls)
	}
}

// interruptMetadata is the metadata.interrupt of the output's one
// interrupted request.
func interruptMetadata(t *testing.T, out *service.AgentOutput) string {
	t.Helper()
	for _, p := range out.Message.Content {
		if raw, ok := p.Metadata["interrupt"]; ok && p.ToolRequest != nil {
			return string(raw)
		}
	}
	t.Fatalf("no interrupted request in %+v", out.Message)
	return ""
}

// toolCalls lists the session's tool calls, oldest first.
func toolCalls(t *testing.T, s *exampletest.Server, sessionID string) []service.ToolCallRecord {
	t.Helper()
	var page struct{ Items []service.ToolCallRecord }
	s.Get(t, "/sessions/"+sessionID+"/tool-calls", &page)
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
