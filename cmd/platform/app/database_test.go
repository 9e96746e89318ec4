package app

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestDatabasePoolerFlags: --database-pooler takes none, session or
// transaction; a listen URL must parse, and its error never quotes it.
func TestDatabasePoolerFlags(t *testing.T) {
	for _, c := range []struct {
		pooler, listen, err string
	}{
		{poolerNone, "", ""},
		{poolerSession, "", ""},
		{poolerTransaction, "postgres://u:secret@db:5432/x", ""},
		{"statement", "", "not one of none, session, transaction"},
		{poolerTransaction, "postgres://u:secret@db:badport/x", "--listen-database-url is not a valid PostgreSQL URL"},
	} {
		d := databaseConfig{pooler: c.pooler, listenURL: c.listen}
		err := d.check()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "secret")):
			t.Errorf("%+v: error %v, want %q without the password", c, err, c.err)
		}
	}
}

// TestTransactionPoolingConfig: behind a transaction pooler the pool keeps
// no prepared statements and sends no SET ROLE per connection; a URL's
// describe_exec stays; without a pooler nothing changes.
func TestTransactionPoolingConfig(t *testing.T) {
	for _, c := range []struct {
		pooler, url string
		want        pgx.QueryExecMode
	}{
		{poolerTransaction, "postgres://u@db/x", pgx.QueryExecModeCacheDescribe},
		{poolerTransaction, "postgres://u@db/x?default_query_exec_mode=describe_exec", pgx.QueryExecModeDescribeExec},
		{poolerNone, "postgres://u@db/x", pgx.QueryExecModeCacheStatement},
	} {
		cfg, err := pgxpool.ParseConfig(c.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AfterConnect = func(context.Context, *pgx.Conn) error { return nil }
		d := databaseConfig{pooler: c.pooler}
		if hook := d.appPoolOptions(); hook != nil {
			hook(cfg)
		}
		if cfg.ConnConfig.DefaultQueryExecMode != c.want {
			t.Errorf("%s %s: mode %v, want %v", c.pooler, c.url, cfg.ConnConfig.DefaultQueryExecMode, c.want)
		}
		if (cfg.AfterConnect == nil) != (c.pooler == poolerTransaction) {
			t.Errorf("%s: AfterConnect (SET ROLE) kept: %v", c.pooler, cfg.AfterConnect != nil)
		}
	}
}
