package pgstore

import (
	"context"
	"net/url"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestCheckQueryExecMode: the modes that send parameters without their
// types are refused; the others pass.
func TestCheckQueryExecMode(t *testing.T) {
	for mode, ok := range map[string]bool{"cache_statement": true, "cache_describe": true, "describe_exec": true, "exec": false, "simple_protocol": false} {
		cc, err := pgx.ParseConfig("postgres://u@db/x?default_query_exec_mode=" + mode)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckQueryExecMode(cc); (err == nil) != ok {
			t.Errorf("%s: %v", mode, err)
		}
	}
}

// TestAppPoolSize: a URL's pool_max_conns sizes the pool, below the
// default of 4 per core too; without it the pool holds 4 per core. The
// setting is the pool's: neither the pool's connections nor one opened
// from ConnConfig send it to PostgreSQL, which would refuse them.
func TestAppPoolSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testdb.URL(t)
	withSize := func(n string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", n)
		u.RawQuery = q.Encode()
		return u.String()
	}
	for dbURL, want := range map[string]int32{base: int32(4 * runtime.GOMAXPROCS(0)), withSize("1"): 1, withSize("64"): 64} {
		pool, err := NewAppPoolWith(ctx, dbURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = pool.Ping(ctx)
		got := pool.Config().MaxConns
		pool.Close()
		if err != nil || got != want {
			t.Errorf("%s: a pool of %d (%v); want %d", dbURL, got, err, want)
		}
	}
	cc, err := ConnConfig(withSize("3"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("a connection of its own from a URL with pool_max_conns: %v", err)
	}
	_ = conn.Close(ctx)
}
