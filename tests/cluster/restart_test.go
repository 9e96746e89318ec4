package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
)

// pgCluster is a private PostgreSQL cluster started by a test, so that it
// can be restarted without touching the machine's shared server.
type pgCluster struct {
	bindir  string
	dir     string // holds data/, the socket and the log
	port    int
	asOwner []string // command prefix running a binary as the cluster's owner
}

// findBindir locates initdb and pg_ctl: pg_config's directory, else the
// highest /usr/lib/postgresql/<major>/bin (Debian keeps them off PATH).
func findBindir() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d
		}
	}
	return ""
}

func majorOf(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// startPrivateCluster initdb's and starts a cluster on a free loopback
// port, and stops it (immediate mode) when the test ends, failed or not. It
// skips the test when the server binaries or a way to run them are missing.
func startPrivateCluster(t *testing.T) *pgCluster {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the private PostgreSQL cluster needs a Unix system")
	}
	bindir := findBindir()
	if bindir == "" {
		t.Skip("no PostgreSQL server binaries (initdb, pg_ctl) found via pg_config or /usr/lib/postgresql/*/bin: cannot start a private cluster to restart")
	}
	c := &pgCluster{bindir: bindir, port: freePort(t)}
	// Not t.TempDir: its parents are private to this user, and as root the
	// cluster runs as postgres, which must reach its directory.
	dir, err := os.MkdirTemp("", "holdpoint-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: initdb refuses root, so no private cluster can be started")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		switch {
		case lookPath("runuser"):
			c.asOwner = []string{"runuser", "-u", "postgres", "--"}
		case lookPath("su"):
			c.asOwner = []string{"su-postgres"} // see run
		default:
			t.Skip("running as root without runuser or su: cannot run initdb as postgres")
		}
	}
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.startOnFreePort(t, "pg_ctl start")
	t.Cleanup(func() {
		if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop"); err != nil {
			t.Errorf("stopping the private cluster: %v\n%s", err, out)
		}
		if t.Failed() {
			t.Logf("--- log of the private PostgreSQL cluster ---\n%s", tail([]byte(c.log()), 80))
		}
	})
	return c
}

func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	return string(b)
}

// run runs a PostgreSQL binary as the cluster's owner.
func (c *pgCluster) run(name string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(c.bindir, name)}, args...)
	// Bounded, so a wedged initdb or pg_ctl fails the test instead of
	// hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	switch {
	case len(c.asOwner) == 1 && c.asOwner[0] == "su-postgres":
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		cmd = exec.CommandContext(ctx, "su", "postgres", "-c", strings.Join(quoted, " "))
	case len(c.asOwner) > 0:
		cmd = exec.CommandContext(ctx, c.asOwner[0], append(c.asOwner[1:], argv...)...)
	default:
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	return cmd.CombinedOutput()
}

// pgctl runs pg_ctl start/stop on the cluster's port, loopback only, with
// its socket in the cluster's directory. fsync is off: the cluster is
// thrown away, and a clean restart does not need it.
func (c *pgCluster) pgctl(action string, extra ...string) ([]byte, error) {
	args := []string{"-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60"}
	if action == "start" {
		args = append(args, "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir))
	}
	args = append(args, extra...)
	return c.run("pg_ctl", append(args, action)...)
}

// startOnFreePort starts a new cluster on c.port. freePort closes its
// listener before postgres binds, so another test's process may take the
// port in between: then the cluster starts again on another free port (a
// few times), instead of failing the test on a race it did not cause.
func (c *pgCluster) startOnFreePort(t *testing.T, what string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		logged := len(c.log())
		out, err := c.pgctl("start")
		if err == nil {
			return
		}
		if attempt < 5 && strings.Contains(c.log()[logged:], "Address already in use") {
			t.Logf("%s: port %d was taken before postgres bound it; trying another", what, c.port)
			c.port = freePort(t)
			continue
		}
		t.Fatalf("%s: %v\n%s\n%s", what, err, out, c.log())
	}
}

// createDatabase creates a database and returns its URL (user postgres).
func (c *pgCluster) createDatabase(t *testing.T, name string) string {
	t.Helper()
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// TestPostgresRestartDuringLoad: Postgres stops under load and comes back.
// While it is down requests fail with 503 UNAVAILABLE (never 500); once it
// is back A serves again without a restart; and every turn is either fully
// stored or not at all.
func TestPostgresRestartDuringLoad(t *testing.T) {
	t.Parallel()
	pg := startPrivateCluster(t)
	url := pg.createDatabase(t, "holdpoint")
	a := startServer(t, "A", url, serverOpts{})

	var (
		mu      sync.Mutex
		results []turnResult
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	// Six clients, each with its own session, send turns back to back: a
	// transfer request (an interrupt) and a question (a text answer) in
	// turn. Naming the session makes each turn read the database first.
	for w := range 6 {
		session := uuid.NewString()
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				kind, text := "hello", "What can you do?"
				if n%2 == 0 {
					kind, text = "transfer", fmt.Sprintf("Transfer $%d to account %d", 10+n, 700000+w)
				}
				r := turnResult{kind: kind, sentAt: time.Now()}
				r.ans = a.post("", service.AgentInit{SessionID: session}, service.AgentInput{Message: userMessage(text)})
				if out, err := r.ans.output(); err == nil {
					r.out = out
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if r.ans.err != nil || r.ans.status != http.StatusOK {
					// Do not spin while the database is down.
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}

	// answered counts the turns sent after since that were answered
	// (200 with a finished turn) or, when unavailable, refused with 503
	// UNAVAILABLE.
	answered := func(since time.Time, unavailable bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range results {
			switch {
			case !r.sentAt.After(since):
			case unavailable && r.ans.status == http.StatusServiceUnavailable && r.ans.errorStatus() == service.CodeUnavailable:
				n++
			case !unavailable && r.out != nil && r.out.FinishReason != service.FinishFailed:
				n++
			}
		}
		return n
	}
	// The load runs (a dozen turns answered), then the database stops,
	// and stays down until A has refused a few turns for it.
	waitUntil(t, "a dozen turns answered before the stop", time.Minute, func() bool { return answered(time.Time{}, false) >= 12 })
	downAt := time.Now()
	if out, err := pg.pgctl("stop", "-m", "fast"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
	stoppedAt := time.Now()
	waitUntil(t, "three turns refused with 503 UNAVAILABLE while the database is down", time.Minute, func() bool {
		return answered(stoppedAt, true) >= 3
	})
	if out, err := pg.pgctl("start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	upAt := time.Now()

	// A must serve again by itself: a turn sent after the restart succeeds.
	recovered := waitUntil(t, "A to answer a turn again after the restart", time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.sentAt.After(upAt) && r.out != nil && r.out.FinishReason != service.FinishFailed {
				return true
			}
		}
		return false
	})
	// Some load on the recovered server: a dozen more turns answered.
	waitUntil(t, "a dozen turns answered after the restart", time.Minute, func() bool { return answered(upAt, false) >= 12 })
	close(stop)
	wg.Wait()

	tally := map[string]int{}
	var ids []string
	for _, r := range results {
		switch {
		case r.ans.err != nil:
			tally["transport error"]++
			t.Errorf("%s turn: %s", r.kind, r.ans)
		case r.out != nil && r.out.FinishReason == service.FinishFailed:
			// The database went away after the turn started: a failed turn
			// (nothing stored), reported in the 200 as the protocol does.
			status := ""
			if r.out.Error != nil {
				status = r.out.Error.Status
			}
			tally["200 failed "+status]++
			if status != service.CodeUnavailable {
				t.Errorf("%s turn failed with %s, want UNAVAILABLE: %s", r.kind, status, r.ans)
			}
		case r.out != nil:
			tally["200 ok"]++
			ids = append(ids, r.out.SnapshotID)
		default:
			key := fmt.Sprintf("%d %s", r.ans.status, r.ans.errorStatus())
			tally[key]++
			if r.ans.status != http.StatusServiceUnavailable || r.ans.errorStatus() != service.CodeUnavailable {
				t.Errorf("%s turn answered %s, want 503 UNAVAILABLE if not 200", r.kind, r.ans)
			}
		}
	}
	t.Logf("FIGURE Postgres restart under load: pg_ctl stop -m fast took %s, the database was back %s after the stop began; A answered a turn again %s after the restart; turns: %v",
		ms(stoppedAt.Sub(downAt)), ms(upAt.Sub(downAt)), ms(recovered), tally)
	if tally["503 "+service.CodeUnavailable] == 0 {
		t.Errorf("no 503 UNAVAILABLE answer while the database was down")
	}
	if tally["200 ok"] == 0 {
		t.Fatalf("no turn succeeded")
	}

	// Every answered turn is stored whole, and nothing is stored in part.
	pool := testdb.OwnerPool(t, url)
	for _, id := range ids {
		snap := a.mustSnapshot(t, id)
		want := count(t, pool, "SELECT message_count FROM snapshots WHERE id = $1", id)
		if snap.Status != service.StatusCompleted || snap.State == nil || len(snap.State.Messages) != want || want < 2 {
			t.Errorf("answered turn %s: status %s, %d messages, message_count %d", id, snap.Status, len(snap.State.Messages), want)
		}
	}
	n := checkHistories(t, a, pool)
	if p := count(t, pool, "SELECT count(*) FROM snapshots WHERE status <> 'completed'"); p != 0 {
		t.Errorf("%d snapshots are not completed", p)
	}
	t.Logf("checked %d answered turns and %d stored snapshots: every history rebuilds", len(ids), n)
}
