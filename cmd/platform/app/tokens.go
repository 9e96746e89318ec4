package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/holdpoint/holdpoint/service/tenants"
)

const tokensUsage = `Usage:
  platform tokens mint --tenant ID --user USER [--ttl 15m]   print a user token
  platform tokens revoke --tenant ID (--token-id ID | --user USER)
                                           refuse one token, or every token of a user issued so far

A user token lets a browser call the agent protocol routes as one end user
of one tenant, seeing only that user's sessions, until it expires (at most
24h). The database comes from DATABASE_URL; run "platform migrate up" first.
`

// tokensCommand runs `platform tokens ...`.
func tokensCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("tokens", tokensUsage, map[string]func([]string) int{
		"mint":   func(args []string) int { return tokensMint(args, stdout, stderr) },
		"revoke": func(args []string) int { return tokensRevoke(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// tokensRevoke runs `platform tokens revoke`.
func tokensRevoke(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform tokens revoke", "platform tokens revoke --tenant ID (--token-id ID | --user USER)", stderr)
	tokenID := cmd.fs.String("token-id", "", "the tokenId printed when the token was minted")
	user := cmd.fs.String("user", "", "end user whose tokens issued so far are all refused")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if (*tokenID == "") == (*user == "") {
		fmt.Fprintf(stderr, "%s: give exactly one of --token-id and --user\n", cmd.name)
		return 2
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		if *tokenID != "" {
			if err := acc.RevokeUserToken(ctx, *tenant, *tokenID); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "token %s of tenant %s is refused from now on\n", *tokenID, *tenant)
			return nil
		}
		if err := acc.RevokeEndUserTokens(ctx, *tenant, *user); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every token of user %s of tenant %s issued so far is refused from now on\n", *user, *tenant)
		return nil
	})
}

// tokensMint runs `platform tokens mint`.
func tokensMint(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform tokens mint", "platform tokens mint --tenant ID --user USER [--ttl 15m]", stderr)
	user := cmd.fs.String("user", "", "end user id the token acts for (required)")
	ttl := cmd.fs.Duration("ttl", tenants.DefaultTokenTTL, "lifetime, at most 24h")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if *user == "" {
		fmt.Fprintf(stderr, "%s: --user is required\n", cmd.name)
		return 2
	}
	if *ttl < time.Second || *ttl > tenants.MaxTokenTTL {
		fmt.Fprintf(stderr, "%s: --ttl must be between 1s and 24h\n", cmd.name)
		return 2
	}
	return cmd.withTenants(stderr, func(ctx context.Context, acc *tenants.Tenants) error {
		tok, err := acc.MintUserToken(ctx, *tenant, *user, *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, tok.Token)
		fmt.Fprintf(stderr, "Token %s for user %s of tenant %s, valid until %s.\n", tok.TokenID, *user, *tenant, tok.ExpiresAt.UTC().Format(time.RFC3339))
		return nil
	})
}
