package testdb

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestIsolation runs two parallel tests and checks that each gets its own
// migrated database: both see the seeded tenant, neither sees the other's
// writes. It reads every tenant, so it connects as the owner.
func TestIsolation(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		names = map[string]string{}
	)
	// Both subtests write first and then wait for each other, so a shared
	// database would show up as a row written by the sibling.
	var written sync.WaitGroup
	written.Add(2)
	for _, tenant := range []string{"alpha", "beta"} {
		t.Run(tenant, func(t *testing.T) {
			t.Parallel()
			// Done must happen even if this subtest fails early, or its
			// sibling would wait forever.
			done := sync.OnceFunc(written.Done)
			defer done()
			pool := OwnerPool(t, URL(t))
			ctx := t.Context()

			var seeded string
			if err := pool.QueryRow(ctx, "SELECT name FROM tenants WHERE id = 'default'").Scan(&seeded); err != nil {
				t.Fatalf("seeded tenant: %v", err)
			}
			var count int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM tenants").Scan(&count); err != nil {
				t.Fatal(err)
			}
			if count != 1 {
				t.Fatalf("fresh database has %d tenants, want only the seeded one", count)
			}
			if _, err := pool.Exec(ctx, "INSERT INTO tenants (id, name) VALUES ($1, $1)", tenant); err != nil {
				t.Fatalf("insert: %v", err)
			}
			done()
			written.Wait()

			rows, err := pool.Query(ctx, "SELECT id FROM tenants ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"default", tenant}
			slices.Sort(want)
			if got, want := strings.Join(ids, ","), strings.Join(want, ","); got != want {
				t.Errorf("tenants = %s, want %s", got, want)
			}

			var db string
			if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			names[tenant] = db
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		if names["alpha"] == "" || names["alpha"] == names["beta"] {
			t.Errorf("subtests shared a database: %v", names)
		}
	})
}

// TestDropOnCleanup checks that a test's database is gone once its cleanups
// have run, so runs do not leave databases behind.
func TestDropOnCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		pool := Pool(t)
		if err := pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := setup().connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after cleanup", name)
	}
}

// TestPoolIsTheApplicationRole checks that Pool connects as the server does:
// as holdpoint_app, which row-level security restricts (no tenant set, no
// rows), and that OwnerPool on the same database sees every row.
func TestPoolIsTheApplicationRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	app := Pool(t)
	owner := OwnerPool(t, app.Config().ConnString())
	var role string
	var tenants int
	if err := app.QueryRow(ctx, "SELECT current_user, (SELECT count(*) FROM tenants)").Scan(&role, &tenants); err != nil {
		t.Fatal(err)
	}
	if role != "holdpoint_app" || tenants != 0 {
		t.Errorf("Pool runs as %s and sees %d tenants without setting one; want holdpoint_app and 0", role, tenants)
	}
	if err := owner.QueryRow(ctx, "SELECT current_user, (SELECT count(*) FROM tenants)").Scan(&role, &tenants); err != nil {
		t.Fatal(err)
	}
	if role == "holdpoint_app" || tenants != 1 {
		t.Errorf("OwnerPool runs as %s and sees %d tenants; want the URL's role and the seeded one", role, tenants)
	}
}

// TestDatabaseName checks that names stay valid identifiers within the
// length limit and that dropStale can read their creation time back.
func TestDatabaseName(t *testing.T) {
	t.Parallel()
	long := "TestSomething/with a very long subtest name that goes on and on and on/case-1"
	for _, in := range []string{"TestX", long, "Test/ünïcode ✓"} {
		name := databaseName(in)
		if len(name) > maxIdentifier {
			t.Errorf("%q -> %q: %d bytes, over %d", in, name, len(name), maxIdentifier)
		}
		if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			t.Errorf("%q -> %q: not a plain identifier", in, name)
		}
		if age := time.Since(createdAt(name)); age < 0 || age > time.Minute {
			t.Errorf("%q -> %q: creation time not recoverable (age %v)", in, name, age)
		}
	}
	if a, b := databaseName(long), databaseName(long); a == b {
		t.Errorf("two names for the same test are equal: %s", a)
	}
	if !createdAt("hpt_my_test_db").IsZero() {
		t.Error("a foreign name was read as carrying a creation time")
	}
}
