package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

const tenantsUsage = `Usage:
  platform tenants create NAME [--id ID]   create a tenant and print its id
  platform tenants list                    list the tenants

The database comes from DATABASE_URL; run "platform migrate up" first.
`

// tenantsCommand runs `platform tenants ...`.
func tenantsCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("tenants", tenantsUsage, map[string]func([]string) int{
		"create": func(args []string) int { return tenantsCreate(args, stdout, stderr) },
		"list":   func(args []string) int { return tenantsList(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// tenantsCreate runs `platform tenants create NAME [--id ID]`.
func tenantsCreate(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tenants create", "platform tenants create NAME [--id ID]", stderr)
	id := cmd.fs.String("id", "", "tenant id: 1-128 letters, digits or _ . : - (default: generated)")
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withAccounts(stderr, func(ctx context.Context, acc *service.Accounts) error {
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
	return cmd.withAccounts(stderr, func(ctx context.Context, acc *service.Accounts) error {
		tenants, err := acc.ListTenants(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tCREATED")
		for _, t := range tenants {
			fmt.Fprintf(w, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return w.Flush()
	})
}
