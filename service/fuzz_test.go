package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// fuzzModel answers every request with a short text, so a resumed turn
// ends at once.
type fuzzModel struct{}

func (fuzzModel) Name() string { return "fuzz" }

func (fuzzModel) Generate(context.Context, *ModelRequest, func(ModelChunk)) (*ModelResponse, error) {
	return &ModelResponse{Message: Message{Role: RoleModel, Content: []Part{TextPart("done")}}, FinishReason: FinishStop}, nil
}

// fuzzAgent is a client-managed banking-like agent: an interrupt that asks
// a human and a tool that runs, so resumes can respond and restart.
func fuzzAgent() *Agent {
	return &Agent{
		Name:  "fuzzAgent",
		Model: fuzzModel{},
		Tools: []*Tool{
			{Name: "userApproval", Interrupt: true,
				OutputSchema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)},
			{Name: "transferMoney", Run: func(_ context.Context, call ToolCall) (json.RawMessage, error) {
				if len(call.Resumed) == 0 {
					return nil, InterruptWith(map[string]any{"reason": "over the daily limit"})
				}
				return json.RawMessage(`{"success":true,"transactionId":"tx-1"}`), nil
			}},
		},
	}
}

// Seeds: histories and resumes as the Genkit client and the banking demo
// produce them.
var (
	seedInterrupted = `[{"role":"user","content":[{"text":"Send $50 to account 12345"}]},` +
		`{"role":"model","content":[{"text":"I need your approval."},{"toolRequest":{"name":"userApproval","ref":"r1","input":{"action":"transferMoney","details":"$50 to 12345"}},"metadata":{"interrupt":{"action":"transferMoney"}}}]}]`
	seedRestartable = `[{"role":"user","content":[{"text":"Send $20000 to account 999"}]},` +
		`{"role":"model","content":[{"toolRequest":{"name":"transferMoney","ref":"t1","input":{"amount":20000,"toAccount":"999"}},"metadata":{"interrupt":{"reason":"over the daily limit"}}},` +
		`{"toolRequest":{"name":"userApproval","input":{"action":"x"}},"metadata":{"pendingOutput":{"approved":true}}}]}]`
	seedTwoInterrupts = `[{"role":"user","content":[{"text":"two"}]},` +
		`{"role":"model","content":[{"toolRequest":{"name":"userApproval","ref":"a","input":{}},"metadata":{"interrupt":true}},` +
		`{"toolRequest":{"name":"userApproval","ref":"b","input":{}},"metadata":{"interrupt":true}}]}]`
	seedRespond        = `{"respond":[{"toolResponse":{"name":"userApproval","ref":"r1","output":{"approved":true}}}]}`
	seedRestart        = `{"restart":[{"toolRequest":{"name":"transferMoney","ref":"t1","input":{"amount":20000,"toAccount":"999"}},"metadata":{"resumed":{"confirmed":true}}}]}`
	seedForgedRestart  = `{"restart":[{"toolRequest":{"name":"transferMoney","ref":"t1","input":{"amount":99999,"toAccount":"666"}}}]}`
	seedRespondBoth    = `{"respond":[{"toolResponse":{"name":"userApproval","ref":"a","output":{"approved":true}}},{"toolResponse":{"name":"userApproval","ref":"b","output":{"approved":false}}}]}`
	seedWrongKind      = `{"respond":[{"text":"hi"}],"restart":[{"toolResponse":{"name":"x"}}]}`
	seedUnknownRequest = `{"respond":[{"toolResponse":{"name":"nope","ref":"zz","output":1}}]}`
)

// FuzzValidateResume feeds arbitrary histories and resumes to resume
// validation and planning, and, when they pass, to a whole resumed turn of
// a client-managed agent. Nothing may panic, and no outcome may be an
// internal error: every bad resume is the client's (a 4xx).
func FuzzValidateResume(f *testing.F) {
	for _, h := range []string{seedInterrupted, seedRestartable, seedTwoInterrupts, `[]`} {
		for _, r := range []string{seedRespond, seedRestart, seedForgedRestart, seedRespondBoth, seedWrongKind, seedUnknownRequest, `{}`} {
			f.Add([]byte(h), []byte(r))
		}
	}
	// A real store: the tools a resumed turn runs are recorded, and the
	// database is the test's own (internal/testdb).
	pool, err := NewAppPool(context.Background(), testdb.URL(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(pool.Close)
	rt := NewRuntime(NewPostgresStore(pool), Options{})
	agent := fuzzAgent()
	if err := rt.Register(agent); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, historyJSON, resumeJSON []byte) {
		var history []Message
		if json.Unmarshal(historyJSON, &history) != nil {
			return
		}
		var res Resume
		if json.Unmarshal(resumeJSON, &res) != nil {
			return
		}
		in := AgentInput{Resume: &res}
		if err := checkInput(in); err != nil {
			wantClientError(t, err)
			return
		}
		if err := checkInit(AgentInit{State: &SessionState{Messages: history}}); err != nil {
			wantClientError(t, err)
			return
		}
		if err := validateResumeAgainstHistory(&res, history); err != nil {
			wantClientError(t, err)
			return
		}
		if _, err := planResume(&res, history, agent); err != nil {
			wantClientError(t, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := rt.InvokeOne(ctx, Caller{TenantID: "fuzz", Actor: "fuzz"}, agent.Name,
			AgentInit{State: &SessionState{Messages: history}}, in, nil)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if out.Error != nil && out.Error.Status == CodeInternal {
			t.Fatalf("resumed turn failed internally: %+v", out.Error)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("output does not encode: %v", err)
		}
	})
}

// wantClientError fails unless err is a client error with a public message.
func wantClientError(t *testing.T, err error) {
	t.Helper()
	e := AsError(err)
	if e.Status == CodeInternal || e.Status == CodeUnavailable || e.Message == "" {
		t.Fatalf("want a client error, got %v", err)
	}
	if strings.Contains(e.Message, "runtime error") {
		t.Fatalf("message betrays a runtime error: %q", e.Message)
	}
}
