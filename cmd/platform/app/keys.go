package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/tenants"
)

const keysUsage = `Usage:
  platform keys create --tenant ID --role client|admin [--name N] [--scope S]...
                                      create a key and print it (once)
  platform keys list --tenant ID      list a tenant's keys
  platform keys revoke --tenant ID KEY_ID
                                      revoke a key (servers refuse it within 5 s)

client keys may use the agent protocol routes (/api/agents/...); admin keys
every route, including /api/v1 (inbox, decisions, reports, events, tokens).
--scope (repeated, at most 20) gives a key what an approval policy may ask
for (e.g. approve:payments; "*" holds every scope). What a key does is
recorded as key:NAME/ID (key:ID for a key without a name), through the API
and the dashboard alike.
The database comes from DATABASE_URL; run "platform migrate up" first.
`

// keysCommand runs `platform keys ...`.
func keysCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("keys", keysUsage, map[string]func([]string) int{
		"create": func(args []string) int { return keysCreate(args, stdout, stderr) },
		"list":   func(args []string) int { return keysList(args, stdout, stderr) },
		"revoke": func(args []string) int { return keysRevoke(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// requireTenant reports a missing --tenant as a usage error.
func requireTenant(cmd *adminCommand, tenant string, stderr io.Writer) int {
	if tenant == "" {
		fmt.Fprintf(stderr, "%s: --tenant is required\n", cmd.name)
		cmd.fs.Usage()
		return 2
	}
	return -1
}

// keysCreate runs `platform keys create`.
func keysCreate(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform keys create", "platform keys create --tenant ID --role client|admin [--name N] [--scope S]...", stderr)
	role := cmd.fs.String("role", "", "client (protocol routes) or admin (every route) (required)")
	name := cmd.fs.String("name", "", "a name to recognize the key by")
	var scopes scopesFlag
	cmd.fs.Var(&scopes, "scope", `a scope the key holds, e.g. approve:payments ("*": every scope); repeat for more`)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if *role != tenants.RoleClient && *role != tenants.RoleAdmin {
		fmt.Fprintf(stderr, "%s: --role must be client or admin\n", cmd.name)
		return 2
	}
	if _, err := tenants.NormalizeScopes(scopes); err != nil {
		fmt.Fprintf(stderr, "%s: --scope: %s\n", cmd.name, service.AsError(err).Message)
		return 2
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		plain, key, err := acc.CreateKey(ctx, *tenant, *role, *name, scopes...)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, plain)
		fmt.Fprintf(stderr, "Created %s key %s for tenant %s%s. The key is shown only this once: store it now.\n",
			key.Role, key.ID, key.TenantID, scopesNote(key.Scopes))
		return nil
	})
}

// keysList runs `platform keys list --tenant ID`.
func keysList(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform keys list", "platform keys list --tenant ID", stderr)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		keys, err := acc.ListKeys(ctx, *tenant)
		if err != nil {
			return err
		}
		return writeTable(stdout, "ID\tROLE\tPREFIX\tNAME\tSCOPES\tCREATED\tLAST USED\tREVOKED", len(keys), func(w io.Writer, i int) {
			k := keys[i]
			fmt.Fprintf(w, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Role, k.Prefix, orDash(k.Name),
				orDash(strings.Join(k.Scopes, ",")), k.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt))
		})
	})
}

// keysRevoke runs `platform keys revoke --tenant ID KEY_ID`.
func keysRevoke(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform keys revoke", "platform keys revoke --tenant ID KEY_ID", stderr)
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	id, err := uuid.Parse(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "%s: KEY_ID %q is not a key id (see platform keys list)\n", cmd.name, pos[0])
		return 2
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		if err := acc.RevokeKey(ctx, *tenant, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", id)
		return nil
	})
}

// scopesFlag is a repeated --scope.
type scopesFlag []string

func (f *scopesFlag) String() string { return strings.Join(*f, ",") }

// Set adds one scope; NormalizeScopes checks them all.
func (f *scopesFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// scopesNote is ", with scopes a, b" for a key that has some.
func scopesNote(scopes []string) string {
	if len(scopes) == 0 {
		return ""
	}
	return ", with scopes " + strings.Join(scopes, ", ")
}

// writeTable prints a table in the aligned columns of the list commands:
// header (its columns separated by tabs), then rows lines, row printing
// line i (likewise, ending in a newline).
func writeTable(out io.Writer, header string, rows int, row func(w io.Writer, i int)) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	for i := range rows {
		row(w, i)
	}
	return w.Flush()
}

// orDash shows an empty column as a dash, so the table stays aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// timeOrDash shows an optional time in UTC, or a dash when unset.
func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
