package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

var caller = auth.Caller{TenantID: "default", Actor: "test"}

// demoRuntime runs both demo agents on the demo model (without its
// streaming pauses) over a fresh database.
func demoRuntime(t *testing.T) *service.Runtime {
	t.Helper()
	return servicetest.New(t, servicetest.Options{
		Register: func(rt *service.Runtime) error { return Register(rt, &Model{}) },
	}).Runtime
}

// interrupted returns the interrupted tool requests of an answer.
func interrupted(out *protocol.AgentOutput) []*protocol.ToolRequest {
	var reqs []*protocol.ToolRequest
	if out.Message == nil {
		return nil
	}
	for _, p := range out.Message.Content {
		if _, ok := p.Metadata["interrupt"]; ok && p.ToolRequest != nil {
			reqs = append(reqs, p.ToolRequest)
		}
	}
	return reqs
}

func respond(req *protocol.ToolRequest, output string) protocol.Part {
	return protocol.Part{ToolResponse: &protocol.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(output)}}
}

// restart restarts a request with `resumed` metadata, as the demo's
// transfer over the limit wants (a plain restart reaches the tool without
// it, and pauses again).
func restart(req *protocol.ToolRequest) protocol.Part {
	return protocol.Part{ToolRequest: &protocol.ToolRequest{Name: req.Name, Ref: req.Ref, Input: req.Input},
		Metadata: protocol.Metadata{"resumed": json.RawMessage(`{"confirmed":true}`)}}
}

// sessionTransfers is the custom state's list of transfers.
func sessionTransfers(t *testing.T, custom json.RawMessage) []SessionTransfer {
	t.Helper()
	var doc struct{ Transfers []SessionTransfer }
	if len(custom) > 0 {
		if err := json.Unmarshal(custom, &doc); err != nil {
			t.Fatalf("custom state %s: %v", custom, err)
		}
	}
	return doc.Transfers
}

// TestSeveralTransfersOneApprovalEach walks the multi-interrupt flows of the
// seed through the demo banking agent: one approval per transfer in one
// answer, a partial answer refused, approvals answered, denied and
// restarted in one resume, the transfers run once each, and the session's
// custom state and statement artifact kept up to date.
func TestSeveralTransfersOneApprovalEach(t *testing.T) {
	t.Parallel()
	rt := demoRuntime(t)
	ctx := context.Background()
	init := protocol.AgentInit{SessionID: "multi"}
	send := func(in protocol.AgentInput, chunks *[]protocol.StreamChunk) *protocol.AgentOutput {
		t.Helper()
		var sink func(protocol.StreamChunk)
		if chunks != nil {
			sink = func(c protocol.StreamChunk) { *chunks = append(*chunks, c) }
		}
		out, err := rt.InvokeOne(ctx, caller, BankingAgentName, init, in, sink)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	first := send(protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{
		protocol.TextPart("Could you please transfer $50 to my savings account, €20 to Bob and 1,250.75 dollars to acct 12345?")}}}, nil)
	asks := interrupted(first)
	if first.FinishReason != protocol.FinishInterrupted || len(asks) != 3 {
		t.Fatalf("first turn: %s with %d interrupts, want 3", first.FinishReason, len(asks))
	}
	var details []string
	for _, a := range asks {
		var in approvalInput
		_ = json.Unmarshal(a.Input, &in)
		details = append(details, in.Details)
	}
	if got := strings.Join(details, " | "); got != "Transfer $50.00 to your savings account | Transfer €20.00 to Bob | Transfer $1,250.75 to account 12345" {
		t.Fatalf("approval details: %s", got)
	}
	inbox, err := inbox.New(rt).ListInterrupts(ctx, caller, store.InterruptFilter{SessionID: "multi"})
	if err != nil || len(inbox) != 3 {
		t.Fatalf("inbox: %v %d", err, len(inbox))
	}
	for _, it := range inbox {
		if it.ExpiresAt == nil || time.Until(*it.ExpiresAt) < 23*time.Hour {
			t.Fatalf("approval %s has deadline %v, want about 24 h", it.ID, it.ExpiresAt)
		}
	}

	// Answering only some of them is refused, and changes nothing.
	partial := send(protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{respond(asks[0], `{"approved":true}`)}}}, nil)
	if partial.Error == nil || partial.Error.Status != store.CodeInvalidArgument || !strings.Contains(partial.Error.Message, asks[1].Ref) {
		t.Fatalf("partial resume: %+v", partial)
	}

	// Approve the first, deny Bob's, restart the third: it asks again.
	again := send(protocol.AgentInput{Resume: &protocol.Resume{
		Respond: []protocol.Part{respond(asks[0], `{"approved":true}`), respond(asks[1], `{"approved":false,"feedback":"not Bob"}`)},
		Restart: []protocol.Part{restart(asks[2])},
	}}, nil)
	if reasked := interrupted(again); again.FinishReason != protocol.FinishInterrupted || len(reasked) != 1 || reasked[0].Ref != asks[2].Ref {
		t.Fatalf("restart of an approval: %s %+v", again.FinishReason, reasked)
	}
	before := len(Transfers())
	var chunks []protocol.StreamChunk
	done := send(protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{respond(asks[2], `{"approved":true}`)}}}, &chunks)
	if done.FinishReason != protocol.FinishStop {
		t.Fatalf("last approval: %+v", done)
	}
	text := done.Message.Text()
	if n := strings.Count(text, "Done: transferred"); n != 2 || !strings.Contains(text, "$50.00 to your savings account") || !strings.Contains(text, "$1,250.75 to account 12345") {
		t.Fatalf("final answer %q", text)
	}
	ran := 0
	for _, tr := range Transfers()[before:] {
		if strings.Contains(text, tr.TransactionID) {
			ran++
		}
	}
	if ran != 2 {
		t.Fatalf("%d of the answer's transfers executed, want 2", ran)
	}
	snap, err := rt.GetSnapshot(ctx, caller, BankingAgentName, protocol.SnapshotLookup{SessionID: "multi"})
	if err != nil || snap.SnapshotID != done.SnapshotID {
		t.Fatalf("latest snapshot: %v", err)
	}
	state := snap.State
	history := state.Messages
	if !strings.Contains(history[len(history)-3].Text(), `Cancelled: the transfer of €20.00 to Bob was not executed. Your feedback: "not Bob".`) {
		t.Fatalf("the denial is not reported: %q", history[len(history)-3].Text())
	}

	// Custom state and the statement, streamed and kept.
	list := sessionTransfers(t, state.Custom)
	if len(list) != 2 || list[0].Amount != 50 || list[0].ToAccount != "savings" || list[1].Amount != 1250.75 || list[1].Currency != "USD" {
		t.Fatalf("custom transfers %+v", list)
	}
	var patches, artifacts int
	for _, c := range chunks {
		if c.CustomPatch != nil {
			patches++
		}
		if c.Artifact != nil && c.Artifact.Name == StatementArtifact {
			artifacts++
		}
	}
	if patches != 2 || artifacts != 2 {
		t.Fatalf("streamed %d customPatch and %d statement chunks, want 2 and 2", patches, artifacts)
	}
	if len(state.Artifacts) != 1 {
		t.Fatalf("artifacts %+v", state.Artifacts)
	}
	statement := state.Artifacts[0].Parts[0].Text
	if statement == nil || !strings.Contains(*statement, "Total USD: $1,300.75") || strings.Count(*statement, "tx-") != 2 {
		t.Fatalf("statement %v", statement)
	}
}

// TestOverLimitTransferNeedsRestart keeps the seed's "let the tool actually
// run": over the daily limit transferMoney interrupts itself, runs after a
// restart, and its result reaches the statement.
func TestOverLimitTransferNeedsRestart(t *testing.T) {
	t.Parallel()
	rt := demoRuntime(t)
	ctx := context.Background()
	init := protocol.AgentInit{SessionID: "limit"}
	out, err := rt.InvokeOne(ctx, caller, BankingAgentName, init, protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser,
		Content: []protocol.Part{protocol.TextPart("Send €25,000 to account 777")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err = rt.InvokeOne(ctx, caller, BankingAgentName, init, protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{respond(interrupted(out)[0], `{"approved":true}`)}}}, nil)
	if err != nil || len(interrupted(out)) != 1 || interrupted(out)[0].Name != ToolTransferMoney {
		t.Fatalf("approved over-limit transfer: %v %+v", err, out)
	}
	transfer := interrupted(out)[0]
	if string(transfer.Input) != `{"amount":25000,"toAccount":"777","currency":"EUR"}` {
		t.Fatalf("transfer input %s", transfer.Input)
	}
	out, err = rt.InvokeOne(ctx, caller, BankingAgentName, init, protocol.AgentInput{Resume: &protocol.Resume{Restart: []protocol.Part{restart(transfer)}}}, nil)
	if err != nil || out.FinishReason != protocol.FinishStop || !strings.HasPrefix(out.Message.Text(), "Done: transferred €25,000.00 to account 777") {
		t.Fatalf("restart: %v %+v", err, out)
	}
	snap, err := rt.GetSnapshot(ctx, caller, BankingAgentName, protocol.SnapshotLookup{SnapshotID: out.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if list := sessionTransfers(t, snap.State.Custom); len(list) != 1 || list[0].Currency != "EUR" {
		t.Fatalf("custom transfers %+v", list)
	}
}

// TestClientTwinRoundTripsTheState runs the client-managed twin for three
// turns, one of them paused on an approval: the server keeps nothing, the
// client sends back the signed state it got, and the custom state grows.
func TestClientTwinRoundTripsTheState(t *testing.T) {
	t.Parallel()
	rt := demoRuntime(t)
	ctx := context.Background()
	turn := func(state *protocol.SessionState, in protocol.AgentInput) *protocol.AgentOutput {
		t.Helper()
		out, err := rt.InvokeOne(ctx, caller, BankingAgentClientName, protocol.AgentInit{State: state}, in, nil)
		if err != nil || out.Error != nil {
			t.Fatalf("turn: %v %+v", err, out)
		}
		if out.SnapshotID != "" {
			t.Fatalf("a client-managed turn has snapshot %s", out.SnapshotID)
		}
		return out
	}
	user := func(s string) protocol.AgentInput {
		return protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(s)}}}
	}
	one := turn(nil, user("Pay Alice $12"))
	if len(interrupted(one)) != 1 {
		t.Fatalf("first turn: %+v", one)
	}
	two := turn(one.State, protocol.AgentInput{Resume: &protocol.Resume{Respond: []protocol.Part{respond(interrupted(one)[0], `{"approved":true}`)}}})
	if two.FinishReason != protocol.FinishStop || !strings.HasPrefix(two.Message.Text(), "Done: transferred $12.00 to Alice") {
		t.Fatalf("second turn: %+v", two.Message)
	}
	three := turn(two.State, user("Now move 7 euros into checking"))
	if len(interrupted(three)) != 1 || len(three.State.Messages) != len(two.State.Messages)+2 {
		t.Fatalf("third turn: %+v", three)
	}
	if list := sessionTransfers(t, three.State.Custom); len(list) != 1 || list[0].ToAccount != "Alice" {
		t.Fatalf("custom transfers %+v", list)
	}
	if items, err := inbox.New(rt).ListInterrupts(ctx, caller, store.InterruptFilter{}); err != nil || len(items) != 0 {
		t.Fatalf("a client-managed agent left interrupt rows: %v %+v", err, items)
	}
}

// TestApprovalDeadlineKnob checks the approval deadline's default, its
// knob, and that a bad value stops registration.
func TestApprovalDeadlineKnob(t *testing.T) {
	a := BankingAgent(NewModel())
	if a.Tools[0].ExpiresAfter != DefaultApprovalDeadline || a.Tools[0].OnExpire == nil {
		t.Fatalf("userApproval deadline %v", a.Tools[0].ExpiresAfter)
	}
	var out approvalOutput
	if err := json.Unmarshal(a.Tools[0].OnExpire.Output, &out); err != nil || out.Approved {
		t.Fatalf("on-expire output %s", a.Tools[0].OnExpire.Output)
	}
	if c := BankingAgentClient(NewModel()); c.Tools[0].ExpiresAfter != 0 {
		t.Fatal("the client-managed twin has a deadline")
	}
	t.Setenv(EnvApprovalDeadline, "90s")
	if got := BankingAgent(NewModel()).Tools[0].ExpiresAfter; got != 90*time.Second {
		t.Fatalf("deadline %v with the knob at 90s", got)
	}
	t.Setenv(EnvApprovalDeadline, "never")
	if err := Register(service.NewRuntime(nil, service.Options{Logger: testlog.Logger(t)}), NewModel()); err == nil || !strings.Contains(err.Error(), EnvApprovalDeadline) {
		t.Fatalf("a bad knob registered: %v", err)
	}
}
