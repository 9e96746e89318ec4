package layers

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServicePackagesNameTypesAtHome: package service names the wire types
// (service/protocol) and the store's records and errors (service/store) as
// its own, so that an agent written against package service reads as
// before. The packages under service/ that build on the engine (agentkit,
// demo, tenantagents) name them where they are defined instead, in their
// tests too: they import the engine for the engine alone.
func TestServicePackagesNameTypesAtHome(t *testing.T) {
	t.Parallel()
	dirs := goListDirs(t, module+"/service", module+"/service/...")
	root, rest := dirs[module+"/service"], dirs
	aliases := engineAliases(t, root)
	if len(aliases) < 50 {
		t.Fatalf("found %d aliases in %s: the alias files moved?", len(aliases), root)
	}
	for path, dir := range rest {
		if path == module+"/service" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := ""
			for _, im := range f.Imports {
				if strings.Trim(im.Path.Value, `"`) == module+"/service" {
					local = "service"
					if im.Name != nil {
						local = im.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
					if home, ok := aliases[sel.Sel.Name]; ok {
						t.Errorf("%s: %s.%s, want %s", fset.Position(sel.Pos()), local, sel.Sel.Name, home)
					}
				}
				return true
			})
		}
	}
}

// engineAliases are the names package service declares as another
// package's (type X = p.X, const/var X = p.X), each with its home.
func engineAliases(t *testing.T, dir string) map[string]string {
	t.Helper()
	aliases := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		// home is p.X when e is p.X, another package's name for X.
		home := func(name string, e ast.Expr) string {
			if sel, ok := e.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				if id, ok := sel.X.(*ast.Ident); ok {
					return id.Name + "." + name
				}
			}
			return ""
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if h := home(s.Name.Name, s.Type); s.Assign.IsValid() && h != "" {
						aliases[s.Name.Name] = h
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if i < len(s.Values) {
							if h := home(n.Name, s.Values[i]); h != "" {
								aliases[n.Name] = h
							}
						}
					}
				}
			}
		}
	}
	return aliases
}

// goListDirs maps the packages matching patterns to their directories.
func goListDirs(t *testing.T, patterns ...string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}}"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", patterns, err, stderr.String())
	}
	dirs := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if p, d, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			dirs[p] = d
		}
	}
	return dirs
}
