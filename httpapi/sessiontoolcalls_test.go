package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/holdpoint/holdpoint/service"
)

// TestUnknownCallOfASessionNeverWritten: a first turn records its calls
// before its write, so a turn cut off in between (its instance killed,
// PostgreSQL stopped: the chaos run, tests/cluster/chaos_test.go, leaves
// such calls) leaves calls of a session that was never written. One that
// may have run is still listed by the session's tool calls, for a human to
// decide; a session with neither a row nor calls is 404, for every tenant.
func TestUnknownCallOfASessionNeverWritten(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	if _, err := s.owner.Exec(context.Background(), `INSERT INTO tool_calls
		(tenant_id, turn_id, call_key, session_id, agent, tool, status, actor)
		VALUES ('default', 'never-written-turn', 'transfer#call_0', 'never-written', 'bankingAgent', 'transferMoney', 'unknown', 'dev')`); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Items []service.ToolCallRecord `json:"items"`
	}
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/sessions/never-written/tool-calls", nil), &page)
	if len(page.Items) != 1 || page.Items[0].Status != service.ToolCallUnknown || page.Items[0].TurnID != "never-written-turn" {
		t.Fatalf("the session's tool calls: %+v, want the unknown call", page.Items)
	}
	var one service.ToolCallRecord
	okJSON(t, s.call(t, http.MethodGet, "/api/v1/tool-calls/"+page.Items[0].ID.String(), nil), &one)
	if one.Status != service.ToolCallUnknown {
		t.Fatalf("the call: %+v", one)
	}
	for _, r := range []struct {
		name, path string
		header     []string
	}{
		{"another tenant's", "/api/v1/sessions/never-written/tool-calls", []string{tenantHeader, "acme"}},
		{"no such session", "/api/v1/sessions/no-such-session/tool-calls", nil},
	} {
		if got := s.call(t, http.MethodGet, r.path, nil, r.header...); got.status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", r.name, got.status, got.body)
		}
	}
}
