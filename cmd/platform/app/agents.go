package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentdef"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/genkitmodel"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenantagents"
	"github.com/holdpoint/holdpoint/service/tenants"
)

const agentsUsage = `Usage:
  platform agents apply -f FILE --tenant ID [--name N]   store FILE (.prompt or JSON) as the agent's next version
  platform agents list --tenant ID                        list a tenant's agents
  platform agents show NAME --tenant ID [--version N]     print an agent's definition (and its versions)
  platform agents disable NAME --tenant ID                disable an agent: new turns get 404, sessions stay readable

A tenant's agent is served at /api/agents/NAME to that tenant only. apply
checks the file as PUT /api/v1/agents/NAME does, with the model providers
and --allow-loopback-tools of this process (set the same environment as the
server's). The database comes from DATABASE_URL.
`

// agentsCommand runs `platform agents ...`.
func agentsCommand(p Platform, args []string, stdout, stderr io.Writer) int {
	return dispatch("agents", agentsUsage, map[string]func([]string) int{
		"apply":   func(args []string) int { return agentsApply(p, args, stdout, stderr) },
		"list":    func(args []string) int { return agentsList(p, args, stdout, stderr) },
		"show":    func(args []string) int { return agentsShow(p, args, stdout, stderr) },
		"disable": func(args []string) int { return agentsDisable(p, args, stdout, stderr) },
	}, args, stdout, stderr)
}

// withManager runs fn with the tenants' agents over DATABASE_URL (as the
// application role, like the server) and a caller acting for tenant.
func (a *adminCommand) withManager(p Platform, tenant string, loopback bool, stderr io.Writer, fn func(ctx context.Context, m *tenantagents.Manager, c service.Caller) error) int {
	return a.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		log := slog.New(slog.DiscardHandler)
		catalog, err := genkitmodel.NewCatalog(ctx, log)
		if err != nil {
			return err
		}
		// The program's own agents, whose names a tenant may not take (the
		// demo agents are served only with --dev or --demo: once a server
		// that serves them has started, the store refuses their names, as
		// it does every compiled agent's an instance recorded).
		agents, err := p.agents(ctx, log, demo.NewModel(), false)
		if err != nil {
			return err
		}
		rt := service.NewRuntime(store, service.Options{Logger: log})
		for _, ag := range agents {
			if err := rt.Register(ag); err != nil {
				return err
			}
		}
		m := &tenantagents.Manager{Store: store, Runtime: rt, Models: p.tenantModels(catalog), AllowLoopback: loopback}
		return fn(ctx, m, service.Caller{TenantID: tenant, Actor: "cli:" + currentUser()})
	})
}

// withStore connects to DATABASE_URL as the application role (row-level
// security on) after checking the schema.
func (a *adminCommand) withStore(stderr io.Writer, fn func(ctx context.Context, store *pgstore.PgStore) error) int {
	return a.withPool(stderr, true, fn)
}

// withPool is withStore, as the application role (app) or as DATABASE_URL's
// own role (the schema owner, for what only the operator may change).
func (a *adminCommand) withPool(stderr io.Writer, app bool, fn func(ctx context.Context, store *pgstore.PgStore) error) int {
	return a.withTenantsCtx(stderr, func(ctx context.Context, where string) error {
		connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		var pool *pgxpool.Pool
		var err error
		if app {
			pool, err = pgstore.NewAppPool(connectCtx, databaseURL())
		} else {
			pool, err = pgxpool.New(connectCtx, databaseURL())
		}
		if err != nil {
			return fmt.Errorf("connect to PostgreSQL at %s: %w", where, err)
		}
		defer pool.Close()
		store := pgstore.New(pool)
		defer store.Close()
		return fn(ctx, store)
	})
}

func currentUser() string {
	for _, v := range []string{"USER", "LOGNAME"} {
		if u := os.Getenv(v); u != "" {
			return u
		}
	}
	return "operator"
}

// agentsApply runs `platform agents apply -f FILE --tenant ID`.
func agentsApply(p Platform, args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform agents apply", "platform agents apply -f FILE --tenant ID [--name N] [--allow-loopback-tools]", stderr)
	file := cmd.fs.String("f", "", "the definition: a .prompt file or its JSON form (required; - reads standard input)")
	name := cmd.fs.String("name", "", "the agent's name (default: the file's name field, else the file name without extension)")
	loopback := cmd.fs.Bool("allow-loopback-tools", false, "let the agent's HTTP tools call loopback addresses (the server must allow them too)")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if *file == "" {
		fmt.Fprintf(stderr, "%s: -f is required\n", cmd.name)
		return 2
	}
	var src []byte
	var err error
	if *file == "-" {
		src, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		src, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.name, err)
		return 1
	}
	agentName := *name
	if agentName == "" {
		agentName = nameOf(src, *file)
	}
	return cmd.withManager(p, *tenant, *loopback, stderr, func(ctx context.Context, m *tenantagents.Manager, c service.Caller) error {
		v, err := m.Put(ctx, c, agentName, src)
		if err != nil {
			return describeDefinitionError(err)
		}
		fmt.Fprintf(stdout, "agent %s of tenant %s: version %d is current\n", agentName, *tenant, v.Version)
		return nil
	})
}

// nameOf is the agent name a file gives: its name field, else its base
// name without extension. A file that does not parse is named after its
// file: the apply reports what is wrong with it.
func nameOf(src []byte, file string) string {
	if def, err := agentdef.Parse(src); err == nil && def.Name != "" {
		return def.Name
	}
	base := file[strings.LastIndex(file, "/")+1:]
	if i := strings.Index(base, "."); i > 0 {
		base = base[:i]
	}
	return base
}

// describeDefinitionError adds the line and field of a definition error.
func describeDefinitionError(err error) error {
	e := service.AsError(err)
	if e.Status != service.CodeInvalidArgument {
		return err
	}
	if d, ok := e.Details.(map[string]any); ok && d["line"] != nil {
		return fmt.Errorf("%s (line %v)", e.Message, d["line"])
	}
	return err
}

// agentsList runs `platform agents list --tenant ID`.
func agentsList(p Platform, args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform agents list", "platform agents list --tenant ID", stderr)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		recs, err := store.ListTenantAgents(ctx, *tenant)
		if err != nil {
			return err
		}
		return writeTable(stdout, "NAME\tVERSION\tSTATE\tUPDATED", len(recs), func(w io.Writer, i int) {
			r := recs[i]
			state := "enabled"
			if r.DisabledAt != nil {
				state = "disabled"
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", r.Name, r.CurrentVersion, state, r.UpdatedAt.UTC().Format(time.RFC3339))
		})
	})
}

// agentsShow runs `platform agents show NAME --tenant ID [--version N]`.
func agentsShow(p Platform, args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform agents show", "platform agents show NAME --tenant ID [--version N]", stderr)
	version := cmd.fs.Int("version", 0, "a version (default: the current one, with the list of versions)")
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		rec, err := store.GetTenantAgent(ctx, *tenant, pos[0], *version)
		if err != nil {
			if err == service.ErrNotFound {
				return service.Errorf(service.CodeNotFound, "tenant %s has no agent %s (version %d)", *tenant, pos[0], *version)
			}
			return err
		}
		fmt.Fprintf(stdout, "# %s version %d of %d, by %s at %s", rec.Name, rec.Version, rec.CurrentVersion, rec.CreatedBy, rec.VersionCreatedAt.UTC().Format(time.RFC3339))
		if rec.DisabledAt != nil {
			fmt.Fprintf(stdout, " (disabled at %s)", rec.DisabledAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(stdout, "\n%s", rec.Source)
		if !strings.HasSuffix(rec.Source, "\n") {
			fmt.Fprintln(stdout)
		}
		return nil
	})
}

// agentsDisable runs `platform agents disable NAME --tenant ID`.
func agentsDisable(p Platform, args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform agents disable", "platform agents disable NAME --tenant ID", stderr)
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		ok, err := store.DisableTenantAgent(ctx, *tenant, pos[0], "cli:"+currentUser())
		if err != nil {
			return err
		}
		if !ok {
			return service.Errorf(service.CodeNotFound, "tenant %s has no enabled agent %s", *tenant, pos[0])
		}
		fmt.Fprintf(stdout, "agent %s of tenant %s is disabled\n", pos[0], *tenant)
		return nil
	})
}

// tenantsToolHosts runs `platform tenants allow-tool-hosts --tenant ID [HOST|CIDR...]`.
func tenantsToolHosts(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform tenants allow-tool-hosts", "platform tenants allow-tool-hosts --tenant ID [HOST|CIDR ...]", stderr)
	if code := parseFlags(cmd.fs, args); code >= 0 {
		return code
	}
	if code := requireTenant(cmd, *tenant, stderr); code >= 0 {
		return code
	}
	hosts := cmd.fs.Args()
	return cmd.withPool(stderr, false, func(ctx context.Context, store *pgstore.PgStore) error {
		if err := store.SetTenantToolHosts(ctx, *tenant, hosts); err != nil {
			if err == service.ErrNotFound {
				return service.Errorf(service.CodeNotFound, "no tenant %s", *tenant)
			}
			return err
		}
		if len(hosts) == 0 {
			fmt.Fprintf(stdout, "tenant %s's HTTP tools may call public addresses only\n", *tenant)
		} else {
			fmt.Fprintf(stdout, "tenant %s's HTTP tools may also call %s\n", *tenant, strings.Join(hosts, ", "))
		}
		return nil
	})
}

// tenantsToolSecret runs `platform tenants tool-secret --tenant ID [--rotate]`.
func tenantsToolSecret(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform tenants tool-secret", "platform tenants tool-secret --tenant ID [--rotate [--grace 24h]]", stderr)
	rotate := cmd.fs.Bool("rotate", false, "make a new secret sign from now on; calls are signed with both during the grace period")
	grace := cmd.fs.Duration("grace", 24*time.Hour, "with --rotate: how long the old secret keeps signing too (at most 720h)")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		if *rotate {
			if _, err := tenants.New(store).RotateSecret(ctx, *tenant, keys.PurposeTool, *grace); err != nil {
				return err
			}
		}
		keys, err := store.SigningKeys(ctx, *tenant, keys.PurposeTool)
		if err != nil {
			return err
		}
		for _, k := range keys {
			state := "signs"
			if k.ExpiresAt != nil {
				state = "also signs until " + k.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "whsec_%s\tkey %d, %s\n", base64.StdEncoding.EncodeToString(k.Secret), k.ID, state)
		}
		return nil
	})
}
