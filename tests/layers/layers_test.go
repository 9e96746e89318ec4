package layers

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/holdpoint/holdpoint"

// rule forbids the packages matching any of patterns to import, directly
// or transitively, any package a forbidden pattern matches. Forbidden
// patterns are read as go list reads them: a path matches that package
// alone, path/... the package and everything below it.
type rule struct {
	patterns  []string // go list patterns
	forbidden []string
}

// The engine's own packages: the turn engine (package service) and what it
// is built from or extends. Each package under service/ is in exactly one
// layer (TestEveryServicePackageHasALayer): these, the features beside
// them, the foundation, or the PostgreSQL store. The approvals inbox
// (inbox) is a layer on the engine: it records decisions and has the
// engine carry them out (service.Runtime.ResumeDecided).
var engine = []string{
	module + "/service",
	module + "/service/agentkit/...", module + "/service/demo/...", module + "/service/tenantagents/...",
	module + "/service/inbox/...",
}

// The foundation: the wire types and the Model interface, the event names,
// JSON Schema validation, the store's interfaces and records, who a call
// acts for, the tenants' signing keys, the HTTP client that calls out, the
// instance's readiness, the Observer the engine reports to, the bounds on
// what a client sends, the request id a context carries, a tool's approval
// policy and the signature of a client-managed state, which the engine, the
// features and the store import.
var foundation = []string{
	module + "/service/protocol/...", module + "/service/events/...", module + "/service/schema/...",
	module + "/service/store/...", module + "/service/auth/...", module + "/service/keys/...",
	module + "/service/httptool/...", module + "/service/readiness/...", module + "/service/observe/...",
	module + "/service/limits/...", module + "/service/requestid/...", module + "/service/approval/...",
	module + "/service/statesig/...",
}

// The features beside the engine: each owns its records and its store
// interface, which the store implements, so the store may import them and
// they import nothing of the engine. The model adapters (genkitmodel) and
// the metrics and tracing (telemetry) are features too: they implement the
// foundation's Model and Observer without the engine; the event hub reads
// the store's event log for the live event streams; the durable streams
// (streams) keep a streamed turn's frames for the clients that rejoin it,
// which the engine hands them without knowing them (service.DetachedStream);
// agentdef reads the agents tenants define as data into the foundation's
// types (an approval.Policy for a gated HTTP tool), which tenantagents
// builds into the engine's agents.
var features = []string{
	module + "/service/webhooks/...", module + "/service/retention/...", module + "/service/tenants/...",
	module + "/service/genkitmodel/...", module + "/service/telemetry/...", module + "/service/eventhub/...",
	module + "/service/streams/...", module + "/service/agentdef/...",
}

// The store: the one package that speaks SQL.
var storeLayer = []string{module + "/service/pgstore/..."}

var edge = []string{module + "/httpapi/...", "github.com/labstack/echo/..."}

var sql = []string{"github.com/jackc/pgx/...", module + "/db/..."}

var rules = []rule{
	// The engine reaches the database only through the store's
	// interfaces, and knows nothing of HTTP.
	{patterns: engine, forbidden: append(append([]string{module + "/service/pgstore/..."}, sql...), edge...)},
	// The foundation depends on nothing of the engine, the store or HTTP.
	{patterns: foundation, forbidden: append(append(append([]string{module + "/service", module + "/service/pgstore/..."}, features...), sql...), edge...)},
	// The features depend on the foundation only: not on the engine, nor on
	// the store that implements their interfaces.
	{patterns: features, forbidden: append(append([]string{module + "/service", module + "/service/pgstore/..."}, sql...), edge...)},
	// The store implements the foundation's and the features' interfaces
	// without the engine.
	{patterns: storeLayer, forbidden: append([]string{module + "/service"}, edge...)},
	// The user's binary ships no benchmark code: platform bench is built
	// with -tags bench (make bench), and this test builds without it.
	{patterns: []string{module + "/cmd/...", module + "/examples/..."}, forbidden: []string{module + "/internal/bench/..."}},
	{
		patterns:  []string{module + "/httpapi/..."},
		forbidden: append([]string{module + "/service/pgstore/..."}, sql...),
	},
	{
		// The public Go client links nothing of the server (and of the
		// module only the wire types: TestClientSharesOnlyTheProtocol).
		patterns: []string{module + "/client/..."},
		forbidden: []string{
			module + "/cmd/...", module + "/db/...", module + "/examples/...", module + "/httpapi/...",
			module + "/service", module + "/service/pgstore/...", module + "/service/store/...", module + "/tests/...",
			"github.com/jackc/pgx/...", "github.com/labstack/echo/...",
		},
	},
}

// TestClientSharesOnlyTheProtocol: of the module, the Go client imports
// the wire types (service/protocol, one definition for both ends) and what
// they are built from, nothing else.
func TestClientSharesOnlyTheProtocol(t *testing.T) {
	t.Parallel()
	_, imports := importGraph(t, []string{module + "/client"})
	allowed := []string{module + "/client/...", module + "/service/protocol", module + "/internal/rawjson"}
	for p := range imports {
		if matches(p, module+"/...") && !slices.ContainsFunc(allowed, func(a string) bool { return matches(p, a) }) {
			t.Errorf("client imports %s", p)
		}
	}
	if _, ok := imports[module+"/service/protocol"]; !ok {
		t.Error("client does not import service/protocol: the wire types are defined twice again")
	}
}

// TestEveryServicePackageHasALayer fails when a package under service/ is
// in no layer above, or in two.
func TestEveryServicePackageHasALayer(t *testing.T) {
	t.Parallel()
	all, _ := importGraph(t, []string{module + "/service/..."})
	layers := [][]string{engine, features, foundation, storeLayer}
	for _, p := range all {
		n := 0
		for _, l := range layers {
			if slices.ContainsFunc(l, func(pat string) bool { return matches(p, pat) }) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is in %d layers of tests/layers, want 1", p, n)
		}
	}
}

// TestProtocolIsStandardLibrary: the wire types, which the Go client may
// share, import nothing outside the standard library but the module's own
// JSON helpers.
func TestProtocolIsStandardLibrary(t *testing.T) {
	t.Parallel()
	_, imports := importGraph(t, []string{module + "/service/protocol"})
	for p := range imports {
		if p != module+"/service/protocol" && p != module+"/internal/rawjson" {
			t.Errorf("service/protocol imports %s", p)
		}
	}
}

// TestLayers fails when a package imports, in its non-test build, what its
// layer forbids, and names the chain of imports that brings it in.
func TestLayers(t *testing.T) {
	t.Parallel()
	for _, r := range rules {
		roots, imports := importGraph(t, r.patterns)
		if len(roots) == 0 {
			t.Errorf("%s match no package", r.patterns)
		}
		for _, root := range roots {
			for _, f := range r.forbidden {
				if chain := importChain(imports, root, f); chain != nil {
					t.Errorf("%s imports %s: %s", root, f, strings.Join(chain, " -> "))
				}
			}
		}
	}
}

// importGraph lists the packages matching patterns and, for each package of
// their non-test builds outside the standard library, its direct imports.
func importGraph(t *testing.T, patterns []string) (roots []string, imports map[string][]string) {
	t.Helper()
	args := append([]string{"list", "-deps", "-f",
		`{{if not .Standard}}{{.DepOnly}} {{.ImportPath}} {{join .Imports " "}}{{end}}`}, patterns...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", patterns, err, stderr.String())
	}
	imports = map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue // a standard-library package
		}
		imports[fields[1]] = fields[2:]
		if fields[0] == "false" {
			roots = append(roots, fields[1])
		}
	}
	slices.Sort(roots)
	return roots, imports
}

// importChain returns a shortest chain of imports from root to a package
// under forbidden, or nil when there is none.
func importChain(imports map[string][]string, root, forbidden string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if matches(p, forbidden) {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range imports[p] {
			if _, seen := from[next]; !seen {
				from[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// matches reports whether the package path p matches the go list pattern:
// path alone, or path/... for path and what is below it.
func matches(p, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}
