package docs

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
)

// The platform binary, built once for every page that runs commands.
var (
	platformOnce sync.Once
	platformDir  string
	platformErr  error
)

// platformBin builds cmd/platform into a directory of its own and returns
// that directory, for PATH.
func platformBin(t *testing.T) string {
	t.Helper()
	platformOnce.Do(func() {
		platformDir, platformErr = os.MkdirTemp("", "docs-platform-")
		if platformErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(platformDir, "platform"), "./cmd/platform")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			platformErr = fmt.Errorf("go build ./cmd/platform: %v\n%s", err, out)
		}
	})
	if platformErr != nil {
		t.Fatal(platformErr)
	}
	return platformDir
}

// pageRun is what the blocks of one page share while they are checked in
// order: a working directory, the shell's exported variables and current
// directory (kept between blocks), a database and a server, both made when
// a block first needs them.
type pageRun struct {
	t     *testing.T
	page  string
	dir   string // the first working directory
	state string // the shell's saved variables and directory
	addr  string // the server's address, a free loopback port
	dbURL string
	subs  []string // old, new pairs applied to every shell block
	srv   *exec.Cmd
	pool  *pgxpool.Pool // on dbURL, as the tables' owner
	// out is what the last shell block printed; ran says it ran (false
	// after a skipped one, whose output a following block cannot check).
	out string
	ran bool
}

// defaultAddr is the address the pages show the server on.
const defaultAddr = "127.0.0.1:8080"

// placeholderRoot is how docs/own-module.md names the checkout.
const placeholderRoot = "/path/to/holdpoint"

func newPageRun(t *testing.T, page string) *pageRun {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	p := &pageRun{t: t, page: page, dir: t.TempDir(), state: t.TempDir(), addr: testproc.FreeAddr(t)}
	p.subs = []string{"http://" + defaultAddr, "http://" + p.addr, defaultAddr, p.addr, placeholderRoot, abs}
	if err := os.WriteFile(filepath.Join(p.state, "cwd"), []byte(p.dir), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// database returns the page's database: for docs/own-module.md one the
// page's own `createdb` makes (under a name of the test's, dropped when the
// test ends), else a migrated one from testdb.
func (p *pageRun) database() string {
	if p.dbURL != "" {
		return p.dbURL
	}
	if p.page != "docs/own-module.md" {
		p.dbURL = testdb.URL(p.t)
		return p.dbURL
	}
	admin := cmp.Or(os.Getenv("DATABASE_URL"), testdb.DefaultAdminURL)
	u, err := url.Parse(admin)
	if err != nil {
		p.t.Fatalf("DATABASE_URL: %v", err)
	}
	name := "hpt_docs_" + strings.ToLower(rand.Text()[:10])
	own := *u
	own.Path = "/" + name
	p.dbURL = own.String()
	args := []string{"-h", u.Hostname(), "-p", cmp.Or(u.Port(), "5432"), "-U", u.User.Username()}
	// The page shows a local server trusting user postgres; the test's runs
	// where DATABASE_URL says, under a name dropped when the test ends.
	p.subs = append(p.subs,
		"createdb -h 127.0.0.1 -U postgres mybank", "createdb "+strings.Join(args, " ")+" "+name,
		"postgres://postgres@127.0.0.1:5432/mybank?sslmode=disable", p.dbURL)
	p.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		drop := exec.CommandContext(ctx, "dropdb", append(args, "--if-exists", "--force", name)...)
		if pw, ok := u.User.Password(); ok {
			drop.Env = append(os.Environ(), "PGPASSWORD="+pw)
		}
		if out, err := drop.CombinedOutput(); err != nil {
			p.t.Errorf("dropdb %s: %v\n%s", name, err, out)
		}
	})
	return p.dbURL
}

// ownerPool connects to the page's database as the tables' owner.
func (p *pageRun) ownerPool() *pgxpool.Pool {
	if p.pool == nil {
		p.pool = testdb.OwnerPool(p.t, p.database())
	}
	return p.pool
}

// env is the environment of the page's shell blocks and server: the
// platform binary on PATH, the page's database and address, and Go
// using the module cache, and the module proxy for what it lacks.
func (p *pageRun) env() []string {
	env := os.Environ()
	if u, err := url.Parse(cmp.Or(os.Getenv("DATABASE_URL"), testdb.DefaultAdminURL)); err == nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw) // for createdb and psql
		}
	}
	return append(env,
		"PATH="+platformBin(p.t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DATABASE_URL="+p.database(),
		"HOLDPOINT_ADDR="+p.addr,
		// The module proxy stays as the user has it: the own-module
		// page's go mod tidy reads the test requirements of the
		// platform's requirements (testify, for pgx's tests), which a
		// build of the platform never put in the module cache.
		"GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off",
		"NO_COLOR=1",
	)
}

// substitute applies the page's substitutions to a block's text.
func (p *pageRun) substitute(s string) string {
	for i := 0; i < len(p.subs); i += 2 {
		s = strings.ReplaceAll(s, p.subs[i], p.subs[i+1])
	}
	return s
}

// script wraps a block so that it starts where the last one ended, with its
// exported variables, and saves both when it exits.
func (p *pageRun) script(body string) string {
	return "set -euo pipefail\n" +
		"state=" + shellQuote(p.state) + "\n" +
		"if [[ -f $state/env ]]; then source \"$state/env\"; fi\n" +
		"cd \"$(cat \"$state/cwd\")\"\n" +
		"trap 'export -p >\"$state/env\"; pwd >\"$state/cwd\"' EXIT\n" +
		body
}

// shell runs a shell block; a server is started first if it talks to one.
func (p *pageRun) shell(b block) {
	t := p.t
	t.Helper()
	for _, tool := range []string{"curl", "jq", "node", "createdb", "psql"} {
		if regexp.MustCompile(`(^|[\s|(])` + tool + `\s`).MatchString(b.text) {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s needs %s, which is not installed", b, tool)
			}
		}
	}
	if strings.Contains(b.text, defaultAddr) && p.srv == nil {
		p.serve(b, "platform serve --dev --log-level warn")
	}
	// The environment first: it builds the platform on first use, which
	// on a cold build cache and a loaded machine takes minutes of its own.
	env := p.env()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", p.script(p.substitute(b.text)))
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s\nstdout:\n%s\nstderr:\n%s", b, err, b.text, stdout.String(), stderr.String())
	}
	p.out, p.ran = stdout.String(), true
}

// node runs a JavaScript program that talks to the server with the
// Genkit JS client of tests/compat (make test installs it first); without
// that client installed it is only checked, and its output block is
// skipped.
func (p *pageRun) node(b block) {
	t := p.t
	t.Helper()
	p.ran = false
	modules, err := filepath.Abs(filepath.Join(root, "tests", "compat", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "genkit")); err != nil {
		t.Logf("%s: checked, not run: the Genkit JS client is not installed (tests/compat/install.sh)", b)
		return
	}
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "block.mjs")
	if err := os.WriteFile(prog, []byte(p.substitute(b.text)), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.srv == nil {
		p.serve(b, "platform serve --dev --log-level warn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", prog)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: node: %v\nstdout:\n%s\nstderr:\n%s", b, err, stdout.String(), stderr.String())
	}
	p.out, p.ran = stdout.String(), true
}

// serve starts the page's server with the shell command command (a serve
// block's, or platform serve --dev) and waits until it is ready. It is
// stopped with SIGTERM when the test ends.
func (p *pageRun) serve(b block, command string) {
	t := p.t
	t.Helper()
	if p.srv != nil {
		t.Fatalf("%s: the page's server is already running", b)
	}
	cmd := exec.Command("bash", "-c", p.script("exec "+p.substitute(strings.TrimSpace(command))))
	cmd.Env = p.env()
	proc := testproc.Start(t, p.page+": the server", cmd, 30*time.Second)
	p.srv = cmd
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if res, err := http.Get("http://" + p.addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-proc.Done():
			t.Fatalf("%s: the server exited before it was ready: %v\n%s", b, proc.Err(), proc.Out)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server was not ready within 3 minutes:\n%s", b, proc.Out)
		}
	}
}

// writeFile writes a file block into the shell's current directory.
func (p *pageRun) writeFile(b block) {
	p.t.Helper()
	cwd, err := os.ReadFile(filepath.Join(p.state, "cwd"))
	if err != nil {
		p.t.Fatal(err)
	}
	name := filepath.Join(strings.TrimSpace(string(cwd)), b.mark.arg)
	if err := os.WriteFile(name, []byte(p.substitute(b.text)), 0o644); err != nil {
		p.t.Fatalf("%s: %v", b, err)
	}
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// outputPattern reads an output block as a pattern: ids and other tokens of
// eight or more letters and digits that contain a digit stand for any such
// token, and "..." for anything.
func outputPattern(expected string) *regexp.Regexp {
	token := regexp.MustCompile(`[A-Za-z0-9]{8,}`)
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i, part := range strings.Split(strings.TrimRight(expected, "\n"), "...") {
		if i > 0 {
			b.WriteString(`.*`)
		}
		last := 0
		for _, m := range token.FindAllStringIndex(part, -1) {
			if !strings.ContainsAny(part[m[0]:m[1]], "0123456789") {
				continue
			}
			b.WriteString(regexp.QuoteMeta(part[last:m[0]]))
			b.WriteString(`[A-Za-z0-9]+`)
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(part[last:]))
	}
	b.WriteString(`\n*$`)
	return regexp.MustCompile(b.String())
}
