package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/genkitmodel"
)

// Platform is the whole Holdpoint platform (the commands serve, migrate,
// tenants, keys, tokens, bench and version) serving a program's own agents.
// Its zero value serves no agent; cmd/platform is Platform{Demo: true}.
type Platform struct {
	// Agents are served by `serve` to every tenant, at
	// /api/agents/{name}.
	Agents []agentkit.Definition
	// Models are models the program provides by name (a scripted model
	// for offline use, a provider of its own), for agents that name them
	// in their Model field.
	Models map[string]service.Model
	// Demo offers the built-in demo agents (bankingAgent,
	// bankingAgentClient and paymentsAgent) with `serve --dev` or
	// `serve --demo`.
	Demo bool
}

// ModelDemo is the model name of the offline demo model.
const ModelDemo = "demo"

// agents builds the program's agents with their models resolved, and
// checks them the way the runtime will, so that a definition error (a
// duplicate tool, a type without a JSON Schema, a model that is unknown or
// whose provider has no key in the environment) stops the start-up with a
// message naming the agent. fallback is the platform's default model;
// withDemo adds the demo agents.
func (p Platform) agents(ctx context.Context, log *slog.Logger, fallback service.Model, withDemo bool) ([]*service.Agent, error) {
	models := map[string]service.Model{"": fallback, ModelDemo: demo.NewModel()}
	for name, m := range p.Models {
		if m == nil {
			return nil, fmt.Errorf("model %q is nil", name)
		}
		models[name] = m
	}
	if err := p.resolveModels(ctx, log, models); err != nil {
		return nil, err
	}
	scratch := service.NewRuntime(nil, service.Options{Logger: log})
	var out []*service.Agent
	for _, d := range p.Agents {
		a, err := d.ServiceAgent(func(name string) service.Model { return models[name] })
		if err != nil {
			return nil, err
		}
		if err := scratch.Register(a); err != nil {
			return nil, fmt.Errorf("agent %s: %w", d.AgentName(), err)
		}
		out = append(out, a)
	}
	if withDemo {
		if err := demo.CheckKnobs(); err != nil {
			return nil, err
		}
		for _, a := range demo.Agents(fallback) {
			if err := scratch.Register(a); err != nil {
				return nil, fmt.Errorf("demo agent %s: %w", a.Name, err)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// resolveModels adds to models the provider models the agents name, built
// together so that Genkit starts once with every plugin needed; an error
// names the model, and here its agent.
func (p Platform) resolveModels(ctx context.Context, log *slog.Logger, models map[string]service.Model) error {
	var wanted []string
	user := map[string]string{} // model name -> the first agent naming it
	for _, d := range p.Agents {
		if d == nil {
			return fmt.Errorf("an agent definition is nil")
		}
		for _, name := range d.ModelNames() {
			if _, ok := models[name]; ok || slices.Contains(wanted, name) {
				continue
			}
			wanted = append(wanted, name)
			user[name] = d.AgentName()
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	resolved, err := genkitmodel.Resolve(ctx, log, wanted)
	if err != nil {
		for _, name := range wanted {
			if strings.Contains(err.Error(), strconv.Quote(name)) {
				return fmt.Errorf("agent %s: %w", user[name], err)
			}
		}
		return err
	}
	for name, m := range resolved {
		models[name] = m
	}
	return nil
}

// tenantModels resolves the models tenants' agents name: the demo model,
// the program's own models, and the providers the catalog's environment
// configures.
type tenantModels struct {
	named   map[string]service.Model
	catalog *genkitmodel.Catalog
}

// tenantModels is the resolver of the models tenants' agents may name.
func (p Platform) tenantModels(catalog *genkitmodel.Catalog) *tenantModels {
	named := map[string]service.Model{ModelDemo: demo.NewModel()}
	for name, m := range p.Models {
		named[name] = m
	}
	return &tenantModels{named: named, catalog: catalog}
}

// Check implements tenantagents.ModelResolver.
func (t *tenantModels) Check(name string) error {
	if name == "" {
		return fmt.Errorf("a model is required (e.g. %s, or googleai/gemini-2.5-flash)", ModelDemo)
	}
	if _, ok := t.named[name]; ok {
		return nil
	}
	return t.catalog.Check(name)
}

// Model implements tenantagents.ModelResolver.
func (t *tenantModels) Model(_ context.Context, name string) (service.Model, error) {
	if m, ok := t.named[name]; ok {
		return m, nil
	}
	return t.catalog.Model(name)
}
