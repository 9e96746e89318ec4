package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/holdpoint/holdpoint/service"
)

// scriptedModel stands in for a provider so that the example runs offline:
// it answers the last message the way a model following the system prompt
// would, the same way every time.
type scriptedModel struct{}

func (scriptedModel) Name() string { return "scripted" }

func (scriptedModel) Generate(_ context.Context, req *service.ModelRequest, onChunk func(service.ModelChunk)) (*service.ModelResponse, error) {
	msg := service.Message{Role: service.RoleModel, Content: []service.Part{answer(req)}}
	onChunk(service.ModelChunk{Role: msg.Role, Content: msg.Content})
	return &service.ModelResponse{Message: msg, FinishReason: service.FinishStop}, nil
}

var refundRE = regexp.MustCompile(`(?i)refund \$([0-9]+(?:\.[0-9]+)?) for order (\w+)`)

// answer is the model's whole policy: its reply to the last message.
func answer(req *service.ModelRequest) service.Part {
	last := req.Messages[len(req.Messages)-1]
	for _, p := range last.Content {
		if r := p.ToolResponse; r != nil && r.Name == refund.Name {
			var in RefundRequest
			inputOf(req, r.Ref, &in)
			var out Refund
			_ = json.Unmarshal(r.Output, &out)
			return service.TextPart(fmt.Sprintf("Refunded $%.2f for order %s (%s).", out.Amount, in.OrderID, out.RefundID))
		}
	}
	if m := refundRE.FindStringSubmatch(last.Text()); m != nil {
		amount, _ := strconv.ParseFloat(m[1], 64)
		input, _ := json.Marshal(RefundRequest{OrderID: m[2], Amount: amount})
		ref := fmt.Sprintf("refund-%d", len(req.Messages))
		return service.Part{ToolRequest: &service.ToolRequest{Name: refund.Name, Ref: ref, Input: input}}
	}
	return service.TextPart(`I make refunds: try "Refund $40 for order 7".`)
}

// inputOf decodes into v the input of the request with this ref: what the
// response in the last message answers.
func inputOf(req *service.ModelRequest, ref string, v any) {
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.ToolRequest != nil && p.ToolRequest.Ref == ref {
				_ = json.Unmarshal(p.ToolRequest.Input, v)
			}
		}
	}
}
