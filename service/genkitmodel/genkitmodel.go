package genkitmodel

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/anthropic"
	"github.com/firebase/genkit/go/plugins/compat_oai/openai"
	"github.com/firebase/genkit/go/plugins/googlegenai"
	"github.com/openai/openai-go/option"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// Provider names accepted in HOLDPOINT_PROVIDER; they are also the Genkit
// plugin names that prefix model names.
const (
	// ProviderGoogleAI is the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY).
	ProviderGoogleAI = "googleai"
	// ProviderAnthropic is the Anthropic API (ANTHROPIC_API_KEY).
	ProviderAnthropic = "anthropic"
	// ProviderOpenAI is OpenAI or an OpenAI-compatible server.
	ProviderOpenAI = "openai"
)

// Default models per provider, used when HOLDPOINT_MODEL is not set.
const (
	// DefaultGoogleAIModel is the Google AI default.
	DefaultGoogleAIModel = "googleai/gemini-2.5-flash"
	// DefaultAnthropicModel is the Anthropic default.
	DefaultAnthropicModel = "anthropic/claude-sonnet-4-6"
	// DefaultOpenAIModel is the OpenAI default; an OpenAI-compatible server
	// usually needs HOLDPOINT_MODEL instead.
	DefaultOpenAIModel = "openai/gpt-4o-mini"
)

// placeholderAPIKey is sent to an OpenAI-compatible server configured by
// OPENAI_BASE_URL alone: the plugin insists on a key, local servers such as
// Ollama, vLLM or LM Studio ignore it.
const placeholderAPIKey = "unused"

// Model is a protocol.Model over one Genkit model action.
type Model struct {
	name     string
	provider string
	model    ai.Model
	// maxTokensKey is the provider's config key for Genkit's common
	// maxOutputTokens.
	maxTokensKey string
}

var _ protocol.Model = (*Model)(nil)

// Name returns the Genkit model name, e.g. "googleai/gemini-2.5-flash".
func (m *Model) Name() string { return m.name }

// Generate calls the model once. Tools are offered with tool choice "auto":
// the model may answer with tool requests, which are returned, never run.
// Streamed pieces go to onChunk as model chunks; a nil onChunk asks the
// plugin for a non-streaming call.
func (m *Model) Generate(ctx context.Context, req *protocol.ModelRequest, onChunk func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	greq, err := m.request(req)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.name, err)
	}
	var cb ai.ModelStreamCallback
	if onChunk != nil {
		cb = func(_ context.Context, c *ai.ModelResponseChunk) error {
			if c == nil {
				return nil
			}
			parts, err := partsFromGenkit(c.Content)
			if err != nil {
				return fmt.Errorf("stream chunk: %w", err)
			}
			if len(parts) == 0 {
				return nil
			}
			// A raw model call produces one message, so Genkit's index is
			// that message's (0); the runtime may renumber within its turn.
			i := c.Index
			onChunk(protocol.ModelChunk{Role: protocol.RoleModel, Content: parts, Index: &i})
			return nil
		}
	}
	resp, err := m.model.Generate(ctx, greq, cb)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.name, err)
	}
	msg, err := messageFromGenkit(resp.Message)
	if err != nil {
		return nil, fmt.Errorf("model %s: response: %w", m.name, err)
	}
	if msg.Role == "" {
		msg.Role = protocol.RoleModel
	}
	return &protocol.ModelResponse{
		Message:       msg,
		FinishReason:  finishReason(resp.FinishReason),
		FinishMessage: resp.FinishMessage,
	}, nil
}

// request converts our model request to Genkit's.
func (m *Model) request(req *protocol.ModelRequest) (*ai.ModelRequest, error) {
	if req == nil {
		return nil, errors.New("nil request")
	}
	msgs, err := messagesToGenkit(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := toolsToGenkit(req.Tools)
	if err != nil {
		return nil, err
	}
	cfg, err := m.config(req.Config)
	if err != nil {
		return nil, err
	}
	greq := &ai.ModelRequest{Messages: msgs, Tools: tools}
	if cfg != nil {
		greq.Config = cfg
	}
	if len(tools) > 0 {
		// Auto lets the model request tools; a raw model action has no tool
		// loop, so nothing runs here. Set only with tools: OpenAI rejects a
		// tool_choice without tools.
		greq.ToolChoice = ai.ToolChoiceAuto
	}
	return greq, nil
}

// config decodes the agent's model configuration into the untyped map every
// plugin accepts (Genkit converts it to the plugin's own config type and
// validates it against that type's schema). Genkit's common keys
// (GenerationCommonConfig: temperature, maxOutputTokens, topK, topP,
// stopSequences) are renamed to the provider's own keys when those are not
// set; other keys pass through.
func (m *Model) config(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var cfg map[string]any
	if err := decodeInto(raw, &cfg); err != nil {
		return nil, fmt.Errorf("config must be a JSON object: %w", err)
	}
	if cfg == nil {
		return nil, nil
	}
	for k := range cfg {
		// A provider's request takes its model from a config key of that
		// name (matched in any case): the model would not be this one, which
		// metrics and the audit trail record.
		if strings.EqualFold(k, "model") {
			return nil, fmt.Errorf("config may not name a model (%s): the model is %s", k, m.name)
		}
	}
	var renames map[string]string
	switch m.provider {
	case ProviderAnthropic:
		renames = map[string]string{
			"maxOutputTokens": m.maxTokensKey,
			"topK":            "top_k",
			"topP":            "top_p",
			"stopSequences":   "stop_sequences",
		}
	case ProviderOpenAI, ProviderOllama:
		renames = map[string]string{
			"maxOutputTokens": m.maxTokensKey,
			"topP":            "top_p",
			"stopSequences":   "stop",
		}
	}
	for from, to := range renames {
		v, ok := cfg[from]
		if !ok {
			continue
		}
		if _, taken := cfg[to]; !taken {
			cfg[to] = v
		}
		delete(cfg, from)
	}
	return cfg, nil
}

// FromEnv builds the model the environment configures, or returns (nil, nil)
// when none is (the server then uses its built-in demo model).
//
// Providers: GEMINI_API_KEY or GOOGLE_API_KEY selects Google AI;
// ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional) selects Anthropic;
// OPENAI_API_KEY and/or OPENAI_BASE_URL select OpenAI or any
// OpenAI-compatible server (Ollama, vLLM, LM Studio), where with a base URL
// the key may be empty. When several are set, HOLDPOINT_PROVIDER (googleai,
// anthropic or openai) chooses, else the order above. HOLDPOINT_MODEL names
// the model, "provider/id" or a bare id that gets the provider's prefix
// (so a server's own "openai/x" model is written "openai/openai/x").
//
// Signals: genkit.Init (v1.12.0) calls signal.NotifyContext for SIGINT and
// SIGTERM and discards its stop function, and genkit has no option to skip
// it, so that registration would last for the life of the process and turn
// off Go's default handling of both signals (Ctrl-C would no longer stop a
// server that has not installed its own handler). FromEnv undoes it with
// signal.Reset(os.Interrupt, syscall.SIGTERM) right after Init. Reset removes
// every registration for those signals, so the server must call FromEnv
// before it installs its own shutdown handling.
//
// Init is also given an empty prompt filesystem, so that genkit does not
// load ".prompt" files from a "prompts" directory in the working directory
// (it panics on invalid ones). With GENKIT_ENV=dev genkit additionally starts
// its reflection server; that is left to the developer who sets it.
func FromEnv(ctx context.Context, logger *slog.Logger) (protocol.Model, error) {
	if logger == nil {
		logger = slog.Default()
	}
	provider, err := selectProvider()
	if err != nil || provider == "" {
		return nil, err
	}

	plugin, maxTokensKey := newPlugin(provider)
	pluginOpt := genkit.WithPlugins(plugin)
	defaultModel := ""
	switch provider {
	case ProviderGoogleAI:
		defaultModel = DefaultGoogleAIModel
	case ProviderAnthropic:
		defaultModel = DefaultAnthropicModel
	case ProviderOpenAI:
		defaultModel = DefaultOpenAIModel
	}

	name := os.Getenv("HOLDPOINT_MODEL")
	if name == "" {
		name = defaultModel
		if provider == ProviderOpenAI && os.Getenv("OPENAI_BASE_URL") != "" {
			logger.Warn("OPENAI_BASE_URL is set without HOLDPOINT_MODEL; the server must serve the default model", "model", name)
		}
	} else if !strings.HasPrefix(name, provider+"/") {
		name = provider + "/" + name
	}

	g, err := initGenkit(ctx, pluginOpt)
	if err != nil {
		return nil, fmt.Errorf("genkit model %s: %w", name, err)
	}
	model := genkit.LookupModel(g, name)
	if model == nil {
		return nil, fmt.Errorf("genkit model %s: not found in plugin %s", name, provider)
	}
	logger.Info("model provider configured", "provider", provider, "model", name)
	return &Model{name: name, provider: provider, model: model, maxTokensKey: maxTokensKey}, nil
}

// initGenkit runs genkit.Init with the plugins pluginOpt carries, turning
// its panics (plugins panic on bad configuration) into errors and undoing its
// signal handler (see FromEnv).
func initGenkit(ctx context.Context, pluginOpt genkit.GenkitOption) (g *genkit.Genkit, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("genkit init: %v", r)
		}
	}()
	defer signal.Reset(os.Interrupt, syscall.SIGTERM)
	// A zero embed.FS is an empty filesystem whose root "." exists.
	g = genkit.Init(ctx, pluginOpt, genkit.WithPromptFS(embed.FS{}), genkit.WithPromptDir("."))
	return g, nil
}

// selectProvider picks the provider from the environment; "" means none.
func selectProvider() (string, error) {
	google := firstEnv("GEMINI_API_KEY", "GOOGLE_API_KEY") != ""
	anth := os.Getenv("ANTHROPIC_API_KEY") != ""
	oai := os.Getenv("OPENAI_API_KEY") != "" || os.Getenv("OPENAI_BASE_URL") != ""

	switch p := strings.ToLower(strings.TrimSpace(os.Getenv("HOLDPOINT_PROVIDER"))); p {
	case "":
	case ProviderGoogleAI:
		if !google {
			return "", errors.New("HOLDPOINT_PROVIDER=googleai needs GEMINI_API_KEY or GOOGLE_API_KEY")
		}
		return p, nil
	case ProviderAnthropic:
		if !anth {
			return "", errors.New("HOLDPOINT_PROVIDER=anthropic needs ANTHROPIC_API_KEY")
		}
		return p, nil
	case ProviderOpenAI:
		if !oai {
			return "", errors.New("HOLDPOINT_PROVIDER=openai needs OPENAI_API_KEY or OPENAI_BASE_URL")
		}
		return p, nil
	default:
		return "", fmt.Errorf("HOLDPOINT_PROVIDER=%q: want googleai, anthropic or openai", p)
	}
	switch {
	case google:
		return ProviderGoogleAI, nil
	case anth:
		return ProviderAnthropic, nil
	case oai:
		return ProviderOpenAI, nil
	}
	return "", nil
}

// newPlugin builds the Genkit plugin for one of the providers FromEnv
// accepts (googleai, anthropic, openai) from the environment, with the
// provider's config key for Genkit's common maxOutputTokens. For Ollama see
// newOllamaPlugin.
// raceFreeBaseURL is OPENAI_BASE_URL with its path ending in "/", set
// back in the environment too. openai-go (v1.8.2, Genkit's) applies
// option.WithBaseURL on every request by appending the slash to a URL it
// parsed once, so concurrent model calls wrote one url.URL at once (the
// race detector caught it under concurrent turns); the client reads the
// variable itself as well, hence the environment. With the slash there,
// nothing is written.
func raceFreeBaseURL() string {
	base := os.Getenv("OPENAI_BASE_URL")
	u, err := url.Parse(base)
	if base == "" || err != nil || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return base
	}
	u.Path += "/"
	base = u.String()
	_ = os.Setenv("OPENAI_BASE_URL", base)
	return base
}

func newPlugin(provider string) (api.Plugin, string) {
	switch provider {
	case ProviderGoogleAI:
		return &googlegenai.GoogleAI{APIKey: firstEnv("GEMINI_API_KEY", "GOOGLE_API_KEY")}, ""
	case ProviderAnthropic:
		// The plugin reads ANTHROPIC_BASE_URL itself.
		return &anthropic.Anthropic{APIKey: os.Getenv("ANTHROPIC_API_KEY")}, "max_tokens"
	case ProviderOpenAI:
		key := os.Getenv("OPENAI_API_KEY")
		baseURL := raceFreeBaseURL()
		p := &openai.OpenAI{APIKey: key}
		maxTokensKey := "max_completion_tokens"
		if baseURL != "" {
			if key == "" {
				p.APIKey = placeholderAPIKey
			}
			p.Opts = []option.RequestOption{option.WithBaseURL(baseURL)}
			// Compatible servers know the older name; OpenAI's reasoning
			// models want the newer one.
			maxTokensKey = "max_tokens"
		}
		return p, maxTokensKey
	}
	panic("genkitmodel: no plugin for provider " + provider)
}

// firstEnv returns the first non-empty of the named environment variables.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
