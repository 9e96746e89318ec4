package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// block is one fenced code block of a page.
type block struct {
	page string // the page's path from the root, e.g. docs/approvals.md
	line int    // the line of the opening fence, from 1
	lang string // the fence's info string, e.g. sh, or "" for none
	text string // the contents, without the fences, dedented to the fence
	mark marker // the marker on the line before it, if any
}

func (b block) String() string { return fmt.Sprintf("%s:%d (%s)", b.page, b.line, b.langName()) }

// langName is the block's language, "text" when it names none.
func (b block) langName() string {
	if b.lang == "" {
		return "text"
	}
	return b.lang
}

// marker is a `<!-- docs-test: KIND (ARG) -->` comment on the line just
// before a block's opening fence (blank lines allowed between). Its kinds:
//
//	skip (reason)      the block is not checked, for the reason given
//	fragment (what)    a Go or YAML excerpt: parsed, not built or applied
//	output             the expected output of the page's previous shell
//	                   block, compared with what it printed
//	file (name)        written to name in the page's working directory
//	serve              a shell block that starts the page's server
//	synopsis           platform command lines, checked against the
//	                   binary's help: commands, subcommands and flags
type marker struct {
	kind, arg string
}

var (
	markerRE = regexp.MustCompile(`^<!-- docs-test: ([a-z]+)(?: \((.+)\))? -->$`)
	fenceRE  = regexp.MustCompile("^( *)(```+)(\\S*)\\s*$")
)

// markerKinds says which kinds need an argument.
var markerKinds = map[string]bool{"skip": true, "fragment": true, "output": false, "file": true, "serve": false, "synopsis": false}

// pages lists README.md and docs/*.md, as paths from the root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(filepath.Join("docs", filepath.Base(d))))
	}
	return out
}

// readBlocks returns the fenced blocks of page; a malformed marker, a
// marker followed by no block, or an unclosed fence fails the test.
func readBlocks(t *testing.T, page string) []block {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var out []block
	var pending *marker
	pendingLine := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "<!-- docs-test") {
			m := markerRE.FindStringSubmatch(trimmed)
			if m == nil {
				t.Fatalf("%s:%d: malformed marker %q: want <!-- docs-test: KIND (ARG) -->", page, i+1, trimmed)
			}
			needsArg, known := markerKinds[m[1]]
			if !known || needsArg != (m[2] != "") {
				t.Fatalf("%s:%d: marker %q: kinds are skip (reason), fragment (what), output, file (name), serve, synopsis", page, i+1, trimmed)
			}
			pending, pendingLine = &marker{kind: m[1], arg: m[2]}, i+1
			continue
		}
		f := fenceRE.FindStringSubmatch(line)
		if f == nil {
			if pending != nil && trimmed != "" {
				t.Fatalf("%s:%d: a marker not followed by a code block", page, pendingLine)
			}
			continue
		}
		indent, fence := f[1], f[2]
		b := block{page: page, line: i + 1, lang: f[3]}
		if pending != nil {
			b.mark = *pending
			pending = nil
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == fence && strings.HasPrefix(lines[i], indent) {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			t.Fatalf("%s:%d: a code block that is never closed", page, b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}
