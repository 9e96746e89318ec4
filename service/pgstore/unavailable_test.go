package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
)

// TestTranslateOutages checks that every way the database can be gone
// becomes service.ErrUnavailable, and that a statement's own errors do not.
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
		got := errors.Is(translate(tc.err), service.ErrUnavailable)
		if got != tc.want {
			t.Errorf("%s: unavailable %v, want %v", tc.name, got, tc.want)
		}
		if got && service.AsError(translate(tc.err)).RetryAfter <= 0 {
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
	if !errors.Is(err, service.ErrUnavailable) {
		t.Fatalf("with the pool exhausted: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s, want about the 200ms bound", d)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ListTenants(dctx); !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("caller's deadline while acquiring: %v, want ErrUnavailable", err)
	}
	cctx, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := s.ListTenants(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
}
