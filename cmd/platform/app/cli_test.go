package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// nowhere is a DATABASE_URL nothing listens on: the usage errors below
// stop before the database.
const nowhere = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"

// TestUnknownCommandSuggests: an unknown command is one line, with the
// closest command when one is within two edits, and exit code 2.
func TestUnknownCommandSuggests(t *testing.T) {
	t.Setenv("DATABASE_URL", nowhere)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, `platform: unknown command "serv" (did you mean serve?); see platform help` + "\n"},
		{[]string{"migrat"}, `platform: unknown command "migrat" (did you mean migrate?); see platform help` + "\n"},
		{[]string{"frobnicate"}, `platform: unknown command "frobnicate"; see platform help` + "\n"},
		{[]string{"tenants", "tool-secrte"}, `platform tenants: unknown command "tool-secrte" (did you mean tool-secret?); see platform help tenants` + "\n"},
		{[]string{"keys", "zap"}, `platform keys: unknown command "zap"; see platform help keys` + "\n"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%v = %d %q %q, want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestMistypedFlag: a bad flag is the flag package's line, a suggestion
// when a flag is close, and where the help is; not the flag list.
func TestMistypedFlag(t *testing.T) {
	t.Setenv("DATABASE_URL", nowhere)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--adr", "x"}, []string{"flag provided but not defined: -adr", "did you mean --addr?", "see platform help serve"}},
		{[]string{"doctor", "--adr=x"}, []string{"flag provided but not defined: -adr", "did you mean --addr?", "see platform help doctor"}},
		{[]string{"keys", "create", "--tenat", "acme"}, []string{"did you mean --tenant?", "see platform help keys create"}},
		{[]string{"serve", "--zzzzzzzz"}, []string{"flag provided but not defined: -zzzzzzzz", "see platform help serve"}},
		{[]string{"serve", "--shutdown-grace", "soon"}, []string{`invalid value "soon" for flag -shutdown-grace`, "see platform help serve"}},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 || out != "" {
			t.Errorf("%v = %d %q, want 2", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: %q lacks %q", tc.args, errOut, w)
			}
		}
		if strings.Contains(errOut, "Usage") || strings.Contains(errOut, "-log-level") || strings.Count(errOut, "\n") > 3 {
			t.Errorf("%v printed the flag list: %q", tc.args, errOut)
		}
		if strings.Contains(errOut, "zzzz") && strings.Contains(errOut, "did you mean") {
			t.Errorf("%v suggested a flag nothing is close to: %q", tc.args, errOut)
		}
	}
	// Where the message points: the command's help.
	if code, _, errOut := runCLI("help", "serve"); code != 0 || !strings.Contains(errOut, "-addr") {
		t.Errorf("help serve = %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("help", "keys", "create"); code != 0 || !strings.Contains(errOut, "-tenant") {
		t.Errorf("help keys create = %d %q", code, errOut)
	}
	if code, out, _ := runCLI("help", "tenants"); code != 0 || !strings.Contains(out, "tool-secret") {
		t.Errorf("help tenants = %d %q", code, out)
	}
}

// TestMigrateDownRefused: migrate down says why it is refused and what to
// do instead.
func TestMigrateDownRefused(t *testing.T) {
	t.Setenv("DATABASE_URL", nowhere)
	code, out, errOut := runCLI("migrate", "down")
	if code != 2 || out != "" {
		t.Errorf("migrate down = %d %q", code, out)
	}
	for _, w := range []string{"down is refused", "only go forward", "restore a backup"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("%q lacks %q", errOut, w)
		}
	}
	if strings.Contains(errOut, "Usage") || strings.Contains(errOut, "127.0.0.1:1") || strings.Count(errOut, "\n") > 2 {
		t.Errorf("migrate down printed more than why: %q", errOut)
	}
}

// TestHelpListsEveryCommand: help names every command and every tenants
// sub-command.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}} {
		code, out, _ := runCLI(args...)
		if code != 0 {
			t.Errorf("%v = %d", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, "platform "+c) {
				t.Errorf("%v lacks the command %s", args, c)
			}
		}
		for _, sub := range []string{"create", "list", "show", "set-retention", "rotate-secret", "tool-secret", "allow-tool-hosts"} {
			if !strings.Contains(out, sub) {
				t.Errorf("%v lacks tenants %s", args, sub)
			}
		}
		for _, sub := range []string{"delete", "deliveries", "redeliver"} {
			if !strings.Contains(out, sub) {
				t.Errorf("%v lacks webhooks %s", args, sub)
			}
		}
	}
	// Every sub-command the usage names is one the command runs.
	t.Setenv("DATABASE_URL", nowhere)
	for _, sub := range []string{"create", "list", "show", "set-retention", "rotate-secret", "tool-secret", "allow-tool-hosts"} {
		if _, _, errOut := runCLI("tenants", sub, "-h"); strings.Contains(errOut, "unknown command") {
			t.Errorf("tenants %s: %q", sub, errOut)
		}
	}
}

// TestLoopbackRefusalNamesTheFlag: a tool URL on this machine, refused,
// says which switch allows it.
func TestLoopbackRefusalNamesTheFlag(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	if code, _, errOut := runPlatform(t, dbURL, "tenants", "create", "acme", "--id", "acme"); code != 0 {
		t.Fatalf("tenants create = %d %s", code, errOut)
	}
	prompt := filepath.Join("..", "..", "..", "examples", "tenant", "banking.prompt")
	code, _, errOut := runPlatform(t, dbURL, "agents", "apply", "-f", prompt, "--tenant", "acme")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1 is a loopback address") || !strings.Contains(errOut, "--allow-loopback-tools") {
		t.Errorf("agents apply of a loopback tool = %d %q", code, errOut)
	}
	if code, _, errOut := runPlatform(t, dbURL, "agents", "apply", "-f", prompt, "--tenant", "acme", "--allow-loopback-tools"); code != 0 {
		t.Errorf("agents apply --allow-loopback-tools = %d %q", code, errOut)
	}
}

// TestDoctorMissingDatabase: a server without the database says to create
// it, with the command.
func TestDoctorMissingDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("holdpoint_missing_%d", time.Now().UnixNano())
	u.Path = "/" + name
	code, out, _ := runPlatform(t, u.String(), "doctor", "--addr", testproc.FreeAddr(t))
	l := doctorLine(out, "database")
	if code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "create it: createdb") || !strings.Contains(l, name) ||
		!strings.Contains(l, `CREATE DATABASE "`+name+`"`) || strings.Contains(l, "start it") {
		t.Errorf("missing database: exit %d, line %q\n%s", code, l, out)
	}
}

// TestServeCountsTenantAgents: serve without built-in agents does not warn
// that it has none to serve when tenants defined theirs, and its start-up
// line counts both.
func TestServeCountsTenantAgents(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	store := pgstore.New(testdb.OwnerPool(t, dbURL))
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := store.CreateTenant(ctx, tenant, tenant); err != nil {
			t.Fatal(err)
		}
		def := json.RawMessage(`{"name":"support","model":"demo","system":"Help."}`)
		if _, err := store.PutTenantAgent(ctx, tenant, "support", string(def), def, "test"); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServe(t, dbURL)
	lines := waitLogLines(t, srv, "msg=serving", `summary="serving 0 built-in agents and 2 tenant agents"`, "tenant_agents=2")
	if len(lines) != 1 {
		t.Errorf("want the serving line to count the tenant agents; log:\n%s", srv.log())
	}
	if strings.Contains(srv.log(), "no agents to serve") {
		t.Errorf("serve warned of no agents while tenants have two:\n%s", srv.log())
	}

	// No agent at all: the warning.
	empty := startServe(t, testdb.URL(t))
	if lines := waitLogLines(t, empty, "no agents to serve"); len(lines) != 1 {
		t.Errorf("serve without any agent did not warn; log:\n%s", empty.log())
	}
	if got := agentsSummary(3, 1, true); got != "serving 3 built-in agents and 1 tenant agent" {
		t.Errorf("agentsSummary = %q", got)
	}
}

// waitLogLines polls the log of srv for the lines with every fragment, for
// up to a minute.
func waitLogLines(t *testing.T, srv *serveProcess, fragments ...string) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if lines := srv.logLines(fragments...); len(lines) > 0 || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond)
	}
}
