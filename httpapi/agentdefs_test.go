package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/tenantagents"
)

type demoModels struct{}

func (demoModels) Check(name string) error {
	if name != "demo" {
		return fmt.Errorf("model %q is not available here", name)
	}
	return nil
}

func (demoModels) Model(context.Context, string) (service.Model, error) { return demo.NewModel(), nil }

const notesPrompt = `---
name: notes
model: demo
holdpoint:
  interrupts:
    - name: ask
      input: {schema: {question: string}}
      output: {schema: {answer: string}}
---
You take notes.
`

// TestTenantAgentRoutes drives PUT/GET/DELETE /api/v1/agents with keys of
// two tenants: versions, the forms of the body, refusals, and the agent
// served to its tenant only.
func TestTenantAgentRoutes(t *testing.T) {
	t.Parallel()
	m := &tenantagents.Manager{Models: demoModels{}}
	s := newAuthServer(t, func(o *httpapi.Options) { o.Agents = m })
	m.Store, m.Runtime = s.store, s.rt
	s.rt.SetTenantAgents(m)
	s.tenant(t, "acme")
	s.tenant(t, "rival")
	admin, _ := s.key(t, "acme", "admin")
	client, _ := s.key(t, "acme", "client")
	rivalAdmin, _ := s.key(t, "rival", "admin")

	put := func(cred, name, contentType, body string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, s.srv.URL+"/api/v1/agents/"+name, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+cred)
		res, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	if r := put(client, "notes", "text/x-dotprompt", notesPrompt); r.status != http.StatusForbidden {
		t.Fatalf("a client key put: %d %s", r.status, r.body)
	}
	if r := put(admin, "notes", "text/x-dotprompt", notesPrompt); r.status != http.StatusCreated || !strings.Contains(string(r.body), `"version":1`) {
		t.Fatalf("put .prompt: %d %s", r.status, r.body)
	}
	jsonForm := `{"name":"notes","model":"demo","system":"You take notes, v2."}`
	if r := put(admin, "notes", "application/json", jsonForm); r.status != http.StatusCreated || !strings.Contains(string(r.body), `"version":2`) {
		t.Fatalf("put JSON form: %d %s", r.status, r.body)
	}
	// Refusals: nothing stored.
	for name, tc := range map[string]struct {
		agent, ctype, body string
		status             int
		want               string
	}{
		"yaml error":                {"notes", "text/x-dotprompt", "---\nmodel: [\n---\nx", 400, `"line"`},
		"unknown model":             {"notes", "text/x-dotprompt", strings.Replace(notesPrompt, "model: demo", "model: gpt-9", 1), 400, `"field":"model"`},
		"name mismatch":             {"other", "text/x-dotprompt", notesPrompt, 400, `"field":"name"`},
		"compiled name":             {demo.BankingAgentName, "application/json", `{"model":"demo"}`, 409, "ALREADY_EXISTS"},
		"compiled name, other case": {"BANKINGAGENT", "application/json", `{"model":"demo"}`, 409, `\"bankingAgent\" is one of this server's own agents`},
		"own name, other case":      {"Notes", "application/json", `{"model":"demo"}`, 409, `already has the agent \"notes\"`},
		"config names a model":      {"notes", "application/json", `{"model":"demo","config":{"model":"openai/gpt-4o"}}`, 400, `"field":"config.model"`},
		"model id climbs out":       {"notes", "application/json", `{"model":"openai/../../x"}`, 400, `"field":"model"`},
		"text/plain body":           {"notes", "text/plain", notesPrompt, 400, "INVALID_ARGUMENT"},
		"bad agent name":            {"no%20spaces", "application/json", `{"model":"demo"}`, 400, "agent name"},
		"JSON form garbage":         {"notes", "application/json", `{"model":"demo","holdpoint":{"interupts":[]}}`, 400, "holdpoint"},
		"approval condition does not compile": {"notes", "application/json", `{"model":"demo","holdpoint":{"httpTools":[{"name":"pay","url":"https://pay.example.com/pay",` +
			`"approval":{"when":"input.amount >"},"input":{"schema":{"amount":"number"}},"output":{"schema":{"ok":"boolean"}}}]}}`, 400,
			`tool pay: the condition \"input.amount \u003e\" does not compile`},
		"approval on an interrupt": {"notes", "text/x-dotprompt", strings.Replace(notesPrompt, "    - name: ask\n", "    - name: ask\n      approval: true\n", 1), 400, `"field":"holdpoint.interrupts[0].approval"`},
	} {
		if r := put(admin, tc.agent, tc.ctype, tc.body); r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	var versions int
	if err := s.owner.QueryRow(context.Background(), `SELECT count(*) FROM tenant_agent_versions`).Scan(&versions); err != nil || versions != 2 {
		t.Fatalf("versions stored: %d %v", versions, err)
	}

	if r := s.call(t, http.MethodGet, "/api/v1/agents", admin, nil); r.status != 200 || !strings.Contains(string(r.body), `"name":"notes"`) || !strings.Contains(string(r.body), `"currentVersion":2`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodGet, "/api/v1/agents/notes", admin, nil); r.status != 200 || strings.Count(string(r.body), `"createdBy"`) < 3 {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodGet, "/api/v1/agents/notes?version=1", admin, nil); r.status != 200 || !strings.Contains(string(r.body), "You take notes.") {
		t.Fatalf("get version 1: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodGet, "/api/v1/agents/notes?version=0", admin, nil); r.status != 400 {
		t.Fatalf("version 0: %d %s", r.status, r.body)
	}
	// Served at /api/agents/notes to acme only.
	turn := map[string]any{"data": map[string]any{"message": map[string]any{"role": "user", "content": []any{map[string]any{"text": "hi"}}}}}
	if r := s.call(t, http.MethodPost, "/api/agents/notes", client, turn); r.status != 200 {
		t.Fatalf("acme's turn: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodPost, "/api/agents/notes", rivalAdmin, turn); r.status != 404 {
		t.Fatalf("rival's turn: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodGet, "/api/v1/agents/notes", rivalAdmin, nil); r.status != 404 {
		t.Fatalf("rival's get: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodDelete, "/api/v1/agents/notes", rivalAdmin, nil); r.status != 404 {
		t.Fatalf("rival's delete: %d %s", r.status, r.body)
	}
	// Disabled: 204, then turns 404.
	if r := s.call(t, http.MethodDelete, "/api/v1/agents/notes", admin, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := s.call(t, http.MethodPost, "/api/agents/notes", client, turn); r.status != 404 {
		t.Fatalf("turn of a disabled agent: %d %s", r.status, r.body)
	}
}
