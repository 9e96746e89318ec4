// Command clientmanaged is a calendar assistant whose sessions live with the
// client: the server keeps nothing, each answer carries the whole state,
// signed, and the client sends it back (init.state) with its next message
// or its answer to an interrupt. The model asks confirmBooking (a human
// answers it) before it calls bookMeeting. A state that was altered cannot
// be resumed, but the same signed state can be resumed more than once (a
// branch of the conversation): a confirmation that must count once belongs
// in a server-managed agent, whose interrupts are rows.
//
// Run it with `go run ./examples/clientmanaged serve --dev`; it answers
// offline with a scripted model (model.go), or with the provider
// CLIENTMANAGED_MODEL names (e.g. googleai/gemini-2.5-flash with
// GEMINI_API_KEY set).
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

// Meeting is what the model asks to book (shown to the human).
type Meeting struct {
	Title string `json:"title"`
	When  string `json:"when"`
}

// Confirmation is the human's answer.
type Confirmation struct {
	Confirmed bool   `json:"confirmed"`
	Note      string `json:"note,omitempty"`
}

// Booking is bookMeeting's result.
type Booking struct {
	BookingID string `json:"bookingId"`
}

// bookings counts the meetings booked: the booking ids are bk-1, bk-2...
var bookings atomic.Int64

var confirmBooking = agentkit.Interrupt[Meeting, Confirmation]{
	Name:        "confirmBooking",
	Description: "Ask the user to confirm a meeting before booking it.",
}

var bookMeeting = agentkit.Tool[Meeting, Booking]{
	Name:        "bookMeeting",
	Description: "Book a meeting in the user's calendar.",
	Run: func(ctx context.Context, m Meeting) (Booking, error) {
		return Booking{BookingID: fmt.Sprintf("bk-%d", bookings.Add(1))}, nil
	},
}

var calendarAgent = agentkit.Agent{
	Name: "calendarAgent",
	System: "You are a calendar assistant. ALWAYS use the confirmBooking interrupt to " +
		"confirm a meeting before booking it with bookMeeting.",
	Tools:         []agentkit.ToolDef{confirmBooking, bookMeeting},
	Model:         cmp.Or(os.Getenv("CLIENTMANAGED_MODEL"), "scripted"),
	ClientManaged: true,
}

func main() {
	app.Main(app.Platform{
		Agents: []agentkit.Definition{calendarAgent},
		Models: map[string]service.Model{"scripted": scriptedModel{}},
	})
}
