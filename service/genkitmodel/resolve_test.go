package genkitmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firebase/genkit/go/core/logger"
	"github.com/firebase/genkit/go/genkit"

	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// resolve is Resolve as a test calls it (see fromEnv).
func resolve(t *testing.T, names ...string) (map[string]protocol.Model, error) {
	log := testlog.Logger(t)
	return Resolve(logger.WithContext(t.Context(), log), log, names)
}

// clearResolveEnv is clearEnv plus the variables only Resolve reads.
func clearResolveEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("OLLAMA_HOST", "")
}

// count returns how many requests the fake has served.
func (f *fakeOpenAI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// TestResolveTwoProviders resolves an OpenAI-compatible and an Ollama model
// in one call, each against its own loopback server, and checks every
// request reaches the server of its model.
func TestResolveTwoProviders(t *testing.T) {
	fakeOAI, fakeOllama := &fakeOpenAI{}, &fakeOpenAI{}
	srvOAI := httptest.NewServer(fakeOAI)
	defer srvOAI.Close()
	srvOllama := httptest.NewServer(fakeOllama)
	defer srvOllama.Close()

	clearResolveEnv(t)
	t.Setenv("OPENAI_BASE_URL", srvOAI.URL+"/v1")
	t.Setenv("OLLAMA_HOST", srvOllama.URL) // no /v1: Resolve appends it

	models, err := resolve(t, "openai/x", "ollama/y")
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 {
		t.Fatalf("models = %v", models)
	}
	ctx := context.Background()
	hello := &protocol.ModelRequest{
		Messages: []protocol.Message{{Role: "user", Content: []protocol.Part{protocol.TextPart("hello")}}},
		Config:   json.RawMessage(`{"maxOutputTokens":50}`),
	}

	cases := []struct {
		name, id string
		fake     *fakeOpenAI
	}{
		{"openai/x", "x", fakeOAI},
		{"ollama/y", "y", fakeOllama},
	}
	for _, tc := range cases {
		m := models[tc.name]
		if m == nil {
			t.Fatalf("no model %s in %v", tc.name, models)
		}
		if m.Name() != tc.name {
			t.Errorf("name = %q, want %q", m.Name(), tc.name)
		}
		before := fakeOAI.count() + fakeOllama.count()
		resp, err := m.Generate(ctx, hello, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := resp.Message.Text(); got != "Hi there." || resp.FinishReason != "stop" {
			t.Errorf("%s: response = %+v", tc.name, resp)
		}
		if fakeOAI.count()+fakeOllama.count() != before+1 {
			t.Fatalf("%s: %d requests, want 1", tc.name, fakeOAI.count()+fakeOllama.count()-before)
		}
		req, auth := tc.fake.request(tc.fake.count() - 1)
		if req["model"] != tc.id || req["max_tokens"] != 50.0 {
			t.Errorf("%s: request = %v", tc.name, req)
		}
		if auth != "Bearer unused" {
			t.Errorf("%s: authorization = %q", tc.name, auth)
		}
	}
	if fakeOAI.count() != 1 || fakeOllama.count() != 1 {
		t.Errorf("requests: openai server %d, ollama server %d; want 1 each", fakeOAI.count(), fakeOllama.count())
	}

	// Streaming goes through the same plugin.
	var streamed string
	resp, err := models["ollama/y"].Generate(ctx, hello, func(c protocol.ModelChunk) {
		for _, p := range c.Content {
			if p.Text != nil {
				streamed += *p.Text
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text() != "Hello!" || streamed != "Hello!" {
		t.Errorf("streamed %q, response %q", streamed, resp.Message.Text())
	}
	if req, _ := fakeOllama.request(1); req["model"] != "y" || req["stream"] != true || fakeOAI.count() != 1 {
		t.Errorf("streaming request = %v (openai server requests %d)", req, fakeOAI.count())
	}
}

// TestResolveAllProviders builds a model of every provider in one Genkit
// from fake credentials; nothing is contacted.
func TestResolveAllProviders(t *testing.T) {
	clearResolveEnv(t)
	t.Setenv("GOOGLE_API_KEY", "fake")
	t.Setenv("ANTHROPIC_API_KEY", "fake")
	t.Setenv("OPENAI_API_KEY", "fake")
	t.Setenv("OLLAMA_HOST", "http://127.0.0.1:9")

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	names := []string{
		"googleai/gemini-2.5-flash", "anthropic/claude-sonnet-4-6", "openai/gpt-4o-mini",
		"ollama/llama3.2", "openai/gpt-4o-mini", "openai/qwen/qwen3-8b",
	}
	models, err := Resolve(logger.WithContext(t.Context(), testlog.Logger(t)), log, names)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ provider, maxTokensKey string }{
		"googleai/gemini-2.5-flash":   {ProviderGoogleAI, ""},
		"anthropic/claude-sonnet-4-6": {ProviderAnthropic, "max_tokens"},
		"openai/gpt-4o-mini":          {ProviderOpenAI, "max_completion_tokens"},
		"openai/qwen/qwen3-8b":        {ProviderOpenAI, "max_completion_tokens"},
		"ollama/llama3.2":             {ProviderOllama, "max_tokens"},
	}
	if len(models) != len(want) {
		t.Errorf("got %d models, want %d: %v", len(models), len(want), models)
	}
	for name, w := range want {
		m, ok := models[name].(*Model)
		if !ok || m.Name() != name || m.provider != w.provider || m.maxTokensKey != w.maxTokensKey || m.model == nil {
			t.Errorf("model %s = %#v, want provider %s, max tokens key %q", name, models[name], w.provider, w.maxTokensKey)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"model resolved"`); n != len(want) {
		t.Errorf("%d \"model resolved\" lines, want %d:\n%s", n, len(want), logs.String())
	}
	if !strings.Contains(logs.String(), `"provider":"ollama","model":"ollama/llama3.2"`) {
		t.Errorf("no log line for the ollama model:\n%s", logs.String())
	}
}

func TestResolveMissingEnv(t *testing.T) {
	cases := []struct {
		names []string
		env   map[string]string
		want  string
	}{
		{[]string{"googleai/gemini-2.5-flash"}, nil,
			`model "googleai/gemini-2.5-flash" needs GEMINI_API_KEY or GOOGLE_API_KEY in the environment`},
		{[]string{"anthropic/claude-sonnet-4-6"}, nil,
			`model "anthropic/claude-sonnet-4-6" needs ANTHROPIC_API_KEY in the environment`},
		{[]string{"openai/gpt-4o"}, nil,
			`model "openai/gpt-4o" needs OPENAI_API_KEY or OPENAI_BASE_URL in the environment`},
		// The first failing name in the order given is reported, whatever
		// comes before or after it.
		{[]string{"ollama/y", "openai/gpt-4o", "googleai/gemini-2.5-flash"}, map[string]string{"GEMINI_API_KEY": "fake"},
			`model "openai/gpt-4o" needs OPENAI_API_KEY or OPENAI_BASE_URL in the environment`},
		{[]string{"anthropic/a", "googleai/g"}, nil,
			`model "anthropic/a" needs ANTHROPIC_API_KEY in the environment`},
		// Bad names are checked in the same pass.
		{[]string{"googleai/g", "foo/bar"}, nil,
			`model "googleai/g" needs GEMINI_API_KEY or GOOGLE_API_KEY in the environment`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.names, ","), func(t *testing.T) {
			clearResolveEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			models, err := resolve(t, tc.names...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Resolve = %v, %v; want error %q", models, err, tc.want)
			}
			if models != nil {
				t.Errorf("models = %v with error", models)
			}
		})
	}
}

func TestResolveBadNames(t *testing.T) {
	clearResolveEnv(t)
	t.Setenv("OPENAI_API_KEY", "fake")
	for _, name := range []string{"", "gpt-4o", "foo/bar", "openai/", "/gpt-4o", "OpenAI/gpt-4o"} {
		models, err := resolve(t, "ollama/ok", name)
		if err == nil {
			t.Errorf("%q: no error (models %v)", name, models)
			continue
		}
		msg := err.Error()
		quoted, _ := json.Marshal(name)
		if !strings.Contains(msg, "model "+string(quoted)) {
			t.Errorf("%q: error %q does not name the model", name, msg)
		}
		for _, p := range []string{"googleai", "anthropic", "openai", "ollama"} {
			if !strings.Contains(msg, p) {
				t.Errorf("%q: error %q does not list provider %s", name, msg, p)
			}
		}
	}
}

func TestResolveEmpty(t *testing.T) {
	for _, names := range [][]string{nil, {}} {
		models, err := resolve(t, names...)
		if err != nil || models == nil || len(models) != 0 {
			t.Errorf("Resolve(%#v) = %#v, %v; want empty map, nil", names, models, err)
		}
	}
}

func TestOllamaBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "http://127.0.0.1:11434/v1",
		"http://127.0.0.1:11434":    "http://127.0.0.1:11434/v1",
		"http://127.0.0.1:11434/":   "http://127.0.0.1:11434/v1",
		"http://127.0.0.1:11434/v1": "http://127.0.0.1:11434/v1",
		"https://ollama.internal":   "https://ollama.internal/v1",
		"http://h:1/proxy/ollama":   "http://h:1/proxy/ollama/v1",
		"0.0.0.0":                   "http://0.0.0.0:11434/v1",
		"localhost:8080":            "http://localhost:8080/v1",
		"[::1]":                     "http://[::1]:11434/v1",
		" 127.0.0.1:9/v1 ":          "http://127.0.0.1:9/v1",
	} {
		if got := ollamaBaseURL(in); got != want {
			t.Errorf("ollamaBaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOllamaModelResolution checks that the compat plugin resolves a model
// it has never seen through ResolveAction (what Resolve relies on), and that
// the fallback that registers one through NewModel works too.
func TestOllamaModelResolution(t *testing.T) {
	clearResolveEnv(t)
	ctx := logger.WithContext(t.Context(), testlog.Logger(t))
	p := newOllamaPlugin()
	g, err := initGenkit(ctx, genkit.WithPlugins(p))
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseURL != "http://127.0.0.1:11434/v1" || p.APIKey != placeholderAPIKey || p.Name() != ProviderOllama {
		t.Errorf("plugin = %q %q %q", p.Name(), p.BaseURL, p.APIKey)
	}
	if m := genkit.LookupModel(g, "ollama/dynamic"); m == nil || m.Name() != "ollama/dynamic" {
		t.Errorf("LookupModel(ollama/dynamic) = %v", m)
	}
	m, err := defineOllamaModel(g, p, "defined")
	if err != nil || m == nil || m.Name() != "ollama/defined" {
		t.Errorf("defineOllamaModel = %v, %v", m, err)
	}
	// Registering a name twice panics in Genkit; the fallback reports it.
	if _, err := defineOllamaModel(g, p, "defined"); err == nil {
		t.Error("second registration: no error")
	}
}
