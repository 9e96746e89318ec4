package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
)

// fuzzRoutes are the protocol routes the decoder fuzzer posts to, on
// client-managed agents, whose requests never reach the database.
var fuzzRoutes = []struct {
	path   string
	stream bool
}{
	{"/api/agents/fuzzAgent", false},
	{"/api/agents/fuzzAgent", true},
	{"/api/agents/fuzzAgent/getSnapshot", false},
	{"/api/agents/fuzzAgent/abort", false},
	{"/api/agents/notesAgent", false},
}

// fuzzTool is the banking demo's transfer: it interrupts until restarted.
func fuzzTool(_ context.Context, call service.ToolCall) (json.RawMessage, error) {
	if len(call.Resumed) == 0 {
		return nil, service.InterruptWith(map[string]any{"reason": "needs confirmation"})
	}
	return json.RawMessage(`{"success":true}`), nil
}

// FuzzDecodeAgentRequest posts arbitrary bodies to the protocol routes of
// an in-process server. Decoding and validation must never panic nor answer
// 5xx: every bad body is the client's fault and gets a 4xx with the
// protocol's error shape; a turn that runs may fail, but not internally.
func FuzzDecodeAgentRequest(f *testing.F) {
	seeds := []string{
		`{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}`,
		`{"data":{"message":{"role":"user","content":[{"text":"Send $50 to 12345"}]}},"init":{"state":{"messages":[{"role":"user","content":[{"text":"earlier"}]}],"custom":{"k":1},"artifacts":[{"name":"a","parts":[{"text":"x"}]}]}}}`,
		`{"data":{"resume":{"respond":[{"toolResponse":{"name":"userApproval","ref":"r1","output":{"approved":true}}}]}},"init":{"state":{"messages":[{"role":"user","content":[{"text":"pay"}]},{"role":"model","content":[{"toolRequest":{"name":"userApproval","ref":"r1","input":{"action":"transferMoney"}},"metadata":{"interrupt":true}}]}]}}}`,
		`{"data":{"resume":{"restart":[{"toolRequest":{"name":"transferMoney","ref":"t1","input":{"amount":5}},"metadata":{"resumed":true}}]}},"init":{"state":{"messages":[{"role":"model","content":[{"toolRequest":{"name":"transferMoney","ref":"t1","input":{"amount":5}},"metadata":{"interrupt":true}}]}]}}}`,
		`{"data":{"message":{"role":"user","content":[{"media":{"url":"data:image/png;base64,AAAA","contentType":"image/png"}},{"data":{"x":[1,2]}},{"custom":{}},{"reasoning":"r"},{"resource":{"uri":"u"}},{"text":"t","metadata":{"m":1},"unknown":true}]},"detach":false}}`,
		`{"data":{"snapshotId":"s1"}}`,
		`{"data":{"sessionId":"sess"}}`,
		`{"data":{},"init":{"snapshotId":"x","sessionId":"y"}}`,
		`{"data":{"message":{"role":"robot","content":[]}}}`,
		`{"data":"x"}`, `[]`, `{}`, ``, `{"data":{"detach":true,"message":{"role":"user","content":[{"text":"bg"}]}}}`,
		`{"data":{"message":{"role":"user","content":[{"text":"\u0000\ud800"}]}},"init":{"state":{"sessionId":"\u0007"}}}`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
		// What the strict pass over every body refuses.
		`{"data":{"message":{"role":"user","content":[{"text":"a\u0000b"}]}}}`,
		`{"data":{"message":{"role":"user","content":[{"data":{"n":1e999999}}]}}}`,
		`{"data":{"message":{"role":"user","content":[{"data":[1e-400,0e-99999,-1e400]}]}}}`,
		"{\"data\":{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"caf\xe9\"}]}}}",
		`{"data":{"resume":{"respond":[{"toolResponse":{"name":"userApproval","ref":"r1","output":{"approved":false,"approved":true}}}]}},"init":{"state":{"messages":[{"role":"model","content":[{"toolRequest":{"name":"userApproval","ref":"r1"},"metadata":{"interrupt":true}}]}]}}}`,
		`{"data":{},"data":{"snapshotId":"s1"}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}

	// Logs are dropped: kept, those of every input would pile up in memory
	// for as long as the fuzzer runs.
	log := slog.New(slog.DiscardHandler)
	rt := service.NewRuntime(nil, service.Options{Logger: log})
	tools := []*service.Tool{
		{Name: "userApproval", Interrupt: true},
		{Name: "transferMoney", Run: fuzzTool},
	}
	for _, a := range []*service.Agent{
		{Name: "fuzzAgent", Model: scriptedModel{}, Tools: tools},
		{Name: "notesAgent", Model: scriptedModel{}},
	} {
		if err := rt.Register(a); err != nil {
			f.Fatal(err)
		}
	}
	h := httpapi.New(rt, httpapi.Options{Logger: log})

	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(http.MethodPost, r.path, bytes.NewReader(body))
		req.Host = "127.0.0.1" // dev mode answers loopback names only
		req.Header.Set("Content-Type", "application/json")
		if r.stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		answer := rec.Body.Bytes()
		status, errBody := res.StatusCode, answer
		if frame, ok := refusalFrame(answer); ok && r.stream && status == http.StatusOK {
			// A streamed turn refused before it started: one error frame,
			// judged by the status its error has as JSON.
			status, errBody = jsonStatus[frame.Status], []byte(mustJSON(frame))
		}
		if status >= 500 {
			t.Fatalf("POST %s %q: status %d %s", r.path, body, status, answer)
		}
		if !utf8.Valid(body) && status != http.StatusBadRequest {
			// No byte of a body that is not UTF-8 may reach a turn.
			t.Fatalf("POST %s %q: invalid UTF-8 answered %d %s, want 400", r.path, body, status, answer)
		}
		if status != http.StatusOK {
			var e struct {
				Status    string `json:"status"`
				Message   string `json:"message"`
				RequestID string `json:"requestId"`
			}
			if err := json.Unmarshal(errBody, &e); err != nil || e.Status == "" || e.Message == "" || e.RequestID == "" {
				t.Fatalf("POST %s %q: error answer %d %s lacks the protocol's shape", r.path, body, status, answer)
			}
			return
		}
		// A 200 is a result (JSON or the frames of a stream); a failed turn
		// inside it must be the client's fault, not ours.
		if bytes.Contains(answer, []byte(`"status":"INTERNAL"`)) {
			t.Fatalf("POST %s %q: internal failure in %s", r.path, body, answer)
		}
		if !r.stream && !json.Valid(answer) {
			t.Fatalf("POST %s %q: invalid JSON answer %s", r.path, body, answer)
		}
	})
}

// refusalFrame returns the error of a stream that is one error frame.
func refusalFrame(answer []byte) (errorAnswer, bool) {
	const prefix, suffix = "data: ", "\n\n"
	if !bytes.HasPrefix(answer, []byte(prefix)) || !bytes.HasSuffix(answer, []byte(suffix)) ||
		bytes.Count(answer, []byte(suffix)) != 1 {
		return errorAnswer{}, false
	}
	var f struct {
		Error *errorAnswer `json:"error"`
	}
	if err := json.Unmarshal(answer[len(prefix):len(answer)-len(suffix)], &f); err != nil || f.Error == nil {
		return errorAnswer{}, false
	}
	return *f.Error, true
}
