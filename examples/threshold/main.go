// Command threshold is a support agent whose refund tool pauses its own
// turn above a limit: a refund of up to $100 runs at once; above, the turn
// is interrupted with the reason and the limit, and the refund runs when
// the client restarts the request (resume.restart), or an operator does in
// the approvals inbox. Restarting is the confirmation.
//
// Run it with `go run ./examples/threshold serve --dev`; it answers offline
// with a scripted model (model.go), or with the provider THRESHOLD_MODEL
// names (e.g. googleai/gemini-2.5-flash with GEMINI_API_KEY set).
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/holdpoint/holdpoint/cmd/platform/app"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
)

// RefundRequest is what the model asks to refund.
type RefundRequest struct {
	OrderID string  `json:"orderId"`
	Amount  float64 `json:"amount" jsonschema:"exclusiveMinimum=0"`
}

// Refund is a refund made.
type Refund struct {
	RefundID string  `json:"refundId"`
	Amount   float64 `json:"amount"`
}

// refundLimit is the largest refund made without a confirmation.
const refundLimit = 100

// refunds counts the refunds made: their ids are rf-1, rf-2...
var refunds atomic.Int64

var refund = agentkit.Tool[RefundRequest, Refund]{
	Name:        "refund",
	Description: "Refund an order. A refund above $100 waits for a confirmation.",
	Run: func(ctx context.Context, in RefundRequest) (Refund, error) {
		// A restart of the paused request that carries metadata.resumed
		// (true, {"confirmed": true}, an operator's note) confirms it; a
		// bare restart reaches the tool without it, as in Genkit.
		_, restarted, _ := agentkit.Resumed[any](ctx)
		if in.Amount > refundLimit && !restarted {
			return Refund{}, agentkit.Pause(map[string]any{"reason": "above the refund limit", "limit": refundLimit})
		}
		return Refund{RefundID: fmt.Sprintf("rf-%d", refunds.Add(1)), Amount: in.Amount}, nil
	},
}

var supportAgent = agentkit.Agent{
	Name:   "supportAgent",
	System: "You are a support assistant. Use the refund tool to refund an order.",
	Tools:  []agentkit.ToolDef{refund},
	Model:  cmp.Or(os.Getenv("THRESHOLD_MODEL"), "scripted"),
}

func main() {
	app.Main(app.Platform{
		Agents: []agentkit.Definition{supportAgent},
		Models: map[string]service.Model{"scripted": scriptedModel{}},
	})
}
