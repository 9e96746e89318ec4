// Command banking is the Genkit guide's banking agent in Go: the model must
// ask userApproval (an interrupt: a human answers it) before it calls
// transferMoney. Run it with `go run ./examples/banking serve --dev`; it
// answers offline with the demo model, or with the provider BANKING_MODEL
// names (e.g. googleai/gemini-2.5-flash with GEMINI_API_KEY set).
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"os"

	"github.com/holdpoint/holdpoint/cmd/platform/app"
	"github.com/holdpoint/holdpoint/service/agentkit"
)

// Approval is what the model passes when it pauses (shown to the human).
type Approval struct {
	Action  string `json:"action"`
	Details string `json:"details"`
}

// Decision is what the human returns to resume.
type Decision struct {
	Approved bool   `json:"approved"`
	Feedback string `json:"feedback,omitempty"`
}

// Transfer is what the model asks transferMoney to do.
type Transfer struct {
	Amount    float64 `json:"amount"`
	ToAccount string  `json:"toAccount"`
}

// Receipt is what transferMoney returns.
type Receipt struct {
	Success       bool   `json:"success"`
	TransactionID string `json:"transactionId"`
}

var userApproval = agentkit.Interrupt[Approval, Decision]{
	Name:        "userApproval",
	Description: "Ask the user for approval before a sensitive action.",
}

var transferMoney = agentkit.Tool[Transfer, Receipt]{
	Name:        "transferMoney",
	Description: "Transfer money to a specified account.",
	Run: func(ctx context.Context, in Transfer) (Receipt, error) {
		return Receipt{Success: true, TransactionID: "txn-" + rand.Text()[:10]}, nil
	},
}

var bankingAgent = agentkit.Agent{
	Name: "bankingAgent",
	System: "You are a banking assistant. ALWAYS use the userApproval interrupt to " +
		"confirm before executing transferMoney.",
	Tools: []agentkit.ToolDef{userApproval, transferMoney},
	Model: cmp.Or(os.Getenv("BANKING_MODEL"), app.ModelDemo),
}

func main() {
	app.Main(app.Platform{Agents: []agentkit.Definition{bankingAgent}})
}
