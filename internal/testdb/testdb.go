package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver that goose runs on

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/migrations"
)

// DefaultAdminURL is the server used when DATABASE_URL is unset: the local
// cluster on the standard port with trust authentication.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const (
	// templatePrefix names template databases; the suffix is a hash of the
	// migration files, so changing a migration builds a new template.
	templatePrefix = "holdpoint_tmpl_"
	// testPrefix names per-test databases, so leftovers of killed runs can be
	// recognised and dropped without touching anything else on the server.
	testPrefix = "hpt_"
	// staleAfter is how old a leftover (another hash's template, or a test
	// database whose cleanup never ran) must be before it is dropped. Other
	// checkouts with other migrations may be testing against the same server
	// right now; the delay keeps them from dropping each other's databases.
	staleAfter = 6 * time.Hour
	// maxIdentifier is Postgres's NAMEDATALEN-1; longer names are truncated
	// silently, which could make two "unique" names collide.
	maxIdentifier = 63
)

// state is built once per test process and shared by all its tests. It
// holds no connection: each operation on the admin database opens one and
// closes it, so a test binary ends with no goroutines of testdb's running.
type state struct {
	adminURL string
	template string
	err      error

	// rebuild serialises rebuilding the template after someone else dropped
	// it while this process was running.
	rebuild sync.Mutex
}

var (
	once   sync.Once
	shared state
)

// setup connects to the admin database and makes sure the template exists.
// Errors are remembered so that every test reports the same cause.
func setup() *state {
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.adminURL = os.Getenv("DATABASE_URL")
		if shared.adminURL == "" {
			shared.adminURL = DefaultAdminURL
		}
		hash, err := migrationsHash()
		if err != nil {
			shared.err = err
			return
		}
		shared.template = templatePrefix + hash
		if err := shared.ensureTemplate(ctx); err != nil {
			shared.err = err
			return
		}
		if conn, err := shared.connect(ctx); err == nil {
			shared.dropStale(ctx, conn)
			conn.Close(ctx)
		}
	})
	return &shared
}

// connect opens a connection to the admin database.
func (s *state) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return nil, fmt.Errorf("testdb: connect to %s: %w", redact(s.adminURL), err)
	}
	return conn, nil
}

// migrationsHash identifies the schema by the names and contents of the
// migration files.
func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, p)
		if err != nil {
			return err
		}
		// Length-prefix both parts so that moving bytes between a name and
		// a body changes the hash.
		fmt.Fprintf(h, "%d:%s%d:", len(p), p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("testdb: hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensureTemplate creates and migrates the template unless a finished one
// exists. Test binaries of several packages run at once, so the work happens
// under an advisory lock in the admin database and is re-checked after
// acquiring it.
func (s *state) ensureTemplate(ctx context.Context) error {
	// The lock is session-level; closing the connection releases it however
	// this function exits.
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if ready, err := s.templateReady(ctx, conn); err != nil || ready {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(s.template)); err != nil {
		return fmt.Errorf("testdb: lock template %s: %w", s.template, err)
	}

	if ready, err := s.templateReady(ctx, conn); err != nil || ready {
		return err
	}
	ident := pgx.Identifier{s.template}.Sanitize()
	// A database with this name that is not marked as a template is the
	// remains of a build that died half-way: start over.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("testdb: drop unfinished template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("testdb: create template: %w", err)
	}
	if err := migrate(ctx, withDatabase(s.adminURL, s.template)); err != nil {
		return err
	}
	// IS_TEMPLATE is the "finished" mark checked above. ALLOW_CONNECTIONS
	// false keeps stray sessions (a developer's psql, a leaked pool) out, as
	// any session on the template makes CREATE DATABASE ... TEMPLATE fail.
	// The comment records the build time for dropStale.
	for _, q := range []string{
		"ALTER DATABASE " + ident + " ALLOW_CONNECTIONS false",
		"COMMENT ON DATABASE " + ident + " IS " + quoteLiteral("holdpoint test template built "+time.Now().UTC().Format(time.RFC3339)),
		"ALTER DATABASE " + ident + " IS_TEMPLATE true",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("testdb: finish template: %w", err)
		}
	}
	return nil
}

// templateReady reports whether the template exists and was finished.
func (s *state) templateReady(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ready bool
	err := conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)",
		s.template).Scan(&ready)
	if err != nil {
		return false, fmt.Errorf("testdb: look up template: %w", err)
	}
	return ready, nil
}

// migrate applies the migrations to the database at url and closes every
// connection it opened, because a template must have no sessions when it is
// cloned.
func migrate(ctx context.Context, url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("testdb: open template: %w", err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("testdb: migrate template: %w", err)
	}
	return db.Close()
}

// dropStale drops, best effort, templates of other migration hashes and
// test databases left by killed runs, once they are older than staleAfter.
func (s *state) dropStale(ctx context.Context, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, `
		SELECT datname, datistemplate, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database
		WHERE datname LIKE 'holdpoint\_tmpl\_%' OR datname LIKE 'hpt\_%'`)
	if err != nil {
		return
	}
	type candidate struct {
		name       string
		isTemplate bool
	}
	var stale []candidate
	for rows.Next() {
		var name, comment string
		var isTemplate bool
		if err := rows.Scan(&name, &isTemplate, &comment); err != nil {
			rows.Close()
			return
		}
		if name == s.template {
			continue
		}
		var built time.Time
		if strings.HasPrefix(name, templatePrefix) {
			built, _ = time.Parse(time.RFC3339, strings.TrimPrefix(comment, "holdpoint test template built "))
		} else {
			built = createdAt(name)
		}
		// An unparsable time means an unfinished build or a foreign name:
		// leave it alone rather than guess.
		if !built.IsZero() && time.Since(built) > staleAfter {
			stale = append(stale, candidate{name, isTemplate})
		}
	}
	rows.Close()
	for _, c := range stale {
		ident := pgx.Identifier{c.name}.Sanitize()
		if c.isTemplate {
			// Postgres refuses to drop a database marked as a template.
			if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE false"); err != nil {
				continue
			}
		}
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)") //nolint:errcheck // best effort
	}
}

// URL creates an empty, fully migrated database for this test, drops it when
// the test ends, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	s := setup()
	if s.err != nil {
		t.Fatalf("%v (set DATABASE_URL to an admin URL of a running PostgreSQL, or use `make test`)", s.err)
	}
	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.createFromTemplate(ctx, ident); err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The test's context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.drop(ctx, ident); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	return withDatabase(s.adminURL, name)
}

// drop drops a test's database. FORCE ends sessions the test leaked, so a
// forgotten pool cannot leave the database behind.
func (s *state) drop(ctx context.Context, ident string) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	return err
}

// createFromTemplate clones the template, retrying while the server reports
// the template busy and rebuilding it if another process dropped it.
func (s *state) createFromTemplate(ctx context.Context, ident string) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	q := "CREATE DATABASE " + ident + " TEMPLATE " + pgx.Identifier{s.template}.Sanitize()
	delay := 10 * time.Millisecond
	rebuilt := false
	for {
		_, err := conn.Exec(ctx, q)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55006" && ctx.Err() == nil:
			// object_in_use: "source database is being accessed by other
			// users". A session on the template is always short-lived here
			// (connections to it are disallowed once built), so wait it out.
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return err
			}
			delay = min(2*delay, 500*time.Millisecond)
		case errors.As(err, &pgErr) && pgErr.Code == "3D000" && !rebuilt:
			// invalid_catalog_name: the template is gone, dropped by a
			// concurrent run with other migrations. Build it again once.
			rebuilt = true
			s.rebuild.Lock()
			err := s.ensureTemplate(ctx)
			s.rebuild.Unlock()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// Pool returns a connection pool on a fresh database for this test whose
// connections run as the application role, holdpoint_app, as the server's
// do (see pgstore.NewAppPool): row-level security applies. The pool is
// closed when the test ends, before the database is dropped.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return open(t, URL(t), func(ctx context.Context, conn *pgx.Conn) error {
		return db.New(conn).SetAppRole(ctx)
	})
}

// OwnerPool returns a connection pool on the database at url (from URL, or
// one the test created itself) connected as the URL's role: the tables' owner, a superuser under `make
// test`, which row-level security does not restrict. It is for a test's own
// set-up and assertions, never for the code under test. The pool is closed
// when the test ends.
func OwnerPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	return open(t, url, nil)
}

// open opens a pool on url, closed when the test ends; afterConnect, when
// set, runs on each new connection.
func open(t testing.TB, url string, afterConnect func(context.Context, *pgx.Conn) error) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testdb: parse the database URL: %v", err)
	}
	cfg.AfterConnect = afterConnect
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	// Cleanups run last-in first-out, so this runs before URL's drop.
	t.Cleanup(pool.Close)
	return pool
}

// databaseName derives a unique database name from the test name: readable
// in pg_database, carrying its creation time for dropStale, and at most 63
// bytes.
func databaseName(testName string) string {
	var b strings.Builder
	underscore := false
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			underscore = false
		} else if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	var random [5]byte
	if _, err := rand.Read(random[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	suffix := "_" + strconv.FormatInt(time.Now().Unix(), 36) + "_" + hex.EncodeToString(random[:])
	prefix := strings.Trim(b.String(), "_")
	if room := maxIdentifier - len(testPrefix) - len(suffix); len(prefix) > room {
		prefix = strings.TrimRight(prefix[:room], "_")
	}
	return testPrefix + prefix + suffix
}

// createdAt reads back the creation time databaseName put into a name, or
// returns the zero time if the name does not carry one.
func createdAt(name string) time.Time {
	parts := strings.Split(name, "_")
	if len(parts) < 3 || len(parts[len(parts)-1]) != 10 {
		return time.Time{}
	}
	if _, err := hex.DecodeString(parts[len(parts)-1]); err != nil {
		return time.Time{}
	}
	sec, err := strconv.ParseInt(parts[len(parts)-2], 36, 64)
	// Names carrying a time before this package existed are not ours.
	if err != nil || sec < 1735689600 || sec > time.Now().Unix() {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

// lockKey maps a template name to an advisory lock key, so that checkouts
// with different migrations build their templates concurrently.
func lockKey(name string) int64 {
	sum := sha256.Sum256([]byte("holdpoint testdb " + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// withDatabase returns the admin URL with its database replaced by name. It
// accepts both URL and keyword/value connection strings.
func withDatabase(adminURL, name string) string {
	if u, err := url.Parse(adminURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		u.RawPath = ""
		return u.String()
	}
	// In a keyword/value string a repeated keyword overrides the first.
	return adminURL + " dbname=" + name
}

// quoteLiteral quotes s as an SQL string literal; COMMENT ON does not take
// parameters.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// redact hides a password in a connection URL before it reaches a log.
func redact(adminURL string) string {
	if u, err := url.Parse(adminURL); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "DATABASE_URL"
}

// WaitForEventHorizon waits, up to two minutes, until every event in
// the database's log is final: past the horizon (holdpoint_horizon,
// migration 00043), older than every transaction of the database that may
// still commit one (the readers of the log send an event only then). A
// test that times how soon events arrive waits for this first.
func WaitForEventHorizon(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var past bool
		if err := pool.QueryRow(context.Background(),
			`SELECT coalesce(holdpoint_horizon() > max(xid), true) FROM interrupt_events`).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the event horizon did not pass the database's events within two minutes")
		}
	}
}
