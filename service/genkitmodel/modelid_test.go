package genkitmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestModelIDsAreChecked refuses model ids that climb out of a provider's
// namespace or hold what no model id holds, and keeps the ids providers
// use.
func TestModelIDsAreChecked(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test")
	t.Setenv("GEMINI_API_KEY", "test")
	for _, bad := range []string{"openai/../../x", "openai/a/../b", "ollama/..", "googleai/a/b", "anthropic/x/y",
		"openai/a\x00b", "openai/a\nb", "openai/ gpt", "openai//x", "openai/x/", "ollama/a/b/c/d", "openai/" + strings.Repeat("a", 201)} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) = nil, want a refusal", bad)
		}
	}
	for _, good := range []string{"openai/gpt-4o", "googleai/gemini-2.5-flash", "ollama/llama3.2:3b",
		"ollama/hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "openai/meta-llama/Llama-3.1-8B-Instruct"} {
		if err := Check(good); err != nil {
			t.Errorf("Check(%q) = %v", good, err)
		}
	}
}

// TestConfigNamesNoModel refuses a configuration that would replace the
// model in the provider's request.
func TestConfigNamesNoModel(t *testing.T) {
	m := &Model{name: "openai/gpt-4o", provider: ProviderOpenAI}
	for _, cfg := range []string{`{"model":"gpt-5"}`, `{"Model":"gpt-5","temperature":1}`} {
		if _, err := m.config(json.RawMessage(cfg)); err == nil || !strings.Contains(err.Error(), "openai/gpt-4o") {
			t.Errorf("config %s: %v", cfg, err)
		}
	}
	if c, err := m.config(json.RawMessage(`{"temperature":0.5}`)); err != nil || c["temperature"] == nil {
		t.Errorf("a plain config: %v %v", c, err)
	}
}
