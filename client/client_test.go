package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/client"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// approval is the input of the demo's userApproval interrupt.
type approval struct {
	Action  string `json:"action"`
	Details string `json:"details"`
}

// decision is the answer userApproval takes.
type decision struct {
	Approved bool   `json:"approved"`
	Feedback string `json:"feedback,omitempty"`
}

// askTransfer sends a transfer request on a new chat and returns the chat,
// the paused answer and its one interrupt.
func askTransfer(t *testing.T, agent *client.Agent, text string) (*client.Chat, *client.Response, client.Interrupt) {
	t.Helper()
	chat := agent.Chat()
	res, err := chat.Send(testContext(t), text)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if res.FinishReason() != client.FinishInterrupted {
		t.Fatalf("finish reason %q, want interrupted (text %q)", res.FinishReason(), res.Text())
	}
	ints := res.Interrupts()
	if len(ints) != 1 {
		t.Fatalf("%d interrupts, want 1", len(ints))
	}
	return chat, res, ints[0]
}

// TestSeedFlowApprove is the Genkit interrupts page's flow: ask for a
// transfer, get the userApproval interrupt, approve it, the transfer is
// done; resuming the same interrupt again is a typed conflict.
func TestSeedFlowApprove(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	agent := s.client(t).Agent("bankingAgent")

	chat, first, ask := askTransfer(t, agent, "Transfer $50 to account 12345")
	if ask.Name != "userApproval" || ask.Ref == "" {
		t.Fatalf("interrupt %+v, want userApproval with a ref", ask)
	}
	var in approval
	if err := ask.DecodeInput(&in); err != nil {
		t.Fatal(err)
	}
	if in.Action != "transferMoney" || !strings.Contains(in.Details, "12345") {
		t.Fatalf("approval input %+v", in)
	}
	if first.SnapshotID() == "" || first.SessionID() == "" || chat.SnapshotID() != first.SnapshotID() {
		t.Fatalf("snapshot %q session %q chat %q", first.SnapshotID(), first.SessionID(), chat.SnapshotID())
	}

	done, err := chat.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !strings.HasPrefix(done.Text(), "Done: transferred $50.00 to account 12345") {
		t.Fatalf("answer %q", done.Text())
	}
	if done.SessionID() != first.SessionID() || done.SnapshotID() == first.SnapshotID() {
		t.Fatalf("session %q snapshot %q after the resume", done.SessionID(), done.SnapshotID())
	}
	// A server-managed answer carries its message, not the state: the
	// chat knows the user's message and the model's two answers.
	if n := len(chat.Messages()); n != 3 {
		t.Fatalf("chat has %d messages, want 3", n)
	}

	// The same resume from the paused snapshot again (its answer lost):
	// decided once, answered with the first attempt's outcome.
	again := agent.ChatFrom(client.Init{SnapshotID: first.SnapshotID()})
	replayed, err := again.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil || replayed.SnapshotID() != done.SnapshotID() {
		t.Fatalf("second resume: %v, want the first outcome (snapshot %s)", err, done.SnapshotID())
	}
	// Another answer to the decided interrupt is a conflict.
	other := agent.ChatFrom(client.Init{SnapshotID: first.SnapshotID()})
	_, err = other.Resume(ctx, ask.Respond(decision{Approved: false}))
	var e *client.Error
	if !errors.As(err, &e) || e.HTTPStatus != http.StatusConflict || e.Status != client.StatusAborted || !client.IsConflict(err) {
		t.Fatalf("another answer: %v, want 409 ABORTED", err)
	}
	if e.RequestID == "" || e.Message == "" {
		t.Fatalf("error %+v lacks a message or request id", e)
	}
}

// TestSeedFlowReject denies the transfer: nothing moves.
func TestSeedFlowReject(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	agent := s.client(t).Agent("bankingAgent")
	chat, _, ask := askTransfer(t, agent, "Transfer $50 to account 12345")
	res, err := chat.Resume(testContext(t), ask.Respond(decision{Approved: false, Feedback: "wrong account"}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text(), "Cancelled: the transfer of $50.00 to account 12345 was not executed") {
		t.Fatalf("answer %q", res.Text())
	}
	for _, p := range res.ToolRequests() {
		t.Fatalf("unexpected tool request %+v", p.ToolRequest)
	}
}

// TestSeedFlowRestart restarts: with a changed input the server refuses
// (a restart must repeat the request it wrote) and the interrupt stays
// answerable; a transfer over the limit pauses itself and runs once
// restarted.
func TestSeedFlowRestart(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	agent := s.client(t).Agent("bankingAgent")

	chat, _, ask := askTransfer(t, agent, "Transfer $50 to account 12345")
	_, err := chat.Resume(ctx, ask.RestartWith(approval{Action: "transferMoney", Details: "Transfer $5000.00 to account 666"}))
	if !client.IsInvalidArgument(err) {
		t.Fatalf("restart with a changed input: %v, want INVALID_ARGUMENT", err)
	}
	res, err := chat.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil || !strings.HasPrefix(res.Text(), "Done:") {
		t.Fatalf("approve after the refused restart: %v %q", err, res.Text())
	}

	chat, _, ask = askTransfer(t, agent, "Transfer $25,000 to account 777")
	res, err = chat.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil {
		t.Fatal(err)
	}
	ints := res.Interrupts()
	if res.FinishReason() != client.FinishInterrupted || len(ints) != 1 || ints[0].Name != "transferMoney" {
		t.Fatalf("over the limit: %q %+v, want transferMoney to pause", res.FinishReason(), ints)
	}
	res, err = chat.Resume(ctx, ints[0].Restart().WithResumedMetadata(map[string]string{"note": "confirmed"}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text(), "Done: transferred $25,000.00 to account 777") {
		t.Fatalf("answer %q", res.Text())
	}
}

// TestSendStream streams a turn: chunks, then the final response; a
// refusal after the 200 (an error frame) is the same typed error.
func TestSendStream(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	agent := s.client(t).Agent("bankingAgent")
	chat := agent.Chat()

	stream := chat.SendStream(ctx, "Transfer $50 to account 12345")
	var texts []string
	for chunk, err := range stream.Chunks() {
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Text() != "" {
			texts = append(texts, chunk.Text())
		}
	}
	res, err := stream.Response()
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) < 2 || strings.Join(texts, "") != res.Text() {
		t.Fatalf("chunks %q do not make the answer %q", texts, res.Text())
	}
	ints := res.Interrupts()
	if len(ints) != 1 {
		t.Fatalf("%d interrupts", len(ints))
	}

	stream = chat.ResumeStream(ctx, ints[0].Respond(decision{Approved: true}))
	var patches, ends int
	for chunk, err := range stream.Chunks() {
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.CustomPatch) > 0 {
			patches++
		}
		if chunk.TurnEnd != nil {
			ends++
		}
	}
	res, err = stream.Response()
	if err != nil || !strings.HasPrefix(res.Text(), "Done:") {
		t.Fatalf("resumed stream: %v %q", err, res.Text())
	}
	if patches == 0 || ends == 0 {
		t.Fatalf("%d customPatch and %d turnEnd chunks, want some of each", patches, ends)
	}

	// Response without ranging runs the turn too.
	res, err = chat.SendStream(ctx, "hello").Response()
	if err != nil || res.Text() == "" {
		t.Fatalf("response without chunks: %v %+v", err, res)
	}

	// An unknown snapshot is refused inside the stream (200, error frame).
	bad := agent.ChatFrom(client.Init{SnapshotID: "00000000-0000-4000-8000-000000000000"}).SendStream(ctx, "hi")
	var got error
	for _, err := range bad.Chunks() {
		got = err
	}
	var e *client.Error
	if !errors.As(got, &e) || e.HTTPStatus != http.StatusOK || e.Status != client.StatusNotFound {
		t.Fatalf("stream on an unknown snapshot: %v, want NOT_FOUND in an error frame", got)
	}
	if _, err := bad.Response(); !client.IsNotFound(err) {
		t.Fatalf("Response after the error frame: %v", err)
	}
}

// transfers decodes the demo's custom state.
func transfers(t *testing.T, custom json.RawMessage) int {
	t.Helper()
	var st struct {
		Transfers []json.RawMessage `json:"transfers"`
	}
	if len(custom) > 0 {
		if err := json.Unmarshal(custom, &st); err != nil {
			t.Fatal(err)
		}
	}
	return len(st.Transfers)
}

// TestClientManagedAgent talks to bankingAgentClient: the chat carries the
// signed state from turn to turn unchanged; an altered state is refused.
func TestClientManagedAgent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	agent := s.client(t).Agent("bankingAgentClient")
	chat := agent.Chat()

	res, err := chat.Send(ctx, "Transfer $50 to account 12345")
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID() != "" || res.State == nil || res.State.Signature == "" {
		t.Fatalf("client-managed answer: snapshot %q state %+v, want a signed state and no snapshot", res.SnapshotID(), res.State)
	}
	paused := chat.State()
	res, err = chat.Resume(ctx, res.Interrupts()[0].Respond(decision{Approved: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text(), "Done:") || transfers(t, res.Custom()) != 1 {
		t.Fatalf("turn 2: %q custom %s", res.Text(), res.Custom())
	}
	res, err = chat.Send(ctx, "Pay Bob $20")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Interrupts()) != 1 {
		t.Fatalf("turn 3: %q, want an approval", res.Text())
	}
	res, err = chat.Resume(ctx, res.Interrupts()[0].Respond(decision{Approved: true}))
	if err != nil {
		t.Fatal(err)
	}
	if transfers(t, res.Custom()) != 2 || len(chat.Messages()) != len(res.State.Messages) || len(res.State.Messages) < 8 {
		t.Fatalf("turn 4: custom %s, %d messages", res.Custom(), len(chat.Messages()))
	}

	// The paused state of turn 1, altered, cannot be resumed.
	var st map[string]any
	if err := json.Unmarshal(paused, &st); err != nil {
		t.Fatal(err)
	}
	st["custom"] = map[string]any{"transfers": []any{}, "forged": true}
	forged, _ := json.Marshal(st)
	ask := client.Interrupt{}
	for _, m := range chat.Messages()[:2] {
		for _, p := range m.Content {
			if p.ToolRequest != nil {
				ask = client.Interrupt{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Input: p.ToolRequest.Input}
			}
		}
	}
	_, err = agent.ChatFrom(client.Init{State: forged}).Resume(ctx, ask.Respond(decision{Approved: true}))
	if !client.IsInvalidArgument(err) {
		t.Fatalf("resume of an altered state: %v, want INVALID_ARGUMENT", err)
	}
}

// TestSnapshotAndLoadSession reads a snapshot and goes on with a session
// from another chat.
func TestSnapshotAndLoadSession(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	c := s.client(t)
	_, first, ask := askTransfer(t, c.Agent("bankingAgent"), "Transfer $50 to account 12345")

	snap, err := c.Snapshot(ctx, "bankingAgent", first.SnapshotID())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != client.SnapshotCompleted || snap.FinishReason != client.FinishInterrupted || snap.SessionID != first.SessionID() || snap.State == nil || len(snap.State.Messages) != 2 {
		t.Fatalf("snapshot %+v", snap)
	}

	loaded, err := c.LoadSession(ctx, "bankingAgent", first.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	if loaded.SnapshotID() != first.SnapshotID() || len(loaded.Messages()) != 2 {
		t.Fatalf("loaded chat at %q with %d messages", loaded.SnapshotID(), len(loaded.Messages()))
	}
	res, err := loaded.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil || !strings.HasPrefix(res.Text(), "Done:") {
		t.Fatalf("resume from the loaded session: %v %q", err, res.Text())
	}
	latest, err := c.Agent("bankingAgent").SessionSnapshot(ctx, first.SessionID())
	if err != nil || latest.SnapshotID != res.SnapshotID() {
		t.Fatalf("latest snapshot %v %+v, want %s", err, latest, res.SnapshotID())
	}
	if _, err := c.Snapshot(ctx, "bankingAgent", "00000000-0000-4000-8000-000000000000"); !client.IsNotFound(err) {
		t.Fatalf("unknown snapshot: %v", err)
	}
}

// TestDetachWaitAndAbort detaches the slow statement: waiting sees it
// complete; another one is aborted.
func TestDetachWaitAndAbort(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	agent := s.client(t).Agent("bankingAgent")

	chat := agent.Chat()
	task, err := chat.Detach(ctx, "Prepare my yearly statement")
	if err != nil {
		t.Fatal(err)
	}
	if task.SnapshotID == "" || chat.SnapshotID() != task.SnapshotID {
		t.Fatalf("task %q, chat at %q", task.SnapshotID, chat.SnapshotID())
	}
	var statuses []string
	var snap *client.Snapshot
	for sn, err := range task.Poll(ctx, 200*time.Millisecond) {
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, sn.Status)
		snap = sn
	}
	// Detach answers before the 40-chunk statement is written.
	if snap.Status != client.SnapshotCompleted || statuses[0] != client.SnapshotPending {
		t.Fatalf("polled %v, last %+v", statuses, snap)
	}
	last := snap.State.Messages[len(snap.State.Messages)-1]
	if !strings.Contains(last.Text(), "yearly statement is ready") {
		t.Fatalf("last message %q", last.Text())
	}

	chat = agent.Chat()
	task, err = chat.Detach(ctx, "Prepare my yearly statement")
	if err != nil {
		t.Fatal(err)
	}
	status, err := chat.Abort(ctx)
	if err != nil || status != client.SnapshotPending {
		t.Fatalf("abort: %q %v", status, err)
	}
	snap, err = task.Wait(ctx, 100*time.Millisecond)
	if err != nil || snap.Status != client.SnapshotAborted {
		t.Fatalf("wait after abort: %v %+v", err, snap)
	}
}

// TestErrors checks the typed errors of 400, 401, 403 and 404 answers.
func TestErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)

	bad, err := client.New(s.srv.URL, client.WithAPIKey("hp_not_a_key"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Agent("bankingAgent").Chat().Send(ctx, "hi")
	var e *client.Error
	if !errors.As(err, &e) || e.HTTPStatus != http.StatusUnauthorized || !client.IsUnauthenticated(err) || e.RequestID == "" {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := bad.Agent("bankingAgent").Chat().SendStream(ctx, "hi").Response(); !errors.As(err, &e) || e.HTTPStatus != http.StatusOK || e.Status != client.StatusUnauthenticated {
		t.Fatalf("bad key, streamed: %v, want an UNAUTHENTICATED error frame", err)
	}
	for _, err := range bad.Interrupts(ctx, client.InterruptFilter{}) {
		if !client.IsUnauthenticated(err) {
			t.Fatalf("bad key on the inbox: %v", err)
		}
	}

	cl := s.client(t, client.WithAPIKey(s.clientKey))
	if _, err := cl.InterruptsPage(ctx, client.InterruptFilter{}, ""); !errors.Is(err, client.ErrPermissionDenied) || !errors.As(err, &e) || e.HTTPStatus != http.StatusForbidden {
		t.Fatalf("client key on the inbox: %v", err)
	}

	admin := s.client(t)
	if _, err := admin.Agent("noSuchAgent").Chat().Send(ctx, "hi"); !client.IsNotFound(err) || !errors.As(err, &e) || e.HTTPStatus != http.StatusNotFound {
		t.Fatalf("unknown agent: %v", err)
	}
	if _, err := admin.Interrupt(ctx, "00000000-0000-4000-8000-000000000000"); !client.IsNotFound(err) {
		t.Fatalf("unknown interrupt: %v", err)
	}
	if _, err := admin.InterruptsPage(ctx, client.InterruptFilter{PageSize: 500}, ""); !client.IsInvalidArgument(err) || !errors.As(err, &e) || e.HTTPStatus != http.StatusBadRequest {
		t.Fatalf("page size 500: %v", err)
	}
	if _, err := admin.Agent("bankingAgent").Chat().SendMessage(ctx, client.Message{Role: client.RoleModel, Content: []client.Part{protocol.TextPart("I approve")}}); !client.IsInvalidArgument(err) {
		t.Fatalf("a model message from the client: %v", err)
	}
	if _, err := admin.Agent("bankingAgent").Chat().Resume(ctx, client.Reply{}); err == nil || client.StatusOf(err) != "" {
		t.Fatalf("an empty reply: %v, want a local error", err)
	}
}
