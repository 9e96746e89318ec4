package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// TestKeyActorIsTheSameThroughAPIAndDashboard decides one interrupt with
// an admin key's bearer credential and another in a dashboard session of
// the same key: both record key:NAME/ID, the interrupt, its events and the
// turn that asked alike; and the session carries the key's scopes.
func TestKeyActorIsTheSameThroughAPIAndDashboard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	plain, key, err := s.acc.CreateKey(ctx, "acme", tenants.RoleAdmin, "ops", "approve:payments", "refunds", "approve:payments")
	if err != nil {
		t.Fatal(err)
	}
	actor := "key:ops/" + key.ID.String()
	first := s.send(t, plain, demo.BankingAgentName, "Transfer $50 to account 12345", nil)
	second := s.send(t, plain, demo.BankingAgentName, "Transfer $60 to account 12345", nil)
	pending := map[string]string{} // snapshot id: interrupt id
	var list struct{ Items []service.Interrupt }
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts", plain, nil), &list)
	for _, it := range list.Items {
		pending[it.SnapshotID] = it.ID.String()
	}
	if len(pending) != 2 || pending[first.SnapshotID] == "" || pending[second.SnapshotID] == "" {
		t.Fatalf("pending interrupts %v, want one for each turn", pending)
	}
	approve := map[string]any{"output": map[string]any{"approved": true}}

	// Through the API.
	var answer json.RawMessage
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+pending[first.SnapshotID]+"/respond", plain, approve), &answer)

	// Through a dashboard session of the same key.
	signIn := s.call(t, http.MethodPost, "/ui/session", "", map[string]string{"key": plain}, "Origin", s.srv.URL)
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: signIn.header}).Cookies() {
		if c.Name == "holdpoint_ui" {
			cookie = c
		}
	}
	if signIn.status != http.StatusNoContent || cookie == nil {
		t.Fatalf("sign-in: %d %s", signIn.status, signIn.body)
	}
	session, err := s.acc.UISession(ctx, cookie.Value)
	if err != nil {
		t.Fatal(err)
	}
	if session.KeyName != "ops" || session.Actor != actor || len(session.Scopes) != 2 || session.Scopes[0] != "approve:payments" || session.Scopes[1] != "refunds" {
		t.Fatalf("session %+v, want the key's name, scopes and actor %s", session, actor)
	}
	okJSON(t, s.call(t, http.MethodPost, "/api/v1/interrupts/"+pending[second.SnapshotID]+"/respond", "", approve,
		"Cookie", "holdpoint_ui="+cookie.Value, "X-CSRF-Token", session.CSRF, "Origin", s.srv.URL), &answer)

	for _, id := range pending {
		var resolvedBy string
		if err := s.owner.QueryRow(ctx, "SELECT resolved_by FROM interrupts WHERE id = $1", id).Scan(&resolvedBy); err != nil || resolvedBy != actor {
			t.Errorf("interrupt %s resolved by %q (%v), want %q", id, resolvedBy, err, actor)
		}
		rows, err := s.owner.Query(ctx, "SELECT type, actor FROM interrupt_events WHERE interrupt_id = $1 ORDER BY id", id)
		if err != nil {
			t.Fatal(err)
		}
		events := 0
		for rows.Next() {
			var typ, got string
			if err := rows.Scan(&typ, &got); err != nil {
				t.Fatal(err)
			}
			events++
			if got != actor {
				t.Errorf("interrupt %s: event %s by %q, want %q", id, typ, got, actor)
			}
		}
		rows.Close()
		if events < 2 {
			t.Errorf("interrupt %s has %d events, want created and resolved at least", id, events)
		}
	}
}
