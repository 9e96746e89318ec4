package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

// tenantAgentCounter is what counting the tenants' agents reads: every
// tenant (a system read) and each tenant's agents.
type tenantAgentCounter interface {
	ListTenants(ctx context.Context) ([]service.Tenant, error)
	ListTenantAgents(ctx context.Context, tenantID string) ([]service.TenantAgentRecord, error)
}

// countTenantAgents counts the enabled agents of every tenant, one query
// per tenant through the store's own reads (which row-level security
// confines to that tenant), bounded in time: at start-up it is a report,
// not a check, so an error or the bound ends it with what it counted and
// false.
func countTenantAgents(ctx context.Context, store tenantAgentCounter) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tenants, err := store.ListTenants(ctx)
	if err != nil {
		return 0, false
	}
	n := 0
	for _, t := range tenants {
		agents, err := store.ListTenantAgents(ctx, t.ID)
		if err != nil {
			return n, false
		}
		for _, a := range agents {
			if a.DisabledAt == nil {
				n++
			}
		}
	}
	return n, true
}

// agentsSummary says what the server serves: "serving 3 built-in agents
// and 2 tenant agents" (tenant agents "at least N" when not all counted).
func agentsSummary(builtin, tenant int, complete bool) string {
	t := fmt.Sprint(tenant)
	if !complete {
		t = "at least " + t
	}
	return fmt.Sprintf("serving %s and %s %s", plural(builtin, "built-in agent"), t, pluralWord(tenant, "tenant agent"))
}

func plural(n int, word string) string { return fmt.Sprintf("%d %s", n, pluralWord(n, word)) }

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// reportAgents logs what the server serves, and warns when it serves no
// agent at all (neither built-in nor any tenant's).
func reportAgents(ctx context.Context, log *slog.Logger, store tenantAgentCounter, builtin int) (string, int) {
	tenant, complete := countTenantAgents(ctx, store)
	if builtin == 0 && tenant == 0 && complete {
		log.Warn("no agents to serve: pass --dev or --demo for the demo agents, define a tenant's with platform agents apply, or serve your own with app.Platform")
	}
	return agentsSummary(builtin, tenant, complete), tenant
}
