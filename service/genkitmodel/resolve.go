package genkitmodel

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// ProviderOllama is a local Ollama server, reached through Genkit's
// OpenAI-compatible adapter at OLLAMA_HOST (default http://127.0.0.1:11434).
// It needs no credentials and is accepted only by Resolve, not by FromEnv.
const ProviderOllama = "ollama"

// defaultOllamaHost is where Ollama listens unless OLLAMA_HOST says otherwise.
const defaultOllamaHost = "http://127.0.0.1:11434"

// resolveProviders are the providers Resolve accepts, in the order its
// errors list them and its plugins are built.
var resolveProviders = []string{ProviderGoogleAI, ProviderAnthropic, ProviderOpenAI, ProviderOllama}

// Resolve returns a model for each name, initializing Genkit once with the
// plugins those names need (and only those). names are "provider/model-id",
// with provider googleai, anthropic, openai or ollama; the id is everything
// after the first slash, so "openai/qwen/qwen3-8b" is the model
// "qwen/qwen3-8b" of an OpenAI-compatible server. The map is keyed by name;
// duplicate names share one model.
//
// Every name is checked before anything is initialized: a malformed name or
// a provider whose environment is missing fails the call, and the error names
// the first such model in the order given. The environment is read as by
// FromEnv: googleai needs GEMINI_API_KEY or GOOGLE_API_KEY, anthropic needs
// ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional), openai needs
// OPENAI_API_KEY or OPENAI_BASE_URL, and ollama needs nothing (OLLAMA_HOST
// optional). An empty names returns an empty map without initializing
// Genkit.
//
// Resolve calls genkit.Init, so what FromEnv says about signals applies: it
// resets SIGINT and SIGTERM handling, and the server must call it before it
// installs its own shutdown handling. Each call initializes a new Genkit
// instance; call it once with every model the server needs.
func Resolve(ctx context.Context, logger *slog.Logger, names []string) (map[string]protocol.Model, error) {
	if logger == nil {
		logger = slog.Default()
	}
	models := make(map[string]protocol.Model)
	if len(names) == 0 {
		return models, nil
	}

	distinct, needed, err := distinctModels(names)
	if err != nil {
		return nil, err
	}
	plugins, ollama, maxTokensKeys := providerPlugins(needed)
	g, err := initGenkit(ctx, genkit.WithPlugins(plugins...))
	if err != nil {
		all := make([]string, len(distinct))
		for i, m := range distinct {
			all[i] = m.name
		}
		return nil, fmt.Errorf("genkit models %s: %w", strings.Join(all, ", "), err)
	}
	for _, m := range distinct {
		model := genkit.LookupModel(g, m.name)
		if model == nil && m.provider == ProviderOllama {
			model, err = defineOllamaModel(g, ollama, m.id)
			if err != nil {
				return nil, fmt.Errorf("genkit model %s: %w", m.name, err)
			}
		}
		if model == nil {
			return nil, fmt.Errorf("genkit model %s: not found in plugin %s", m.name, m.provider)
		}
		logger.Info("model resolved", "provider", m.provider, "model", m.name)
		models[m.name] = &Model{name: m.name, provider: m.provider, model: model, maxTokensKey: maxTokensKeys[m.provider]}
	}
	return models, nil
}

// modelName is one model a program names, split into its parts.
type modelName struct{ name, provider, id string }

// distinctModels parses the names (once each) and checks each provider's
// environment; needed holds the providers they use.
func distinctModels(names []string) (distinct []modelName, needed map[string]bool, err error) {
	seen := make(map[string]bool)
	needed = make(map[string]bool)
	for _, name := range names {
		if seen[name] {
			continue
		}
		provider, id, err := parseModelName(name)
		if err != nil {
			return nil, nil, err
		}
		if err := checkProviderEnv(name, provider); err != nil {
			return nil, nil, err
		}
		seen[name] = true
		needed[provider] = true
		distinct = append(distinct, modelName{name, provider, id})
	}
	return distinct, needed, nil
}

// providerPlugins builds the Genkit plugin of each needed provider, in
// resolveProviders' order, with the request key each uses for max tokens.
func providerPlugins(needed map[string]bool) (plugins []api.Plugin, ollama *compat_oai.OpenAICompatible, maxTokensKeys map[string]string) {
	maxTokensKeys = make(map[string]string)
	for _, provider := range resolveProviders {
		if !needed[provider] {
			continue
		}
		if provider == ProviderOllama {
			ollama = newOllamaPlugin()
			plugins = append(plugins, ollama)
			maxTokensKeys[provider] = "max_tokens"
			continue
		}
		p, key := newPlugin(provider)
		plugins = append(plugins, p)
		maxTokensKeys[provider] = key
	}
	return plugins, ollama, maxTokensKeys
}

// parseModelName splits "provider/model-id" and checks the provider is one
// Resolve accepts and the id is one of its model ids (see checkModelID).
func parseModelName(name string) (provider, id string, err error) {
	provider, id, ok := strings.Cut(name, "/")
	if !ok || id == "" || !slices.Contains(resolveProviders, provider) {
		return "", "", fmt.Errorf("model %q: want \"provider/model-id\" with provider %s", name, strings.Join(resolveProviders, ", "))
	}
	if msg := checkModelID(provider, id); msg != "" {
		return "", "", fmt.Errorf("model %q: %s", name, msg)
	}
	return provider, id, nil
}

// modelIDPartRE is one /-separated part of a model id.
var modelIDPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+-]*$`)

// checkModelID says what is wrong with a provider's model id ("" when
// nothing): parts of letters, digits and . _ : @ + -, each beginning with
// a letter or digit, no "..", 200 bytes at most; one part for Google AI
// and Anthropic, up to three for OpenAI-compatible servers and Ollama
// (meta-llama/Llama-3-8B, hf.co/user/model:tag).
func checkModelID(provider, id string) string {
	parts := 1
	if provider == ProviderOpenAI || provider == ProviderOllama {
		parts = 3
	}
	switch {
	case len(id) > 200:
		return "the model id is longer than 200 bytes"
	case strings.Contains(id, ".."):
		return `the model id contains ".."`
	case strings.Count(id, "/") >= parts:
		return fmt.Sprintf("a %s model id has at most %d parts separated by /", provider, parts)
	}
	for _, p := range strings.Split(id, "/") {
		if !modelIDPartRE.MatchString(p) {
			return "a model id is letters, digits and . _ : @ + -, each part separated by / beginning with a letter or digit"
		}
	}
	return ""
}

// checkProviderEnv reports the environment variables the provider of the
// named model needs when none of them is set.
func checkProviderEnv(name, provider string) error {
	var need string
	switch provider {
	case ProviderGoogleAI:
		if firstEnv("GEMINI_API_KEY", "GOOGLE_API_KEY") == "" {
			need = "GEMINI_API_KEY or GOOGLE_API_KEY"
		}
	case ProviderAnthropic:
		if os.Getenv("ANTHROPIC_API_KEY") == "" {
			need = "ANTHROPIC_API_KEY"
		}
	case ProviderOpenAI:
		if firstEnv("OPENAI_API_KEY", "OPENAI_BASE_URL") == "" {
			need = "OPENAI_API_KEY or OPENAI_BASE_URL"
		}
	}
	if need != "" {
		return fmt.Errorf("model %q needs %s in the environment", name, need)
	}
	return nil
}

// newOllamaPlugin builds the OpenAI-compatible plugin for the Ollama server
// at OLLAMA_HOST. Ollama ignores the API key, which the client insists on.
func newOllamaPlugin() *compat_oai.OpenAICompatible {
	return &compat_oai.OpenAICompatible{
		Provider: ProviderOllama,
		BaseURL:  ollamaBaseURL(os.Getenv("OLLAMA_HOST")),
		APIKey:   placeholderAPIKey,
	}
}

// ollamaBaseURL turns an OLLAMA_HOST value into the base URL of Ollama's
// OpenAI-compatible API. Empty means http://127.0.0.1:11434. As Ollama reads
// the variable, a value without a scheme is http and one without a port
// then gets 11434 ("0.0.0.0" is http://0.0.0.0:11434). "/v1" is appended
// unless the URL already ends in it.
func ollamaBaseURL(host string) string {
	u := strings.TrimSpace(host)
	if u == "" {
		u = defaultOllamaHost
	}
	if !strings.Contains(u, "://") {
		hostport, path, _ := strings.Cut(u, "/")
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			hostport = net.JoinHostPort(strings.Trim(hostport, "[]"), "11434")
		}
		u = "http://" + hostport
		if path != "" {
			u += "/" + path
		}
	}
	u = strings.TrimRight(u, "/")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u
}

// defineOllamaModel registers the Ollama model id with g through the
// plugin's NewModel, for when genkit.LookupModel does not resolve it through
// the plugin's ResolveAction (it does in Genkit v1.12.0; this keeps Resolve
// working should a release stop doing so).
func defineOllamaModel(g *genkit.Genkit, p *compat_oai.OpenAICompatible, id string) (m ai.Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("define model: %v", r)
		}
	}()
	genkit.RegisterAction(g, p.NewModel(id, compat_oai.DefaultModelOptions()))
	return genkit.LookupModel(g, api.NewName(ProviderOllama, id)), nil
}

// Check reports whether Resolve could build the named model: a well-formed
// "provider/id" whose provider's variables are in the environment. It
// initializes nothing, so it is cheap enough to run on every definition a
// tenant uploads.
func Check(name string) error {
	provider, _, err := parseModelName(name)
	if err != nil {
		return err
	}
	return checkProviderEnv(name, provider)
}

// OllamaBaseURL is the base URL of the OpenAI-compatible API of the Ollama
// server OLLAMA_HOST names (http://127.0.0.1:11434/v1 when it is unset),
// for a check that it answers.
func OllamaBaseURL() string {
	return ollamaBaseURL(os.Getenv("OLLAMA_HOST"))
}
