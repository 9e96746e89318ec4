package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/tenants"
)

const tenantsUsage = `Usage:
  platform tenants create NAME [--id ID]   create a tenant and print its id
  platform tenants list                    list the tenants
  platform tenants show ID                 print a tenant and its retention policy
  platform tenants set-retention ID [--completed 30d] [--failed 7d] [--events 90d] | --clear
                                           how long the tenant keeps finished sessions and its event log (see platform prune)
  platform tenants rotate-secret --tenant ID [--purpose token|state|tool|all] [--grace 24h]
                                           give the tenant new signing keys
  platform tenants tool-secret --tenant ID [--rotate [--grace 24h]]
                                           print (or rotate) the secret that signs the tenant's HTTP tool calls
  platform tenants allow-tool-hosts --tenant ID [HOST|CIDR ...]
                                           let the tenant's HTTP tools call these non-public hosts (none: public only)

rotate-secret: the new token key signs end-user tokens from now on, the new
state key the state of client-managed agents, the new tool key the tenant's
HTTP tool calls; what the old keys signed stays valid for the grace period
(0: refused at once; servers pick up a state key within a minute), and tool
calls carry both signatures meanwhile. At most three keys of a purpose are
valid at once: rotating a fourth time within the grace period ends the
oldest key's at once.

The database comes from DATABASE_URL; run "platform migrate up" first.
`

// tenantsCommand runs `platform tenants ...`.
func tenantsCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("tenants", tenantsUsage, map[string]func([]string) int{
		"create": func(args []string) int { return tenantsCreate(args, stdout, stderr) },
		"list":   func(args []string) int { return tenantsList(args, stdout, stderr) },
		"rotate-secret": func(args []string) int {
			return tenantsRotateSecret(args, stdout, stderr)
		},
		"allow-tool-hosts": func(args []string) int { return tenantsToolHosts(args, stdout, stderr) },
		"tool-secret":      func(args []string) int { return tenantsToolSecret(args, stdout, stderr) },
		"show":             func(args []string) int { return tenantsShow(args, stdout, stderr) },
		"set-retention":    func(args []string) int { return tenantsSetRetention(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// tenantsRotateSecret runs `platform tenants rotate-secret`.
func tenantsRotateSecret(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform tenants rotate-secret", "platform tenants rotate-secret --tenant ID [--purpose token|state|tool|all] [--grace 24h]", stderr)
	purpose := cmd.fs.String("purpose", "all", "which key: token (end-user tokens), state (client-managed state), tool (HTTP tool calls), or all")
	grace := cmd.fs.Duration("grace", 24*time.Hour, "how long what the old key signed stays valid (at most 720h)")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	purposes := []string{keys.PurposeToken, keys.PurposeState, keys.PurposeTool}
	switch *purpose {
	case "all":
	case keys.PurposeToken, keys.PurposeState, keys.PurposeTool:
		purposes = []string{*purpose}
	default:
		fmt.Fprintf(stderr, "%s: --purpose must be token, state, tool or all\n", cmd.name)
		return 2
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		for _, p := range purposes {
			id, err := acc.RotateSecret(ctx, *tenant, p, *grace)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s key %d of tenant %s signs from now on; the previous keys verify until %s\n",
				p, id, *tenant, time.Now().Add(*grace).UTC().Format(time.RFC3339))
		}
		return nil
	})
}

// tenantsCreate runs `platform tenants create NAME [--id ID]`.
func tenantsCreate(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tenants create", "platform tenants create NAME [--id ID]", stderr)
	id := cmd.fs.String("id", "", "tenant id: 1-128 letters, digits or _ . : - (default: generated)")
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		t, err := acc.CreateTenant(ctx, *id, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, t.ID)
		return nil
	})
}

// tenantsList runs `platform tenants list`.
func tenantsList(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tenants list", "platform tenants list", stderr)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		tenants, err := acc.ListTenants(ctx)
		if err != nil {
			return err
		}
		return writeTable(stdout, "ID\tNAME\tCREATED", len(tenants), func(w io.Writer, i int) {
			t := tenants[i]
			fmt.Fprintf(w, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339))
		})
	})
}
