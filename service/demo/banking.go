package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// BankingAgentName is the route name of the demo banking agent.
const BankingAgentName = "bankingAgent"

// BankingSystemPrompt is the banking agent's system prompt. It is what makes
// a real provider ask for approval before moving money; the demo model
// follows it by construction.
const BankingSystemPrompt = "You are a banking assistant. ALWAYS use the userApproval interrupt to confirm before executing transferMoney."

// DailyLimit is the amount above which transferMoney refuses to run until the
// client restarts it (a second, explicit confirmation).
const DailyLimit = 10000

// Tool names of the banking agent.
const (
	// ToolUserApproval is the interrupt that asks a human to approve an action.
	ToolUserApproval = "userApproval"
	// ToolTransferMoney moves money; the model calls it only after an approval.
	ToolTransferMoney = "transferMoney"
)

var (
	userApprovalInput = json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","description":"The action awaiting approval, e.g. transferMoney."},` +
		`"details":{"type":"string","description":"A human-readable description of exactly what will happen."}},` +
		`"required":["action","details"]}`)
	userApprovalOutput = json.RawMessage(`{"type":"object","properties":{` +
		`"approved":{"type":"boolean"},` +
		`"feedback":{"type":"string"}},` +
		`"required":["approved"]}`)
	transferMoneyInput = json.RawMessage(`{"type":"object","properties":{` +
		`"amount":{"type":"number","exclusiveMinimum":0,"description":"Amount in the currency (dollars unless currency says EUR)."},` +
		`"toAccount":{"type":"string","minLength":1,"description":"Destination: an account number, savings or checking (the user's own accounts), or a payee's name."},` +
		`"currency":{"type":"string","enum":["USD","EUR"],"description":"Currency of the amount; USD when absent."}},` +
		`"required":["amount","toAccount"]}`)
	transferMoneyOutput = json.RawMessage(`{"type":"object","properties":{` +
		`"success":{"type":"boolean"},` +
		`"transactionId":{"type":"string"}},` +
		`"required":["success","transactionId"]}`)
)

// DefaultApprovalDeadline is how long a demo approval waits for a human
// before it is answered for them: denied, so no money moves
// (HOLDPOINT_DEMO_APPROVAL_DEADLINE changes it).
const DefaultApprovalDeadline = 24 * time.Hour

// BankingAgent returns the demo banking agent answered by model.
//
// It asks a human before each transfer (userApproval, one interrupt per
// transfer, denied for them when nobody decides within the approval
// deadline), and transferMoney interrupts itself above DailyLimit until the
// client restarts it. It keeps the session's executed transfers as custom
// state ({"transfers": [...]}, streamed as customPatch chunks) and a
// "statement" artifact listing them.
func BankingAgent(model protocol.Model) *service.Agent {
	deadline, _ := approvalDeadlineFromEnv()
	return &service.Agent{
		Name:          BankingAgentName,
		Description:   "Demo banking assistant: transfers money after a human approves each transfer.",
		ServerManaged: true,
		System:        BankingSystemPrompt,
		Model:         model,
		Tools: []*service.Tool{
			{
				Name:         ToolUserApproval,
				Description:  "Ask the user to approve an action before it is executed. Always call this before transferMoney.",
				InputSchema:  userApprovalInput,
				OutputSchema: userApprovalOutput,
				Interrupt:    true,
				ExpiresAfter: deadline,
				OnExpire: &service.ExpireRespond{Output: mustJSON(approvalOutput{
					Feedback: fmt.Sprintf("No decision within %s: the transfer was not executed.", deadline),
				})},
			},
			{
				Name:         ToolTransferMoney,
				Description:  "Transfer money to an account. Only call this after the user approved the transfer with userApproval.",
				InputSchema:  transferMoneyInput,
				OutputSchema: transferMoneyOutput,
				Run:          runTransferMoney,
			},
		},
	}
}

// CheckKnobs reports a demo knob (HOLDPOINT_DEMO_APPROVAL_DEADLINE) set to
// a value the demo cannot use.
func CheckKnobs() error {
	_, err := approvalDeadlineFromEnv()
	return err
}

// BankingAgentClientName is the route name of the banking agent that keeps
// its state on the client.
const BankingAgentClientName = "bankingAgentClient"

// BankingAgentClient returns the banking agent with client-managed state
// (the seed's "no store required"): the server stores no session; every
// answer carries the whole state, signed by the server, and the client
// sends it back with the next turn. Only an approval of a state the server
// signed is honoured. Its approvals have no deadline: nothing is stored
// that a deadline could act on.
func BankingAgentClient(model protocol.Model) *service.Agent {
	a := BankingAgent(model)
	a.Name = BankingAgentClientName
	a.Description = "Demo banking assistant with client-managed (signed) state: transfers money after a human approves each transfer."
	a.ServerManaged = false
	for _, t := range a.Tools {
		t.ExpiresAfter, t.OnExpire = 0, nil
	}
	return a
}

// Agents returns the demo agents: the banking agents answered by model
// (the demo model or a real provider), and the payments agent on its
// steered stub (see paymentsModelFor).
func Agents(model protocol.Model) []*service.Agent {
	return []*service.Agent{BankingAgent(model), BankingAgentClient(model), PaymentsAgent(paymentsModelFor(model))}
}

// Register registers the demo agents on rt (Agents). It fails when
// HOLDPOINT_DEMO_APPROVAL_DEADLINE is set to something that is not a
// positive duration.
func Register(rt *service.Runtime, model protocol.Model) error {
	if err := CheckKnobs(); err != nil {
		return err
	}
	for _, a := range Agents(model) {
		if err := rt.Register(a); err != nil {
			return err
		}
	}
	return nil
}

// Transfer is one executed transfer in the demo ledger.
type Transfer struct {
	// TransactionID is what transferMoney returned to the model.
	TransactionID string
	// Amount is in Currency.
	Amount float64
	// Currency is USD or EUR.
	Currency string
	// ToAccount is the destination account.
	ToAccount string
	// Ref is the ref of the transferMoney request that executed it.
	Ref string
	// At is when the transfer executed (UTC).
	At time.Time
}

var ledger struct {
	sync.Mutex
	transfers []Transfer
}

// Transfers returns every transfer executed by this process, oldest first.
func Transfers() []Transfer {
	ledger.Lock()
	defer ledger.Unlock()
	return append([]Transfer(nil), ledger.transfers...)
}

func recordTransfer(t Transfer) {
	ledger.Lock()
	defer ledger.Unlock()
	ledger.transfers = append(ledger.transfers, t)
}

// transferInput is transferMoney's input.
type transferInput struct {
	Amount    *float64 `json:"amount"`
	ToAccount string   `json:"toAccount"`
	Currency  string   `json:"currency,omitempty"`
}

// transferOutput is transferMoney's output.
type transferOutput struct {
	Success       bool   `json:"success"`
	TransactionID string `json:"transactionId"`
}

func runTransferMoney(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
	var in transferInput
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Amount == nil || in.ToAccount == "" {
		return nil, store.Errorf(store.CodeInvalidArgument, "transferMoney: input must be {amount: number, toAccount: string}")
	}
	amount := *in.Amount
	if math.IsNaN(amount) || math.IsInf(amount, 0) || amount <= 0 {
		return nil, store.Errorf(store.CodeInvalidArgument, "transferMoney: amount must be a positive number")
	}
	if amount > DailyLimit && !confirmed(call.Resumed) {
		// Over the limit the transfer needs a second, explicit confirmation:
		// the client restarts this request (interrupt.restart()).
		return nil, service.InterruptWith(map[string]any{"reason": "over daily limit", "limit": DailyLimit})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := Transfer{
		TransactionID: newTransactionID(),
		Amount:        amount,
		Currency:      currencyOf(in.Currency),
		ToAccount:     in.ToAccount,
		Ref:           call.Ref,
		At:            time.Now().UTC(),
	}
	// The file ledger comes first: a transfer it could not record is
	// reported as failed rather than executed without a trace.
	if err := appendLedgerFile(t); err != nil {
		return nil, err
	}
	recordTransfer(t)
	if call.Session != nil {
		if err := recordInSession(call.Session, t); err != nil {
			return nil, err
		}
	}
	return json.Marshal(transferOutput{Success: true, TransactionID: t.TransactionID})
}

// confirmed reports whether a restart's resumed metadata confirms the call:
// anything but absent, null or false.
func confirmed(resumed json.RawMessage) bool {
	var v any
	if len(resumed) == 0 || json.Unmarshal(resumed, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case map[string]any:
		if approved, ok := v["approved"].(bool); ok {
			return approved
		}
	}
	return true
}

func newTransactionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "tx-" + hex.EncodeToString(b[:])
}

// SessionTransfer is one executed transfer as the session's custom state
// lists it.
type SessionTransfer struct {
	TransactionID string  `json:"transactionId"`
	Amount        float64 `json:"amount"`
	Currency      string  `json:"currency"`
	ToAccount     string  `json:"toAccount"`
	At            string  `json:"at"`
}

// StatementArtifact is the name of the artifact listing a session's
// transfers.
const StatementArtifact = "statement"

// recordInSession appends the transfer to the session's custom state
// ({"transfers": [...]}, other keys kept) and rewrites the statement
// artifact from it.
func recordInSession(s *service.ToolSession, t Transfer) error {
	var list []SessionTransfer
	err := s.UpdateCustom(func(cur json.RawMessage) (json.RawMessage, error) {
		doc := map[string]json.RawMessage{}
		if len(cur) > 0 && string(cur) != "null" {
			if err := json.Unmarshal(cur, &doc); err != nil {
				doc = map[string]json.RawMessage{} // not an object: start over
			}
		}
		if raw, ok := doc["transfers"]; ok {
			_ = json.Unmarshal(raw, &list)
		}
		list = append(list, SessionTransfer{TransactionID: t.TransactionID, Amount: t.Amount, Currency: t.Currency,
			ToAccount: t.ToAccount, At: t.At.Format(time.RFC3339)})
		doc["transfers"] = mustJSON(list)
		return json.Marshal(doc)
	})
	if err != nil {
		return err
	}
	s.AddArtifacts(protocol.Artifact{
		Name:     StatementArtifact,
		Parts:    []protocol.Part{protocol.TextPart(statementText(list))},
		Metadata: mustJSON(map[string]any{"transfers": len(list)}),
	})
	return nil
}

// statementText is the statement artifact: one line per transfer and the
// totals per currency.
func statementText(list []SessionTransfer) string {
	var b strings.Builder
	b.WriteString("Statement of this conversation's transfers\n")
	totals := map[string]float64{}
	for i, t := range list {
		dest := transfer{amount: t.Amount, currency: t.Currency, account: t.ToAccount}
		fmt.Fprintf(&b, "%d. %s  %s  %s\n", i+1, t.At, dest.summary(), t.TransactionID)
		totals[t.Currency] += t.Amount
	}
	for _, c := range []string{currencyUSD, currencyEUR} {
		if v, ok := totals[c]; ok {
			fmt.Fprintf(&b, "Total %s: %s\n", c, formatMoney(v, c))
		}
	}
	return b.String()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
