package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service/agentdef"
	"github.com/holdpoint/holdpoint/service/agentkit"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/genkitmodel"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// doctorTimeout bounds each network check of doctor.
const doctorTimeout = 5 * time.Second

// Statuses of a doctor check.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "FAIL"
	statusSkip = "skip"
)

// doctor prints one line per check and counts the failures and warnings.
type doctor struct {
	out      io.Writer
	secret   string // the database password, never printed
	failures int
	warnings int
}

// report prints one check's line.
func (d *doctor) report(status, check, detail string) {
	switch status {
	case statusFail:
		d.failures++
	case statusWarn:
		d.warnings++
	}
	if d.secret != "" {
		detail = strings.ReplaceAll(detail, d.secret, "******")
	}
	// One line per check: pgx lists the addresses it tried on lines of
	// their own.
	detail = strings.Join(strings.Fields(strings.NewReplacer(":\n", ": ", "\n", "; ").Replace(detail)), " ")
	fmt.Fprintf(d.out, "%-4s  %-16s  %s\n", status, check, detail)
}

// doctorCommand runs `platform doctor`: it checks what `platform serve`
// with the same flags, environment and --config file needs (the database,
// its migrations, the role, the model providers of every agent, the
// listen address) and prints what is wrong. Exit code 0: no failure
// (warnings allowed); 1: some check failed; 2: bad flags.
func doctorCommand(p Platform, args []string, stdout, stderr io.Writer) int {
	fs, flags, lf := serveFlags(stderr)
	fs.Init("platform doctor", 0)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: platform doctor [serve flags]\n\nChecks what platform serve with the same flags, environment and --config needs; exit code 1 if a check fails.")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "platform doctor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := *flags
	lf.dev = cfg.dev
	d := &doctor{out: stdout}
	ctx := context.Background()

	if err := cfg.check(); err != nil {
		d.report(statusFail, "flags", err.Error())
	} else if _, err := lf.logger(io.Discard); err != nil {
		d.report(statusFail, "flags", err.Error())
	} else {
		d.report(statusOK, "flags", "serve would accept them")
	}
	tenantModels := d.database(ctx, cfg)
	d.models(ctx, p, cfg, tenantModels)
	d.listen(cfg.addr)

	switch {
	case d.failures > 0:
		fmt.Fprintf(stdout, "%d check(s) failed, %d warning(s)\n", d.failures, d.warnings)
		return 1
	case d.warnings > 0:
		fmt.Fprintf(stdout, "no failure, %d warning(s)\n", d.warnings)
	default:
		fmt.Fprintln(stdout, "all checks passed")
	}
	return 0
}

// loginRole reports whether row-level security confines the login role.
func (d *doctor) loginRole(ctx context.Context, owner *pgxpool.Pool, dev bool) {
	row, err := db.New(owner).GetLoginRolePrivileges(ctx)
	if err != nil {
		d.report(statusWarn, "role", fmt.Sprintf("could not read the login role's privileges: %v", err))
		return
	}
	switch problems := privilegeProblems(row); {
	case len(problems) > 0 && !dev:
		d.report(statusWarn, "role", fmt.Sprintf("login role %s %s: %s", row.RoleName, strings.Join(problems, "; it "), leastPrivilegeAdvice))
	case len(problems) > 0:
		d.report(statusOK, "role", fmt.Sprintf("login role %s is not confined by row-level security, acceptable with --dev only", row.RoleName))
	default:
		d.report(statusOK, "role", fmt.Sprintf("login role %s is confined by row-level security", row.RoleName))
	}
}

// tenantModel is a model a tenant's enabled agent names.
type tenantModel struct {
	tenant, agent, model string
}

// database checks DATABASE_URL, the server, the migrations and the roles,
// and returns the models tenants' enabled agents name (none when the
// database could not tell).
func (d *doctor) database(ctx context.Context, cfg serveConfig) []tenantModel {
	owner, pcfg := d.reachDatabase(ctx, cfg)
	if owner == nil {
		return nil
	}
	defer owner.Close()
	checkCtx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	if !d.migrations(checkCtx, owner, cfg) {
		return nil
	}
	d.loginRole(checkCtx, owner, cfg.dev)
	return d.appRole(checkCtx, cfg, pcfg)
}

// reachDatabase checks DATABASE_URL and connects as its role (the schema
// owner's pool, of two connections); nil when it cannot.
func (d *doctor) reachDatabase(ctx context.Context, cfg serveConfig) (*pgxpool.Pool, *pgxpool.Config) {
	raw := os.Getenv("DATABASE_URL")
	pcfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		// The parse error may quote the URL, password included.
		d.report(statusFail, "DATABASE_URL", "not a valid PostgreSQL URL (postgres://user:password@host:5432/database?sslmode=...)")
		d.report(statusSkip, "database", "no valid DATABASE_URL")
		return nil, nil
	}
	d.secret = pcfg.ConnConfig.Password
	where := describe(pcfg)
	if raw == "" {
		d.report(statusOK, "DATABASE_URL", where+" (unset: the default; set DATABASE_URL for another server)")
	} else {
		d.report(statusOK, "DATABASE_URL", where)
	}
	pcfg.MaxConns = 2
	cfg.database.adjustOwner(pcfg)
	connectCtx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	owner, err := pgxpool.NewWithConfig(connectCtx, pcfg)
	if err == nil {
		if err = owner.Ping(connectCtx); err != nil {
			owner.Close()
		}
	}
	if err != nil {
		d.report(statusFail, "database", fmt.Sprintf("cannot reach PostgreSQL at %s: %v: %s", where, err, unreachableAdvice(err, pcfg.ConnConfig)))
		return nil, nil
	}
	version := "?"
	if conn, err := owner.Acquire(connectCtx); err == nil {
		version = conn.Conn().PgConn().ParameterStatus("server_version")
		conn.Release()
	}
	d.report(statusOK, "database", "reachable, PostgreSQL "+version)
	var autovacuum string
	if err := owner.QueryRow(connectCtx, `SHOW autovacuum`).Scan(&autovacuum); err == nil && autovacuum != "on" {
		// Every turn updates rows (a session's head, a claimed
		// interrupt): without vacuum their dead versions pile up, and
		// without statistics the planner picks indexes blind; turns slow
		// down as the tables grow (a soak here fell from 411 to 169
		// cycles/s in ten minutes).
		d.report(statusWarn, "autovacuum", "off on this server: dead rows are never removed nor statistics gathered, and turns slow down as tables grow; set autovacuum = on")
	}
	return owner, pcfg
}

// migrations reports whether every migration is applied.
func (d *doctor) migrations(ctx context.Context, owner *pgxpool.Pool, cfg serveConfig) bool {
	sqlDB := stdlib.OpenDBFromPool(owner)
	defer sqlDB.Close()
	pending, err := migrations.Pending(ctx, sqlDB)
	switch {
	case err != nil:
		d.report(statusFail, "migrations", fmt.Sprintf("cannot read the schema version: %v", err))
		return false
	case len(pending) > 0:
		how := "run `platform migrate up` as the schema owner"
		if cfg.migrate {
			how += " (serve applies them at start-up when DATABASE_URL's role owns the schema)"
		}
		d.report(statusFail, "migrations", fmt.Sprintf("%d pending: %s: %s", len(pending), strings.Join(pending, ", "), how))
		return false
	}
	d.report(statusOK, "migrations", "all applied")
	return true
}

// appRole checks that the application role reads the tenants and their
// agents, and returns the models the enabled agents name.
func (d *doctor) appRole(ctx context.Context, cfg serveConfig, pcfg *pgxpool.Config) []tenantModel {
	app, err := pgstore.NewAppPoolWith(ctx, databaseURL(), cfg.database.appPoolOptions())
	if err == nil {
		defer app.Close()
		err = pgstore.CheckAppRole(ctx, app)
	}
	if err != nil {
		if hint := appRoleHint(err, pcfg.ConnConfig.User); hint != nil {
			err = hint
		}
		d.report(statusFail, "application role", err.Error())
		return nil
	}
	store := pgstore.New(app)
	defer store.Close()
	tenants, err := store.ListTenants(ctx)
	if err != nil {
		d.report(statusFail, "application role", fmt.Sprintf("holdpoint_app cannot list the tenants (%v): re-run `platform migrate up` as the schema owner to restore its grants", err))
		return nil
	}
	var out []tenantModel
	agents := 0
	for _, t := range tenants {
		recs, err := store.ListTenantAgents(ctx, t.ID)
		if err != nil {
			d.report(statusFail, "application role", fmt.Sprintf("holdpoint_app cannot read tenant %s's agents (%v): re-run `platform migrate up` as the schema owner to restore its grants", t.ID, err))
			return nil
		}
		for _, r := range recs {
			if r.DisabledAt != nil {
				continue
			}
			agents++
			def, err := agentdef.ParseJSON(r.Definition)
			if err != nil {
				d.report(statusFail, "tenant agent", fmt.Sprintf("tenant %s, agent %s: its stored definition does not parse (%v): apply it again", t.ID, r.Name, err))
				continue
			}
			out = append(out, tenantModel{tenant: t.ID, agent: r.Name, model: def.Model})
		}
	}
	d.report(statusOK, "application role", fmt.Sprintf("holdpoint_app reads %d tenant(s) and their %d enabled agent(s)", len(tenants), agents))
	return out
}

// models checks the model providers: the default model, the program's
// agents, and every model an enabled tenant agent names.
func (d *doctor) models(ctx context.Context, p Platform, cfg serveConfig, tenants []tenantModel) {
	var keys []string
	for _, group := range [][]string{{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, {"ANTHROPIC_API_KEY"}, {"OPENAI_API_KEY", "OPENAI_BASE_URL"}, {"OLLAMA_HOST"}} {
		for _, k := range group {
			if os.Getenv(k) != "" {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		d.report(statusOK, "model providers", "none configured: only the offline demo model answers")
	} else {
		d.report(statusOK, "model providers", "set: "+strings.Join(keys, ", "))
	}

	log := slog.New(slog.DiscardHandler)
	model, err := genkitmodel.FromEnv(ctx, log)
	if err != nil {
		d.report(statusFail, "default model", err.Error())
		return
	}
	if model == nil {
		model = demo.NewModel()
	}
	d.report(statusOK, "default model", model.Name())

	agents, err := p.agents(ctx, log, model, p.Demo && (cfg.dev || cfg.access.demo))
	if err != nil {
		d.report(statusFail, "agents", err.Error())
	} else {
		names := make([]string, len(agents))
		for i, a := range agents {
			names[i] = a.Name
		}
		if len(names) == 0 {
			d.report(statusOK, "agents", "none compiled in (--dev or --demo serve the demo agents)")
		} else {
			d.report(statusOK, "agents", fmt.Sprintf("%d compiled in: %s", len(agents), strings.Join(names, ", ")))
		}
	}

	needOllama := slices.ContainsFunc(p.Agents, func(a agentkit.Definition) bool {
		return slices.ContainsFunc(a.ModelNames(), isOllama)
	})
	if len(tenants) > 0 {
		tenantsNeed, ok := d.tenantModels(ctx, log, p, tenants)
		if !ok {
			return
		}
		needOllama = needOllama || tenantsNeed
	}
	if needOllama || os.Getenv("OLLAMA_HOST") != "" {
		d.ollama(needOllama)
	}
}

// tenantModels checks that the model of every enabled tenant agent is
// available; needOllama reports that one is Ollama's, ok that the check
// could run.
func (d *doctor) tenantModels(ctx context.Context, log *slog.Logger, p Platform, tenants []tenantModel) (needOllama, ok bool) {
	catalog, err := genkitmodel.NewCatalog(ctx, log)
	if err != nil {
		d.report(statusFail, "tenant agents", err.Error())
		return false, false
	}
	resolver := p.tenantModels(catalog)
	failed := 0
	for _, t := range tenants {
		if err := resolver.Check(t.model); err != nil {
			failed++
			d.report(statusFail, "tenant agent", fmt.Sprintf("tenant %s, agent %s: %v", t.tenant, t.agent, err))
		}
		needOllama = needOllama || isOllama(t.model)
	}
	if failed == 0 {
		d.report(statusOK, "tenant agents", fmt.Sprintf("the models of all %d enabled agent(s) are available", len(tenants)))
	}
	return needOllama, true
}

// isOllama reports whether a model name is served by Ollama.
func isOllama(name string) bool {
	return strings.HasPrefix(name, genkitmodel.ProviderOllama+"/")
}

// ollama checks that the Ollama server answers a connection: a failure
// when an agent needs it, a warning otherwise.
func (d *doctor) ollama(needed bool) {
	u, err := url.Parse(genkitmodel.OllamaBaseURL())
	if err != nil || u.Host == "" {
		d.report(statusFail, "ollama", "OLLAMA_HOST is not an address (host:port or http://host:port)")
		return
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	conn, err := net.DialTimeout("tcp", host, doctorTimeout)
	if err != nil {
		status := statusWarn
		if needed {
			status = statusFail
		}
		d.report(status, "ollama", fmt.Sprintf("nothing answers at %s (%v): start Ollama or fix OLLAMA_HOST", host, err))
		return
	}
	conn.Close()
	d.report(statusOK, "ollama", "answers at "+host)
}

// listen checks that serve could listen on addr.
func (d *doctor) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		hint := "choose another --addr"
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another process listens there (a running server?): stop it or choose another --addr"
		}
		d.report(statusFail, "listen address", fmt.Sprintf("%s: %v: %s", addr, err, hint))
		return
	}
	ln.Close()
	d.report(statusOK, "listen address", addr+" is free")
}

// unreachableAdvice is what to do when connecting with cfg failed with
// err: create the database when the server says it does not exist
// (SQLSTATE 3D000), else start the server or fix DATABASE_URL.
func unreachableAdvice(err error, cfg *pgx.ConnConfig) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		return "start it, or fix DATABASE_URL"
	}
	return fmt.Sprintf("create it: createdb -h %s -p %d -U %s %s (or in psql: CREATE DATABASE %s;), or fix DATABASE_URL",
		cfg.Host, cfg.Port, cfg.User, cfg.Database, pgx.Identifier{cfg.Database}.Sanitize())
}
