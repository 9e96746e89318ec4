package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// errSchemaMissing says what to do when the admin commands find a database
// without (all of) the platform's schema.
var errSchemaMissing = errors.New("the database schema is missing or out of date: run `platform migrate up` first")

// adminCommand is a sub-command of tenants, keys or tokens: it gets the
// accounts over DATABASE_URL and its positional arguments.
type adminCommand struct {
	name  string // "platform keys create"
	usage string // the usage line after "Usage: "
	fs    *flag.FlagSet
	// tenant is the value of the required --tenant flag of a command on
	// one tenant (newTenantCommand), which parse checks; nil: none.
	tenant *string
}

// newAdminCommand returns a sub-command whose flags the caller adds to fs.
func newAdminCommand(name, usage string, stderr io.Writer) *adminCommand {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n", usage)
		fs.PrintDefaults()
	}
	return &adminCommand{name: name, usage: usage, fs: fs}
}

// newTenantCommand returns a sub-command on one tenant: it has the
// --tenant flag, whose value it returns, and parse requires it.
func newTenantCommand(name, usage string, stderr io.Writer) (*adminCommand, *string) {
	cmd := newAdminCommand(name, usage, stderr)
	cmd.tenant = cmd.fs.String("tenant", "", "tenant id (required)")
	return cmd, cmd.tenant
}

// parse parses flags given before, between or after the positional
// arguments (`keys revoke KEY --tenant T` as well as `keys revoke --tenant T
// KEY`) and returns the positional ones, then requires --tenant on a
// command on one tenant. The exit code is -1 to go on.
func (a *adminCommand) parse(args []string, positional int, stderr io.Writer) ([]string, int) {
	var pos []string
	for {
		if code := parseFlags(a.fs, args); code >= 0 {
			return nil, code
		}
		rest := a.fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // everything after -- is positional
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) != positional {
		fmt.Fprintf(stderr, "%s: want %d argument(s), got %d\n", a.name, positional, len(pos))
		a.fs.Usage()
		return nil, 2
	}
	if a.tenant != nil {
		if code := requireTenant(a, *a.tenant, stderr); code >= 0 {
			return nil, code
		}
	}
	return pos, -1
}

// fail reports err on stderr and returns the exit code 1. Domain errors
// show their message; anything else (the database) in full, since the
// operator running the command is the one who needs it.
func (a *adminCommand) fail(stderr io.Writer, err error) int {
	var e *service.Error
	if errors.As(err, &e) && e.Cause == nil {
		fmt.Fprintf(stderr, "%s: %s\n", a.name, e.Message)
	} else {
		fmt.Fprintf(stderr, "%s: %v\n", a.name, err)
	}
	return 1
}

// withTenants connects to DATABASE_URL, checks the schema is migrated,
// and runs fn with the accounts (as the application role, like the server).
func (a *adminCommand) withTenants(stderr io.Writer, fn func(ctx context.Context, acc *tenants.Tenants) error) int {
	return a.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		return fn(ctx, tenants.New(store))
	})
}

// withTenantsCtx checks DATABASE_URL and the schema, and runs fn (which
// connects) with a context that the first SIGINT or SIGTERM cancels.
func (a *adminCommand) withTenantsCtx(stderr io.Writer, fn func(ctx context.Context, where string) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		return a.fail(stderr, errors.New("DATABASE_URL is not a valid PostgreSQL URL"))
	}
	where := describe(cfg)
	if err := checkSchema(ctx, where); err != nil {
		return a.fail(stderr, err)
	}
	if err := fn(ctx, where); err != nil {
		return a.fail(stderr, err)
	}
	return 0
}

// checkSchema fails with errSchemaMissing unless every migration is
// applied, so a command on a fresh database says what to do instead of
// failing on a missing role or table.
func checkSchema(ctx context.Context, where string) error {
	cc, err := pgstore.ConnConfig(databaseURL())
	if err != nil {
		return errors.New("DATABASE_URL is not a valid PostgreSQL URL")
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		return fmt.Errorf("cannot reach PostgreSQL at %s (set DATABASE_URL): %w", where, err)
	}
	pending, err := migrations.HasPending(ctx, db)
	if err != nil {
		return fmt.Errorf("%w (%v)", errSchemaMissing, err)
	}
	if pending {
		return errSchemaMissing
	}
	return nil
}

// dispatch runs the sub-command args[0] of group (tenants, keys, tokens)
// from subs, or prints the group's usage.
func dispatch(group, usage string, subs map[string]func([]string) int, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	sub, ok := subs[args[0]]
	if !ok {
		names := make([]string, 0, len(subs))
		for n := range subs {
			names = append(names, n)
		}
		slices.Sort(names)
		return unknownCommand(stderr, "platform "+group, args[0], names)
	}
	return sub(args[1:])
}
