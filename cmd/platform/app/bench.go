//go:build bench

package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdpoint/holdpoint/internal/bench"
	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// benchCommand runs `platform bench`: the approval cycle against a fresh
// database it creates on DATABASE_URL's server (and drops afterwards).
func benchCommand(args []string, stdout, stderr io.Writer) int {
	fs, b := benchFlags(stdout, stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if err := b.check(fs); err != nil {
		fmt.Fprintln(stderr, "platform bench:", err)
		return 2
	}
	ctx := context.Background()
	// The in-process server's heap, as serve warms it.
	warmHeap()
	if b.peers != nil {
		return b.runPeers(ctx, stderr)
	}
	dbURL, drop, err := createBenchDatabase(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "platform bench:", err)
		return 1
	}
	if !b.keep {
		defer drop()
	} else {
		fmt.Fprintln(stderr, "platform bench: keeping", dbURL)
	}
	stopProfile, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "platform bench:", err)
		return 1
	}
	defer stopProfile()
	row, err := b.run(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(stderr, "platform bench:", err)
		return 1
	}
	if b.markdown != "" {
		if err := bench.AppendMarkdown(b.markdown, row); err != nil {
			fmt.Fprintln(stderr, "platform bench: --markdown:", err)
			return 1
		}
	}
	return 0
}

// benchRun is what `platform bench`'s flags ask for: the approval cycle
// (cfg), or one of the runs of their own.
type benchRun struct {
	cfg        bench.Config
	inbox      bool
	inboxCfg   bench.InboxConfig
	idleCfg    bench.IdleConfig
	streamsCfg bench.StreamsConfig
	soakCfg    bench.SoakConfig
	peers      *peersRun
	dispatch   *bool
	keep       bool
	cpuProfile string
	markdown   string
}

// benchFlags registers `platform bench`'s flags.
func benchFlags(stdout, stderr io.Writer) (*flag.FlagSet, *benchRun) {
	fs := flag.NewFlagSet("platform bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	b := &benchRun{cfg: bench.Config{Out: stdout}, inboxCfg: bench.InboxConfig{Out: stdout, Queries: 500},
		idleCfg: bench.IdleConfig{Out: stdout}, streamsCfg: bench.StreamsConfig{Out: stdout}, soakCfg: bench.SoakConfig{Out: stdout}}
	cfg := &b.cfg
	fs.StringVar(&cfg.Mode, "mode", "inprocess", "inprocess (runtime calls) or http (the protocol over loopback HTTP)")
	fs.IntVar(&cfg.Sessions, "sessions", 32, "concurrent sessions (HTTP clients)")
	fs.IntVar(&cfg.Cycles, "cycles", 20, "approval cycles per session")
	fs.IntVar(&cfg.FlatCycles, "flat-cycles", 0, "also run one session of this many cycles and compare bytes written by its first and last 20")
	fs.IntVar(&cfg.CPUSplit, "cpu-split", 0, "also run one session of --cpu-split-cycles cycles and print this process's CPU per cycle (and the machine's, and the wall time) over its first N and last N cycles")
	fs.IntVar(&cfg.CPUSplitCycles, "cpu-split-cycles", 2000, "cycles of the long session of --cpu-split")
	fs.BoolVar(&b.keep, "keep", false, "keep the benchmark database")
	fs.BoolVar(&cfg.Stream, "stream", false, "with --mode http: streaming turns (Accept: text/event-stream), kept as durable streams")
	fs.BoolVar(&cfg.Detach, "detach", false, "with --mode inprocess: detach both turns of every cycle (each runs as a detached job; the client polls its snapshot every --detach-poll until it ends)")
	fs.DurationVar(&cfg.DetachPoll, "detach-poll", bench.DefaultDetachPoll, "how often a --detach client reads its pending snapshot")
	fs.BoolVar(&cfg.ColdPool, "cold-pool", false, "skip the pool's warm-up (pgstore.WarmPool, which platform serve runs before it listens): connections open as the first turns need them")
	fs.BoolVar(&cfg.EarlyClaims, "early-claims", false, "make every resume claim its interrupts before the model runs (serve --early-claims): one commit more per cycle")
	fs.DurationVar(&cfg.DBRTT, "db-rtt", 0, "add at least this round-trip time between the server and PostgreSQL (a delaying loopback proxy), as for a database on another host; the machine's timer granularity may make it more, and the bench prints the round trip measured")
	fs.BoolVar(&cfg.Waits, "waits", false, "sample where turns wait during the run (the run queue of PostgreSQL's backends and of this process, GC pauses, pool acquires, PostgreSQL wait events) and print it per cycle")
	fs.IntVar(&cfg.Slowest, "slowest", 0, "also print this many of the run's slowest turns, each with when it started, and the statistics keeper's ANALYZEs during the run")
	fs.BoolVar(&cfg.Calibrate, "calibrate", false, "first measure the server's commit ceiling (one-row insert transactions with 1 and 32 clients, 3 s each) and print the fraction of it the run reached")
	fs.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.BoolVar(&cfg.Webhooks.Subscribe, "webhook", false, "subscribe a loopback endpoint to every event and deliver during the run")
	b.dispatch = fs.Bool("webhook-dispatch", true, "deliver during the run (false: no dispatcher, to measure what a subscribed endpoint alone costs the turns)")
	fs.BoolVar(&cfg.Webhooks.Drain, "webhook-drain", false, "with --webhook: deliver nothing while the turns run, then deliver the events they left in the log and print the rate and the CPU per delivery (this process's and the rest of the machine's)")
	fs.IntVar(&cfg.Webhooks.Backlog, "webhook-backlog", 0, "queue this many deliveries to a slow loopback endpoint before the run")
	fs.DurationVar(&cfg.Webhooks.Slow, "webhook-slow", 2*time.Second, "how long the slow endpoint takes to answer (--webhook-backlog)")
	fs.IntVar(&cfg.Prune.Seed, "seed-prunable", 0, "seed old completed sessions (a tenant of their own) before the run: one per 8 of this number (8 rows each before migration 00029, 5 now)")
	fs.BoolVar(&cfg.Prune.Run, "prune", false, "prune the seeded rows while the turns run (--prune-batch, --prune-pause)")
	fs.IntVar(&cfg.Prune.Batch, "prune-batch", 0, "sessions per prune transaction (default: platform prune's)")
	fs.DurationVar(&cfg.Prune.Pause, "prune-pause", 0, "least wait between prune batches (default: platform prune's)")
	fs.Float64Var(&cfg.Prune.Share, "prune-share", 0, "the most of the wall time prune batches take (default: platform prune's)")
	b.otherRunFlags(fs)
	b.peersFlags(fs)
	fs.StringVar(&b.markdown, "markdown", "", "also append the run's figures as a row of its kind's table to this markdown file (created with its title if absent)")
	return fs, b
}

// otherRunFlags registers the flags of the runs other than the cycle's.
func (b *benchRun) otherRunFlags(fs *flag.FlagSet) {
	fs.BoolVar(&b.inbox, "inbox", false, "instead of the approval cycle: seed many tenants' interrupts and time the inbox and the daily report")
	fs.IntVar(&b.inboxCfg.Tenants, "inbox-tenants", 1000, "tenants to seed (--inbox)")
	fs.IntVar(&b.inboxCfg.PerTenant, "inbox-interrupts", 1000, "interrupts per tenant (--inbox)")
	fs.IntVar(&b.inboxCfg.Pending, "inbox-pending", 100, "pending interrupts per tenant (--inbox)")
	fs.IntVar(&b.idleCfg.Sessions, "idle-sessions", 0, "instead of the approval cycle: pause this many sessions on an approval and print the heap, RSS and goroutines they hold (make bench: 1000)")
	fs.IntVar(&b.streamsCfg.Streams, "streams", 0, "instead of the approval cycle: open this many GET /api/v1/events streams, print what they hold and check one cycle's event reaches each (make bench: 1000)")
	fs.DurationVar(&b.soakCfg.Duration, "soak", 0, "instead of the approval cycle: measure the peak rate (8 sessions, 10 s), then hold --soak-rate of it for this long, printing a line a minute (make soak: 10m)")
	fs.Float64Var(&b.soakCfg.Rate, "soak-rate", 0.5, "the fraction of the peak rate a soak holds (--soak)")
	fs.DurationVar(&b.soakCfg.Interval, "soak-interval", time.Minute, "how often a soak prints a line (--soak)")
}

// check refuses flags that ask for two runs, and carries the cycle's mode
// and sessions to a soak.
func (b *benchRun) check(fs *flag.FlagSet) error {
	b.cfg.Webhooks.NoDispatch = !*b.dispatch
	kinds := 0
	if err := b.checkPeers(fs); err != nil {
		return err
	}
	if c := b.cfg; c.CPUSplit < 0 || 2*c.CPUSplit > c.CPUSplitCycles {
		return fmt.Errorf("--cpu-split %d: want at most half of --cpu-split-cycles (%d)", c.CPUSplit, c.CPUSplitCycles)
	}
	for _, on := range []bool{b.inbox, b.idleCfg.Sessions > 0, b.streamsCfg.Streams > 0, b.soakCfg.Duration > 0, b.peers != nil} {
		if on {
			kinds++
		}
	}
	if kinds > 1 {
		return errors.New("--inbox, --idle-sessions, --streams, --soak and --peers are runs of their own: give one at a time")
	}
	if b.soakCfg.Duration > 0 {
		b.soakCfg.Mode = b.cfg.Mode
		if flagsSet(fs)["sessions"] {
			b.soakCfg.Sessions = b.cfg.Sessions
		}
	}
	return nil
}

// run runs what the flags ask for on the database at dbURL.
func (b *benchRun) run(ctx context.Context, dbURL string) (bench.Row, error) {
	switch {
	case b.inbox:
		b.inboxCfg.DatabaseURL = dbURL
		return bench.RunInbox(ctx, b.inboxCfg)
	case b.idleCfg.Sessions > 0:
		b.idleCfg.DatabaseURL = dbURL
		return bench.RunIdle(ctx, b.idleCfg)
	case b.streamsCfg.Streams > 0:
		b.streamsCfg.DatabaseURL = dbURL
		return bench.RunStreams(ctx, b.streamsCfg)
	case b.soakCfg.Duration > 0:
		b.soakCfg.DatabaseURL = dbURL
		return bench.RunSoak(ctx, b.soakCfg)
	default:
		b.cfg.DatabaseURL = dbURL
		return bench.Run(ctx, b.cfg)
	}
}

// startCPUProfile writes a CPU profile to path until stop (no profile
// when path is "").
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// createBenchDatabase creates and migrates a database of its own next to
// DATABASE_URL's, and returns its URL and a function that drops it.
func createBenchDatabase(ctx context.Context) (string, func(), error) {
	return createDatabase(ctx, "holdpoint_bench", true)
}

// createDatabase creates a database named prefix_<time> on DATABASE_URL's
// server, migrated or empty, and returns its URL and a function that
// drops it.
func createDatabase(ctx context.Context, prefix string, migrate bool) (string, func(), error) {
	base := databaseURL()
	cc, err := pgstore.ConnConfig(base)
	if err != nil {
		return "", nil, errors.New("DATABASE_URL is not a valid PostgreSQL URL")
	}
	admin, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return "", nil, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close(ctx)
		return "", nil, fmt.Errorf("create the benchmark database: %w", err)
	}
	drop := func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		admin.Close(context.Background())
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, fmt.Errorf("DATABASE_URL is not a URL")
	}
	u.Path = "/" + name
	dbURL := u.String()
	if !migrate {
		return dbURL, drop, nil
	}
	owner, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		drop()
		return "", nil, err
	}
	db := stdlib.OpenDBFromPool(owner)
	err = migrations.Up(ctx, db)
	db.Close()
	owner.Close()
	if err != nil {
		drop()
		return "", nil, err
	}
	return dbURL, drop, nil
}
