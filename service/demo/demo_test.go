package demo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// conversation builds a model request for the banking agent: its system
// prompt, the given history and its tools.
func conversation(msgs ...protocol.Message) *protocol.ModelRequest {
	agent := BankingAgent(NewModel())
	req := &protocol.ModelRequest{
		Messages: append([]protocol.Message{{Role: protocol.RoleSystem, Content: []protocol.Part{protocol.TextPart(agent.System)}}}, msgs...),
	}
	for _, t := range agent.Tools {
		req.Tools = append(req.Tools, protocol.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema})
	}
	return req
}

func user(text string) protocol.Message {
	return protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(text)}}
}

func modelMsg(r reply) protocol.Message { return r.message() }

func toolMsg(name, ref, output string) protocol.Message {
	return protocol.Message{Role: protocol.RoleTool, Content: []protocol.Part{{ToolResponse: &protocol.ToolResponse{Name: name, Ref: ref, Output: json.RawMessage(output)}}}}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("got %s, want %s", gb, wb)
	}
}

func TestTransferRequestAsksForApproval(t *testing.T) {
	t.Parallel()
	r := decide(conversation(user("Transfer $50 to account 12345")))
	if len(r.toolRequests) != 1 || r.toolRequests[0].Name != ToolUserApproval {
		t.Fatalf("want a userApproval request, got %+v", r)
	}
	if r.toolRequests[0].Ref == "" {
		t.Fatal("the approval request has no ref")
	}
	jsonEqual(t, r.toolRequests[0].Input, `{"action":"transferMoney","details":"Transfer $50.00 to account 12345"}`)
	if !strings.Contains(r.text, "approval") {
		t.Fatalf("text %q does not mention the approval", r.text)
	}
}

func TestApprovedTransferRequestsTransferMoney(t *testing.T) {
	t.Parallel()
	first := decide(conversation(user("Transfer $50 to account 12345")))
	req := conversation(user("Transfer $50 to account 12345"), modelMsg(first),
		toolMsg(ToolUserApproval, first.toolRequests[0].Ref, `{"approved":true}`))
	r := decide(req)
	if len(r.toolRequests) != 1 || r.toolRequests[0].Name != ToolTransferMoney {
		t.Fatalf("want a transferMoney request, got %+v", r)
	}
	jsonEqual(t, r.toolRequests[0].Input, `{"amount":50,"toAccount":"12345"}`)
	if r.toolRequests[0].Ref == first.toolRequests[0].Ref {
		t.Fatalf("transferMoney reuses the approval's ref %q", r.toolRequests[0].Ref)
	}
}

func TestDeniedTransferIsCancelled(t *testing.T) {
	t.Parallel()
	first := decide(conversation(user("Transfer $50 to account 12345")))
	r := decide(conversation(user("Transfer $50 to account 12345"), modelMsg(first),
		toolMsg(ToolUserApproval, first.toolRequests[0].Ref, `{"approved":false,"feedback":"wrong account"}`)))
	if len(r.toolRequests) > 0 {
		t.Fatalf("a denied transfer must not request a tool, got %+v", r.toolRequests[0])
	}
	for _, want := range []string{"Cancelled", "$50.00", "12345", "wrong account"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("text %q lacks %q", r.text, want)
		}
	}
}

func TestApprovalWithoutApprovedFieldIsADenial(t *testing.T) {
	t.Parallel()
	first := decide(conversation(user("Transfer $50 to account 12345")))
	r := decide(conversation(user("Transfer $50 to account 12345"), modelMsg(first),
		toolMsg(ToolUserApproval, first.toolRequests[0].Ref, `{"ok":"yes"}`)))
	if len(r.toolRequests) > 0 || !strings.HasPrefix(r.text, "Cancelled") {
		t.Fatalf("want a cancellation, got %+v", r)
	}
}

func TestTransferResultIsConfirmed(t *testing.T) {
	t.Parallel()
	first := decide(conversation(user("Transfer $50 to account 12345")))
	approval := toolMsg(ToolUserApproval, first.toolRequests[0].Ref, `{"approved":true}`)
	second := decide(conversation(user("Transfer $50 to account 12345"), modelMsg(first), approval))
	r := decide(conversation(user("Transfer $50 to account 12345"), modelMsg(first), approval, modelMsg(second),
		toolMsg(ToolTransferMoney, second.toolRequests[0].Ref, `{"success":true,"transactionId":"tx-1"}`)))
	if want := "Done: transferred $50.00 to account 12345 (transaction tx-1)."; r.text != want {
		t.Fatalf("text %q, want %q", r.text, want)
	}
	if len(r.toolRequests) > 0 {
		t.Fatalf("unexpected tool request %+v", r.toolRequests[0])
	}
}

func TestFailedTransferResult(t *testing.T) {
	t.Parallel()
	r := decide(conversation(user("Transfer $50 to account 12345"),
		toolMsg(ToolTransferMoney, "x", `{"success":false,"transactionId":""}`)))
	if !strings.Contains(r.text, "failed") {
		t.Fatalf("text %q does not report the failure", r.text)
	}
}

func TestOtherMessagesGetHelp(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"hello", "Transfer money please", "Transfer $50 to my friend", "Send 0 to Bob", "$50 to account 12345", ""} {
		r := decide(conversation(user(text)))
		if len(r.toolRequests) > 0 || r.text != helpText {
			t.Errorf("%q: want the help text, got %+v", text, r)
		}
	}
	if r := decide(conversation()); r.text != helpText {
		t.Errorf("empty conversation: got %+v", r)
	}
	if r := decide(conversation(toolMsg("weather", "w", `{}`))); r.text != helpText {
		t.Errorf("unknown tool result: got %+v", r)
	}
}

func TestNoApprovalToolNoTransfer(t *testing.T) {
	t.Parallel()
	req := conversation(user("Transfer $50 to account 12345"))
	req.Tools = nil
	if r := decide(req); len(r.toolRequests) > 0 {
		t.Fatalf("requested %q without the tools being offered", r.toolRequests[0].Name)
	}
}

func TestDecisionsAreDeterministic(t *testing.T) {
	t.Parallel()
	a := decide(conversation(user("Transfer $1,234.5 to account 42")))
	b := decide(conversation(user("Transfer $1,234.5 to account 42")))
	am, _ := json.Marshal(a.message())
	bm, _ := json.Marshal(b.message())
	if string(am) != string(bm) {
		t.Fatalf("two answers to one conversation differ:\n%s\n%s", am, bm)
	}
	jsonEqual(t, a.toolRequests[0].Input, `{"action":"transferMoney","details":"Transfer $1,234.50 to account 42"}`)
}

func TestParseTransfers(t *testing.T) {
	t.Parallel()
	type tr = transfer
	usd := func(amount float64, account string) tr {
		return tr{amount: amount, currency: currencyUSD, account: account}
	}
	eur := func(amount float64, account string) tr {
		return tr{amount: amount, currency: currencyEUR, account: account}
	}
	cases := []struct {
		in   string
		want []tr
	}{
		{"Transfer $50 to account 12345", []tr{usd(50, "12345")}},
		{"transfer $50.00 to account 12345", []tr{usd(50, "12345")}},
		{"Please send 20 dollars to my account 555-1.", []tr{usd(20, "555-1")}},
		{"Transfer $25,000 to account 777", []tr{usd(25000, "777")}},
		{"wire $3.999 into account #A12", []tr{usd(4, "A12")}},
		{"Could you please transfer 1,234.56 dollars to acct 98765?", []tr{usd(1234.56, "98765")}},
		{"send €20 to acct. 4242", []tr{eur(20, "4242")}},
		{"Transfer 15 euros to account number 31337", []tr{eur(15, "31337")}},
		{"Move 100 EUR to my savings account", []tr{eur(100, "savings")}},
		{"transfer $50 to savings", []tr{usd(50, "savings")}},
		{"Please move $75.5 into checking", []tr{usd(75.5, "checking")}},
		{"Pay Bob $20", []tr{usd(20, "Bob")}},
		{"Can you send 12.5$ to Alice, please?", []tr{usd(12.5, "Alice")}},
		{"Transfer $50 to savings and $20 to Bob", []tr{usd(50, "savings"), usd(20, "Bob")}},
		{"Send $10 to account 111, $20 to account 222 and €5 to Alice.", []tr{usd(10, "111"), usd(20, "222"), eur(5, "Alice")}},
		{"Transfer $1,000,000.01 to account 9", []tr{usd(1000000.01, "9")}},
		// The approvals' details read back as what they describe.
		{"Transfer €1,200.50 to your savings account", []tr{eur(1200.5, "savings")}},
		{"Transfer $20.00 to Bob", []tr{usd(20, "Bob")}},
		{"Transfer $0 to account 1", nil},
		{"Transfer $50 to my friend", nil},
		{"Transfer $50 to Please", nil},
		{"$50 to account 12345", nil},
		{"What is my balance?", nil},
		{"Transfer 99999999999999 to account 1", nil},
	}
	for _, c := range cases {
		got := parseTransfers(c.in)
		if len(got) != len(c.want) {
			t.Errorf("parseTransfers(%q) = %+v, want %+v", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("parseTransfers(%q)[%d] = %+v, want %+v", c.in, i, got[i], c.want[i])
			}
		}
	}
	for _, want := range []tr{usd(50, "12345"), eur(1200.5, "savings"), usd(20, "Bob"), eur(7, "checking")} {
		if got := parseTransfers(want.details()); len(got) != 1 || got[0] != want {
			t.Errorf("details %q read back as %+v", want.details(), got)
		}
	}
}

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "$0.00", 50: "$50.00", 1234.5: "$1,234.50", 25000: "$25,000.00", 1000000.01: "$1,000,000.01"} {
		if got := formatMoney(in, currencyUSD); got != want {
			t.Errorf("formatMoney(%v) = %q, want %q", in, got, want)
		}
	}
	if got := formatMoney(1234.5, currencyEUR); got != "€1,234.50" {
		t.Errorf("formatMoney in euros = %q", got)
	}
}

func TestGenerateStreamsTextThenToolRequest(t *testing.T) {
	t.Parallel()
	m := &Model{}
	var chunks []protocol.ModelChunk
	resp, err := m.Generate(context.Background(), conversation(user("Transfer $50 to account 12345")), func(c protocol.ModelChunk) { chunks = append(chunks, c) })
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 {
		t.Fatalf("want several chunks, got %d", len(chunks))
	}
	var streamed string
	for _, c := range chunks[:len(chunks)-1] {
		if c.Role != protocol.RoleModel || len(c.Content) != 1 || c.Content[0].Text == nil {
			t.Fatalf("want a model text chunk, got %+v", c)
		}
		streamed += *c.Content[0].Text
	}
	if streamed != resp.Message.Text() {
		t.Fatalf("streamed %q, message text %q", streamed, resp.Message.Text())
	}
	lastChunk := chunks[len(chunks)-1]
	if lastChunk.Content[0].ToolRequest == nil || lastChunk.Content[0].ToolRequest.Name != ToolUserApproval {
		t.Fatalf("last chunk is not the tool request: %+v", lastChunk)
	}
	if resp.Message.Role != protocol.RoleModel || len(resp.Message.Content) != 2 || resp.Message.Content[1].ToolRequest == nil {
		t.Fatalf("want text + toolRequest, got %+v", resp.Message)
	}
}

func TestStatementIsSlowAndLong(t *testing.T) {
	t.Parallel()
	r := decide(conversation(user("Prepare my yearly statement")))
	if !r.slow || len(r.chunks()) != statementChunkCount {
		t.Fatalf("want %d slow chunks, got slow=%v n=%d", statementChunkCount, r.slow, len(r.chunks()))
	}
	if strings.Join(r.chunks(), "") != r.text {
		t.Fatal("the chunks do not add up to the text")
	}
}

func TestGenerateHonoursCancellation(t *testing.T) {
	t.Parallel()
	m := &Model{chunkDelay: time.Millisecond, slowDelay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, conversation(user("Prepare my yearly statement")), func(protocol.ModelChunk) { n++ })
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
		if n != 0 {
			t.Fatalf("streamed %d chunks after cancellation", n)
		}
	case <-time.After(time.Minute): // generous: a loaded machine
		t.Fatal("Generate did not stop after cancellation")
	}
}

func TestTransferMoneyLimitAndRestart(t *testing.T) {
	call := service.ToolCall{Name: ToolTransferMoney, Ref: "t-limit", Input: json.RawMessage(`{"amount":25000,"toAccount":"777"}`)}
	before := len(Transfers())
	_, err := runTransferMoney(context.Background(), call)
	var ie *service.InterruptError
	if !errors.As(err, &ie) {
		t.Fatalf("want an interrupt over the limit, got %v", err)
	}
	jsonEqual(t, ie.Metadata, `{"reason":"over daily limit","limit":10000}`)
	if len(Transfers()) != before {
		t.Fatal("an interrupted transfer was recorded")
	}
	for _, resumed := range []string{`false`, `null`, `{"approved":false}`} {
		call.Resumed = json.RawMessage(resumed)
		if _, err := runTransferMoney(context.Background(), call); !errors.As(err, &ie) {
			t.Fatalf("resumed %s: want an interrupt, got %v", resumed, err)
		}
	}
	call.Resumed = json.RawMessage(`true`)
	out, err := runTransferMoney(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	var res transferOutput
	if err := json.Unmarshal(out, &res); err != nil || !res.Success || !strings.HasPrefix(res.TransactionID, "tx-") {
		t.Fatalf("bad output %s (%v)", out, err)
	}
	found := false
	for _, tr := range Transfers() {
		if tr.TransactionID == res.TransactionID {
			found = tr.Amount == 25000 && tr.ToAccount == "777" && tr.Ref == "t-limit"
		}
	}
	if !found {
		t.Fatalf("transfer %s not in the ledger as executed", res.TransactionID)
	}
}

func TestTransferMoneyUnderLimitRunsAtOnce(t *testing.T) {
	out, err := runTransferMoney(context.Background(), service.ToolCall{Name: ToolTransferMoney, Input: json.RawMessage(`{"amount":50,"toAccount":"12345"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var res transferOutput
	if err := json.Unmarshal(out, &res); err != nil || !res.Success {
		t.Fatalf("bad output %s", out)
	}
}

func TestTransferMoneyRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{}`, `{"amount":"50","toAccount":"1"}`, `{"amount":-5,"toAccount":"1"}`, `{"amount":5}`, `[]`} {
		_, err := runTransferMoney(context.Background(), service.ToolCall{Name: ToolTransferMoney, Input: json.RawMessage(in)})
		var e *store.Error
		if !errors.As(err, &e) || e.Status != store.CodeInvalidArgument {
			t.Errorf("input %s: want INVALID_ARGUMENT, got %v", in, err)
		}
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	rt := service.NewRuntime(nil, service.Options{Logger: testlog.Logger(t)})
	if err := Register(rt, NewModel()); err != nil {
		t.Fatal(err)
	}
	a, err := rt.Lookup(BankingAgentName)
	if err != nil {
		t.Fatal(err)
	}
	if !a.ServerManaged || a.System != BankingSystemPrompt || len(a.Tools) != 2 {
		t.Fatalf("unexpected agent %+v", a)
	}
	if !a.Tools[0].Interrupt || a.Tools[0].Name != ToolUserApproval || a.Tools[1].Name != ToolTransferMoney || a.Tools[1].Run == nil {
		t.Fatalf("unexpected tools %+v %+v", a.Tools[0], a.Tools[1])
	}
	if err := Register(rt, NewModel()); err == nil {
		t.Fatal("registering twice succeeded")
	}
}

func TestLedgerFileKnob(t *testing.T) {
	path := t.TempDir() + "/ledger"
	t.Setenv(EnvLedger, path)
	call := service.ToolCall{Ref: "transferMoney-3", Input: json.RawMessage(`{"amount":50,"toAccount":"12345"}`)}
	for range 2 {
		if _, err := runTransferMoney(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		t.Fatalf("ledger has %d lines, want 2:\n%s", len(lines), raw)
	}
	var l LedgerLine
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
		t.Fatal(err)
	}
	if l.Ref != call.Ref || l.Amount != 50 || l.ToAccount != "12345" || l.PID != os.Getpid() || l.TransactionID == "" {
		t.Fatalf("ledger line = %+v", l)
	}

	// An unwritable ledger fails the tool instead of losing the trace.
	t.Setenv(EnvLedger, t.TempDir()+"/missing/dir/ledger")
	if _, err := runTransferMoney(context.Background(), call); err == nil {
		t.Fatal("transferMoney succeeded without writing its ledger line")
	}
}

func TestToolDelayKnob(t *testing.T) {
	t.Setenv(EnvToolDelay, "300ms")
	m := NewModel()
	afterTool := conversation(user("Transfer $50 to account 12345"), protocol.Message{Role: protocol.RoleTool, Content: []protocol.Part{{
		ToolResponse: &protocol.ToolResponse{Name: ToolTransferMoney, Ref: "r", Output: json.RawMessage(`{"success":true,"transactionId":"tx-1"}`)},
	}}})
	start := time.Now()
	if _, err := m.Generate(context.Background(), afterTool, func(protocol.ModelChunk) {}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answer after a tool message took %s, want the 300ms delay", d)
	}

	// The delay ends with the context.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t.Setenv(EnvToolDelay, "1h")
	if _, err := NewModel().Generate(ctx, afterTool, func(protocol.ModelChunk) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}

	t.Setenv(EnvToolDelay, "soon")
	if _, err := NewModel().Generate(context.Background(), afterTool, func(protocol.ModelChunk) {}); err == nil || !strings.Contains(err.Error(), EnvToolDelay) {
		t.Fatalf("err = %v, want one naming %s", err, EnvToolDelay)
	}
	// A user message is answered without the delay, whatever the knob says.
	if _, err := NewModel().Generate(context.Background(), conversation(user("hello")), func(protocol.ModelChunk) {}); err != nil {
		t.Fatal(err)
	}
}

func TestEurosNeedACurrencyProperty(t *testing.T) {
	t.Parallel()
	req := conversation(user("Send €20 to Bob"))
	for i, tool := range req.Tools {
		if tool.Name == ToolTransferMoney {
			req.Tools[i].InputSchema = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"toAccount":{"type":"string"}}}`)
		}
	}
	if r := decide(req); len(r.toolRequests) != 0 || !strings.Contains(r.text, "only transfer dollars") {
		t.Fatalf("euros without a currency property: %+v", r)
	}
	if r := decide(conversation(user("Send €20 to Bob"))); len(r.toolRequests) != 1 {
		t.Fatalf("euros with the demo's own tool: %+v", r)
	}
}
