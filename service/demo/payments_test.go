package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/protocol"
)

func TestPaymentsGrammar(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]struct {
		tool   string
		vendor string
		amount float64
	}{
		"pay 5000 to 777":              {ToolPayVendor, "777", 5000},
		"Please pay $1,250.50 to acme": {ToolPayVendor, "acme", 1250.5},
		"pay vendor acme 900":          {ToolPayVendor, "acme", 900},
		"pay acme 900 now":             {ToolPayVendor, "acme", 900},
		"refund 40 to acme":            {ToolRefund, "acme", 40},
		"Refund $12 for vendor b-2":    {ToolRefund, "b-2", 12},
	} {
		tool, in, ok := parsePayment(text)
		if !ok || tool != want.tool || in.Vendor != want.vendor || in.Amount != want.amount {
			t.Errorf("%q: %s %+v %v, want %+v", text, tool, in, ok, want)
		}
	}
	for _, text := range []string{"hello", "pay me", "pay 0 to acme", "refund acme"} {
		if tool, in, ok := parsePayment(text); ok {
			t.Errorf("%q: read %s %+v", text, tool, in)
		}
	}
}

// paymentsTo lists the executed payments and refunds of a vendor (the
// ledger is shared by the tests running in parallel).
func paymentsTo(vendor string) []Payment {
	var out []Payment
	for _, p := range Payments() {
		if p.Vendor == vendor {
			out = append(out, p)
		}
	}
	return out
}

func payTurn(t *testing.T, rt *service.Runtime, session, text string) *protocol.AgentOutput {
	t.Helper()
	out, err := rt.InvokeOne(context.Background(), caller, PaymentsAgentName, protocol.AgentInit{SessionID: session},
		protocol.AgentInput{Message: &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(text)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPaymentsAgentIsGated: the steered model calls payVendor and refund
// at once; a small payment runs, a large one and every refund pause on the
// platform's gate with the model's explanation, and a confirmation runs
// the refund once.
func TestPaymentsAgentIsGated(t *testing.T) {
	t.Parallel()
	rt := demoRuntime(t)
	ctx := context.Background()

	out := payTurn(t, rt, "pay-small", "pay 500 to small-vendor")
	if out.FinishReason != protocol.FinishStop || !strings.HasPrefix(out.Message.Text(), "Paid $500.00 to small-vendor (payment pay-") || len(paymentsTo("small-vendor")) != 1 {
		t.Fatalf("a small payment: %+v %q", out, out.Message.Text())
	}

	out = payTurn(t, rt, "pay-large", "pay 5000 to large-vendor")
	reqs := interrupted(out)
	if out.FinishReason != protocol.FinishInterrupted || len(reqs) != 1 || reqs[0].Name != ToolPayVendor || len(paymentsTo("large-vendor")) != 0 {
		t.Fatalf("a large payment: %+v", out)
	}
	var meta struct {
		Approval    string `json:"approval"`
		Explanation string `json:"explanation"`
		Gate        struct {
			Scope     string `json:"scope"`
			Approvals int    `json:"approvals"`
			AllowEdit bool   `json:"allowEdit"`
		} `json:"gate"`
	}
	for _, p := range out.Message.Content {
		if p.ToolRequest != nil {
			_ = json.Unmarshal(p.Metadata["interrupt"], &meta)
		}
	}
	if meta.Approval != "required" || meta.Gate.Scope != PaymentsScope || meta.Gate.Approvals != 2 || !meta.Gate.AllowEdit ||
		meta.Explanation != "Paying $5,000.00 to large-vendor right away, as you asked." {
		t.Fatalf("gate metadata %+v", meta)
	}

	out = payTurn(t, rt, "refund", "refund 40 to refunded-vendor")
	reqs = interrupted(out)
	if out.FinishReason != protocol.FinishInterrupted || len(reqs) != 1 || reqs[0].Name != ToolRefund {
		t.Fatalf("a refund: %+v", out)
	}
	plain := protocol.Part{ToolRequest: &protocol.ToolRequest{Name: reqs[0].Name, Ref: reqs[0].Ref, Input: reqs[0].Input}}
	done, err := rt.InvokeOne(ctx, caller, PaymentsAgentName, protocol.AgentInit{SessionID: "refund"},
		protocol.AgentInput{Resume: &protocol.Resume{Restart: []protocol.Part{plain}}}, nil)
	if err != nil || done.FinishReason != protocol.FinishStop || !strings.HasPrefix(done.Message.Text(), "Refunded $40.00 to refunded-vendor (refund rf-") {
		t.Fatalf("the confirmed refund: %v %+v", err, done)
	}
	if got := paymentsTo("refunded-vendor"); len(got) != 1 || got[0].Tool != ToolRefund {
		t.Fatalf("refunds %+v, want one", got)
	}
}

func TestPaymentSentences(t *testing.T) {
	t.Parallel()
	no := false
	got := paymentSentence(ToolPayVendor, "$5,000.00 to 777", paymentResult{Paid: &no, Reason: "not on the list"})
	if got != `Not paid: the payment of $5,000.00 to 777 was declined. Reason: "not on the list".` {
		t.Errorf("denial: %q", got)
	}
	if got := paymentSentence(ToolRefund, "$4.00 to b", paymentResult{}); got != "Not refunded: the refund of $4.00 to b was declined." {
		t.Errorf("refund denial: %q", got)
	}
}
