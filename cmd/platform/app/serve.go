package app

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/startstop"
	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/eventhub"
	"github.com/holdpoint/holdpoint/service/genkitmodel"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/readiness"
	"github.com/holdpoint/holdpoint/service/streams"
	"github.com/holdpoint/holdpoint/service/telemetry"
	"github.com/holdpoint/holdpoint/service/tenantagents"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// serveConfig is what the serve flags chose.
type serveConfig struct {
	addr  string
	dev   bool
	grace time.Duration
	// streamRetention is how long a streaming turn's frames stay
	// rejoinable after it ended.
	streamRetention time.Duration
	// migrate applies pending migrations at start-up as DATABASE_URL's
	// role; without it serve changes no schema and refuses to start while
	// migrations are pending, so it can run as a role that may not.
	migrate bool
	// sweep is how often the deadline sweeper looks for due interrupts.
	sweep time.Duration
	// heartbeat and heartbeatTimeout pace detached turns: how often they
	// prove they are alive, and after how long without it another instance
	// takes them over (and their snapshot reads as expired).
	heartbeat        time.Duration
	heartbeatTimeout time.Duration
	// lostToolCallAfter is how long a tool call may stay running with no
	// job running its turn before the sweep marks it unknown.
	lostToolCallAfter time.Duration
	// access is authentication and input bounds.
	access accessConfig
	// models resolves the models of tenants' agents.
	models tenantagents.ModelResolver
	// webhooks configures the webhook dispatcher.
	webhooks webhookConfig
	// metricsAddr serves /metrics on a listener of its own ("": on addr,
	// to the bearer of metricsToken, if set); metricsTenantLabels reports
	// the pending interrupts per tenant.
	metricsAddr         string
	metricsToken        string
	metricsTenantLabels bool
	// earlyClaims: every resume claims before its turn goes on.
	earlyClaims bool
	// prune is the retention sweeper.
	prune pruneConfig
	// limits bound turns and detached turns.
	limits limitsConfig
	// database is what stands between serve and PostgreSQL.
	database databaseConfig
	// banner is where the start-up URLs are printed for a person (stderr
	// with --dev); nil: in the log only.
	banner io.Writer
}

// webhookConfig is what the webhook flags chose.
type webhookConfig struct {
	publicURL string
	loopback  bool
	retries   string
	lease     time.Duration
	timeout   time.Duration
}

func (w *webhookConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&w.publicURL, "public-url", "", "where users reach this server (e.g. https://holdpoint.example.com), for the links in webhook payloads; empty: the listen address")
	fs.BoolVar(&w.loopback, "allow-loopback-webhooks", false, "let webhook endpoints be loopback addresses (always on with --dev): for tests and a receiver on this machine")
	fs.StringVar(&w.retries, "webhook-retries", "", "comma-separated waits before each retry of a failed webhook delivery (default 5s,30s,2m,10m,30m,1h,2h,4h,8h,12h: about 27 h); after the last, the delivery is dead")
	fs.DurationVar(&w.lease, "webhook-lease", webhooks.DefaultLease, "how long an instance holds a webhook delivery it attempts; if it dies, another instance attempts it after this")
	fs.DurationVar(&w.timeout, "webhook-timeout", webhooks.DefaultTimeout, "time a webhook receiver has to answer one attempt")
}

// schedule parses --webhook-retries.
func (w *webhookConfig) schedule() ([]time.Duration, error) {
	if w.retries == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, part := range strings.Split(w.retries, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--webhook-retries: %q is not a positive duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// connectTimeout bounds the start-up connection to PostgreSQL, so a wrong
// DATABASE_URL fails fast with a clear message instead of hanging.
const connectTimeout = 10 * time.Second

// serveFlags is a new set of serve's flags, which set cfg and lf: serve
// and doctor parse them, and the configuration table documents them.
func serveFlags(stderr io.Writer) (fs *flag.FlagSet, cfg *serveConfig, lf *logFlags) {
	fs = flag.NewFlagSet("platform serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, lf = new(serveConfig), new(logFlags)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.BoolVar(&cfg.dev, "dev", false, "development mode: default tenant, no authentication, demo agents")
	fs.BoolVar(&cfg.migrate, "migrate", true, "apply pending migrations at start-up as DATABASE_URL's role, which must own the schema; "+
		"with --migrate=false serve changes no schema and refuses to start while migrations are pending (apply them with platform migrate up as the owner)")
	fs.DurationVar(&cfg.grace, "shutdown-grace", 20*time.Second, "time in-flight requests get to finish after SIGINT/SIGTERM")
	fs.DurationVar(&cfg.streamRetention, "stream-retention", streams.DefaultRetention, "how long a streaming turn's frames are kept after it ended, for clients that rejoin the stream (x-genkit-stream-id, Last-Event-ID); then they are pruned")
	fs.DurationVar(&cfg.sweep, "sweep-interval", time.Second, "how often interrupt deadlines are applied")
	fs.DurationVar(&cfg.heartbeat, "heartbeat-interval", 5*time.Second, "how often a detached turn refreshes its heartbeat")
	fs.BoolVar(&cfg.earlyClaims, "early-claims", false, "make every protocol resume claim its interrupts before the model runs, in a transaction of its own "+
		"(by default an unstreamed resume that runs no tool claims them with its turn's write, one commit fewer): for slow or costly models")
	fs.DurationVar(&cfg.heartbeatTimeout, "heartbeat-timeout", 15*time.Second, "age of a heartbeat after which a detached turn is taken over or reads as expired")
	fs.DurationVar(&cfg.lostToolCallAfter, "lost-tool-call-after", service.DefaultLostToolCallAfter, "age after which a tool call still running, whose turn no detached job runs, "+
		"is marked unknown (it may have run; a human decides): keep it well above any tool's run time")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "serve the Prometheus metrics at /metrics on this address (e.g. 127.0.0.1:9090), open to whoever reaches it: "+
		"keep it on a private network; empty: /metrics on --addr if --metrics-token is set, else nowhere")
	fs.StringVar(&cfg.metricsToken, "metrics-token", "", "with no --metrics-addr, serve /metrics on --addr to requests bearing this token (Authorization: Bearer <token>; at least 32 characters; "+
		"tenants' keys never read the metrics, which describe every tenant); set it through the environment rather than the command line")
	fs.BoolVar(&cfg.metricsTenantLabels, "metrics-tenant-labels", false, "report the pending interrupts metrics per tenant (label tenant); one series per tenant, so only with few tenants")
	cfg.access.register(fs)
	cfg.webhooks.register(fs)
	cfg.prune.register(fs)
	cfg.limits.register(fs)
	cfg.database.register(fs)
	lf.register(fs)
	addConfigFlag(fs)
	return fs, cfg, lf
}

// check validates the serve flags together; doctor runs it too.
func (cfg *serveConfig) check() error {
	if cfg.sweep <= 0 {
		return errors.New("--sweep-interval must be positive")
	}
	if cfg.metricsToken != "" && len(cfg.metricsToken) < 32 {
		return errors.New("--metrics-token must be at least 32 characters")
	}
	if err := cfg.prune.check(); err != nil {
		return err
	}
	if err := cfg.limits.check(); err != nil {
		return err
	}
	if err := cfg.database.check(); err != nil {
		return err
	}
	if _, err := cfg.webhooks.schedule(); err != nil {
		return err
	}
	if cfg.webhooks.lease <= cfg.webhooks.timeout {
		return errors.New("--webhook-lease must be longer than --webhook-timeout")
	}
	// Without authentication every request acts for the default tenant;
	// that is only acceptable on a developer's machine.
	return cfg.access.check(cfg.addr, cfg.dev)
}

// serveCommand runs `platform serve`.
func serveCommand(p Platform, args []string, stderr io.Writer) int {
	fs, flags, lf := serveFlags(stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	cfg := *flags
	lf.dev = cfg.dev
	if cfg.dev {
		cfg.banner = stderr
	}
	log, code := checkServeArgs(fs, &cfg, lf, stderr)
	if code >= 0 {
		return code
	}
	// Log lines written within a traced request or turn name its trace.
	log = slog.New(telemetry.LogHandler(log.Handler()))

	// The model comes first: Genkit's Init takes over SIGINT/SIGTERM and
	// FromEnv resets them, which would undo a handler installed before.
	model, err := genkitmodel.FromEnv(context.Background(), log)
	if err != nil {
		log.Error("model provider", "err", err)
		return 1
	}
	if model == nil {
		// No provider configured: the deterministic demo model keeps the
		// server and its demo agents usable offline.
		model = demo.NewModel()
	}
	if cfg.access.demo && !p.Demo {
		fmt.Fprintln(stderr, "platform serve: --demo: this program has no demo agents")
		return 2
	}
	agents, err := p.agents(context.Background(), log, model, p.Demo && (cfg.dev || cfg.access.demo))
	if err != nil {
		log.Error("agent definitions", "err", err)
		fmt.Fprintln(stderr, "platform serve:", err)
		return 1
	}
	// Tenants' agents name their models after start-up: one Genkit
	// instance, started now, builds them on demand.
	catalog, err := genkitmodel.NewCatalog(context.Background(), log)
	if err != nil {
		log.Error("model provider", "err", err)
		return 1
	}
	cfg.models = p.tenantModels(catalog)

	// The server owns shutdown: the first signal starts a graceful stop,
	// and stop() restores the default handling so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, stop, log, cfg, agents); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// checkServeArgs refuses arguments and flag values serve cannot use, and
// builds the logger; code is the exit code to end with, or -1 to go on.
func checkServeArgs(fs *flag.FlagSet, cfg *serveConfig, lf *logFlags, stderr io.Writer) (*slog.Logger, int) {
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "platform serve: unexpected argument %q\n", fs.Arg(0))
		return nil, 2
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, "platform serve:", err)
		return nil, 2
	}
	log, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "platform serve:", err)
		return nil, 2
	}
	return log, -1
}

// serve runs the server until ctx is cancelled, then shuts down gracefully.
func serve(ctx context.Context, stopSignals func(), log *slog.Logger, cfg serveConfig, agents []*service.Agent) error {
	pool, db, store, err := openStore(ctx, log, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	defer db.Close()
	defer store.Close()
	// Traces (when the OTEL_* environment asks for them) and metrics.
	tracing, err := telemetry.TracingFromEnv(ctx)
	if err != nil {
		return err
	}
	defer flushTraces(tracing, log)
	metrics := telemetry.New(telemetry.Options{Pending: store.PendingInterruptStats, HeldEvents: store.HeldEvents, TenantLabels: cfg.metricsTenantLabels, Logger: log})
	metrics.Registry().MustRegister(newPoolCollector(pool))

	// The services, stopped last started first: the listeners, then the
	// background loops, then readiness. The loops watch ctx as well, so
	// at the first signal they end at once (the event hub then ends the
	// live event streams, which would otherwise hold up the listener's
	// graceful shutdown) and Stop waits for each.
	var services startstop.Group
	defer services.Stop()
	// One probe decides readiness for /readyz, the work routes and the
	// background workers.
	ready := readiness.New(readyProbe(pool, db), readiness.Options{Logger: log})
	if err := services.Start(ctx, startstop.Func("readiness", ready.Run)); err != nil {
		return err
	}
	p := &platform{cfg: cfg, log: log, store: store, metrics: metrics, tracing: tracing, readiness: ready}
	rt := p.runtime()
	models, err := registerAgents(ctx, log, store, rt, agents)
	if err != nil {
		return err
	}
	manager := p.tenantAgents(rt)
	summary, tenantAgents := reportAgents(ctx, log, store, len(agents))
	web, err := p.listen(rt, manager)
	if err != nil {
		return err
	}
	metricsAt, err := p.start(ctx, &services, rt, web)
	if err != nil {
		return err
	}
	urls := newStartupURLs(web.ln.Addr(), metricsAt, cfg.metricsToken != "")
	log.Info("serving", append([]any{
		"addr", web.addr(), "dev", cfg.dev, "auth", !cfg.dev, "agents", rt.AgentNames(), "tenant_agents", tenantAgents,
		"summary", summary, "models", models, "tracing", tracing.Enabled}, urls.logArgs()...)...)
	if cfg.banner != nil {
		urls.print(cfg.banner, rt.AgentNames(), summary)
	}
	select {
	case err := <-web.served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stopSignals()
	p.shutdown(&services, rt)
	return nil
}

// shutdown stops the services (the listener gracefully, within the grace
// period) and then the runtime's turns.
func (p *platform) shutdown(services *startstop.Group, rt *service.Runtime) {
	p.log.Info("shutting down", "grace", p.cfg.grace.String())
	deadline := time.Now().Add(p.cfg.grace)
	services.Stop()
	// Detached turns are cancelled here; their pending snapshots expire
	// once their heartbeat goes stale.
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), 5*time.Second))
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		p.log.Warn("background turns did not stop in time", "err", err)
	}
	p.log.Info("stopped")
}

// flushTraces sends the traces still buffered, for at most 5 seconds.
func flushTraces(tracing *telemetry.Tracing, log *slog.Logger) {
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tracing.Shutdown(flushCtx); err != nil {
		log.Warn("flushing traces failed", "err", err)
	}
}

// platform is what serve builds its parts from.
type platform struct {
	cfg       serveConfig
	log       *slog.Logger
	store     *pgstore.PgStore
	metrics   *telemetry.Metrics
	tracing   *telemetry.Tracing
	readiness *readiness.Readiness
	eventIDs  *keys.EventIDs
	hub       *eventhub.Hub
	streams   *streams.Hub
}

// runtime is the turn engine, with the serve flags' limits.
func (p *platform) runtime() *service.Runtime {
	cfg := p.cfg
	return service.NewRuntime(p.store, service.Options{
		Readiness:         p.readiness,
		Logger:            p.log,
		HeartbeatInterval: cfg.heartbeat,
		HeartbeatTimeout:  cfg.heartbeatTimeout,
		Observer:          p.metrics,
		TracerProvider:    p.tracing.Provider,
		EarlyClaims:       cfg.earlyClaims,
		Limits:            cfg.limits.turn,
		Detach:            cfg.limits.detach,
		LostToolCallAfter: cfg.lostToolCallAfter,
	})
}

// tenantAgents serves the agents tenants define next to the compiled ones.
func (p *platform) tenantAgents(rt *service.Runtime) *tenantagents.Manager {
	cfg := p.cfg
	manager := &tenantagents.Manager{Store: p.store, Runtime: rt, Models: cfg.models, AllowLoopback: cfg.dev || cfg.access.loopbackTools, Log: p.log,
		// An endpoint's answer wraps the output ({"output": ...}); one
		// past the bound is not read whole.
		Client: httptool.Client{MaxBody: int64(cfg.limits.turn.ToolOutputBytes) + 4096}}
	rt.SetTenantAgents(manager)
	return manager
}

// listen opens the API's listener, with its handler.
func (p *platform) listen(rt *service.Runtime, manager *tenantagents.Manager) (*httpService, error) {
	cfg := p.cfg
	p.eventIDs = keys.NewEventIDs(p.store.SigningKeys)
	p.hub = eventhub.New(p.store, p.log)
	// Durable streams: kept, followed across instances, pruned.
	p.streams = streams.New(p.store, p.log, cfg.streamRetention)
	var metricsOnAPI http.Handler
	if cfg.metricsAddr == "" && cfg.metricsToken != "" {
		metricsOnAPI = p.metrics.Handler()
	}
	handler := httpapi.New(rt, httpapi.Options{
		Logger:          p.log,
		Auth:            authenticator(cfg.dev, p.store),
		BodyLimit:       cfg.access.maxBody,
		RateLimit:       cfg.access.rateLimit,
		RateBurst:       cfg.access.rateBurst,
		IPRateLimit:     cfg.access.ipRateLimit,
		IPRateBurst:     cfg.access.ipRateBurst,
		BodyTimeout:     cfg.access.bodyTimeout,
		MaxEventStreams: cfg.access.maxEventStreams,
		TrustedProxies:  cfg.access.trustedProxies,
		Events:          p.hub,
		Streams:         p.streams,
		Agents:          manager,
		// Tenants' webhook endpoints, under the same address rules as
		// their HTTP tools.
		Webhooks:       &webhooks.Manager{Store: p.store, AllowLoopback: cfg.dev || cfg.webhooks.loopback},
		EventIDs:       p.eventIDs,
		Metrics:        p.metrics,
		MetricsHandler: metricsOnAPI,
		MetricsToken:   cfg.metricsToken,
		TracerProvider: p.tracing.Provider,
		Readiness:      p.readiness,
	})
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return newHTTPService(handler, ln, cfg.grace, p.log), nil
}

// background is the loops every instance runs beside its listener.
func (p *platform) background(rt *service.Runtime, addr string) []startstop.Service {
	cfg := p.cfg
	// Webhooks: every instance delivers the outbox; a stopped dispatcher
	// has recorded its attempts in flight.
	publicURL := cfg.webhooks.publicURL
	if publicURL == "" {
		publicURL = "http://" + addr
	}
	schedule, _ := cfg.webhooks.schedule()
	dispatcher := &webhooks.Dispatcher{
		Store: p.store, IDs: p.eventIDs, Owner: rt.InstanceID(), AllowLoopback: cfg.dev || cfg.webhooks.loopback,
		Schedule: schedule, Lease: cfg.webhooks.lease, Timeout: cfg.webhooks.timeout, PublicURL: publicURL, Log: p.log,
		Observer: p.metrics, TracerProvider: p.tracing.Provider, Ready: p.readiness.Ready,
	}
	return []startstop.Service{
		// The approvals inbox's sweeps: deadlines, escalations, tool calls
		// lost with their turn, and the engine's repair of stranded decisions.
		startstop.Func("deadline sweeper", func(ctx context.Context) { inbox.New(rt).RunDeadlineSweeper(ctx, cfg.sweep) }),
		// Detached turns: take over jobs of stopped instances, and hear
		// aborts made on any instance.
		startstop.Func("detached turns", rt.RunBackground),
		startstop.Func("event hub", p.hub.Run),
		startstop.Func("stream hub", p.streams.Run),
		// Retention: one instance at a time prunes what policies let go.
		startstop.Func("pruner", func(ctx context.Context) { cfg.prune.run(ctx, p.store, p.log, p.readiness.Ready) }),
		startstop.Func("webhook dispatcher", dispatcher.Run),
	}
}

// start starts the background loops, the metrics' listener and then the
// API's, and returns the metrics' address. On failure the listener is
// closed; the services started are stopped by the caller's group.
func (p *platform) start(ctx context.Context, services *startstop.Group, rt *service.Runtime, web *httpService) (string, error) {
	if err := services.Start(ctx, p.background(rt, web.addr())...); err != nil {
		web.close()
		return "", err
	}
	metricsAt, err := p.startMetrics(ctx, services)
	if err != nil {
		web.close()
		return "", err
	}
	return metricsAt, services.Start(ctx, web)
}

// startMetrics starts the metrics' own listener (--metrics-addr) as a
// service of the group, and returns its address ("" without one).
func (p *platform) startMetrics(ctx context.Context, services *startstop.Group) (string, error) {
	if p.cfg.metricsAddr == "" {
		return "", nil
	}
	addr, stop, err := metricsServer(p.cfg.metricsAddr, p.metrics.Handler(), p.log)
	if err != nil {
		return "", fmt.Errorf("listen (--metrics-addr): %w", err)
	}
	return addr, services.Start(ctx, startstop.Func("metrics listener", func(ctx context.Context) {
		<-ctx.Done()
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stop(stopCtx)
	}))
}

// openStore migrates (with --migrate) or checks the schema, connects,
// warms the pool's connections (warmPool), and returns the pool, a
// database/sql handle over it, and the one store that serves the runtime,
// the live events and the accounts.
func openStore(ctx context.Context, log *slog.Logger, cfg serveConfig) (*pgxpool.Pool, *sql.DB, *pgstore.PgStore, error) {
	if cfg.migrate {
		if err := migrateAtStartup(ctx, log, cfg.database); err != nil {
			return nil, nil, nil, err
		}
	}
	pool, db, err := openDatabase(ctx, log, cfg.database)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*pgxpool.Pool, *sql.DB, *pgstore.PgStore, error) {
		db.Close()
		pool.Close()
		return nil, nil, nil, err
	}
	if !cfg.migrate {
		if err := requireMigrated(ctx, db); err != nil {
			return fail(err)
		}
	}
	if !cfg.dev {
		warnUnlessLeastPrivilege(ctx, log, pool)
	}
	store := pgstore.New(pool)
	if err := cfg.database.configureListen(ctx, log, store, pool.Config()); err != nil {
		store.Close()
		return fail(err)
	}
	warmHeap()
	warmPool(ctx, log, store)
	return pool, db, store, nil
}

// warmPool opens the pool's connections and warms each (the statements
// of an approval cycle prepared and run once, rolled back), so that the
// first turns cost what later ones do (pgstore.WarmPool). A failure leaves
// the pool as it is, only colder: it is logged, not fatal.
func warmPool(ctx context.Context, log *slog.Logger, store *pgstore.PgStore) {
	start := time.Now()
	n, err := store.WarmPool(ctx)
	if err != nil {
		log.Warn("database pool not fully warmed; the first turns may be slower", "connections", n, "err", err)
		return
	}
	log.Info("database pool warmed", "connections", n, "took", time.Since(start).Round(time.Millisecond).String())
}

// readyProbe is the readiness probe: the pool hands out a connection that
// answers (a pool saturated for the probe's whole timeout fails it too) on
// a server that takes writes (not a standby, nor a primary fenced in a
// failover), and no migration of this build is pending.
func readyProbe(pool *pgxpool.Pool, db *sql.DB) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := pgstore.CheckWritable(ctx, pool); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		pending, err := migrations.HasPending(ctx, db)
		if err != nil {
			return err
		}
		if pending {
			return errors.New("migrations pending")
		}
		return nil
	}
}

// migrateAtStartup applies pending migrations as the user DATABASE_URL
// names (the schema owner), on a connection of its own. Several instances
// may start at once: Up serialises them on goose's session-level advisory
// lock, so each migration is applied exactly once. That lock cannot be
// taken through a transaction pooler (it would stay with whichever server
// connection took it): behind one, nothing pending is checked through the
// pooler, and what is pending is applied through --listen-database-url,
// the direct connection, or serve refuses to start.
func migrateAtStartup(ctx context.Context, log *slog.Logger, dbc databaseConfig) error {
	owner, cfg, err := openOwner(ctx, databaseURL(), "DATABASE_URL", dbc.adjustOwner)
	if err != nil {
		return err
	}
	defer owner.Close()
	db := stdlib.OpenDBFromPool(owner)
	defer db.Close()
	if dbc.transaction() {
		pending, err := migrations.Pending(ctx, db)
		if err != nil {
			return fmt.Errorf("check the schema version: %w", err)
		}
		if len(pending) == 0 {
			return nil
		}
		if dbc.listenURL == "" {
			return fmt.Errorf("%d migration(s) pending (%s), and the migration lock cannot be taken through a transaction pooler (--database-pooler=transaction): "+
				"apply them with `platform migrate up` on a direct connection as the schema owner, or set --listen-database-url to PostgreSQL itself as the owner",
				len(pending), strings.Join(pending, ", "))
		}
		direct, directCfg, err := openOwner(ctx, dbc.listenURL, "--listen-database-url", nil)
		if err != nil {
			return err
		}
		defer direct.Close()
		cfg = directCfg
		db = stdlib.OpenDBFromPool(direct)
		defer db.Close()
	}
	if err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("apply migrations: %w", migrationHint(err, cfg.ConnConfig.User))
	}
	log.Info("migrations applied", "database", describe(cfg))
	return nil
}

// openOwner connects a small pool to url (named what in errors) as its
// role, after adjust (if set) changes its configuration.
func openOwner(ctx context.Context, url, what string, adjust func(*pgxpool.Config)) (*pgxpool.Pool, *pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, nil, fmt.Errorf("%s is not a valid PostgreSQL URL", what)
	}
	cfg.MaxConns = 2
	if adjust != nil {
		adjust(cfg)
	}
	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(connectCtx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL at %s: %w", describe(cfg), err)
	}
	if err := pool.Ping(connectCtx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("cannot reach PostgreSQL at %s (set %s): %w", describe(cfg), what, err)
	}
	return pool, cfg, nil
}

// requireMigrated fails unless every migration of this build is applied:
// serve with --migrate=false must not run queries against a schema they
// were not written for.
func requireMigrated(ctx context.Context, db *sql.DB) error {
	pending, err := migrations.Pending(ctx, db)
	if err != nil {
		return fmt.Errorf("check the schema version: %w", err)
	}
	if len(pending) > 0 {
		return fmt.Errorf("the database schema is behind this build, %d migration(s) pending (%s): "+
			"apply them as the schema owner with `platform migrate up`; serve with --migrate=false changes no schema",
			len(pending), strings.Join(pending, ", "))
	}
	return nil
}

// openDatabase connects to DATABASE_URL for the server's queries: a pgx
// pool whose transactions run as the application role (row-level security
// applies), and a database/sql handle over it for the readiness probe.
func openDatabase(ctx context.Context, log *slog.Logger, dbc databaseConfig) (*pgxpool.Pool, *sql.DB, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, nil, errors.New("DATABASE_URL is not a valid PostgreSQL URL")
	}
	where := describe(cfg)

	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	// Turns are I/O bound (model calls, short transactions); NewAppPool
	// keeps a few connections per core.
	pool, err := pgstore.NewAppPoolWith(connectCtx, databaseURL(), dbc.appPoolOptions())
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL at %s: %w", where, err)
	}
	if err := pgstore.CheckAppRole(connectCtx, pool); err != nil {
		pool.Close()
		if hint := appRoleHint(err, cfg.ConnConfig.User); hint != nil {
			return nil, nil, fmt.Errorf("connect to PostgreSQL at %s: %w", where, hint)
		}
		return nil, nil, fmt.Errorf("cannot reach PostgreSQL at %s (set DATABASE_URL): %w", where, err)
	}
	log.Info("database connected", "database", where, "max_conns", pool.Config().MaxConns, "role", "holdpoint_app",
		"pooler", dbc.pooler, "query_exec_mode", pool.Config().ConnConfig.DefaultQueryExecMode.String())
	// OpenDBFromPool keeps no idle connections of its own, so migrations
	// and readiness probes never starve the store.
	return pool, stdlib.OpenDBFromPool(pool), nil
}

// describe names a database without its password, for logs and errors.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// registerAgents registers the compiled agents and records their names
// (recordCompiledAgents); it returns each one's model name.
func registerAgents(ctx context.Context, log *slog.Logger, store *pgstore.PgStore, rt *service.Runtime, agents []*service.Agent) (map[string]string, error) {
	models := map[string]string{}
	for _, a := range agents {
		if err := rt.Register(a); err != nil {
			return nil, fmt.Errorf("register agent %s: %w", a.Name, err)
		}
		if a.Model != nil {
			models[a.Name] = a.Model.Name()
		}
	}
	return models, recordCompiledAgents(ctx, log, store, rt)
}

// recordCompiledAgents records the names of the agents compiled into this
// instance before it serves, so that no tenant defines one through any
// instance, and warns of the tenants' agents that already have one (in
// any case): defined before an instance with that agent first started.
// They are left as they are; their turns run only as the tenant's agent
// (a snapshot resumes only on the definition that wrote it), but the
// compiled agent takes their name for new sessions here.
func recordCompiledAgents(ctx context.Context, log *slog.Logger, store *pgstore.PgStore, rt *service.Runtime) error {
	host, _ := os.Hostname()
	clash, err := store.RecordCompiledAgents(ctx, host+" "+rt.InstanceID(), rt.AgentNames())
	if err != nil {
		return fmt.Errorf("recording the compiled agents' names: %w", err)
	}
	for _, a := range clash {
		log.Warn("a tenant's agent has the name of an agent compiled into this server: the compiled agent serves new sessions of that name here; rename the tenant's agent",
			"tenant", a.TenantID, "agent", a.Name)
	}
	return nil
}
