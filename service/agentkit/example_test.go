package agentkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/approval"
)

// Approval is what the model sends to ask for an approval, and what the
// human sees.
type Approval struct {
	Action  string `json:"action" jsonschema:"description=The action awaiting approval"`
	Details string `json:"details" jsonschema:"description=Exactly what will happen"`
}

// Decision is the human's answer.
type Decision struct {
	Approved bool   `json:"approved"`
	Feedback string `json:"feedback,omitempty"`
}

// The seed's userApproval interrupt: denied for the human when nobody
// answers within a day.
func ExampleInterrupt() {
	userApproval := agentkit.Interrupt[Approval, Decision]{
		Name:         "userApproval",
		Description:  "Ask the user to approve an action before it is executed.",
		ExpiresAfter: 24 * time.Hour,
		OnExpire:     &Decision{Approved: false, Feedback: "no answer within a day"},
	}
	tool, err := userApproval.ServiceTool()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(tool.InputSchema))
	fmt.Println(string(tool.OutputSchema))
	// Output:
	// {"properties":{"action":{"type":"string","description":"The action awaiting approval"},"details":{"type":"string","description":"Exactly what will happen"}},"additionalProperties":false,"type":"object","required":["action","details"]}
	// {"properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"}},"additionalProperties":false,"type":"object","required":["approved"]}
}

// Transfer is transferMoney's input.
type Transfer struct {
	Amount    float64 `json:"amount" jsonschema:"exclusiveMinimum=0"`
	ToAccount string  `json:"toAccount"`
}

// Receipt is transferMoney's output.
type Receipt struct {
	Success       bool   `json:"success"`
	TransactionID string `json:"transactionId"`
}

// A tool that pauses for a second confirmation above a limit, and runs
// when the client restarts it with {"confirmed": true}.
func ExampleTool() {
	transferMoney := agentkit.Tool[Transfer, Receipt]{
		Name:        "transferMoney",
		Description: "Transfer money to an account.",
		Run: func(ctx context.Context, in Transfer) (Receipt, error) {
			if in.Amount > 10000 {
				resumed, restarted, err := agentkit.Resumed[struct{ Confirmed bool }](ctx)
				if err != nil {
					return Receipt{}, err
				}
				if !restarted || !resumed.Confirmed {
					return Receipt{}, agentkit.Pause(map[string]any{"reason": "over the daily limit"})
				}
			}
			return Receipt{Success: true, TransactionID: "tx-" + agentkit.RefOf(ctx)}, nil
		},
	}
	tool, err := transferMoney.ServiceTool()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(tool.InputSchema))
	out, err := tool.Run(context.Background(), service.ToolCall{Name: "transferMoney", Ref: "t1", Input: json.RawMessage(`{"amount":50,"toAccount":"12345"}`)})
	fmt.Println(string(out), err)
	// Output:
	// {"properties":{"amount":{"type":"number","exclusiveMinimum":0},"toAccount":{"type":"string"}},"additionalProperties":false,"type":"object","required":["amount","toAccount"]}
	// {"success":true,"transactionId":"tx-t1"} <nil>
}

// A transfer the platform gates: above 1000, nothing runs until two
// holders of approve:payments approve it (one of them may correct the
// amount first); after an hour unanswered it goes to the leads. Run only
// ever sees an approved input, however the model phrases its request.
func ExampleApproval() {
	transferMoney := agentkit.Tool[Transfer, Receipt]{
		Name:        "transferMoney",
		Description: "Transfer money to an account.",
		Run: func(ctx context.Context, in Transfer) (Receipt, error) {
			return Receipt{Success: true, TransactionID: "tx-" + agentkit.RefOf(ctx)}, nil
		},
		Approval: &agentkit.Approval[Transfer]{
			When:      func(_ context.Context, in Transfer) bool { return in.Amount > 1000 },
			Scope:     "approve:payments",
			Approvals: 2,
			AllowEdit: true,
			Escalate:  &approval.Escalation{After: time.Hour, Scope: "approve:payments-lead"},
		},
	}
	tool, err := transferMoney.ServiceTool()
	if err != nil {
		panic(err)
	}
	for _, in := range []string{`{"amount":50,"toAccount":"12345"}`, `{"amount":5000,"toAccount":"12345"}`} {
		gated, err := tool.Approval.When(context.Background(), json.RawMessage(in))
		fmt.Println(in, "needs approval:", gated, err)
	}
	fmt.Println("maker-checker:", tool.Approval.MakerChecker())
	// Output:
	// {"amount":50,"toAccount":"12345"} needs approval: false <nil>
	// {"amount":5000,"toAccount":"12345"} needs approval: true <nil>
	// maker-checker: true
}

// The seed's banking agent: the model asks userApproval before it calls
// transferMoney. Serve it with app.Main(app.Platform{Agents: ...}).
func ExampleAgent() {
	bankingAgent := agentkit.Agent{
		Name:   "bankingAgent",
		System: "You are a banking assistant. ALWAYS use the userApproval interrupt to confirm before executing transferMoney.",
		Model:  "googleai/gemini-2.5-flash",
		Tools: []agentkit.ToolDef{
			agentkit.Interrupt[Approval, Decision]{Name: "userApproval", Description: "Ask the user to approve an action."},
			agentkit.Tool[Transfer, Receipt]{Name: "transferMoney", Description: "Transfer money.", Run: func(context.Context, Transfer) (Receipt, error) {
				return Receipt{Success: true}, nil
			}},
		},
	}
	fmt.Println(bankingAgent.AgentName(), bankingAgent.ModelNames())
	// Output: bankingAgent [googleai/gemini-2.5-flash]
}
