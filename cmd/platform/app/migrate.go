package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// migrateCommand runs `platform migrate up|status`.
func migrateCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("platform migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: platform migrate up|status [flags]")
		fs.PrintDefaults()
	}
	var lf logFlags
	lf.register(fs)
	// Accept flags on either side of the action: `migrate --log-format text up`
	// and `migrate up --log-format text`.
	var action string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if action == "" && fs.NArg() > 0 {
		action = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "platform migrate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	switch action {
	case "up", "status":
	case "down", "down-to", "redo", "reset":
		fmt.Fprintf(stderr, "platform migrate: %s is refused: migrations only go forward, since undoing one drops tables and the sessions and audit trail in them.\n"+
			"To go back, restore a backup of the database taken before migrate up (and run the release that matches it).\n", action)
		return 2
	default:
		fs.Usage()
		return 2
	}
	log, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "platform migrate:", err)
		return 2
	}

	return runMigrate(action, log, stdout)
}

// runMigrate connects to DATABASE_URL and runs the action (up or status).
func runMigrate(action string, log *slog.Logger, stdout io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := pgstore.ConnConfig(databaseURL())
	if err != nil {
		log.Error("DATABASE_URL is not a valid PostgreSQL URL")
		return 1
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		log.Error("cannot reach PostgreSQL (set DATABASE_URL)", "err", err)
		return 1
	}
	switch action {
	case "up":
		if err := migrations.Up(ctx, db); err != nil {
			log.Error("migrate up failed", "err", migrationHint(err, cfg.User))
			return 1
		}
		log.Info("migrations applied")
	case "status":
		if err := migrations.Status(ctx, db, stdout); err != nil {
			log.Error("migrate status failed", "err", err)
			return 1
		}
	}
	return 0
}
