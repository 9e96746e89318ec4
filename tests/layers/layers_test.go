package layers

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/holdpoint/holdpoint"

// rule forbids the packages matching pattern (and not matching except) to
// import, directly or transitively, any package under the forbidden paths.
type rule struct {
	pattern   string // a `go list` pattern
	except    string // a path whose packages the rule skips
	forbidden []string
}

var rules = []rule{
	{
		pattern: module + "/service/...",
		except:  module + "/service/pgstore",
		forbidden: []string{
			"github.com/jackc/pgx",
			module + "/db",
			module + "/httpapi",
			"github.com/labstack/echo",
		},
	},
	{
		pattern:   module + "/service/pgstore/...",
		forbidden: []string{module + "/httpapi", "github.com/labstack/echo"},
	},
	{
		pattern:   module + "/httpapi/...",
		forbidden: []string{"github.com/jackc/pgx", module + "/db", module + "/service/pgstore"},
	},
	{
		// The public Go client links nothing of the server.
		pattern: module + "/client/...",
		forbidden: []string{
			module + "/cmd", module + "/db", module + "/examples", module + "/httpapi",
			module + "/internal", module + "/service", module + "/tests",
			"github.com/jackc/pgx", "github.com/labstack/echo",
		},
	},
}

// TestLayers fails when a package imports, in its non-test build, what its
// layer forbids, and names the chain of imports that brings it in.
func TestLayers(t *testing.T) {
	t.Parallel()
	for _, r := range rules {
		roots, imports := importGraph(t, r.pattern)
		if len(roots) == 0 {
			t.Errorf("%s matches no package", r.pattern)
		}
		for _, root := range roots {
			if under(root, r.except) {
				continue
			}
			for _, f := range r.forbidden {
				if chain := importChain(imports, root, f); chain != nil {
					t.Errorf("%s imports %s: %s", root, f, strings.Join(chain, " -> "))
				}
			}
		}
	}
}

// importGraph lists the packages matching pattern and, for each package of
// their non-test builds outside the standard library, its direct imports.
func importGraph(t *testing.T, pattern string) (roots []string, imports map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.DepOnly}} {{.ImportPath}} {{join .Imports " "}}{{end}}`, pattern)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, stderr.String())
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
		if under(p, forbidden) {
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

// under reports whether the package path p is path or below it.
func under(p, path string) bool {
	return path != "" && (p == path || strings.HasPrefix(p, path+"/"))
}
