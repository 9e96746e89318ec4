package genkitmodel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// Catalog builds models by name on demand, from one Genkit instance
// started with the plugin of every provider the environment configures
// (Ollama when OLLAMA_HOST is set): what a server needs for models named
// after it started, such as those of the agents tenants define, since
// starting Genkit again would reset the server's signal handling (see
// FromEnv). Its methods are safe for concurrent use.
type Catalog struct {
	log       *slog.Logger
	g         *genkit.Genkit
	maxTokens map[string]string // configured provider -> its max tokens key
	ollama    *compat_oai.OpenAICompatible

	mu     sync.Mutex
	models map[string]*Model
}

// NewCatalog starts the catalog's Genkit instance (none when no provider
// is configured: every Check then fails). Call it before installing signal
// handling.
func NewCatalog(ctx context.Context, logger *slog.Logger) (*Catalog, error) {
	if logger == nil {
		logger = slog.Default()
	}
	c := &Catalog{log: logger, maxTokens: map[string]string{}, models: map[string]*Model{}}
	var plugins []api.Plugin
	for _, provider := range resolveProviders {
		switch {
		case provider == ProviderOllama:
			if os.Getenv("OLLAMA_HOST") == "" {
				continue
			}
			c.ollama = newOllamaPlugin()
			plugins = append(plugins, c.ollama)
			c.maxTokens[provider] = "max_tokens"
		case checkProviderEnv(provider+"/x", provider) == nil:
			p, key := newPlugin(provider)
			plugins = append(plugins, p)
			c.maxTokens[provider] = key
		}
	}
	if len(plugins) == 0 {
		return c, nil
	}
	g, err := initGenkit(ctx, genkit.WithPlugins(plugins...))
	if err != nil {
		return nil, fmt.Errorf("genkit model catalog: %w", err)
	}
	c.g = g
	return c, nil
}

// Check reports why the catalog cannot build the named model: a malformed
// name, or a provider this server has no configuration for.
func (c *Catalog) Check(name string) error {
	provider, _, err := parseModelName(name)
	if err != nil {
		return err
	}
	if _, ok := c.maxTokens[provider]; !ok {
		if err := checkProviderEnv(name, provider); err != nil {
			return err
		}
		return fmt.Errorf("model %q: provider %s is not configured on this server (set OLLAMA_HOST for ollama)", name, provider)
	}
	return nil
}

// Model returns the named model, built on first use.
func (c *Catalog) Model(name string) (protocol.Model, error) {
	if err := c.Check(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.models[name]; ok {
		return m, nil
	}
	provider, id, _ := parseModelName(name)
	model := genkit.LookupModel(c.g, name)
	if model == nil && provider == ProviderOllama {
		var err error
		if model, err = defineOllamaModel(c.g, c.ollama, id); err != nil {
			return nil, fmt.Errorf("genkit model %s: %w", name, err)
		}
	}
	if model == nil {
		return nil, fmt.Errorf("genkit model %s: not found in plugin %s", name, provider)
	}
	m := &Model{name: name, provider: provider, model: model, maxTokensKey: c.maxTokens[provider]}
	c.models[name] = m
	c.log.Info("model resolved", "provider", provider, "model", name)
	return m, nil
}
