// Command missingfield is a shipping assistant written as a Go function per
// turn (a custom agent: no model) that asks a human for what a request
// lacks. "Ship order 42 to 1 Main St, Springfield" is answered at once;
// "Ship order 42" pauses the turn on askAddress until someone gives the
// address: the client, resuming the turn, or an operator in the approvals
// inbox. Its sessions, snapshots and interrupts are kept on the server.
// The turn books the shipment through the platform (bookShipment.Call):
// the call is recorded in tool_calls, and a turn taken over after its
// instance died gets the booking back instead of booking twice. A
// shipment to a PO box waits for a human's approval before it is booked.
//
// Run it with `go run ./examples/missingfield serve --dev`. It calls no
// model, so it needs no provider (and no *_MODEL variable).
package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/holdpoint/holdpoint/cmd/platform/app"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
)

// AddressQuestion is what the human is asked.
type AddressQuestion struct {
	OrderID  string `json:"orderId"`
	Question string `json:"question"`
}

// Address is the human's answer; both fields are required.
type Address struct {
	Street string `json:"street" jsonschema:"minLength=1"`
	City   string `json:"city" jsonschema:"minLength=1"`
}

var askAddress = agentkit.Interrupt[AddressQuestion, Address]{
	Name:        "askAddress",
	Description: "Ask for the shipping address of an order.",
}

// shipRE reads "Ship order <id>", optionally followed by " to <street>, <city>".
var shipRE = regexp.MustCompile(`(?i)^ship order (\w+)(?: to (.+), (.+))?$`)

// ship runs one turn of shippingAgent.
func ship(ctx context.Context, t *service.Turn) (string, error) {
	if s, _, ok, err := bookShipment.Decided(t); ok {
		// The booking waited for its approval, given now: the same call
		// returns it.
		if err != nil {
			return "", err
		}
		return shipTo(ctx, t, s.OrderID, s.To)
	}
	if addr, ref, ok, err := askAddress.Answer(t); ok {
		if err != nil {
			return "", err
		}
		return shipTo(ctx, t, strings.TrimPrefix(ref, "address-"), addr)
	}
	var m []string
	if msg := t.Input().Message; msg != nil {
		m = shipRE.FindStringSubmatch(strings.TrimSpace(msg.Text()))
	}
	switch {
	case m == nil:
		return say(t, `I ship orders: try "Ship order 42 to 1 Main St, Springfield".`)
	case m[2] == "":
		q := AddressQuestion{OrderID: m[1], Question: "Where should order " + m[1] + " go?"}
		return askAddress.Ask(t, "address-"+m[1], q, "I need a shipping address for order "+m[1]+".")
	default:
		return shipTo(ctx, t, m[1], Address{Street: m[2], City: m[3]})
	}
}

// Booking is what bookShipment returns.
type Booking struct {
	Tracking string `json:"tracking"`
}

// Shipment is what bookShipment books.
type Shipment struct {
	OrderID string  `json:"orderId" jsonschema:"minLength=1"`
	To      Address `json:"to"`
}

// bookings counts the shipments this process booked (the example's
// stand-in for a carrier's API).
var bookings atomic.Int64

var bookShipment = agentkit.Tool[Shipment, Booking]{
	Name:        "bookShipment",
	Description: "Book a carrier for an order.",
	Run: func(ctx context.Context, s Shipment) (Booking, error) {
		return Booking{Tracking: fmt.Sprintf("TRK-%s-%d", s.OrderID, bookings.Add(1))}, nil
	},
	// The carrier cannot take a PO box without a human's check.
	Approval: &agentkit.Approval[Shipment]{When: func(_ context.Context, s Shipment) bool {
		return poBoxRE.MatchString(s.To.Street)
	}},
}

var poBoxRE = regexp.MustCompile(`(?i)\bp\.?\s*o\.?\s*box\b`)

// shipTo books the order's shipment to addr and says where it goes.
func shipTo(ctx context.Context, t *service.Turn, orderID string, addr Address) (string, error) {
	// The ref names the call within the turn: the same if the turn runs
	// again on another instance, so the booking is not made twice.
	b, err := bookShipment.Call(ctx, t, "ship-"+orderID, Shipment{OrderID: orderID, To: addr})
	if err != nil {
		// Also a booking that waits for its approval (service.ErrCallPaused):
		// returned as it is, it pauses the turn.
		return "", err
	}
	return say(t, fmt.Sprintf("Order %s ships to %s, %s (tracking %s).", orderID, addr.Street, addr.City, b.Tracking))
}

// say ends the turn with a text answer.
func say(t *service.Turn, text string) (string, error) {
	t.AddMessages(service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart(text)}})
	return "", nil
}

var shippingAgent = agentkit.CustomAgent{
	Name:        "shippingAgent",
	Description: "Ships orders, asking for the address when it is missing.",
	Interrupts:  []agentkit.ToolDef{askAddress},
	Tools:       []agentkit.ToolDef{bookShipment},
	Turn:        ship,
}

func main() {
	app.Main(app.Platform{Agents: []agentkit.Definition{shippingAgent}})
}
