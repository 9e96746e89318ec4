package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
)

// pgbouncerBin finds PgBouncer, or skips (fails under CI, which installs it
// through .ci/run).
func pgbouncerBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	if os.Getenv("CI") != "" {
		t.Fatal("tests/cluster: no pgbouncer on this machine (apt-get install -y pgbouncer); CI must run the pooler test")
	}
	t.Skip("tests/cluster: SKIPPED, no pgbouncer on this machine: apt-get install -y pgbouncer to run the pooler test")
	return ""
}

// startPgBouncer starts PgBouncer in transaction pooling mode on a free
// loopback port, in front of dbURL's database, for the given users (trust
// authentication), with fewer server connections than its clients hold so
// that they share them. It returns dbURL through the pooler, and stops the
// process when the test ends.
func startPgBouncer(t *testing.T, dbURL string, users ...string) string {
	t.Helper()
	bin := pgbouncerBin(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	port := freePort(t)
	dir := t.TempDir()
	var userlist strings.Builder
	for _, name := range users {
		fmt.Fprintf(&userlist, "%q \"\"\n", name)
	}
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
`, dbName, u.Hostname(), u.Port(), dbName, port, filepath.Join(dir, "userlist.txt"))
	writeFile(t, filepath.Join(dir, "userlist.txt"), userlist.String())
	writeFile(t, filepath.Join(dir, "pgbouncer.ini"), ini)
	logPath := filepath.Join(dir, "pgbouncer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttr()
	// PgBouncer refuses to run as root.
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = unprivileged(t, dir)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("--- log of pgbouncer ---\n%s", tail(log, 60))
		}
	})
	pooled := *u
	pooled.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitForPooler(t, pooled.String(), done)
	return pooled.String()
}

// writeFile writes a file others may read (PgBouncer may run as nobody).
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// unprivileged is the credential of user nobody, for a child that must not
// run as root; dir becomes readable and writable by it.
func unprivileged(t *testing.T, dir string) *syscall.Credential {
	t.Helper()
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("pgbouncer refuses to run as root, and there is no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// waitForPooler waits until a query goes through the pooler at pooledURL
// (ten seconds at most), failing the test if PgBouncer exits first.
func waitForPooler(t *testing.T, pooledURL string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			t.Fatal("pgbouncer exited at start-up")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, withParam(t, pooledURL, "default_query_exec_mode", "simple_protocol"))
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not answer within 10 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withParam adds a query parameter to a URL.
func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// approvalCycle runs one transfer through two instances: asked on from,
// approved on to, which runs it. It returns the first error.
func approvalCycle(from, to *server, account string) error {
	first, err := from.post("", service.AgentInit{}, service.AgentInput{Message: userMessage("Transfer $25 to account " + account)}).output()
	if err != nil {
		return err
	}
	if first.FinishReason != service.FinishInterrupted {
		return fmt.Errorf("transfer request finished %q, want interrupted", first.FinishReason)
	}
	ref := ""
	for _, p := range first.Message.Content {
		if p.ToolRequest != nil && p.ToolRequest.Name == demo.ToolUserApproval {
			ref = p.ToolRequest.Ref
		}
	}
	resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
		Name: demo.ToolUserApproval, Ref: ref, Output: json.RawMessage(`{"approved":true}`),
	}}}}}
	out, err := to.post("", service.AgentInit{SnapshotID: first.SnapshotID}, resume).output()
	if err != nil {
		return err
	}
	if want := "Done: transferred $25.00 to account " + account; out.Message == nil || !strings.HasPrefix(out.Message.Text(), want) {
		return fmt.Errorf("approved turn answered %+v, want %q", out.Message, want)
	}
	return nil
}

// approvalCycles runs n cycles per pair of instances at once, alternating
// who asks and who approves, and fails the test on any error.
func approvalCycles(t *testing.T, n int, a, b *server) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		wg.Go(func() {
			if err := approvalCycle(from, to, strconv.Itoa(100000+rand.IntN(900000))); err != nil {
				errs <- fmt.Errorf("%s -> %s: %w", from.name, to.name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// listeners counts the sessions of the test's database whose last statement
// was a LISTEN on a channel starting with channel, among those named
// holdpoint-listen (the direct URL) or the others (through the pooler).
func listeners(t *testing.T, pool *pgxpool.Pool, direct bool, channel string) int {
	t.Helper()
	op := "="
	if !direct {
		op = "IS DISTINCT FROM"
	}
	return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND pid <> pg_backend_pid() AND query LIKE '%LISTEN '||$1||'%' AND application_name `+op+` 'holdpoint-listen'`, channel)
}

// abortAcross detaches a slow turn on a, aborts it through b, and returns
// how long until a dropped its job (the turn stopped), failing after bound.
func abortAcross(t *testing.T, a, b *server, pool *pgxpool.Pool, bound time.Duration) time.Duration {
	t.Helper()
	gate := "abort-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	out := a.invoke(t, service.AgentInit{}, service.AgentInput{Message: userMessage("Prepare my yearly statement gate " + gate), Detach: true})
	if out.FinishReason != service.FinishDetached {
		t.Fatalf("detach on %s answered %+v", a.name, out)
	}
	a.held(t, gate) // the turn is in the middle of its model call
	defer a.open(t, gate)
	sent := time.Now()
	if ab := b.post("/abort", nil, map[string]string{"snapshotId": out.SnapshotID}); ab.err != nil || ab.status != http.StatusOK {
		t.Fatalf("abort via %s: %s", b.name, ab)
	}
	waitUntil(t, a.name+" to stop the turn aborted on "+b.name, bound, func() bool {
		return count(t, pool, "SELECT count(*) FROM turn_jobs WHERE snapshot_id = $1", out.SnapshotID) == 0
	})
	return time.Since(sent)
}

// TestBehindPgBouncer: two instances behind PgBouncer 1.18 in transaction
// pooling mode (four server connections for all their clients), with
// --database-pooler=transaction and LISTEN on a direct connection, both
// start, run approval cycles across each other without an error, and hear
// each other's aborts through LISTEN; the pooler's server connections keep
// no role set by the server. A third instance without the direct URL warns
// and falls back to polling; a fourth logs in as a least-privilege role.
func TestBehindPgBouncer(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	owner := testdb.OwnerPool(t, dbURL)
	role := leastPrivilegeRole(t, owner)
	pooled := startPgBouncer(t, dbURL, "postgres", role)
	direct := withParam(t, dbURL, "application_name", "holdpoint-listen")

	// A 5 s heartbeat: a detached turn whose listener is up polls for an
	// abort only that often, so a stop well within it is the notification.
	o := serverOpts{heartbeat: 5 * time.Second, heartbeatTimeout: 15 * time.Second,
		args: []string{"--database-pooler", "transaction"},
		env:  []string{"HOLDPOINT_LISTEN_DATABASE_URL=" + direct}}
	a := startServer(t, "A", pooled, o)
	b := startServer(t, "B", pooled, o)
	for _, s := range []*server{a, b} {
		if !s.logContains("listening for notifications on a direct connection") || !s.logContains(`query_exec_mode="cache describe"`) {
			t.Errorf("%s's log does not show the pooler settings", s.name)
		}
	}
	waitUntil(t, "both instances' abort listeners, direct", time.Minute, func() bool {
		return listeners(t, owner, true, "holdpoint_abort") == 2
	})

	approvalCycles(t, 10, a, b)
	latency := abortAcross(t, a, b, owner, 3*time.Second)
	t.Logf("FIGURE abort across instances behind PgBouncer (LISTEN direct, heartbeat 5s): %s", ms(latency))

	// Without the direct URL: a warning, no LISTEN through the pooler, and
	// an abort still arrives, by polling.
	c := startServer(t, "C", pooled, serverOpts{heartbeat: 5 * time.Second, heartbeatTimeout: 15 * time.Second, args: o.args})
	if !c.logContains("level=WARN", "without --listen-database-url") {
		t.Errorf("C's log has no warning about polling")
	}
	approvalCycles(t, 3, a, c)
	polled := abortAcross(t, c, b, owner, 3*time.Second)
	t.Logf("FIGURE abort across instances behind PgBouncer, the aborted turn on C, which has no LISTEN: %s", ms(polled))
	if n := listeners(t, owner, false, "holdpoint"); n != 0 {
		t.Errorf("%d sessions ran LISTEN through the pooler", n)
	}

	// The least-privilege login role, through the pooler as well.
	d := startServer(t, "D", asUser(t, pooled, role), serverOpts{
		args: []string{"--database-pooler", "transaction", "--migrate=false"},
		env:  []string{"HOLDPOINT_LISTEN_DATABASE_URL=" + asUser(t, direct, role)}})
	if d.logContains("level=WARN", "login role") {
		t.Errorf("D warns about its login role")
	}
	approvalCycles(t, 3, d, a)

	noLeakedRole(t, pooled)
}

// noLeakedRole checks, over many transactions through the pooler (as its
// postgres user, whose server connections the instances shared), that none
// runs as another role: the server set none beyond a transaction.
func noLeakedRole(t *testing.T, pooled string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(withParam(t, pooled, "default_query_exec_mode", "cache_describe"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	roles := map[string]int{}
	for range 8 {
		wg.Go(func() {
			for range 25 {
				var r string
				if err := pool.QueryRow(ctx, "SELECT current_user::text").Scan(&r); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				roles[r]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(roles) != 1 || roles["postgres"] == 0 {
		t.Errorf("current_user through the pooler: %v, want postgres only", roles)
	}
}

// leastPrivilegeRole creates a login role that is only a member of
// holdpoint_app, dropped when the test ends.
func leastPrivilegeRole(t *testing.T, owner *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("hp_pgb_%d", rand.IntN(1_000_000_000))
	ctx := context.Background()
	if _, err := owner.Exec(ctx, "CREATE ROLE "+name+" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+name)
		if _, err := owner.Exec(context.Background(), "DROP ROLE "+name); err != nil {
			t.Logf("drop role %s: %v", name, err)
		}
	})
	if _, err := owner.Exec(ctx, "GRANT holdpoint_app TO "+name); err != nil {
		t.Fatal(err)
	}
	return name
}

// asUser is raw with another user and no password.
func asUser(t *testing.T, raw, name string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	return u.String()
}
