package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service"
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
		`"amount":{"type":"number","description":"Amount in dollars."},` +
		`"toAccount":{"type":"string","description":"Destination account number."}},` +
		`"required":["amount","toAccount"]}`)
	transferMoneyOutput = json.RawMessage(`{"type":"object","properties":{` +
		`"success":{"type":"boolean"},` +
		`"transactionId":{"type":"string"}},` +
		`"required":["success","transactionId"]}`)
)

// BankingAgent returns the demo banking agent answered by model.
func BankingAgent(model service.Model) *service.Agent {
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

// BankingAgentClientStateName is the route name of the banking agent that
// keeps its state on the client.
const BankingAgentClientStateName = "bankingAgentClientState"

// BankingAgentClientState returns the banking agent with client-managed
// state: the server stores no session; every answer carries the whole
// state, signed by the server, and the client sends it back with the next
// turn. Only an approval of a state the server signed is honoured.
func BankingAgentClientState(model service.Model) *service.Agent {
	a := BankingAgent(model)
	a.Name = BankingAgentClientStateName
	a.Description = "Demo banking assistant with client-managed (signed) state: transfers money after a human approves each transfer."
	a.ServerManaged = false
	return a
}

// Register registers the demo agents on rt, answered by model (the demo
// model or a real provider).
func Register(rt *service.Runtime, model service.Model) error {
	for _, a := range []*service.Agent{BankingAgent(model), BankingAgentClientState(model)} {
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
	// Amount is in dollars.
	Amount float64
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
}

// transferOutput is transferMoney's output.
type transferOutput struct {
	Success       bool   `json:"success"`
	TransactionID string `json:"transactionId"`
}

func runTransferMoney(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
	var in transferInput
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Amount == nil || in.ToAccount == "" {
		return nil, service.Errorf(service.CodeInvalidArgument, "transferMoney: input must be {amount: number, toAccount: string}")
	}
	amount := *in.Amount
	if math.IsNaN(amount) || math.IsInf(amount, 0) || amount <= 0 {
		return nil, service.Errorf(service.CodeInvalidArgument, "transferMoney: amount must be a positive number")
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
