package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/examples/internal/exampletest"
	"github.com/holdpoint/holdpoint/service"
)

const agent = "calendarAgent"

// TestClientManagedFlow builds the example and drives a conversation whose
// state lives with the client: ask, confirm with the returned state, then
// a second request denied; an altered state is refused and books nothing,
// and the first paused state, confirmed again, is a branch that books
// again.
func TestClientManagedFlow(t *testing.T) {
	t.Parallel()
	s := exampletest.Start(t, ".")

	// Turn 1: no init, a new conversation. It pauses on confirmBooking
	// and the whole state comes back, signed; the server keeps nothing.
	res := s.Turn(t, agent, service.AgentInit{}, exampletest.User("Book Team sync on Friday 10:00"))
	asks := exampletest.Interrupts(res)
	if res.FinishReason != "interrupted" || len(asks) != 1 || asks[0].Name != "confirmBooking" {
		t.Fatalf("turn 1: %+v", res)
	}
	if got, want := string(asks[0].Input), `{"title":"Team sync","when":"Friday 10:00"}`; got != want {
		t.Fatalf("confirmBooking input %s, want %s", got, want)
	}
	if res.SnapshotID != "" || res.State == nil || res.State.Signature == "" {
		t.Fatalf("turn 1: want a signed state and no snapshot, got snapshotId %q state %+v", res.SnapshotID, res.State)
	}

	// A state the client altered (the user's words, or the meeting the
	// human is asked to confirm) loses its signature: the confirmation is
	// refused and nothing is booked.
	for what, alter := range map[string][2]string{
		"user text":     {"Book Team sync on Friday 10:00", "Book Team sync on Sunday 03:00"},
		"request input": {`"when":"Friday 10:00"`, `"when":"Sunday 03:00"`},
	} {
		altered := alterState(t, res.State, alter[0], alter[1])
		status, body := s.Refused(t, agent, service.AgentInit{State: altered}, exampletest.Respond(asks[0], `{"confirmed":true}`))
		if status != 400 || !strings.Contains(body, "INVALID_ARGUMENT") {
			t.Fatalf("altered %s: %d %s, want 400 INVALID_ARGUMENT", what, status, body)
		}
	}

	first, firstAsk := res.State, asks[0]

	// Turn 2: the state as returned, with the human's confirmation. The
	// first booking is bk-1: the refused resumes booked nothing.
	done := s.Turn(t, agent, service.AgentInit{State: res.State}, exampletest.Respond(asks[0], `{"confirmed":true}`))
	if got, want := exampletest.Text(done), "Booked Team sync on Friday 10:00 (bk-1)."; got != want || done.FinishReason != "stop" {
		t.Fatalf("turn 2: %q (%s), want %q", got, done.FinishReason, want)
	}
	if done.SnapshotID != "" || done.State == nil || done.State.Signature == "" {
		t.Fatalf("turn 2: want a signed state and no snapshot, got %+v", done)
	}

	// Turn 3 continues from the new state with another request, denied.
	res = s.Turn(t, agent, service.AgentInit{State: done.State}, exampletest.User("Book 1:1 with Ana on Monday 9:30"))
	asks = exampletest.Interrupts(res)
	if len(asks) != 1 || string(asks[0].Input) != `{"title":"1:1 with Ana","when":"Monday 9:30"}` {
		t.Fatalf("turn 3: %+v", res)
	}
	// The whole conversation: turn 1's user message, request and
	// confirmation, bookMeeting's request, result and answer; this turn's
	// user message and request.
	if n := len(res.State.Messages); n != 8 || res.State.Messages[0].Text() != "Book Team sync on Friday 10:00" {
		t.Fatalf("turn 3: the state holds %d messages, want the whole conversation (8)", n)
	}
	denied := s.Turn(t, agent, service.AgentInit{State: res.State}, exampletest.Respond(asks[0], `{"confirmed":false,"note":"not this week"}`))
	if got, want := exampletest.Text(denied), "Not booked: 1:1 with Ana."; got != want {
		t.Fatalf("denial: %q, want %q", got, want)
	}

	// The next booking is bk-2: the denial booked nothing.
	res = s.Turn(t, agent, service.AgentInit{State: denied.State}, exampletest.User("Book Retro on Friday 16:00"))
	done = s.Turn(t, agent, service.AgentInit{State: res.State}, exampletest.Respond(exampletest.Interrupts(res)[0], `{"confirmed":true}`))
	if got, want := exampletest.Text(done), "Booked Retro on Friday 16:00 (bk-2)."; got != want {
		t.Fatalf("last booking: %q, want %q", got, want)
	}

	// The server keeps nothing: turn 1's signed state, confirmed again,
	// is a branch of the conversation that books the meeting again.
	branch := s.Turn(t, agent, service.AgentInit{State: first}, exampletest.Respond(firstAsk, `{"confirmed":true}`))
	if got, want := exampletest.Text(branch), "Booked Team sync on Friday 10:00 (bk-3)."; got != want {
		t.Fatalf("branch: %q, want %q", got, want)
	}

	// Anything else gets the help text.
	help := s.Turn(t, agent, service.AgentInit{}, exampletest.User("hello"))
	exampletest.Contains(t, "help", exampletest.Text(help), `try "Book Team sync on Friday 10:00"`)
}

// alterState returns a copy of st whose JSON has old replaced by by, its
// signature kept.
func alterState(t *testing.T, st *service.SessionState, old, by string) *service.SessionState {
	t.Helper()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(raw), old, by, 1)
	if changed == string(raw) {
		t.Fatalf("the state has no %s: %s", old, raw)
	}
	var out service.SessionState
	if err := json.Unmarshal([]byte(changed), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
