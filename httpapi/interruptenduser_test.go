package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// TestInterruptsShowTheEndUser: the inbox and an interrupt's detail say
// who asked: the end user the interrupt recorded or, for one that recorded
// none, its session's; an interrupt of a session without one has no
// endUser.
func TestInterruptsShowTheEndUser(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	client, _ := s.key(t, "acme", tenants.RoleClient)

	pause := func(session string, headers ...string) string {
		t.Helper()
		out := s.send(t, client, demo.BankingAgentName, "Transfer $50 to account 12345", map[string]any{"sessionId": session}, headers...)
		if out.FinishReason != service.FinishInterrupted {
			t.Fatalf("banking turn %+v, want interrupted", out)
		}
		return s.interruptOf(t, out.SnapshotID)
	}
	alice := pause("alice-transfer", "X-End-User", "alice")
	nobody := pause("anonymous-transfer")
	recorded := pause("carol-transfer", "X-End-User", "carol")
	// The interrupt's own column wins over the session's.
	if _, err := s.owner.Exec(context.Background(), "UPDATE interrupts SET end_user = 'carol@desk' WHERE id = $1", recorded); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{alice: "alice", nobody: "", recorded: "carol@desk"}

	var page inboxPage
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?limit=10", admin, nil), &page)
	if len(page.Items) != 3 {
		t.Fatalf("%d pending interrupts, want 3", len(page.Items))
	}
	for _, it := range page.Items {
		if it.EndUser != want[it.ID.String()] {
			t.Errorf("list: interrupt of %s has endUser %q, want %q", it.SessionID, it.EndUser, want[it.ID.String()])
		}
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/interrupts?order=oldest&endUser="+url.QueryEscape("alice"), admin, nil), &page)
	if len(page.Items) != 1 || page.Items[0].EndUser != "alice" {
		t.Errorf("oldest first, filtered by alice: %s", mustJSON(page.Items))
	}
	for id, user := range want {
		r := s.call(t, http.MethodGet, "/api/v1/interrupts/"+id, admin, nil)
		var detail inbox.InterruptDetail
		okJSON(t, r, &detail)
		if detail.EndUser != user {
			t.Errorf("detail of %s: endUser %q, want %q", detail.SessionID, detail.EndUser, user)
		}
		var raw map[string]any
		okJSON(t, r, &raw)
		if _, has := raw["endUser"]; has != (user != "") {
			t.Errorf("detail of %s: endUser present %v, want %v", detail.SessionID, has, user != "")
		}
	}
}
