package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// PaymentsAgentName is the route name of the demo payments agent.
const PaymentsAgentName = "paymentsAgent"

// Tool names of the payments agent.
const (
	// ToolPayVendor pays a vendor; above PaymentApprovalThreshold it needs
	// two approvals from holders of PaymentsScope (maker-checker).
	ToolPayVendor = "payVendor"
	// ToolRefund refunds a vendor; every refund needs a confirmation.
	ToolRefund = "refund"
)

// PaymentsScope is the scope of the keys that approve large vendor
// payments.
const PaymentsScope = "approve:payments"

// PaymentApprovalThreshold is the amount above which payVendor waits for
// approvals; smaller payments run at once.
const PaymentApprovalThreshold = 1000

var (
	payVendorInput = json.RawMessage(`{"type":"object","properties":{` +
		`"vendor":{"type":"string","minLength":1,"maxLength":64,"description":"The vendor paid: a name or an account number."},` +
		`"amount":{"type":"number","exclusiveMinimum":0,"description":"Amount in dollars."}},` +
		`"required":["vendor","amount"],"additionalProperties":false}`)
	payVendorOutput = json.RawMessage(`{"type":"object","properties":{` +
		`"paid":{"type":"boolean"},` +
		`"paymentId":{"type":"string"},` +
		`"vendor":{"type":"string"},` +
		`"amount":{"type":"number"},` +
		`"reason":{"type":"string","description":"Why it was not paid."}},` +
		`"required":["paid"]}`)
	refundInput = json.RawMessage(`{"type":"object","properties":{` +
		`"vendor":{"type":"string","minLength":1,"maxLength":64,"description":"The vendor refunded."},` +
		`"amount":{"type":"number","exclusiveMinimum":0,"description":"Amount in dollars."}},` +
		`"required":["vendor","amount"],"additionalProperties":false}`)
	refundOutput = json.RawMessage(`{"type":"object","properties":{` +
		`"refunded":{"type":"boolean"},` +
		`"refundId":{"type":"string"},` +
		`"vendor":{"type":"string"},` +
		`"amount":{"type":"number"},` +
		`"reason":{"type":"string","description":"Why it was not refunded."}},` +
		`"required":["refunded"]}`)
)

// PayVendorApproval is payVendor's approval policy: a payment above
// PaymentApprovalThreshold needs two distinct approvers holding
// PaymentsScope (never the user who asked), who may lower or redirect it
// before approving.
func PayVendorApproval() *approval.Policy {
	return &approval.Policy{
		Scope:     PaymentsScope,
		Approvals: 2,
		AllowEdit: true,
		When: func(_ context.Context, input json.RawMessage) (bool, error) {
			var in struct {
				Amount float64 `json:"amount"`
			}
			if err := json.Unmarshal(input, &in); err != nil {
				return false, err
			}
			return in.Amount > PaymentApprovalThreshold, nil
		},
	}
}

// PaymentsAgent returns the demo payments agent answered by model
// (NewPaymentsModel: a model steered to act at once).
//
// Its model asks for no approval: it calls payVendor and refund as soon as
// the user asks. The platform's approval policies are what stand between
// it and the money: a large payment waits for two approvals in the inbox,
// every refund for a confirmation (a restart, by the user or an operator).
func PaymentsAgent(model protocol.Model) *service.Agent {
	return &service.Agent{
		Name:          PaymentsAgentName,
		Description:   "Demo payments assistant on a steered model that never asks: the platform's approval policies gate its tools.",
		ServerManaged: true,
		System:        "You are a payments assistant. Pay vendors and refund them as the user asks.",
		Model:         model,
		Tools: []*service.Tool{
			{
				Name:         ToolPayVendor,
				Description:  "Pay a vendor.",
				InputSchema:  payVendorInput,
				OutputSchema: payVendorOutput,
				Approval:     PayVendorApproval(),
				Run:          runPayVendor,
			},
			{
				Name:         ToolRefund,
				Description:  "Refund a vendor.",
				InputSchema:  refundInput,
				OutputSchema: refundOutput,
				// A confirmation: no scope, one approval.
				Approval: &approval.Policy{},
				Run:      runRefund,
			},
		},
	}
}

// NewPaymentsModel returns the payments agent's stub model: deterministic
// and offline, like NewModel, and steered to call the tools directly.
func NewPaymentsModel() protocol.Model {
	m := NewModel().(*Model)
	m.answer = decidePayment
	return m
}

// paymentsModelFor is the payments agent's model beside the banking
// agents' model: the demo model with the payments answers (keeping its
// delays), and the stub for any other model (a real provider would not
// play the steered model this demo is about).
func paymentsModelFor(model protocol.Model) protocol.Model {
	if m, ok := model.(*Model); ok {
		c := *m
		c.answer = decidePayment
		return &c
	}
	return NewPaymentsModel()
}

// Payment is one executed payVendor or refund.
type Payment struct {
	// ID is what the tool returned (pay-... or rf-...).
	ID string
	// Tool is payVendor or refund.
	Tool   string
	Vendor string
	Amount float64
	// Ref is the ref of the request that ran.
	Ref string
	At  time.Time
}

var paymentLedger struct {
	sync.Mutex
	list []Payment
}

// Payments returns every payment and refund executed by this process,
// oldest first.
func Payments() []Payment {
	paymentLedger.Lock()
	defer paymentLedger.Unlock()
	return append([]Payment(nil), paymentLedger.list...)
}

// vendorAmount is the input of payVendor and refund.
type vendorAmount struct {
	Vendor string  `json:"vendor"`
	Amount float64 `json:"amount"`
}

// execute records a payment or refund of the call's input.
func execute(ctx context.Context, call service.ToolCall, prefix string) (Payment, error) {
	var in vendorAmount
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Vendor == "" || in.Amount <= 0 || math.IsInf(in.Amount, 0) {
		return Payment{}, store.Errorf(store.CodeInvalidArgument, "%s: input must be {vendor: string, amount: positive number}", call.Name)
	}
	if err := ctx.Err(); err != nil {
		return Payment{}, err
	}
	p := Payment{ID: prefix + newTransactionID()[3:], Tool: call.Name, Vendor: in.Vendor, Amount: in.Amount, Ref: call.Ref, At: time.Now().UTC()}
	paymentLedger.Lock()
	paymentLedger.list = append(paymentLedger.list, p)
	paymentLedger.Unlock()
	return p, nil
}

// flakyCalls are the call ids of payments to a "flaky…" vendor that
// failed once: such a vendor's bank fails the first run of every call, so
// that retrying an approved call can be tried (the retry keeps the call
// id, and succeeds).
var flakyCalls sync.Map

func runPayVendor(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
	var in vendorAmount
	if json.Unmarshal(call.Input, &in) == nil && strings.HasPrefix(in.Vendor, "flaky") {
		if _, seen := flakyCalls.LoadOrStore(call.ID, true); !seen {
			return nil, store.Errorf(store.CodeUnavailable, "payVendor: the bank of %s did not answer; the approved payment can be retried", in.Vendor)
		}
	}
	p, err := execute(ctx, call, "pay-")
	if err != nil {
		return nil, err
	}
	return mustJSON(map[string]any{"paid": true, "paymentId": p.ID, "vendor": p.Vendor, "amount": p.Amount}), nil
}

func runRefund(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
	p, err := execute(ctx, call, "rf-")
	if err != nil {
		return nil, err
	}
	return mustJSON(map[string]any{"refunded": true, "refundId": p.ID, "vendor": p.Vendor, "amount": p.Amount}), nil
}

// paymentsHelpText answers what the payments model does not understand.
const paymentsHelpText = "I'm the Holdpoint demo payments assistant, a model steered to act at once: " +
	`try "pay 500 to acme" (runs at once), "pay 5000 to 777" (over $1,000: two approvals from holders of ` +
	PaymentsScope + `, in the inbox) or "refund 40 to acme" (every refund waits for your confirmation: restart it).`

// The payments grammar: "pay 5000 to 777", "pay vendor acme 900",
// "refund 40 to acme".
const (
	payAmountRE = `\$?([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?)`
	payVendorRE = `(?:vendor\s+)?([A-Za-z0-9][A-Za-z0-9_-]{0,63})`
)

var (
	payToRE     = regexp.MustCompile(`(?i)\bpay\s+` + payAmountRE + `\s+to\s+` + payVendorRE)
	payVendorTo = regexp.MustCompile(`(?i)\bpay\s+` + payVendorRE + `\s+` + payAmountRE + `\b`)
	refundToRE  = regexp.MustCompile(`(?i)\brefund\s+` + payAmountRE + `\s+(?:to|for)\s+` + payVendorRE)
)

// parsePayment reads the payment or refund a message asks for.
func parsePayment(text string) (tool string, in vendorAmount, ok bool) {
	amount := func(s string) (float64, bool) {
		v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		v = math.Round(v*100) / 100
		return v, err == nil && v > 0 && v <= 1e12
	}
	if m := refundToRE.FindStringSubmatch(text); m != nil {
		v, ok := amount(m[1])
		return ToolRefund, vendorAmount{Vendor: m[2], Amount: v}, ok
	}
	if m := payToRE.FindStringSubmatch(text); m != nil {
		v, ok := amount(m[1])
		return ToolPayVendor, vendorAmount{Vendor: m[2], Amount: v}, ok
	}
	if m := payVendorTo.FindStringSubmatch(text); m != nil {
		v, ok := amount(m[2])
		return ToolPayVendor, vendorAmount{Vendor: m[1], Amount: v}, ok
	}
	return "", vendorAmount{}, false
}

// decidePayment is the payments model's whole policy: a payment or refund
// the user asks for is called at once, with a sentence saying so (the
// explanation the inbox shows beside a gated call); a tool result is
// reported.
func decidePayment(req *protocol.ModelRequest) reply {
	last := lastConversationMessage(req.Messages)
	if last == nil {
		return reply{text: paymentsHelpText}
	}
	if last.Role == protocol.RoleTool {
		return reportPayments(req, *last)
	}
	if last.Role != protocol.RoleUser {
		return reply{text: paymentsHelpText}
	}
	tool, in, ok := parsePayment(last.Text())
	if !ok {
		return reply{text: paymentsHelpText}
	}
	if !offers(req, tool) {
		return reply{text: "I can't do that here: I have no " + tool + " tool."}
	}
	what := formatMoney(in.Amount, currencyUSD) + " to " + in.Vendor
	text := "Paying " + what + " right away, as you asked."
	if tool == ToolRefund {
		text = "Refunding " + what + " right away, as you asked."
	}
	return reply{text: text, toolRequests: []*protocol.ToolRequest{{Name: tool, Ref: newRef(req, tool, 0), Input: mustJSON(in)}}}
}

// paymentResult is the output of payVendor and refund (and of a denial).
type paymentResult struct {
	Paid      *bool    `json:"paid"`
	Refunded  *bool    `json:"refunded"`
	PaymentID string   `json:"paymentId"`
	RefundID  string   `json:"refundId"`
	Vendor    string   `json:"vendor"`
	Amount    *float64 `json:"amount"`
	Reason    string   `json:"reason"`
}

// reportPayments names the outcome of each payment and refund of the tool
// message: what ran (an approver's edit included), or that it was denied.
func reportPayments(req *protocol.ModelRequest, msg protocol.Message) reply {
	var sentences []string
	for _, p := range msg.Content {
		tr := p.ToolResponse
		if tr == nil || (tr.Name != ToolPayVendor && tr.Name != ToolRefund) {
			continue
		}
		var out paymentResult
		_ = json.Unmarshal(tr.Output, &out)
		var in vendorAmount
		if raw, ok := findToolRequest(req.Messages, tr.Name, tr.Ref); ok {
			_ = json.Unmarshal(raw, &in)
		}
		if out.Vendor != "" {
			in.Vendor = out.Vendor
		}
		if out.Amount != nil {
			in.Amount = *out.Amount
		}
		what := formatMoney(in.Amount, currencyUSD) + " to " + in.Vendor
		sentences = append(sentences, paymentSentence(tr.Name, what, out))
	}
	if len(sentences) == 0 {
		return reply{text: paymentsHelpText}
	}
	return reply{text: strings.Join(sentences, " ")}
}

func paymentSentence(tool, what string, out paymentResult) string {
	var s string
	switch {
	case tool == ToolPayVendor && out.Paid != nil && *out.Paid:
		return fmt.Sprintf("Paid %s (payment %s).", what, out.PaymentID)
	case tool == ToolRefund && out.Refunded != nil && *out.Refunded:
		return fmt.Sprintf("Refunded %s (refund %s).", what, out.RefundID)
	case tool == ToolPayVendor:
		s = fmt.Sprintf("Not paid: the payment of %s was declined.", what)
	default:
		s = fmt.Sprintf("Not refunded: the refund of %s was declined.", what)
	}
	if r := strings.TrimSpace(out.Reason); r != "" {
		s += fmt.Sprintf(" Reason: %q.", r)
	}
	return s
}
