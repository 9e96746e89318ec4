package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/migrations"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// connect opens a pool as the URL's user, closed when the test ends. As
// the test server's admin (a superuser, whom row-level security does not
// restrict) the tests see every tenant's rows through it.
func connect(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// emptyDatabase creates a database without any migration on the server of
// admin, owned by owner (admin's user if empty), drops it when the test
// ends, and returns its URL (as admin's user). Its name carries its
// creation time like testdb's, so a leftover of a killed run is dropped by
// a later one.
func emptyDatabase(t *testing.T, admin *pgxpool.Pool, owner string) string {
	t.Helper()
	var random [5]byte
	if _, err := rand.Read(random[:]); err != nil {
		t.Fatal(err)
	}
	name := "hpt_empty_" + strconv.FormatInt(time.Now().Unix(), 36) + "_" + hex.EncodeToString(random[:])
	ident := pgx.Identifier{name}.Sanitize()
	create := "CREATE DATABASE " + ident
	if owner != "" {
		create += " OWNER " + pgx.Identifier{owner}.Sanitize()
	}
	if _, err := admin.Exec(context.Background(), create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin.Config().ConnString())
	if err != nil {
		t.Fatalf("the tests need DATABASE_URL as a URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// createLoginRole creates a login role with the given attributes (e.g.
// "BYPASSRLS"), a member of holdpoint_app if member is set, like the
// holdpoint_server of docs/security.md. Roles are cluster-wide, so its name
// is unique, and it is dropped when the test ends; what it owns in admin's
// database goes back to admin's user.
func createLoginRole(t *testing.T, admin *pgxpool.Pool, attrs string, member bool) string {
	t.Helper()
	ctx := context.Background()
	name := "hpt_role_" + strings.ToLower(rand.Text()[:12])
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN "+attrs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		// What the role owns goes back to the admin rather than being dropped:
		// a table it owned may have views.
		if _, err := admin.Exec(ctx, "REASSIGN OWNED BY "+ident+" TO CURRENT_USER"); err != nil {
			t.Errorf("reassign owned by %s: %v", name, err)
		}
		if _, err := admin.Exec(ctx, "DROP OWNED BY "+ident); err != nil {
			t.Errorf("drop owned by %s: %v", name, err)
		}
		if _, err := admin.Exec(ctx, "DROP ROLE "+ident); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	if member {
		if _, err := admin.Exec(ctx, "GRANT holdpoint_app TO "+ident); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// asRole is dbURL logging in as role (the test server trusts local
// connections, so no password).
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// queryInt runs a query returning one integer.
func queryInt(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// invoke runs a turn of the banking agent with an API key and returns its
// output, failing the test unless the answer is a 200.
func (s *serveProcess) invoke(t *testing.T, key string, init service.AgentInit, in service.AgentInput) *service.AgentOutput {
	t.Helper()
	body, err := json.Marshal(map[string]any{"init": init, "data": in})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/api/agents/"+demo.BankingAgentName, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	client := &http.Client{Timeout: time.Minute}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var r struct {
		Result *service.AgentOutput `json:"result"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Result == nil {
		t.Fatalf("invoke answered %d %s", res.StatusCode, b)
	}
	return r.Result
}

// approve runs the approval cycle of the README for tenant key: ask for a
// transfer, get the userApproval interrupt, approve it. It returns the ids
// of the two snapshots.
func approve(t *testing.T, s *serveProcess, key string) (first, second string) {
	t.Helper()
	msg := &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart("Transfer $50 to account 12345")}}
	out := s.invoke(t, key, service.AgentInit{}, service.AgentInput{Message: msg})
	if out.FinishReason != service.FinishInterrupted {
		t.Fatalf("transfer request finished %q, want an interrupt: %+v", out.FinishReason, out)
	}
	var ref string
	for _, p := range out.Message.Content {
		if p.ToolRequest != nil && p.ToolRequest.Name == demo.ToolUserApproval {
			ref = p.ToolRequest.Ref
		}
	}
	if ref == "" {
		t.Fatalf("no userApproval request in %+v", out.Message)
	}
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
		Name: demo.ToolUserApproval, Ref: ref, Output: json.RawMessage(`{"approved":true}`),
	}}}}}
	done := s.invoke(t, key, service.AgentInit{SnapshotID: out.SnapshotID}, resume)
	if text := done.Message.Text(); !strings.HasPrefix(text, "Done: transferred $50.00 to account 12345") {
		t.Fatalf("approved turn answered %q", text)
	}
	return out.SnapshotID, done.SnapshotID
}

// TestServeAsLoginRole follows "Running with least privilege" of
// docs/security.md: an owner that is no superuser migrates its database; a
// login role that is only a member of holdpoint_app creates tenants and
// keys and serves with --migrate=false, without the start-up warning; a
// turn pauses on its interrupt and is approved over HTTP, and the rows are
// written. The login role, connected directly, sees and changes only the
// tenant its transaction names and cannot change the schema or the
// policies.
func TestServeAsLoginRole(t *testing.T) {
	t.Parallel()
	admin := connect(t, testdb.URL(t))
	// The owner first, so that its database is dropped before it is.
	ownerRole := createLoginRole(t, admin, "NOSUPERUSER", false)
	adminURL := emptyDatabase(t, admin, ownerRole)
	role := createLoginRole(t, admin, "NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE", true)
	serverURL := asRole(t, adminURL, role)

	if code, _, errOut := runPlatform(t, asRole(t, adminURL, ownerRole), "migrate", "up"); code != 0 {
		t.Fatalf("migrate up as the owner = %d:\n%s", code, errOut)
	}
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "other"} {
		if code, _, errOut := runPlatform(t, serverURL, "tenants", "create", tenant, "--id", tenant); code != 0 {
			t.Fatalf("tenants create as %s = %d:\n%s", role, code, errOut)
		}
		code, key, errOut := runPlatform(t, serverURL, "keys", "create", "--tenant", tenant, "--role", "client")
		if code != 0 {
			t.Fatalf("keys create as %s = %d:\n%s", role, code, errOut)
		}
		keys[tenant] = strings.TrimSpace(key)
	}

	// A tenant's bankingAgent, defined before any instance with the demo
	// agents started (the order issue 25 races on).
	prompt := filepath.Join("..", "..", "..", "examples", "tenant", "banking.prompt")
	if code, _, errOut := runPlatform(t, serverURL, "agents", "apply", "-f", prompt, "--tenant", "other", "--allow-loopback-tools"); code != 0 {
		t.Fatalf("agents apply as %s = %d:\n%s", role, code, errOut)
	}

	srv := startServe(t, serverURL, "--demo", "--migrate=false", "--rate-limit", "0")
	first, second := approve(t, srv, keys["acme"])
	approve(t, srv, keys["other"])
	if lines := srv.logLines("level=WARN", "login role"); len(lines) > 0 {
		t.Errorf("serve as %s warned about its role:\n%s", role, strings.Join(lines, "\n"))
	}
	// The login role recorded the compiled agents, and serve named the
	// tenant's agent that has one's name; from now on it is refused.
	if lines := srv.logLines("level=WARN", "compiled into this server", "tenant=other", "agent=bankingAgent"); len(lines) != 1 {
		t.Errorf("serve did not warn of other's bankingAgent:\n%s", srv.log())
	}
	if code, _, errOut := runPlatform(t, serverURL, "agents", "apply", "-f", prompt, "--tenant", "acme", "--allow-loopback-tools"); code == 0 || !strings.Contains(errOut, "own agents") {
		t.Errorf("agents apply of bankingAgent once --demo served = %d:\n%s", code, errOut)
	}

	// The rows are there (seen by the admin: the owner is under the
	// policies too).
	all := connect(t, adminURL)
	for query, want := range map[string]int{
		"SELECT count(*) FROM sessions WHERE tenant_id = 'acme'":                              1,
		"SELECT count(*) FROM snapshots WHERE tenant_id = 'acme' AND status = 'completed'":    2,
		"SELECT count(*) FROM interrupt_events WHERE tenant_id = 'acme' AND type = 'created'": 1,
		"SELECT count(*) FROM interrupt_events WHERE tenant_id = 'acme' AND type = 'claimed'": 1,
		"SELECT count(*) FROM api_keys WHERE tenant_id = 'acme' AND last_used_at IS NOT NULL": 1,
		"SELECT count(*) FROM compiled_agents WHERE name = 'bankingAgent'":                    1,
	} {
		if got := queryInt(t, all, query); got != want {
			t.Errorf("%s = %d, want %d", query, got, want)
		}
	}
	if n := queryInt(t, all, "SELECT count(*) FROM interrupts WHERE tenant_id = 'acme' AND status = 'resolved' AND resumed_snapshot_id = $1", second); n != 1 {
		t.Errorf("%d resolved interrupts resumed by %s, want 1", n, second)
	}
	// The question and the paused answer, then at least the approval and
	// the final answer.
	for snap, least := range map[string]int{first: 2, second: 2} {
		if n := queryInt(t, all, "SELECT count(*) FROM messages WHERE tenant_id = 'acme' AND snapshot_id = $1", snap); n < least {
			t.Errorf("snapshot %s wrote %d messages, want at least %d", snap, n, least)
		}
	}

	// The login role itself (no SET ROLE: what it inherits from
	// holdpoint_app) is confined to the tenant its transaction names.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	inTenant := func(tenant string, fn func(tx pgx.Tx) error) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // every write here is undone
		if tenant != "" {
			if _, err := tx.Exec(ctx, "SELECT set_config('holdpoint.tenant_id', $1, true)", tenant); err != nil {
				t.Fatal(err)
			}
		}
		return fn(tx)
	}
	const acmeRows = `SELECT (SELECT count(*) FROM tenants WHERE id = 'acme')
		+ (SELECT count(*) FROM sessions WHERE tenant_id = 'acme')
		+ (SELECT count(*) FROM snapshots WHERE tenant_id = 'acme')
		+ (SELECT count(*) FROM messages WHERE tenant_id = 'acme')
		+ (SELECT count(*) FROM interrupts WHERE tenant_id = 'acme')
		+ (SELECT count(*) FROM interrupt_events WHERE tenant_id = 'acme')
		+ (SELECT count(*) FROM api_keys WHERE tenant_id = 'acme')`
	for tenant, visible := range map[string]bool{"acme": true, "other": false, "": false} {
		var n int
		if err := inTenant(tenant, func(tx pgx.Tx) error { return tx.QueryRow(ctx, acmeRows).Scan(&n) }); err != nil {
			t.Fatal(err)
		}
		if visible != (n > 0) {
			t.Errorf("as %s in tenant %q: %d rows of acme visible", role, tenant, n)
		}
	}
	for _, stmt := range []string{
		"UPDATE interrupts SET status = 'pending' WHERE tenant_id = 'acme'",
		"UPDATE snapshots SET turn_messages = NULL, messages_from = NULL WHERE tenant_id = 'acme'",
		"UPDATE api_keys SET revoked_at = now() WHERE tenant_id = 'acme'",
	} {
		err := inTenant("other", func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, stmt)
			if err == nil && tag.RowsAffected() != 0 {
				t.Errorf("as %s in tenant other: %s changed %d rows", role, stmt, tag.RowsAffected())
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	// Refused outright: a row for another tenant, the schema, the policies,
	// the owner's identity.
	for _, stmt := range []string{
		"INSERT INTO sessions (tenant_id, id, agent) VALUES ('acme', 'forged', 'bankingAgent')",
		"ALTER TABLE sessions DISABLE ROW LEVEL SECURITY",
		"DROP POLICY tenant_isolation ON interrupts",
		"CREATE TABLE stolen (x int)",
		"SET ROLE " + pgx.Identifier{ownerRole}.Sanitize(),
	} {
		err := inTenant("other", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, stmt); return err })
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != sqlstateInsufficientPrivilege {
			t.Errorf("as %s: %s = %v, want insufficient privilege", role, stmt, err)
		}
	}
}

// migrateAllButNewest applies every migration but the newest as the owner
// and returns the newest's file name: the database a new build meets
// before its migrations ran.
func migrateAllButNewest(t *testing.T, ownerURL string) string {
	t.Helper()
	sqlDB, err := sql.Open("pgx", ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	if len(sources) < 4 {
		t.Fatalf("%d migrations: want the role-creating ones and one more", len(sources))
	}
	if _, err := p.UpTo(context.Background(), sources[len(sources)-2].Version); err != nil {
		t.Fatal(err)
	}
	return sources[len(sources)-1].Path
}

// pendingAsOwner lists what the owner sees pending.
func pendingAsOwner(t *testing.T, ownerURL string) []string {
	t.Helper()
	sqlDB, err := sql.Open("pgx", ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	pending, err := migrations.Pending(context.Background(), sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	return pending
}

// TestServeWithPendingMigrations: a login role cannot migrate, and serve
// says so and exits 1 instead of running on an old schema: with
// --migrate=false it names the pending migrations; with migrations on it
// fails on the first statement it may not run. Once the owner migrates,
// the same command serves.
func TestServeWithPendingMigrations(t *testing.T) {
	t.Parallel()
	admin := connect(t, testdb.URL(t))
	role := createLoginRole(t, admin, "", true)

	ownerURL := emptyDatabase(t, admin, "")
	newest := migrateAllButNewest(t, ownerURL)
	serverURL := asRole(t, ownerURL, role)

	code, _, errOut := runPlatform(t, serverURL, "serve", "--demo", "--migrate=false", "--addr", testproc.FreeAddr(t))
	if code != 1 || !strings.Contains(errOut, "1 migration(s) pending ("+newest+")") || !strings.Contains(errOut, "platform migrate up") {
		t.Errorf("serve --migrate=false with %s pending = %d:\n%s", newest, code, errOut)
	}
	code, _, errOut = runPlatform(t, serverURL, "serve", "--demo", "--addr", testproc.FreeAddr(t))
	if code != 1 || !strings.Contains(errOut, "role "+role+" may not change the schema") || !strings.Contains(errOut, "--migrate=false") {
		t.Errorf("serve (migrating) as %s = %d:\n%s", role, code, errOut)
	}
	code, _, errOut = runPlatform(t, serverURL, "migrate", "up")
	if code != 1 || !strings.Contains(errOut, "may not change the schema") {
		t.Errorf("migrate up as %s = %d:\n%s", role, code, errOut)
	}
	if pending := pendingAsOwner(t, ownerURL); len(pending) != 1 || pending[0] != newest {
		t.Fatalf("after the refused attempts the owner sees %v pending, want just %s", pending, newest)
	}

	// A database never migrated: every migration is pending, and checking
	// that created nothing.
	emptyURL := emptyDatabase(t, admin, "")
	code, _, errOut = runPlatform(t, asRole(t, emptyURL, role), "serve", "--demo", "--migrate=false", "--addr", testproc.FreeAddr(t))
	if code != 1 || !strings.Contains(errOut, "00001_init.sql") {
		t.Errorf("serve --migrate=false on an empty database = %d:\n%s", code, errOut)
	}
	if n := queryInt(t, connect(t, emptyURL), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"); n != 0 {
		t.Errorf("checking for pending migrations created %d tables", n)
	}

	if code, _, errOut := runPlatform(t, ownerURL, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up as the owner = %d:\n%s", code, errOut)
	}
	startServe(t, serverURL, "--demo", "--migrate=false")

	// A login role that is not a member of holdpoint_app is told how to fix it.
	outsider := createLoginRole(t, admin, "", false)
	code, _, errOut = runPlatform(t, asRole(t, ownerURL, outsider), "serve", "--demo", "--migrate=false", "--addr", testproc.FreeAddr(t))
	if code != 1 || !strings.Contains(errOut, `GRANT holdpoint_app TO \"`+outsider+`\"`) {
		t.Errorf("serve as a role outside holdpoint_app = %d:\n%s", code, errOut)
	}
}

// TestServeWarnsWhenRowLevelSecurityDoesNotConfineItsRole: serve as the
// test server's superuser warns once at start-up, naming the role, unless
// in --dev.
func TestServeWarnsWhenRowLevelSecurityDoesNotConfineItsRole(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	super := u.User.Username()
	if !queryBool(t, connect(t, dbURL), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") {
		t.Skipf("DATABASE_URL's user %s is not a superuser", super)
	}

	srv := startServe(t, dbURL, "--demo")
	lines := srv.logLines("level=WARN", "login role "+super+" is a superuser", "role="+super)
	if len(lines) != 1 {
		t.Errorf("serve --demo as %s: %d warnings about the role, want 1; log:\n%s", super, len(lines), srv.log())
	}
	dev := startServe(t, dbURL, "--dev")
	if lines := dev.logLines("level=WARN", "login role"); len(lines) != 0 {
		t.Errorf("serve --dev warned about its role:\n%s", strings.Join(lines, "\n"))
	}
}

// queryBool runs a query returning one boolean.
func queryBool(t *testing.T, pool *pgxpool.Pool, query string) bool {
	t.Helper()
	var b bool
	if err := pool.QueryRow(context.Background(), query).Scan(&b); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return b
}

// TestPrivilegeProblems checks what the start-up warning says for each kind
// of role, through an application pool as serve opens it.
func TestPrivilegeProblems(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	admin := connect(t, dbURL)
	super := admin.Config().ConnConfig.User
	member := createLoginRole(t, admin, "", true)
	bypass := createLoginRole(t, admin, "BYPASSRLS", true)
	owner := createLoginRole(t, admin, "", true)
	if _, err := admin.Exec(context.Background(), "ALTER TABLE interrupts OWNER TO "+pgx.Identifier{owner}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	for role, want := range map[string]string{
		member: "",
		bypass: "has BYPASSRLS",
		owner:  "owns the tables under row-level security (interrupts)",
		super:  "is a superuser",
	} {
		pool, err := pgstore.NewAppPool(context.Background(), asRole(t, dbURL, role))
		if err != nil {
			t.Fatal(err)
		}
		row, err := db.New(pool).GetLoginRolePrivileges(context.Background())
		pool.Close()
		if err != nil {
			t.Fatalf("as %s: %v", role, err)
		}
		problems := strings.Join(privilegeProblems(row), "; ")
		if row.RoleName != role || (want == "") != (problems == "") || !strings.Contains(problems, want) {
			t.Errorf("role %s (seen as %s): problems %q, want %q", role, row.RoleName, problems, want)
		}
	}
}
