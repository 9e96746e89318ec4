package genkitmodel

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/logger"
	"github.com/firebase/genkit/go/genkit"

	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// fromEnv is FromEnv as a test calls it: genkit logs to the test, and the
// context ends with the test, taking with it the goroutine of the
// signal.NotifyContext genkit.Init starts and never stops.
func fromEnv(t *testing.T) (protocol.Model, error) {
	log := testlog.Logger(t)
	return FromEnv(logger.WithContext(t.Context(), log), log)
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("bad JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestPartRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		json string
		kind ai.PartKind
		// check inspects the Genkit part.
		check func(t *testing.T, p *ai.Part)
	}{
		{"text", `{"text":"hello"}`, ai.PartText, func(t *testing.T, p *ai.Part) {
			if p.Text != "hello" {
				t.Errorf("text = %q", p.Text)
			}
		}},
		{"empty text", `{"text":""}`, ai.PartText, nil},
		{"text with metadata", `{"text":"x","metadata":{"a":1,"b":{"c":[true,null]}}}`, ai.PartText, func(t *testing.T, p *ai.Part) {
			if p.Metadata["a"] != json.Number("1") {
				t.Errorf("metadata a = %#v", p.Metadata["a"])
			}
		}},
		{"media with contentType", `{"media":{"url":"data:image/png;base64,AAAA","contentType":"image/png"}}`, ai.PartMedia, func(t *testing.T, p *ai.Part) {
			if p.Text != "data:image/png;base64,AAAA" || p.ContentType != "image/png" {
				t.Errorf("media = %q %q", p.Text, p.ContentType)
			}
		}},
		{"media without contentType", `{"media":{"url":"https://example.invalid/a.jpg"}}`, ai.PartMedia, nil},
		{"toolRequest", `{"toolRequest":{"name":"transferMoney","ref":"call_1","input":{"amount":12345678901234567890,"to":"bob"}}}`, ai.PartToolRequest, func(t *testing.T, p *ai.Part) {
			in, ok := p.ToolRequest.Input.(map[string]any)
			if !ok || p.ToolRequest.Name != "transferMoney" || p.ToolRequest.Ref != "call_1" || in["to"] != "bob" {
				t.Errorf("toolRequest = %#v", p.ToolRequest)
			}
		}},
		{"toolRequest without input", `{"toolRequest":{"name":"now"}}`, ai.PartToolRequest, func(t *testing.T, p *ai.Part) {
			if p.ToolRequest.Input != nil {
				t.Errorf("input = %#v", p.ToolRequest.Input)
			}
		}},
		{"toolResponse", `{"toolResponse":{"name":"transferMoney","ref":"call_1","output":{"ok":true,"id":"t1"}}}`, ai.PartToolResponse, func(t *testing.T, p *ai.Part) {
			out, ok := p.ToolResponse.Output.(map[string]any)
			if !ok || out["ok"] != true || p.ToolResponse.Ref != "call_1" {
				t.Errorf("toolResponse = %#v", p.ToolResponse)
			}
		}},
		{"toolResponse scalar output and content", `{"toolResponse":{"name":"f","output":"done","content":[{"text":"log"},{"media":{"url":"https://example.invalid/x.png","contentType":"image/png"}}]}}`, ai.PartToolResponse, func(t *testing.T, p *ai.Part) {
			if len(p.ToolResponse.Content) != 2 || !p.ToolResponse.Content[1].IsMedia() {
				t.Errorf("content = %#v", p.ToolResponse.Content)
			}
		}},
		{"data object", `{"data":{"rows":[1,2,3]}}`, ai.PartData, func(t *testing.T, p *ai.Part) {
			if p.ContentType != contentTypeJSON {
				t.Errorf("contentType = %q", p.ContentType)
			}
		}},
		{"data URI string", `{"data":"data:text/plain;base64,aGk="}`, ai.PartData, func(t *testing.T, p *ai.Part) {
			if p.Text != "data:text/plain;base64,aGk=" || p.ContentType != "" {
				t.Errorf("data = %q %q", p.Text, p.ContentType)
			}
		}},
		{"data string that looks like JSON", `{"data":"123"}`, ai.PartData, nil},
		{"data number", `{"data":42}`, ai.PartData, nil},
		{"data null-free array", `{"data":[{"a":"<b>"}]}`, ai.PartData, nil},
		{"reasoning", `{"reasoning":"thinking...","metadata":{"signature":"c2ln"}}`, ai.PartReasoning, func(t *testing.T, p *ai.Part) {
			if !p.IsReasoning() || p.Text != "thinking..." {
				t.Errorf("reasoning = %#v", p)
			}
		}},
		{"custom", `{"custom":{"executableCode":{"language":"PYTHON","code":"print(1)"}}}`, ai.PartCustom, func(t *testing.T, p *ai.Part) {
			if _, ok := p.Custom["executableCode"]; !ok {
				t.Errorf("custom = %#v", p.Custom)
			}
		}},
		{"empty custom", `{"custom":{}}`, ai.PartCustom, nil},
		{"resource", `{"resource":{"uri":"file:///a.txt"}}`, ai.PartResource, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p protocol.Part
			if err := json.Unmarshal([]byte(tc.json), &p); err != nil {
				t.Fatal(err)
			}
			gp, err := partToGenkit(p)
			if err != nil {
				t.Fatal(err)
			}
			if gp == nil || gp.Kind != tc.kind {
				t.Fatalf("genkit part = %#v, want kind %d", gp, tc.kind)
			}
			if tc.check != nil {
				tc.check(t, gp)
			}
			back, err := partFromGenkit(gp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tc.json)) {
				t.Errorf("round trip:\n got %s\nwant %s", got, tc.json)
			}
		})
	}
}

func TestBigNumbersKeptExact(t *testing.T) {
	in := `{"toolRequest":{"name":"f","input":{"n":12345678901234567890}}}`
	var p protocol.Part
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	gp, err := partToGenkit(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := partFromGenkit(gp)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(back.ToolRequest.Input); got != `{"n":12345678901234567890}` {
		t.Errorf("input = %s", got)
	}
}

func TestUnknownPartSkipped(t *testing.T) {
	var p protocol.Part
	if err := json.Unmarshal([]byte(`{"futureKind":{"x":1}}`), &p); err != nil {
		t.Fatal(err)
	}
	parts, err := partsToGenkit([]protocol.Part{p, protocol.TextPart("kept")})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0].Text != "kept" {
		t.Errorf("parts = %#v", parts)
	}
}

func TestInvalidPartsRejected(t *testing.T) {
	for _, in := range []string{
		`{"custom":[1,2]}`,
		`{"media":"not an object"}`,
	} {
		var p protocol.Part
		if err := json.Unmarshal([]byte(in), &p); err != nil {
			t.Fatal(err)
		}
		if _, err := partToGenkit(p); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	conv := `[
	  {"role":"system","content":[{"text":"You are a bank."}]},
	  {"role":"user","content":[{"text":"Send 100 to Bob"},{"media":{"url":"https://example.invalid/id.png","contentType":"image/png"}}],"metadata":{"from":"web"}},
	  {"role":"model","content":[{"reasoning":"need approval"},{"text":""},{"toolRequest":{"name":"transferMoney","ref":"r1","input":{"amount":100,"to":"Bob"}}}]},
	  {"role":"tool","content":[{"toolResponse":{"name":"transferMoney","ref":"r1","output":{"status":"done"}}}]},
	  {"role":"model","content":[{"text":"Done."}],"metadata":{"turn":3}}
	]`
	var msgs []protocol.Message
	if err := json.Unmarshal([]byte(conv), &msgs); err != nil {
		t.Fatal(err)
	}
	gms, err := messagesToGenkit(msgs)
	if err != nil {
		t.Fatal(err)
	}
	wantRoles := []ai.Role{ai.RoleSystem, ai.RoleUser, ai.RoleModel, ai.RoleTool, ai.RoleModel}
	for i, gm := range gms {
		if gm.Role != wantRoles[i] {
			t.Errorf("message %d role = %q, want %q", i, gm.Role, wantRoles[i])
		}
	}
	if gms[1].Metadata["from"] != "web" {
		t.Errorf("message metadata = %#v", gms[1].Metadata)
	}
	back := make([]protocol.Message, len(gms))
	for i, gm := range gms {
		if back[i], err = messageFromGenkit(gm); err != nil {
			t.Fatal(err)
		}
	}
	got, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, []byte(conv)) {
		t.Errorf("round trip:\n got %s\nwant %s", got, conv)
	}
}

// TestFromGenkitPluginParts converts parts as plugins build them (Go values,
// []byte signatures) and checks they survive the trip back to Genkit in the
// form the plugins read.
func TestFromGenkitPluginParts(t *testing.T) {
	sig := []byte{0xde, 0xad, 0xbe, 0xef}
	parts := []*ai.Part{
		ai.NewReasoningPart("hmm", sig),
		ai.NewTextPart("answer"),
		ai.NewToolRequestPart(&ai.ToolRequest{Name: "f", Ref: "c1", Input: map[string]any{"x": 1.5}}),
		ai.NewMediaPart("image/png", "data:image/png;base64,AAAA"),
		ai.NewDataPart("data:text/plain;base64,aGk="),
		ai.NewCustomPart(map[string]any{"k": "v"}),
		ai.NewToolResponsePart(&ai.ToolResponse{Name: "f", Ref: "c1", Output: []any{"a", 2.0}}),
	}
	ours, err := partsFromGenkit(parts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	want := `[
	  {"reasoning":"hmm","metadata":{"signature":"` + base64.StdEncoding.EncodeToString(sig) + `"}},
	  {"text":"answer"},
	  {"toolRequest":{"name":"f","ref":"c1","input":{"x":1.5}}},
	  {"media":{"url":"data:image/png;base64,AAAA","contentType":"image/png"}},
	  {"data":"data:text/plain;base64,aGk="},
	  {"custom":{"k":"v"}},
	  {"toolResponse":{"name":"f","ref":"c1","output":["a",2]}}
	]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("from genkit:\n got %s\nwant %s", got, want)
	}
	again, err := partsToGenkit(ours)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again {
		if p.Kind != parts[i].Kind || p.Text != parts[i].Text {
			t.Errorf("part %d: kind/text %d %q, want %d %q", i, p.Kind, p.Text, parts[i].Kind, parts[i].Text)
		}
	}
	// Plugins accept the base64 string form of a signature.
	if s, _ := again[0].Metadata["signature"].(string); s != base64.StdEncoding.EncodeToString(sig) {
		t.Errorf("signature = %#v", again[0].Metadata["signature"])
	}
	if again[3].ContentType != "image/png" {
		t.Errorf("media content type = %q", again[3].ContentType)
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[ai.FinishReason]string{
		ai.FinishReasonStop:        "stop",
		ai.FinishReasonLength:      "length",
		ai.FinishReasonBlocked:     "blocked",
		ai.FinishReasonInterrupted: "interrupted",
		ai.FinishReasonOther:       "other",
		ai.FinishReasonAborted:     "other",
		ai.FinishReasonUnknown:     "unknown",
		"":                         "unknown",
		"somethingNew":             "unknown",
	} {
		if got := finishReason(in); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestToolDefinitions(t *testing.T) {
	tools := []protocol.ToolDefinition{
		{
			Name:         "transferMoney",
			Description:  "Moves money.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"}},"required":["amount","to"]}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`),
		},
		{Name: "now", Description: "Current time."},
	}
	got, err := toolsToGenkit(tools)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("tools = %#v", got)
	}
	if got[0].Name != "transferMoney" || got[0].Description != "Moves money." {
		t.Errorf("tool 0 = %#v", got[0])
	}
	if got[0].InputSchema["type"] != "object" || got[0].OutputSchema["type"] != "object" {
		t.Errorf("schemas = %#v %#v", got[0].InputSchema, got[0].OutputSchema)
	}
	props, _ := got[0].InputSchema["properties"].(map[string]any)
	if _, ok := props["amount"]; !ok {
		t.Errorf("properties = %#v", props)
	}
	if got[1].InputSchema != nil || got[1].OutputSchema != nil {
		t.Errorf("tool 1 schemas = %#v %#v", got[1].InputSchema, got[1].OutputSchema)
	}
	if _, err := toolsToGenkit([]protocol.ToolDefinition{{Name: "bad", InputSchema: json.RawMessage(`[1]`)}}); err == nil {
		t.Error("array schema accepted")
	}
	if tools, err := toolsToGenkit(nil); err != nil || tools != nil {
		t.Errorf("no tools = %#v, %v", tools, err)
	}
}

func TestRequestAndConfig(t *testing.T) {
	m := &Model{provider: ProviderAnthropic, maxTokensKey: "max_tokens"}
	req, err := m.request(&protocol.ModelRequest{
		Messages: []protocol.Message{{Role: "user", Content: []protocol.Part{protocol.TextPart("hi")}}},
		Tools:    []protocol.ToolDefinition{{Name: "t"}},
		Config:   json.RawMessage(`{"temperature":0.5,"maxOutputTokens":100,"topK":3,"stopSequences":["x"],"top_p":0.9,"topP":0.1}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if req.ToolChoice != ai.ToolChoiceAuto {
		t.Errorf("tool choice = %q", req.ToolChoice)
	}
	cfg := req.Config.(map[string]any)
	want := map[string]any{
		"temperature":    json.Number("0.5"),
		"max_tokens":     json.Number("100"),
		"top_k":          json.Number("3"),
		"stop_sequences": []any{"x"},
		"top_p":          json.Number("0.9"), // an explicit provider key wins
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %#v, want %#v", cfg, want)
	}

	g := &Model{provider: ProviderGoogleAI}
	req, err = g.request(&protocol.ModelRequest{Config: json.RawMessage(`{"maxOutputTokens":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if req.ToolChoice != "" {
		t.Errorf("tool choice without tools = %q", req.ToolChoice)
	}
	if cfg := req.Config.(map[string]any); cfg["maxOutputTokens"] != json.Number("7") {
		t.Errorf("google config = %#v", cfg)
	}
	for _, raw := range []string{"", "null", "  "} {
		if req, err := g.request(&protocol.ModelRequest{Config: json.RawMessage(raw)}); err != nil || req.Config != nil {
			t.Errorf("config %q: %#v, %v", raw, req, err)
		}
	}
	if _, err := g.request(&protocol.ModelRequest{Config: json.RawMessage(`[1]`)}); err == nil {
		t.Error("array config accepted")
	}
}

// clearEnv unsets (sets empty, which FromEnv treats as unset) every variable
// FromEnv or the plugins read.
func clearEnv(t *testing.T) {
	for _, k := range []string{
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
		"ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID",
		"OPENAI_PROJECT_ID", "HOLDPOINT_PROVIDER", "HOLDPOINT_MODEL", "GENKIT_ENV",
	} {
		t.Setenv(k, "")
	}
}

func TestFromEnvNone(t *testing.T) {
	clearEnv(t)
	m, err := fromEnv(t)
	if err != nil || m != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil", m, err)
	}
}

func TestSelectProvider(t *testing.T) {
	cases := []struct {
		env     map[string]string
		want    string
		wantErr bool
	}{
		{map[string]string{}, "", false},
		{map[string]string{"GOOGLE_API_KEY": "k"}, ProviderGoogleAI, false},
		{map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, ProviderAnthropic, false},
		{map[string]string{"GEMINI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, ProviderGoogleAI, false},
		{map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, ProviderOpenAI, false},
		{map[string]string{"GEMINI_API_KEY": "k", "OPENAI_API_KEY": "k", "HOLDPOINT_PROVIDER": "openai"}, ProviderOpenAI, false},
		{map[string]string{"GEMINI_API_KEY": "k", "HOLDPOINT_PROVIDER": "anthropic"}, "", true},
		{map[string]string{"GEMINI_API_KEY": "k", "HOLDPOINT_PROVIDER": "bogus"}, "", true},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := selectProvider()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("selectProvider = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// fakeOpenAI imitates the OpenAI chat-completions endpoint: a user message
// mentioning "transfer" (with tools offered) is answered with a tool call,
// anything else with text; "stream": true gets server-sent events.
type fakeOpenAI struct {
	mu       sync.Mutex
	requests []map[string]any
	auth     []string
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()

	msgs, _ := req["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	lastText := fmt.Sprint(last["content"])
	_, hasTools := req["tools"]
	wantTool := hasTools && last["role"] == "user" && strings.Contains(lastText, "transfer")
	model, _ := req["model"].(string)

	if stream, _ := req["stream"].(bool); stream {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		send := func(delta map[string]any, finish any) {
			chunk := map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
			}
			b, _ := json.Marshal(chunk)
			fmt.Fprintf(bw, "data: %s\n\n", b)
			bw.Flush()
			w.(http.Flusher).Flush()
		}
		if wantTool {
			send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
				"index": 0, "id": "call_7", "type": "function",
				"function": map[string]any{"name": "transferMoney", "arguments": ""},
			}}}, nil)
			send(map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": `{"amount":100,`},
			}}}, nil)
			send(map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": `"to":"bob"}`},
			}}}, nil)
			send(map[string]any{}, "tool_calls")
		} else {
			send(map[string]any{"role": "assistant", "content": "Hel"}, nil)
			send(map[string]any{"content": "lo!"}, nil)
			send(map[string]any{}, "stop")
		}
		fmt.Fprint(bw, "data: [DONE]\n\n")
		bw.Flush()
		return
	}

	message := map[string]any{"role": "assistant", "content": "Hi there."}
	finish := "stop"
	if wantTool {
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "transferMoney", "arguments": `{"amount":100,"to":"bob"}`},
		}}}
		finish = "tool_calls"
	} else if last["role"] == "tool" {
		message = map[string]any{"role": "assistant", "content": "Transfer done: " + lastText}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
	})
}

func (f *fakeOpenAI) request(i int) (map[string]any, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i], f.auth[i]
}

// TestOpenAICompatibleEndToEnd drives the adapter through the real
// OpenAI-compatible plugin against a loopback imitation of the API.
func TestOpenAICompatibleEndToEnd(t *testing.T) {
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	clearEnv(t)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "test-key")
	t.Setenv("HOLDPOINT_MODEL", "llama3.2")

	ctx := context.Background()
	model, err := fromEnv(t)
	if err != nil {
		t.Fatal(err)
	}
	if model == nil {
		t.Fatal("no model")
	}
	if model.Name() != "openai/llama3.2" {
		t.Errorf("name = %q", model.Name())
	}

	tools := []protocol.ToolDefinition{{
		Name:        "transferMoney",
		Description: "Moves money between accounts.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"}},"required":["amount","to"]}`),
	}}
	system := protocol.Message{Role: "system", Content: []protocol.Part{protocol.TextPart("You are a bank.")}}
	user := func(s string) protocol.Message {
		return protocol.Message{Role: "user", Content: []protocol.Part{protocol.TextPart(s)}}
	}

	t.Run("text, non-streaming", func(t *testing.T) {
		resp, err := model.Generate(ctx, &protocol.ModelRequest{
			Messages: []protocol.Message{system, user("hello")},
			Config:   json.RawMessage(`{"temperature":0.2,"maxOutputTokens":50}`),
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Role != "model" || resp.Message.Text() != "Hi there." || resp.FinishReason != "stop" {
			t.Errorf("response = %+v", resp)
		}
		req, auth := fake.request(0)
		if req["model"] != "llama3.2" || req["temperature"] != 0.2 || req["max_tokens"] != 50.0 {
			t.Errorf("request = %v", req)
		}
		if _, ok := req["tool_choice"]; ok {
			t.Errorf("tool_choice sent without tools: %v", req)
		}
		if auth != "Bearer test-key" {
			t.Errorf("authorization = %q", auth)
		}
		msgs := req["messages"].([]any)
		if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["role"] != "user" {
			t.Errorf("messages = %v", msgs)
		}
	})

	var toolReq *protocol.ToolRequest
	t.Run("tool request, non-streaming", func(t *testing.T) {
		resp, err := model.Generate(ctx, &protocol.ModelRequest{
			Messages: []protocol.Message{system, user("please transfer 100 to bob")},
			Tools:    tools,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, p := range resp.Message.Content {
			if p.ToolRequest != nil {
				n++
				toolReq = p.ToolRequest
			}
		}
		if n != 1 || toolReq.Name != "transferMoney" || toolReq.Ref != "call_1" ||
			!jsonEqual(t, toolReq.Input, []byte(`{"amount":100,"to":"bob"}`)) {
			t.Fatalf("message = %+v", resp.Message)
		}
		if resp.FinishReason != "stop" {
			t.Errorf("finish reason = %q", resp.FinishReason)
		}
		req, _ := fake.request(1)
		if req["tool_choice"] != "auto" {
			t.Errorf("tool_choice = %v", req["tool_choice"])
		}
		sent := req["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
		if sent["name"] != "transferMoney" || sent["description"] != "Moves money between accounts." {
			t.Errorf("tool = %v", sent)
		}
		if params, _ := sent["parameters"].(map[string]any); params["type"] != "object" {
			t.Errorf("parameters = %v", sent["parameters"])
		}
	})

	t.Run("tool response goes back", func(t *testing.T) {
		if toolReq == nil {
			t.Skip("no tool request")
		}
		resp, err := model.Generate(ctx, &protocol.ModelRequest{
			Messages: []protocol.Message{
				system, user("please transfer 100 to bob"),
				{Role: "model", Content: []protocol.Part{{ToolRequest: toolReq}}},
				{Role: "tool", Content: []protocol.Part{{ToolResponse: &protocol.ToolResponse{
					Name: toolReq.Name, Ref: toolReq.Ref, Output: json.RawMessage(`{"status":"ok"}`),
				}}}},
			},
			Tools: tools,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Message.Text(); got != `Transfer done: {"status":"ok"}` {
			t.Errorf("text = %q", got)
		}
		req, _ := fake.request(2)
		msgs := req["messages"].([]any)
		asst := msgs[2].(map[string]any)
		call := asst["tool_calls"].([]any)[0].(map[string]any)
		if asst["role"] != "assistant" || call["id"] != "call_1" {
			t.Errorf("assistant message = %v", asst)
		}
		tool := msgs[3].(map[string]any)
		if tool["role"] != "tool" || tool["tool_call_id"] != "call_1" {
			t.Errorf("tool message = %v", tool)
		}
	})

	t.Run("text, streaming", func(t *testing.T) {
		var chunks []protocol.ModelChunk
		resp, err := model.Generate(ctx, &protocol.ModelRequest{
			Messages: []protocol.Message{system, user("hello")},
		}, func(c protocol.ModelChunk) { chunks = append(chunks, c) })
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Text() != "Hello!" || resp.FinishReason != "stop" {
			t.Errorf("response = %+v", resp)
		}
		var streamed string
		for _, c := range chunks {
			if c.Role != "model" || c.Index == nil || *c.Index != 0 {
				t.Errorf("chunk = %+v", c)
			}
			for _, p := range c.Content {
				if p.Text != nil {
					streamed += *p.Text
				}
			}
		}
		if len(chunks) != 2 || streamed != "Hello!" {
			t.Errorf("chunks = %d, streamed %q", len(chunks), streamed)
		}
		req, _ := fake.request(3)
		if req["stream"] != true {
			t.Errorf("stream = %v", req["stream"])
		}
	})

	t.Run("tool request, streaming", func(t *testing.T) {
		var chunks []protocol.ModelChunk
		resp, err := model.Generate(ctx, &protocol.ModelRequest{
			Messages: []protocol.Message{system, user("transfer 100 to bob")},
			Tools:    tools,
		}, func(c protocol.ModelChunk) { chunks = append(chunks, c) })
		if err != nil {
			t.Fatal(err)
		}
		var tr *protocol.ToolRequest
		for _, p := range resp.Message.Content {
			if p.ToolRequest != nil {
				tr = p.ToolRequest
			}
		}
		if tr == nil || tr.Name != "transferMoney" || tr.Ref != "call_7" ||
			!jsonEqual(t, tr.Input, []byte(`{"amount":100,"to":"bob"}`)) {
			t.Fatalf("message = %+v", resp.Message)
		}
		if len(chunks) == 0 {
			t.Fatal("no chunks streamed")
		}
		for _, c := range chunks {
			if c.Role != "model" || c.Index == nil || len(c.Content) == 0 || c.Content[0].ToolRequest == nil {
				t.Errorf("chunk = %+v", c)
			}
		}
	})
}

// signalHelperEnv makes the test binary act as the child process of
// TestSignalHandling: "fromenv" calls FromEnv, "init" only genkit.Init; then
// it sends itself SIGTERM and reports whether it survived.
const signalHelperEnv = "GENKITMODEL_SIGNAL_HELPER"

func TestSignalHelper(t *testing.T) {
	mode := os.Getenv(signalHelperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	switch mode {
	case "fromenv":
		if _, err := FromEnv(context.Background(), nil); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
	case "init":
		genkit.Init(context.Background(), genkit.WithPromptDir("."))
	}
	if err := raise(syscall.SIGTERM); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("survived")
	os.Exit(0)
}

// TestSignalHandling shows that genkit.Init alone swallows SIGTERM (the
// sharp edge) and that after FromEnv the signal kills the process again, as
// Go's default handling does.
func TestSignalHandling(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the helper raises the signal with tgkill, which is Linux only")
	}
	run := func(mode string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			signalHelperEnv+"="+mode,
			"OPENAI_BASE_URL=http://127.0.0.1:9/v1", // never contacted
			"HOLDPOINT_PROVIDER=openai", "GENKIT_ENV=",
		)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("init")
	if err != nil || !strings.Contains(out, "survived") {
		t.Logf("genkit.Init alone no longer traps SIGTERM (err %v): %s", err, out)
	}

	out, err = run("fromenv")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("after FromEnv the process survived SIGTERM: %v\n%s", err, out)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want killed by SIGTERM\n%s", err, out)
	}
}

// TestFromEnvProviders builds each provider's model from fake credentials;
// nothing is contacted.
func TestFromEnvProviders(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GEMINI_API_KEY": "fake"}, DefaultGoogleAIModel},
		{map[string]string{"GOOGLE_API_KEY": "fake", "HOLDPOINT_MODEL": "gemini-2.5-pro"}, "googleai/gemini-2.5-pro"},
		{map[string]string{"ANTHROPIC_API_KEY": "fake"}, DefaultAnthropicModel},
		{map[string]string{"OPENAI_API_KEY": "fake"}, DefaultOpenAIModel},
		{map[string]string{"OPENAI_API_KEY": "fake", "HOLDPOINT_MODEL": "openai/gpt-4.1"}, "openai/gpt-4.1"},
		{map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "HOLDPOINT_MODEL": "qwen/qwen3-8b"}, "openai/qwen/qwen3-8b"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			m, err := fromEnv(t)
			if err != nil {
				t.Fatal(err)
			}
			if m == nil || m.Name() != tc.want {
				t.Fatalf("model = %v, want %s", m, tc.want)
			}
		})
	}
}

// TestOpenAIConcurrentCallsDoNotRace: an OPENAI_BASE_URL without a trailing
// slash made openai-go write its parsed base URL on every request; calls
// at once raced (under -race, this test fails without raceFreeBaseURL).
func TestOpenAIConcurrentCallsDoNotRace(t *testing.T) {
	srv := httptest.NewServer(&fakeOpenAI{})
	defer srv.Close()
	clearEnv(t)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "test-key")
	t.Setenv("HOLDPOINT_MODEL", "llama3.2")
	model, err := fromEnv(t)
	if err != nil || model == nil {
		t.Fatalf("model: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := model.Generate(context.Background(), &protocol.ModelRequest{Messages: []protocol.Message{
				{Role: "user", Content: []protocol.Part{protocol.TextPart("hello")}}}}, nil)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := os.Getenv("OPENAI_BASE_URL"); got != srv.URL+"/v1/" {
		t.Errorf("OPENAI_BASE_URL = %q; want its path to end in /", got)
	}
}
