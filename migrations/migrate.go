package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// newProvider builds a goose provider over the embedded files. Up takes a
// session-level advisory lock through it, so several instances starting at
// once apply each migration exactly once; the others wait and then find
// nothing pending.
func newProvider(db *sql.DB) (*goose.Provider, error) {
	// Probe every second for up to five minutes: the default five-second
	// interval would make every instance but the first start-up slower than
	// the migrations themselves.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithSessionLocker(locker),
		// Only the embedded SQL files count: a Go migration registered
		// globally by some imported package must not sneak in.
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Up applies every pending migration, serialised across processes by a
// Postgres advisory lock.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Status writes one line per migration: version, file name, and whether it
// is applied (with when) or pending.
func Status(ctx context.Context, db *sql.DB, w io.Writer) error {
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	statuses, err := p.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrations: status: %w", err)
	}
	for _, s := range statuses {
		state := string(s.State)
		if s.State == goose.StateApplied {
			state += " " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		if _, err := fmt.Fprintf(w, "%05d  %-40s  %s\n", s.Source.Version, path.Base(s.Source.Path), state); err != nil {
			return err
		}
	}
	return nil
}

// HasPending reports whether some migration is not applied yet. It takes no
// lock, so a readiness probe never waits behind a running migration.
func HasPending(ctx context.Context, db *sql.DB) (bool, error) {
	p, err := newProvider(db)
	if err != nil {
		return false, err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("migrations: pending: %w", err)
	}
	return pending, nil
}
