package client_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/client"
)

// createdEventID returns the id of the interrupt.created event of the one
// interrupt of a session, from the audit trail (the stream's ids are the
// same), and the interrupt's id.
func createdEventID(t *testing.T, c *client.Client, sessionID string) (eventID, interruptID string) {
	t.Helper()
	ctx := testContext(t)
	page, err := c.InterruptsPage(ctx, client.InterruptFilter{SessionID: sessionID}, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("interrupts of %s: %v %+v", sessionID, err, page)
	}
	trail, err := c.InterruptEvents(ctx, page.Items[0].ID)
	if err != nil || len(trail) == 0 || trail[0].Type != "created" {
		t.Fatalf("audit trail: %v %+v", err, trail)
	}
	return trail[0].ID, page.Items[0].ID
}

// collectUntil reads events until the interrupt.created of interrupt
// marker, failing on an error.
func collectUntil(t *testing.T, events <-chan client.Event, errs <-chan error, marker string) []client.Event {
	t.Helper()
	var got []client.Event
	for {
		select {
		case ev := <-events:
			got = append(got, ev)
			if ev.Type == "interrupt.created" && ev.InterruptID == marker {
				return got
			}
		case err := <-errs:
			t.Fatalf("event stream ended after %d events: %v", len(got), err)
		case <-time.After(30 * time.Second):
			t.Fatalf("no interrupt.created of %s among %d events", marker, len(got))
		}
	}
}

// stream runs c.Events in a goroutine until the test ends.
func stream(t *testing.T, c *client.Client, o client.EventsOptions) (<-chan client.Event, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	events, errs, done := make(chan client.Event, 256), make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range c.Events(ctx, o) {
			if err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events, errs
}

// TestEventsSurviveDisconnect cuts the event stream from the server side
// and keeps the server refusing it (503) while events happen: the iterator
// reconnects with Last-Event-ID and yields exactly what a fresh replay of
// the log yields, in the same order, with no event twice.
func TestEventsSurviveDisconnect(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testContext(t)
	// The cut closes every connection, idle ones too: the requests that
	// make events go through a transport of their own, whose idle
	// connections the test drops with the cut.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := s.client(t, client.WithHTTPClient(&http.Client{Transport: tr}))
	agent := c.Agent("bankingAgent")
	streamTr := &http.Transport{}
	t.Cleanup(streamTr.CloseIdleConnections)
	sc := s.client(t, client.WithHTTPClient(&http.Client{Transport: streamTr}))

	_, first, _ := askTransfer(t, agent, "Transfer $50 to account 12345")
	start, firstInterrupt := createdEventID(t, c, first.SessionID())
	var reconnects []error
	events, errs := stream(t, sc, client.EventsOptions{
		After: start, ReconnectDelay: 20 * time.Millisecond, MaxReconnectDelay: 100 * time.Millisecond,
		OnReconnect: func(cause error, _ int, _ time.Duration) { reconnects = append(reconnects, cause) },
	})

	// Something to read before the cut: a second paused transfer.
	_, second, _ := askTransfer(t, agent, "Transfer $10 to account 555")
	_, secondInterrupt := createdEventID(t, c, second.SessionID())
	got := collectUntil(t, events, errs, secondInterrupt)

	// Cut every connection and refuse new event streams meanwhile.
	s.eventsDown.Store(true)
	s.srv.CloseClientConnections()
	tr.CloseIdleConnections()
	if _, err := c.Respond(ctx, firstInterrupt, map[string]any{"approved": true}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Chat().Send(ctx, "Pay Alice $20"); err != nil {
		t.Fatal(err)
	}
	for s.refused.Load() == 0 {
		select {
		case err := <-errs:
			t.Fatalf("the stream gave up while the server was down: %v", err)
		case <-ctx.Done():
			t.Fatal("the stream never tried to reconnect")
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.eventsDown.Store(false)

	_, marker, _ := askTransfer(t, agent, "Transfer $30 to account 999")
	_, markerInterrupt := createdEventID(t, c, marker.SessionID())
	got = append(got, collectUntil(t, events, errs, markerInterrupt)...)

	// The first connection resumed after start; every reconnection (the
	// refused ones and the one that worked) after the last event the
	// iterator read before the cut.
	conns := s.eventConnections()
	if len(conns) < 3 || conns[0] != start {
		t.Fatalf("Last-Event-ID of the connections %q, want %q first", conns, start)
	}
	resumedAt := slices.IndexFunc(got, func(ev client.Event) bool { return ev.ID == conns[1] })
	if resumedAt < 0 || slices.ContainsFunc(conns[1:], func(id string) bool { return id != conns[1] }) {
		t.Fatalf("reconnections with Last-Event-ID %q, want one id, of an event read (%d events)", conns[1:], len(got))
	}
	if len(reconnects) == 0 {
		t.Fatal("OnReconnect was never called")
	}

	// A fresh stream from the same start replays the log: the same events.
	replay, replayErrs := stream(t, c, client.EventsOptions{After: start})
	want := collectUntil(t, replay, replayErrs, markerInterrupt)
	ids := func(evs []client.Event) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = ev.ID
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("events across the disconnect:\n%v\nthe log from the same start:\n%v", ids(got), ids(want))
	}
	seen := map[string]bool{}
	var types []string
	for _, ev := range got {
		if seen[ev.ID] {
			t.Fatalf("event %s yielded twice", ev.ID)
		}
		seen[ev.ID] = true
		types = append(types, ev.Type)
		if ev.TenantID != "acme" || ev.At.IsZero() {
			t.Fatalf("event %+v", ev)
		}
	}
	for _, typ := range []string{"interrupt.resolved", "tool.called", "turn.completed", "interrupt.created"} {
		if !slices.Contains(types, typ) {
			t.Fatalf("no %s among %v", typ, types)
		}
	}

	// A filter the server refuses ends the stream with the typed error.
	for _, err := range c.Events(ctx, client.EventsOptions{Types: []string{"no.such"}}) {
		if !client.IsInvalidArgument(err) {
			t.Fatalf("unknown event type: %v", err)
		}
	}
}
