package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
)

type question struct {
	Question string `json:"question"`
}

type answer struct {
	Text string `json:"text"`
}

// TestPlatformRefusesBadDefinitionsAtStartup checks that an agent whose
// model cannot be had, or whose definition is wrong, stops serve before it
// touches the database, with a message naming the agent (and the missing
// variable or the tool).
func TestPlatformRefusesBadDefinitionsAtStartup(t *testing.T) {
	for _, v := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HOLDPOINT_PROVIDER"} {
		t.Setenv(v, "")
	}
	// Nothing listens here: reaching the database would be a failure of
	// its own, with another message.
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	ask := agentkit.Interrupt[question, answer]{Name: "ask"}
	for _, tc := range []struct {
		p    Platform
		want []string
	}{
		{Platform{Agents: []agentkit.Definition{agentkit.Agent{Name: "gem", Model: "googleai/gemini-2.5-flash"}}},
			[]string{"agent gem", "GEMINI_API_KEY"}},
		{Platform{Agents: []agentkit.Definition{agentkit.Agent{Name: "claude", Model: "anthropic/claude-sonnet-4-6"}}},
			[]string{"agent claude", "ANTHROPIC_API_KEY"}},
		{Platform{Agents: []agentkit.Definition{agentkit.Agent{Name: "odd", Model: "mystery"}}},
			[]string{"agent odd", `"mystery"`}},
		{Platform{Agents: []agentkit.Definition{agentkit.Agent{Name: "twice", Tools: []agentkit.ToolDef{ask, ask}}}},
			[]string{"agent twice", "two tools named ask"}},
		{Platform{Agents: []agentkit.Definition{agentkit.Agent{Name: "bad name!"}}},
			[]string{"agent bad name!"}},
		{Platform{Demo: true, Agents: []agentkit.Definition{agentkit.Agent{Name: "bankingAgent"}}},
			[]string{"bankingAgent"}},
	} {
		var stderr bytes.Buffer
		code := serveCommand(tc.p, []string{"--dev", "--addr", "127.0.0.1:0", "--migrate=false"}, &stderr)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1: %s", tc.want, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%q lacks %q", stderr.String(), w)
			}
		}
		if strings.Contains(stderr.String(), "127.0.0.1:1") {
			t.Errorf("%v: serve went on to the database: %s", tc.want, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := serveCommand(Platform{}, []string{"--demo"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "no demo agents") {
		t.Errorf("--demo without demo agents: %d %q", code, stderr.String())
	}
}

// TestPlatformResolvesModelsByName checks the model names an agent may use
// without a provider: "demo", "" (the default) and the program's own.
func TestPlatformResolvesModelsByName(t *testing.T) {
	t.Parallel()
	mine := &namedModel{name: "mine"}
	fallback := &namedModel{name: "fallback"}
	p := Platform{
		Models: map[string]service.Model{"scripted": mine},
		Agents: []agentkit.Definition{
			agentkit.Agent{Name: "a", Model: "scripted"},
			agentkit.Agent{Name: "b", Model: "demo"},
			agentkit.Agent{Name: "c"},
			agentkit.CustomAgent{Name: "d", Turn: func(context.Context, *service.Turn) (string, error) { return "", nil }},
		},
	}
	agents, err := p.agents(context.Background(), nil, fallback, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range agents {
		if a.Model != nil {
			got[a.Name] = a.Model.Name()
		} else {
			got[a.Name] = "-"
		}
	}
	if got["a"] != "mine" || got["b"] != "demo" || got["c"] != "fallback" || got["d"] != "-" {
		t.Fatalf("models %v", got)
	}
}

type namedModel struct{ name string }

func (m *namedModel) Name() string { return m.name }

func (m *namedModel) Generate(context.Context, *service.ModelRequest, func(service.ModelChunk)) (*service.ModelResponse, error) {
	return &service.ModelResponse{Message: service.Message{Role: service.RoleModel}}, nil
}

// TestPlatformServesSeveralProviders checks that agents naming models of
// different providers get each their own model in one process (no
// provider is called: the servers named here are never reached).
func TestPlatformServesSeveralProviders(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("OLLAMA_HOST", "http://127.0.0.1:9")
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	p := Platform{Agents: []agentkit.Definition{
		agentkit.Agent{Name: "a", Model: "openai/gpt-test"},
		agentkit.Agent{Name: "b", Model: "ollama/llama-test"},
		agentkit.Agent{Name: "c", Model: "anthropic/claude-sonnet-4-6"},
		agentkit.Agent{Name: "d", Model: "openai/gpt-test"},
	}}
	agents, err := p.agents(t.Context(), nil, &namedModel{name: "fallback"}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range agents {
		got[a.Name] = a.Model.Name()
	}
	if got["a"] != "openai/gpt-test" || got["b"] != "ollama/llama-test" || got["c"] != "anthropic/claude-sonnet-4-6" || got["d"] != "openai/gpt-test" {
		t.Fatalf("models %v", got)
	}
}
