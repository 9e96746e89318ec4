package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

const tokensUsage = `Usage:
  platform tokens mint --tenant ID --user USER [--ttl 15m]   print a user token

A user token lets a browser call the agent protocol routes as one end user
of one tenant, seeing only that user's sessions, until it expires (at most
24h). The database comes from DATABASE_URL; run "platform migrate up" first.
`

// tokensCommand runs `platform tokens ...`.
func tokensCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("tokens", tokensUsage, map[string]func([]string) int{
		"mint": func(args []string) int { return tokensMint(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// tokensMint runs `platform tokens mint`.
func tokensMint(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tokens mint", "platform tokens mint --tenant ID --user USER [--ttl 15m]", stderr)
	tenant := cmd.fs.String("tenant", "", "tenant id (required)")
	user := cmd.fs.String("user", "", "end user id the token acts for (required)")
	ttl := cmd.fs.Duration("ttl", service.DefaultTokenTTL, "lifetime, at most 24h")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if code := requireTenant(cmd, *tenant, stderr); code >= 0 {
		return code
	}
	if *user == "" {
		fmt.Fprintf(stderr, "%s: --user is required\n", cmd.name)
		return 2
	}
	if *ttl < time.Second || *ttl > service.MaxTokenTTL {
		fmt.Fprintf(stderr, "%s: --ttl must be between 1s and 24h\n", cmd.name)
		return 2
	}
	return cmd.withAccounts(stderr, func(ctx context.Context, acc *service.Accounts) error {
		tok, err := acc.MintUserToken(ctx, *tenant, *user, *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, tok.Token)
		fmt.Fprintf(stderr, "Token for user %s of tenant %s, valid until %s.\n", *user, *tenant, tok.ExpiresAt.UTC().Format(time.RFC3339))
		return nil
	})
}
