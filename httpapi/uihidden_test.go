package httpapi_test

import (
	"context"
	"encoding/json"
	"html"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
)

// TestDashboardShowsHiddenCharacters is the attack of issue 25: a model
// asks to pay account "\u202e54321", which a browser draws as 12345, and
// a client names its session and writes its message with invisible
// characters. The decision page, the inbox and the session's history show
// each as a visible escape and flag it; none sends the raw character. The
// decision page's link to the session escapes its id.
func TestDashboardShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	env := servicetest.New(t, servicetest.Options{HTTP: &httpapi.Options{}, DevMode: true})
	rt := env.Runtime
	model := scriptedAsk{input: `{"action":"transferMoney","account":"\u202e54321","amount\u200b":"50"}`}
	if err := rt.Register(&service.Agent{Name: "asker", ServerManaged: true, Model: model, Tools: []*service.Tool{{
		Name: "userApproval", Interrupt: true, OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}}}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	out, err := rt.InvokeOne(context.Background(), service.Caller{TenantID: "default", Actor: "test"}, "asker", service.AgentInit{SessionID: "s\u2066ession"},
		service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("pay\u00ad now")}}}, nil)
	if err != nil || out.FinishReason != "interrupted" {
		t.Fatalf("turn: %v %+v", err, out)
	}
	s := &testServer{srv: env.Server}
	inbox := getUI(t, s, "/ui/")
	id := inbox[strings.Index(inbox, `href="/ui/interrupts/`)+len(`href="/ui/interrupts/`):][:36]
	decision := getUI(t, s, "/ui/interrupts/"+id)
	session := decision[strings.Index(decision, `href="/ui/sessions/`)+len(`href="`):]
	session = html.UnescapeString(session[:strings.IndexByte(session, '"')])
	if session != "/ui/sessions/s%E2%81%A6ession?agent=asker" {
		t.Errorf("the decision page links to the session as %q", session)
	}
	const warning = "this value contains invisible or direction-changing characters"
	for path, escapes := range map[string][]string{
		"/ui/interrupts/" + id: {"⟨U+202E⟩</span>54321", "amount<span", "⟨U+200B⟩", "⟨U+2066⟩", "⟨U+00AD⟩"},
		"/ui/":                 {"⟨U+202E⟩</span>54321", "⟨U+200B⟩", "⟨U+2066⟩"},
		session:                {"⟨U+2066⟩", "⟨U+00AD⟩", "⟨U+202E⟩</span>54321"},
	} {
		page := getUI(t, s, path)
		for _, want := range append(escapes, `<span class="hidden-char"`, warning) {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %q:\n%s", path, want, page)
			}
		}
		for _, raw := range []string{"\u202e", "\u200b", "\u2066", "\u00ad"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s holds a raw %+q", path, raw)
			}
		}
	}
}
