package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service/agentdef"
)

// tally counts the blocks checked and skipped, per language.
type tally struct {
	mu      sync.Mutex
	checked map[string]int
	skipped map[string]map[string]int // language, reason
}

func (c *tally) check(b block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked[b.langName()]++
}

func (c *tally) skip(b block, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skipped[b.langName()] == nil {
		c.skipped[b.langName()] = map[string]int{}
	}
	c.skipped[b.langName()][reason]++
}

// TestDocsBlocks checks every fenced block of README.md and docs/*.md by
// its language, the blocks of each page in order: shell blocks run (those
// that talk to the server against one started for the page, with its own
// database), output blocks are compared with what the shell block before
// them printed, .prompt files parse as `platform agents apply` reads them,
// configuration files load as `platform serve --config` reads them, JSON is
// valid, Go programs build and Go fragments parse, SQL runs on a migrated
// database, JavaScript passes `node --check` (and a program that talks to
// the server runs, with the compat suite's Genkit client). A block it cannot check
// fails unless a marker says why it is skipped.
func TestDocsBlocks(t *testing.T) {
	c := &tally{checked: map[string]int{}, skipped: map[string]map[string]int{}}
	t.Run("pages", func(t *testing.T) {
		for _, page := range pages(t) {
			t.Run(strings.TrimSuffix(filepath.Base(page), ".md"), func(t *testing.T) {
				t.Parallel()
				p := newPageRun(t, page)
				for _, b := range readBlocks(t, page) {
					checkBlock(t, p, c, b)
				}
			})
		}
	})
	var langs []string
	for l := range c.checked {
		langs = append(langs, l)
	}
	for l := range c.skipped {
		if _, ok := c.checked[l]; !ok {
			langs = append(langs, l)
		}
	}
	slices.Sort(langs)
	total := 0
	for _, l := range langs {
		var reasons []string
		n := 0
		for r, k := range c.skipped[l] {
			reasons = append(reasons, fmt.Sprintf("\n\t%d skipped: %s", k, r))
			n += k
		}
		slices.Sort(reasons)
		total += c.checked[l] + n
		t.Logf("%s: %d checked, %d skipped%s", l, c.checked[l], n, strings.Join(reasons, ""))
	}
	t.Logf("%d blocks", total)
}

// checkBlock checks one block, or counts it skipped.
func checkBlock(t *testing.T, p *pageRun, c *tally, b block) {
	t.Helper()
	switch b.mark.kind {
	case "skip":
		p.ran = false
		c.skip(b, b.mark.arg)
		return
	case "file":
		p.writeFile(b)
		c.check(b)
		return
	case "serve":
		p.serve(b, b.text)
		c.check(b)
		return
	case "synopsis":
		checkSynopsis(t, b)
		p.ran = false
		c.check(b)
		return
	case "output":
		if !p.ran {
			c.skip(b, "output of a skipped block")
			return
		}
		if !outputPattern(b.text).MatchString(p.out) {
			t.Errorf("%s: the block before printed\n%s\nnot\n%s", b, p.out, b.text)
		}
		c.check(b)
		return
	}
	switch b.lang {
	case "sh", "bash", "console":
		p.shell(b)
	case "json":
		if !json.Valid([]byte(b.text)) {
			t.Errorf("%s: not valid JSON:\n%s", b, b.text)
		}
	case "yaml", "prompt":
		checkYAML(t, p, b)
	case "go":
		checkGo(t, b)
	case "sql":
		checkSQL(t, p, b)
	case "js":
		if _, err := exec.LookPath("node"); err != nil {
			c.skip(b, "node is not installed")
			return
		}
		f := filepath.Join(t.TempDir(), "block.mjs")
		if err := os.WriteFile(f, []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("node", "--check", f).CombinedOutput(); err != nil {
			t.Errorf("%s: node --check: %v\n%s", b, err, out)
		}
		if strings.Contains(b.text, defaultAddr) {
			p.node(b)
		}
	default:
		t.Errorf("%s: no check for this language: mark it (<!-- docs-test: skip (reason) -->, or output after a shell block)", b)
		return
	}
	c.check(b)
}

// checkYAML parses a .prompt file as agentdef does, loads a configuration
// file as serve does, and parses a marked fragment as YAML.
func checkYAML(t *testing.T, p *pageRun, b block) {
	t.Helper()
	switch {
	case strings.HasPrefix(b.text, "---\n"):
		d, err := agentdef.Parse([]byte(b.text))
		if err != nil {
			t.Errorf("%s: the .prompt file does not parse: %v\n%s", b, err, b.text)
		} else if d.Name == "" {
			t.Errorf("%s: the .prompt file names no agent", b)
		}
	case b.mark.kind == "fragment":
		var v any
		if err := yaml.Unmarshal([]byte(b.text), &v); err != nil {
			t.Errorf("%s: not YAML: %v", b, err)
		}
	default:
		// A configuration file: `platform doctor --config` reads it as
		// serve would, and its first line says whether serve accepts it.
		f := filepath.Join(t.TempDir(), "holdpoint.yaml")
		if err := os.WriteFile(f, []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(platformBin(t), "platform"), "doctor", "--config", f, "--addr", testproc.FreeAddr(t))
		cmd.Env = p.env()
		out, _ := cmd.CombinedOutput()
		first, _, _ := strings.Cut(string(out), "\n")
		if !strings.HasPrefix(first, "ok") || !strings.Contains(first, "flags") {
			t.Errorf("%s: serve does not accept this configuration (mark a fragment of one):\n%s", b, out)
		}
	}
}

// checkGo builds a complete program (package main) in a module of its own
// that requires this one, and parses a marked fragment.
func checkGo(t *testing.T, b block) {
	t.Helper()
	if b.mark.kind == "fragment" {
		fset := token.NewFileSet()
		_, errFile := parser.ParseFile(fset, "", "package p\n"+b.text, 0)
		_, errBody := parser.ParseFile(fset, "", "package p\nfunc _() {\n"+b.text+"\n}\n", 0)
		_, errExpr := parser.ParseExpr(b.text)
		_, errElem := parser.ParseFile(fset, "", "package p\nvar _ = []any{\n"+b.text+"\n}\n", 0)
		if errFile != nil && errBody != nil && errExpr != nil && errElem != nil {
			t.Errorf("%s: the fragment parses neither as declarations, statements, an expression, nor list elements: %v", b, errBody)
		}
		return
	}
	if !strings.HasPrefix(b.text, "package main\n") {
		t.Errorf("%s: a Go block is a complete program (package main) or marked <!-- docs-test: fragment (what) -->", b)
		return
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/docsblock\n\ngo 1.26\n\n" +
		"require github.com/holdpoint/holdpoint v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/holdpoint/holdpoint => " + abs + "\n"
	for name, body := range map[string][]byte{"main.go": []byte(b.text), "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "prog"), ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("%s: go build: %v\n%s", b, err, out)
	}
}

// checkSQL runs a block on the page's migrated database as the tables'
// owner, in a transaction rolled back afterwards; a block that begins its
// own transaction runs as it is.
func checkSQL(t *testing.T, p *pageRun, b block) {
	t.Helper()
	pool := p.ownerPool()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	text := b.text
	if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(text)), "BEGIN") {
		text = "BEGIN;\n" + text + "\n;ROLLBACK;"
	}
	if _, err := conn.Exec(ctx, text); err != nil {
		t.Errorf("%s: %v\n%s", b, err, b.text)
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
}
