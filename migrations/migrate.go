package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
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

// HasPending reports whether some migration is not applied yet. Like
// Pending, it changes nothing and takes no lock, so a readiness probe never
// waits behind a running migration.
func HasPending(ctx context.Context, db *sql.DB) (bool, error) {
	pending, err := Pending(ctx, db)
	return len(pending) > 0, err
}

// Pending lists the files of the migrations not applied yet, in order. It
// only reads: goose's own checks create the version table when it is
// missing, which a role without the right to change the schema (the
// server's login role) may not do.
func Pending(ctx context.Context, db *sql.DB) ([]string, error) {
	p, err := newProvider(db)
	if err != nil {
		return nil, err
	}
	store, err := database.NewStore(database.DialectPostgres, goose.DefaultTablename)
	if err != nil {
		return nil, fmt.Errorf("migrations: version store: %w", err)
	}
	ext, ok := store.(database.StoreExtender)
	if !ok {
		return nil, errors.New("migrations: the postgres version store cannot check that its table exists")
	}
	exists, err := ext.TableExists(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("migrations: pending: %w", err)
	}
	// The newest row of a version says whether it is applied now (goose
	// records a rollback as a row with is_applied false).
	applied := map[int64]bool{}
	if exists {
		rows, err := store.ListMigrations(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("migrations: pending: %w", err)
		}
		for _, r := range rows { // newest first
			if _, seen := applied[r.Version]; !seen {
				applied[r.Version] = r.IsApplied
			}
		}
	}
	var pending []string
	for _, s := range p.ListSources() {
		if !applied[s.Version] {
			pending = append(pending, path.Base(s.Path))
		}
	}
	return pending, nil
}
