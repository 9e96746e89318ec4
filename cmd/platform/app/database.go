package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service/pgstore"
)

// Values of --database-pooler.
const (
	poolerNone        = "none"
	poolerSession     = "session"
	poolerTransaction = "transaction"
)

// databaseConfig is how serve reaches PostgreSQL beyond DATABASE_URL: what
// stands between them, and where the LISTEN connections go.
type databaseConfig struct {
	pooler    string
	listenURL string
}

func (d *databaseConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&d.pooler, "database-pooler", poolerNone, "what DATABASE_URL reaches: none (PostgreSQL itself) or session (a pooler in session mode) change nothing; "+
		"transaction (PgBouncer with pool_mode=transaction) keeps no state on a connection beyond one transaction: no prepared statements "+
		"(default_query_exec_mode cache_statement becomes cache_describe), the application role set per transaction, "+
		"and no LISTEN through DATABASE_URL (see --listen-database-url)")
	fs.StringVar(&d.listenURL, "listen-database-url", "", "PostgreSQL URL of the LISTEN connections only (aborts and live-event wake-ups across instances); empty: DATABASE_URL. "+
		"With --database-pooler=transaction name PostgreSQL itself here (not the pooler), or instances hear each other only by polling (a warning at start-up); "+
		"set it through the environment, since it usually holds a password")
}

func (d *databaseConfig) check() error {
	switch d.pooler {
	case poolerNone, poolerSession, poolerTransaction:
	default:
		return fmt.Errorf("--database-pooler: %q is not one of none, session, transaction", d.pooler)
	}
	if d.listenURL != "" {
		if _, err := pgstore.ConnConfig(d.listenURL); err != nil {
			// The parse error may quote the URL, password included.
			return errors.New("--listen-database-url is not a valid PostgreSQL URL")
		}
	}
	return nil
}

// transaction reports whether DATABASE_URL goes through a transaction
// pooler.
func (d *databaseConfig) transaction() bool {
	return d.pooler == poolerTransaction
}

// adjustOwner adapts the configuration of a pool that runs as DATABASE_URL's
// role (migrations, doctor's checks) to the pooler.
func (d *databaseConfig) adjustOwner(cfg *pgxpool.Config) {
	if d.transaction() {
		pgstore.TransactionPooling(cfg)
	}
}

// appPoolOptions is the hook of pgstore.NewAppPoolWith for the pooler.
func (d *databaseConfig) appPoolOptions() func(*pgxpool.Config) {
	if !d.transaction() {
		return nil
	}
	return pgstore.TransactionPooling
}

// configureListen points the store's LISTEN connections at
// --listen-database-url, after checking it reaches PostgreSQL; behind a
// transaction pooler without one, it turns them off and warns once that
// instances will hear each other's aborts and events by polling.
func (d *databaseConfig) configureListen(ctx context.Context, log *slog.Logger, store *pgstore.PgStore, main *pgxpool.Config) error {
	if d.listenURL == "" {
		if d.transaction() {
			store.DisableListen()
			log.Warn("--database-pooler=transaction without --listen-database-url: no LISTEN through the pooler, so this instance learns of aborts and events "+
				"made on other instances by polling (a detached turn stops within about 250 ms of an abort, a live event arrives within about a second); "+
				"set --listen-database-url (HOLDPOINT_LISTEN_DATABASE_URL) to PostgreSQL itself for instant notifications",
				"database", describe(main))
		}
		return nil
	}
	cc, err := pgstore.ConnConfig(d.listenURL)
	if err != nil {
		return errors.New("--listen-database-url is not a valid PostgreSQL URL")
	}
	where := fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(connectCtx, cc.Copy())
	if err != nil {
		return fmt.Errorf("cannot reach PostgreSQL at %s (--listen-database-url): %w", where, err)
	}
	_ = conn.Close(connectCtx)
	if d.transaction() && cc.Host == main.ConnConfig.Host && cc.Port == main.ConnConfig.Port {
		log.Warn("--listen-database-url names the same server as DATABASE_URL, which goes through a transaction pooler: "+
			"if it is the pooler, notifications across instances will not arrive; name PostgreSQL itself", "listen", where)
	}
	store.ListenThrough(cc)
	log.Info("listening for notifications on a direct connection", "listen", where)
	return nil
}
