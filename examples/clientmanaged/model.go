package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

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

var bookRE = regexp.MustCompile(`(?i)^book (.+?) on (.+)$`)

// answer is the model's whole policy: its reply to the last message.
func answer(req *service.ModelRequest) service.Part {
	last := req.Messages[len(req.Messages)-1]
	for _, p := range last.Content {
		r := p.ToolResponse
		if r == nil {
			continue
		}
		var m Meeting
		inputOf(req, r.Ref, &m)
		switch r.Name {
		case confirmBooking.Name:
			var c Confirmation
			_ = json.Unmarshal(r.Output, &c)
			if !c.Confirmed {
				return service.TextPart("Not booked: " + m.Title + ".")
			}
			return toolRequest(req, bookMeeting.Name, m)
		case bookMeeting.Name:
			var b Booking
			_ = json.Unmarshal(r.Output, &b)
			return service.TextPart(fmt.Sprintf("Booked %s on %s (%s).", m.Title, m.When, b.BookingID))
		}
	}
	if m := bookRE.FindStringSubmatch(strings.TrimSpace(last.Text())); m != nil {
		return toolRequest(req, confirmBooking.Name, Meeting{Title: m[1], When: m[2]})
	}
	return service.TextPart(`I book meetings: try "Book Team sync on Friday 10:00".`)
}

// toolRequest asks for a tool, with a ref unique in the conversation.
func toolRequest(req *service.ModelRequest, tool string, input any) service.Part {
	raw, _ := json.Marshal(input)
	ref := fmt.Sprintf("%s-%d", tool, len(req.Messages))
	return service.Part{ToolRequest: &service.ToolRequest{Name: tool, Ref: ref, Input: raw}}
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
