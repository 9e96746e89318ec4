package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestTranslateOutages checks that every way the database can be gone
// becomes store.ErrUnavailable, and that a statement's own errors do not.
func TestTranslateOutages(t *testing.T) {
	t.Parallel()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"out of memory", &pgconn.PgError{Code: "53200"}, true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"read-only server (standby, failover)", &pgconn.PgError{Code: "25006"}, true},
		{"connection reset", fmt.Errorf("receive message: %w", reset), true},
		{"EOF mid-query", fmt.Errorf("unexpected EOF: %w", io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"conn closed", fmt.Errorf("wrapped: %w", pgconn.ErrConnClosed), true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"statement cancelled", &pgconn.PgError{Code: "57014"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"other", errors.New("boom"), false},
	} {
		got := errors.Is(translate(tc.err), store.ErrUnavailable)
		if got != tc.want {
			t.Errorf("%s: unavailable %v, want %v", tc.name, got, tc.want)
		}
		if got && store.AsError(translate(tc.err)).RetryAfter <= 0 {
			t.Errorf("%s: no RetryAfter", tc.name)
		}
	}
}

// TestAcquireTimeout holds the pool's only connection: a store call waits
// the acquire bound and is answered unavailable, not queued for ever. A
// caller that gives up gets its own error.
func TestAcquireTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := NewAppPoolWith(ctx, testdb.URL(t), func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	defer s.Close()
	s.SetAcquireTimeout(200 * time.Millisecond)
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	start := time.Now()
	_, err = s.ListTenants(ctx)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("with the pool exhausted: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s, want about the 200ms bound", d)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ListTenants(dctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("caller's deadline while acquiring: %v, want ErrUnavailable", err)
	}
	cctx, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := s.ListTenants(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
}

// TestReadOnlyServer: on a server that takes no writes (a standby, or a
// primary fenced read-only in a failover) a write is UNAVAILABLE with a
// Retry-After, the readiness check fails, and neither keeps the
// connection: the pool's next one goes where the URL points now.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := NewAppPoolWith(ctx, url, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
		cfg.MaxConns = 1
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	defer s.Close()
	// backend is the server process of the pool's one connection.
	backend := func() uint32 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		return c.Conn().PgConn().PID()
	}

	before := backend()
	_, err = s.CreateTenant(ctx, "read-only-"+strconv.Itoa(int(time.Now().UnixNano()%1e9)), "r")
	if !errors.Is(err, store.ErrUnavailable) || store.AsError(err).RetryAfter <= 0 {
		t.Errorf("a write on a read-only server: %v, want ErrUnavailable with a Retry-After", err)
	}
	after := backend()
	if after == before {
		t.Errorf("the connection that met a read-only server (pid %d) is still pooled", before)
	}
	if err := CheckWritable(ctx, pool); !readOnlyServer(err) {
		t.Errorf("CheckWritable on a read-only server: %v, want SQLSTATE 25006", err)
	}
	if backend() == after {
		t.Errorf("the connection CheckWritable found read-only (pid %d) is still pooled", after)
	}

	writable, err := NewAppPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer writable.Close()
	if err := CheckWritable(ctx, writable); err != nil {
		t.Errorf("CheckWritable on a writable server: %v", err)
	}
}
