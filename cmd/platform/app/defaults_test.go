package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

func TestLogFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag          string
		dev, terminal bool
		noColor       string
		want          string
	}{
		{"auto", false, false, "", formatJSON},
		{"auto", false, true, "", formatJSON},
		{"auto", true, true, "", formatColor},
		{"auto", true, true, "1", formatText},
		{"auto", true, false, "", formatText},
		{"", true, true, "", formatColor},
		{"json", true, true, "", formatJSON},
		{"JSON", false, false, "", formatJSON},
		{"text", false, false, "", formatText},
		{"text", true, true, "", formatText},
	} {
		got, err := logFormat(tc.flag, tc.dev, tc.terminal, tc.noColor)
		if err != nil || got != tc.want {
			t.Errorf("logFormat(%q, dev=%v, terminal=%v, NO_COLOR=%q) = %q, %v; want %q", tc.flag, tc.dev, tc.terminal, tc.noColor, got, err, tc.want)
		}
	}
	if _, err := logFormat("xml", true, true, ""); err == nil || !strings.Contains(err.Error(), `--log-format "xml"`) {
		t.Errorf("logFormat(xml) error = %v", err)
	}
}

// TestLoggerOutput: what the logger writes to a writer that is not a
// terminal, by flags.
func TestLoggerOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lf   logFlags
		json bool
	}{
		{logFlags{format: "auto", level: "info"}, true},
		{logFlags{format: "auto", level: "info", dev: true}, false},
		{logFlags{format: "json", level: "info", dev: true}, true},
		{logFlags{format: "text", level: "info"}, false},
	} {
		var buf bytes.Buffer
		log, err := tc.lf.logger(&buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "k", "v")
		out := buf.String()
		isJSON := json.Valid(bytes.TrimSpace(buf.Bytes()))
		if isJSON != tc.json || strings.Contains(out, "\x1b[") {
			t.Errorf("%+v wrote %q (JSON: %v, want %v; no colour codes off a terminal)", tc.lf, out, isJSON, tc.json)
		}
		if !tc.json && !strings.Contains(out, "level=INFO msg=hello k=v") {
			t.Errorf("%+v wrote %q, want slog's text", tc.lf, out)
		}
	}
}

// writeConfig writes a configuration file into the test's directory.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "holdpoint.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedence: command line > environment > file > default, over
// serve's real flags.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
addr: 127.0.0.1:9001          # overridden by the environment and the command line
webhook-timeout: 3s           # overridden by the environment
log-level: debug              # from the file
webhook-retries: [5s, 30s]    # a list
dev: true
`)
	env := map[string]string{
		"HOLDPOINT_ADDR":            "127.0.0.1:9002",
		"HOLDPOINT_WEBHOOK_TIMEOUT": "4s",
		"HOLDPOINT_CONFIG":          path,
		"HOLDPOINT_MAX_BODY":        "", // empty: unset
	}
	fs, cfg, lf := serveFlags(&bytes.Buffer{})
	if err := fs.Parse([]string{"--addr", "127.0.0.1:9003"}); err != nil {
		t.Fatal(err)
	}
	if err := applySources(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "127.0.0.1:9003" {
		t.Errorf("addr = %s, want the command line's", cfg.addr)
	}
	if cfg.webhooks.timeout != 4*time.Second {
		t.Errorf("webhook-timeout = %s, want the environment's 4s", cfg.webhooks.timeout)
	}
	if lf.level != "debug" || !cfg.dev || cfg.webhooks.retries != "5s,30s" {
		t.Errorf("from the file: log-level %q, dev %v, webhook-retries %q", lf.level, cfg.dev, cfg.webhooks.retries)
	}
	if cfg.access.maxBody != 1<<20 || cfg.heartbeat != 5*time.Second {
		t.Errorf("defaults: max-body %d, heartbeat-interval %s", cfg.access.maxBody, cfg.heartbeat)
	}

	// Applying again (commands that parse around positional arguments)
	// keeps the same choices.
	if err := applySources(fs, func(k string) string { return env[k] }); err != nil || cfg.addr != "127.0.0.1:9003" || cfg.webhooks.timeout != 4*time.Second {
		t.Errorf("second apply: %v, addr %s, timeout %s", err, cfg.addr, cfg.webhooks.timeout)
	}
}

// TestConfigErrors: a bad file or variable stops the command with exit
// code 2 and a message naming it, before anything runs.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"unknown key", "addr: 127.0.0.1:8080\nadress: x\n", []string{":2: unknown key \"adress\""}},
		{"bad value", "\nwebhook-timeout: soon\n", []string{`:2: key webhook-timeout: invalid value "soon"`}},
		{"bad bool", "demo: maybe\n", []string{`:1: key demo: invalid value "maybe"`}},
		{"no value", "addr:\n", []string{":1: key addr: no value"}},
		{"nested", "addr: {host: x}\n", []string{"key addr: want a value or a list of values"}},
		{"duplicate", "addr: a\naddr: b\n", []string{":2: key addr is already set on line 1"}},
		{"not a mapping", "- addr\n", []string{"want a mapping of flag names"}},
		{"config key", "config: other.yaml\n", []string{"cannot name another"}},
		{"syntax", "addr: [\n", []string{"--config"}},
	} {
		path := writeConfig(t, tc.content)
		var stderr bytes.Buffer
		// --sweep-interval 0 stops a serve that accepted the file before
		// it touches DATABASE_URL.
		code := serveCommand(Platform{Demo: true}, []string{"--dev", "--config", path, "--sweep-interval", "0"}, &stderr)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2; %s", tc.name, code, stderr.String())
		}
		for _, w := range append(tc.want, "platform serve: ") {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, stderr.String(), w)
			}
		}
		if tc.name != "syntax" && !strings.Contains(stderr.String(), path) {
			t.Errorf("%s: stderr %q does not name the file", tc.name, stderr.String())
		}
	}

	var stderr bytes.Buffer
	if code := serveCommand(Platform{Demo: true}, []string{"--config", missing, "--sweep-interval", "0"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "nope.yaml") {
		t.Errorf("unreadable file: exit %d, %q", code, stderr.String())
	}

	// Other commands skip serve's keys but refuse unknown ones.
	stderr.Reset()
	path := writeConfig(t, "addr: 127.0.0.1:8080\nlog-level: debug\ntenatn: acme\n")
	if code := run([]string{"tenants", "list", "--config", path}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), `:3: unknown key "tenatn"`) {
		t.Errorf("tenants list with a typo in the file: exit %d, %q", code, stderr.String())
	}

	// A variable the flag refuses names the variable.
	fs, _, _ := serveFlags(&bytes.Buffer{})
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := applySources(fs, func(k string) string { return map[string]string{"HOLDPOINT_RATE_BURST": "lots"}[k] })
	if err == nil || !strings.Contains(err.Error(), "HOLDPOINT_RATE_BURST") || !strings.Contains(err.Error(), "--rate-burst") {
		t.Errorf("bad variable: %v", err)
	}
}

// TestConfigurationDoc: docs/configuration.md is what `platform help
// config` prints for the flags of this build.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI("help", "config")
	if code != 0 {
		t.Fatalf("help config = %d %s", code, errOut)
	}
	committed, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != out {
		t.Errorf("docs/configuration.md is out of date: run `go run ./cmd/platform help config > docs/configuration.md`")
	}
	fs, _, _ := serveFlags(&bytes.Buffer{})
	for _, name := range []string{"addr", "webhook-timeout", "log-format", "config"} {
		if fs.Lookup(name) == nil || !strings.Contains(out, "| `--"+name+"` | `"+envName(name)+"` |") {
			t.Errorf("the table lacks --%s", name)
		}
	}
	if !strings.Contains(out, "| `DATABASE_URL` |") {
		t.Errorf("the table lacks DATABASE_URL")
	}
}

// doctorLine is the line of a check in doctor's output.
func doctorLine(out, check string) string {
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 6 && strings.HasPrefix(l[6:], check+" ") {
			return l
		}
	}
	return ""
}

func TestDoctorGoodDatabase(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	code, out, errOut := runPlatform(t, url, "doctor", "--dev", "--addr", testproc.FreeAddr(t))
	if code != 0 {
		t.Fatalf("doctor = %d\n%s\n%s", code, out, errOut)
	}
	for _, check := range []string{"flags", "DATABASE_URL", "database", "migrations", "role", "application role", "model providers", "default model", "agents", "listen address"} {
		if l := doctorLine(out, check); !strings.HasPrefix(l, "ok ") {
			t.Errorf("check %s: %q, want ok\n%s", check, l, out)
		}
	}
	// The server's autovacuum setting is the machine's: a warning when it
	// is off, nothing when on.
	var autovacuum string
	if err := testdb.OwnerPool(t, url).QueryRow(context.Background(), `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		t.Fatal(err)
	}
	l := doctorLine(out, "autovacuum")
	switch {
	case autovacuum == "on" && (l != "" || !strings.Contains(out, "all checks passed")):
		t.Errorf("autovacuum on: %q\n%s", l, out)
	case autovacuum != "on" && (!strings.HasPrefix(l, "warn ") || !strings.Contains(out, "no failure, 1 warning(s)")):
		t.Errorf("autovacuum off: %q, want a warning\n%s", l, out)
	}
}

// TestDoctorFailures: each problem is a FAIL line saying what is wrong,
// and the exit code is 1.
func TestDoctorFailures(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)

	// A tenant agent whose provider has no key, and the address taken.
	store := pgstore.New(testdb.OwnerPool(t, dbURL))
	ctx := context.Background()
	if _, err := store.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	def := json.RawMessage(`{"name":"support","model":"anthropic/claude-sonnet-4-5","system":"Help."}`)
	if _, err := store.PutTenantAgent(ctx, "acme", "support", string(def), def, "test"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out, _ := runPlatform(t, dbURL, "doctor", "--dev", "--addr", ln.Addr().String())
	if code != 1 {
		t.Errorf("doctor = %d, want 1\n%s", code, out)
	}
	if l := doctorLine(out, "tenant agent"); !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "tenant acme, agent support") || !strings.Contains(l, "ANTHROPIC_API_KEY") {
		t.Errorf("tenant agent line %q\n%s", l, out)
	}
	if l := doctorLine(out, "listen address"); !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "another process listens there") {
		t.Errorf("listen address line %q", l)
	}

	// Pending migrations are listed.
	code, out, _ = runPlatform(t, emptyDatabase(t, connect(t, dbURL), ""), "doctor", "--dev", "--addr", testproc.FreeAddr(t))
	if l := doctorLine(out, "migrations"); code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "00001_init.sql") || !strings.Contains(l, "platform migrate up") {
		t.Errorf("unmigrated database: exit %d, migrations line %q", code, l)
	}

	// An unreachable server: FAIL, and the password is never printed.
	const password = "pa55-w0rd-secret"
	unreachable := "postgres://holdpoint:" + password + "@" + testproc.FreeAddr(t) + "/holdpoint?sslmode=disable"
	code, out, errOut := runPlatform(t, unreachable, "doctor", "--addr", testproc.FreeAddr(t))
	if l := doctorLine(out, "database"); code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "cannot reach PostgreSQL at holdpoint@127.0.0.1") {
		t.Errorf("unreachable database: exit %d, line %q\n%s", code, l, out)
	}
	if strings.Contains(out+errOut, password) {
		t.Errorf("doctor printed the password:\n%s%s", out, errOut)
	}

	// A URL that does not parse.
	code, out, errOut = runPlatform(t, "postgres://holdpoint:"+password+"@host:notaport/x", "doctor", "--addr", testproc.FreeAddr(t))
	if l := doctorLine(out, "DATABASE_URL"); code != 1 || !strings.HasPrefix(l, "FAIL") || strings.Contains(out+errOut, password) {
		t.Errorf("bad URL: exit %d, line %q\n%s%s", code, l, out, errOut)
	}
}

// TestServeBanner: serve logs the URLs of the protocol, the dashboard and
// the metrics once listening, and under --dev prints them for a person.
func TestServeBanner(t *testing.T) {
	t.Parallel()
	srv := startServe(t, testdb.URL(t), "--dev", "--metrics-token", "banner-test-metrics-token-0123456789")
	// The server answers /readyz once it listens; the serving line and the
	// banner are written beside that, so they may reach the log a moment
	// after the first answer.
	banner := "Metrics    " + srv.base + "/metrics"
	waitfor.Until(t, "the banner in the log", time.Minute, func() bool { return len(srv.logLines(banner)) > 0 })
	lines := srv.logLines("msg=serving", "url="+srv.base+"/api/agents/", "ui="+srv.base+"/ui/", "metrics="+srv.base+"/metrics")
	if len(lines) != 1 {
		t.Errorf("want one serving line with the URLs; log:\n%s", srv.log())
	}
	for _, want := range []string{"Agents     " + srv.base + "/api/agents/{name}", "Dashboard  " + srv.base + "/ui/", "Metrics    " + srv.base + "/metrics"} {
		if len(srv.logLines(want)) != 1 {
			t.Errorf("the --dev banner lacks %q; log:\n%s", want, srv.log())
		}
	}
}

func TestStartupURLs(t *testing.T) {
	t.Parallel()
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	u := newStartupURLs(any4, "[::]:9090", false)
	if u.Protocol != "http://127.0.0.1:8080/api/agents/" || u.UI != "http://127.0.0.1:8080/ui/" || u.Metrics != "http://[::1]:9090/metrics" {
		t.Errorf("urls = %+v", u)
	}
	if u := newStartupURLs(any4, "", true); u.Metrics != "http://127.0.0.1:8080/metrics" || u.MetricsNote != "metrics token required" {
		t.Errorf("metrics on the API address with a token: %+v", u)
	}
	if u := newStartupURLs(any4, "", false); u.Metrics != "off" {
		t.Errorf("metrics without a listener or a token: %+v", u)
	}
}
